"""The consumer group protocol (KIP-848, ``group.protocol=consumer``): its logic, pure.

Sits beside the classic rebalance protocol in the group coordinator. Nothing here does I/O,
reads a clock it was not given, or imports asyncio: requests and timers go in, responses,
``__consumer_offsets`` records and timer operations come out (``protocol.py`` explains the
write-then-replay contract). docs/consumer_groups.md describes the protocol for users.

Modules, bottom up:

``errors``          refusals with their Kafka error codes; ``ReplayError``
``config``          ``group.consumer.*`` settings, bounds, per-group overrides, migration policy
``topics``          the topic metadata view (ids, names, partition counts, a version)
``member``          a member, its states and epochs; the ``Assignment`` type
``records``         the consumer group records of ``__consumer_offsets``, typed
``record_codec``    their bytes (sans-I/O codec)
``embedded``        the consumer's embedded classic protocol (subscription, assignment)
``group``           one group's state, changed only by replaying records
``record_helpers``  records built from members and groups
``assignors/``      the ``uniform`` and ``range`` server assignors
``subscriptions``   RE2 regex subscriptions and the subscribed topics' metadata
``target``          the target assignment at a group epoch
``reconcile``       a member's incremental, cooperative step toward its target
``timers``          session and rebalance timeouts, as data
``requests``        ConsumerGroupHeartbeat's fields and validation
``migration``       classic <-> consumer conversions (``group.consumer.migration.policy``)
``heartbeat``       ConsumerGroupHeartbeat handling, leaving and fencing
``describe``        ConsumerGroupDescribe's data
``offset_rules``    offset commits and fetches with member epochs
``store``           groups rebuilt by replay (``GroupLookup``)
``protocol``        ``ConsumerGroupProtocol``: the component the coordinator calls
"""

from tierlog.broker.group.consumer.config import ConsumerGroupConfig, MigrationPolicy
from tierlog.broker.group.consumer.describe import DescribedGroup, DescribedMember
from tierlog.broker.group.consumer.errors import ConsumerGroupError, ReplayError
from tierlog.broker.group.consumer.group import ConsumerGroup, GroupState
from tierlog.broker.group.consumer.heartbeat import Outcome
from tierlog.broker.group.consumer.member import ConsumerGroupMember, MemberState
from tierlog.broker.group.consumer.migration import ClassicGroupView, ClassicMemberView
from tierlog.broker.group.consumer.protocol import ConsumerGroupProtocol
from tierlog.broker.group.consumer.record_codec import decode_record, encode_record
from tierlog.broker.group.consumer.records import Record
from tierlog.broker.group.consumer.requests import HeartbeatRequest, HeartbeatResponse
from tierlog.broker.group.consumer.store import ConsumerGroupStore, GroupLookup
from tierlog.broker.group.consumer.timers import CancelTimer, ScheduleTimer, TimerKey, TimerOp
from tierlog.broker.group.consumer.topics import TopicInfo, TopicsImage, TopicsView

__all__ = [
    "CancelTimer",
    "ClassicGroupView",
    "ClassicMemberView",
    "ConsumerGroup",
    "ConsumerGroupConfig",
    "ConsumerGroupError",
    "ConsumerGroupMember",
    "ConsumerGroupProtocol",
    "ConsumerGroupStore",
    "DescribedGroup",
    "DescribedMember",
    "GroupLookup",
    "GroupState",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "MemberState",
    "MigrationPolicy",
    "Outcome",
    "Record",
    "ReplayError",
    "ScheduleTimer",
    "TimerKey",
    "TimerOp",
    "TopicInfo",
    "TopicsImage",
    "TopicsView",
    "decode_record",
    "encode_record",
]
