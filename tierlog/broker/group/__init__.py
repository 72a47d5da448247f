"""The broker's consumer group coordinator and the ``__consumer_offsets`` formats.

Modules, composed rather than inherited: ``coordinator`` (``GroupCoordinator``, the thin
facade the request handlers call, and the coordinator's partitions), ``runtime`` (what the
components share: the groups and their store, timers, writes in flight), ``classic``
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup) with ``classic_rebalance`` (its rebalance
steps and timers), ``offsets`` (OffsetCommit/TxnOffsetCommit/OffsetFetch/OffsetDelete,
transaction completion, expiration), ``admin`` (List/Describe/DeleteGroups), ``group``
(one group's state machine), ``txn_offsets`` (a group's offsets pending in open
transactions, KIP-98), ``manager`` (group cache, partition ownership, persistence and
loading), ``offsets_codec`` (sans-I/O record keys and values), ``placement``
(``partition_for``), ``results`` (answer dataclasses), ``config``, ``timers``. KIP-848's
consumer protocol is a component beside ``classic``.
"""

from tierlog.broker.group.config import GroupConfig
from tierlog.broker.group.coordinator import GroupCoordinator
from tierlog.broker.group.group import GroupState
from tierlog.broker.group.manager import Append, AppendError
from tierlog.broker.group.placement import java_string_hashcode, partition_for
from tierlog.broker.group.results import (
    DeleteGroupResult,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    HeartbeatResult,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    ListedGroup,
    ListGroupsResult,
    MemberLeaveResult,
    OffsetCommitResult,
    OffsetFetchResult,
    SyncGroupResult,
    TopicPartition,
)

__all__ = [
    "Append",
    "AppendError",
    "DeleteGroupResult",
    "DescribedGroup",
    "DescribedMember",
    "FetchedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "HeartbeatResult",
    "JoinGroupMember",
    "JoinGroupResult",
    "LeaveGroupResult",
    "ListGroupsResult",
    "ListedGroup",
    "MemberLeaveResult",
    "OffsetCommitResult",
    "OffsetFetchResult",
    "SyncGroupResult",
    "TopicPartition",
    "java_string_hashcode",
    "partition_for",
]
