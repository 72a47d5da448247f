"""The classic protocol's side of KIP-848's conversions between the two protocols.

This module owns ``ClassicConversionSteps``: what happens to a classic group when the
consumer protocol's records that convert it have been written (``consumer_groups``
applies them and calls these). An upgrade ends the classic group: waiting JoinGroup and
SyncGroup calls answer REBALANCE_IN_PROGRESS so that their members rejoin the consumer
group, its timers stop, and the ``GroupMetadata`` keeps only the id's committed offsets. A
downgrade restores a classic group from the GroupMetadata record the conversion wrote and
starts a rebalance, so that a leader assigns again (Kafka's ``convertToClassicGroup``).
Runs on the event loop.
"""

from __future__ import annotations

from tierlog.broker.group.classic_rebalance import ClassicRebalance
from tierlog.broker.group.group import GroupMetadata, GroupState
from tierlog.broker.group.loader import restore_membership
from tierlog.broker.group.offsets_codec import GroupMetadataValue
from tierlog.broker.group.results import JoinGroupResult, SyncGroupResult
from tierlog.broker.group.runtime import GroupRuntime
from tierlog.protocol.errors import ErrorCode

E = ErrorCode


class ClassicConversionSteps:
    """The classic side of conversions (see the module docstring).

    Args:
        runtime: the coordinator's groups, store and timers.
        rebalance: the classic protocol's rebalance steps, over the same runtime.
    """

    def __init__(self, runtime: GroupRuntime, rebalance: ClassicRebalance) -> None:
        self._runtime = runtime
        self._rebalance = rebalance

    def converted_to_consumer(self, group_id: str) -> None:
        """KIP-848: the id's group is a consumer group from now on (an upgrade, or an empty
        group converted). Waiting JoinGroup and SyncGroup calls answer REBALANCE_IN_PROGRESS
        (their members rejoin the consumer group), the group's timers stop, and the
        ``GroupMetadata`` keeps only the id's committed offsets."""
        group = self._runtime.store.get_group(group_id)
        if group is None:
            return
        for member in group.members.values():
            group.maybe_invoke_join(
                member, JoinGroupResult(E.rebalance_in_progress, member.member_id)
            )
            group.maybe_invoke_sync(member, SyncGroupResult(E.rebalance_in_progress))
        self._runtime.timers.cancel_group(group_id)
        group.clear_membership(self._runtime.now())

    def converted_to_classic(self, group_id: str, value: GroupMetadataValue) -> None:
        """KIP-848's downgrade: the consumer group of ``group_id`` became the classic group
        ``value`` records. Its members must heartbeat within their session timeouts, and a
        rebalance starts (Kafka's convertToClassicGroup) so that a leader assigns again."""
        store = self._runtime.store
        group = store.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            group = store.add_group(GroupMetadata(group_id, self._runtime.now()))
        restore_membership(group, value)
        for member in group.members.values():
            self._rebalance.arm_heartbeat(group, member)
        if group.members:
            self._rebalance.prepare_rebalance(
                group, f"group {group_id} downgraded from the consumer protocol"
            )
