"""Group administration: ListGroups, DescribeGroups and DeleteGroups (Kafka's
``handleListGroups``, ``handleDescribeGroup`` and ``handleDeleteGroups``).

This module owns ``GroupAdmin``, the group coordinator's component for requests about
whole groups rather than their members or offsets. A group with members cannot be
deleted (NON_EMPTY_GROUP), nor one with offsets pending in an open transaction (its
marker would bring them back); a deleted group's offsets and metadata get tombstones in
``__consumer_offsets``. Consumer groups (KIP-848) are listed with type ``consumer``,
described by DescribeGroups as classic groups are (protocol type ``consumer``, the
assignor as the protocol) and deleted by the consumer protocol's component
(``ConsumerGroupAdmin``). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from typing import Protocol

from tierlog.broker.group.group import GroupMetadata, GroupState
from tierlog.broker.group.manager import group_store_error
from tierlog.broker.group.results import (
    DeleteGroupResult,
    DescribedGroup,
    ListedGroup,
    ListGroupsResult,
)
from tierlog.broker.group.runtime import GroupRuntime
from tierlog.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState


CLASSIC = "classic"
CONSUMER = "consumer"


class ConsumerGroupAdmin(Protocol):
    """What administration needs of the consumer protocol's groups (``ConsumerGroups``)."""

    def listed(self) -> list[ListedGroup]: ...

    def describe_classic(self, group_id: str) -> DescribedGroup | None: ...

    async def delete(self, group_id: str) -> int | None: ...


class GroupAdmin:
    """ListGroups, DescribeGroups and DeleteGroups (see the module docstring).

    Args:
        runtime: the coordinator's groups, store and timers.
        consumer_groups: the consumer protocol's groups.
    """

    def __init__(self, runtime: GroupRuntime, consumer_groups: ConsumerGroupAdmin) -> None:
        self._runtime = runtime
        self._consumer = consumer_groups

    # ================================================================ List / Describe

    def list_groups(
        self,
        states_filter: Collection[str] | None = None,
        types_filter: Collection[str] | None = None,
    ) -> ListGroupsResult:
        """ListGroups: the groups of every loaded partition.

        Args:
            states_filter: v4+ (KIP-518), case-insensitive state names; empty = all.
            types_filter: v5+ (KIP-848), group types (``classic``, ``consumer``); empty = all.
        """
        if not self._runtime.active:
            return ListGroupsResult(E.coordinator_not_available)
        store = self._runtime.store
        error = E.coordinator_load_in_progress if store.any_loading() else E.none
        types = {t.lower() for t in types_filter} if types_filter else {CLASSIC, CONSUMER}
        states = {s.lower() for s in states_filter} if states_filter else None
        listed: list[ListedGroup] = []
        if CLASSIC in types:
            listed += [
                ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                for g in store.groups.values()
                if store.consumer_group(g.group_id) is None  # not a consumer group's offsets
            ]
        if CONSUMER in types:
            listed += self._consumer.listed()
        groups = tuple(g for g in listed if states is None or g.state.lower() in states)
        return ListGroupsResult(error, groups)

    def describe_groups(
        self, group_ids: Iterable[str], *, not_found_error: bool = False
    ) -> list[DescribedGroup]:
        """DescribeGroups, one entry per id in order.

        An unknown group is state "Dead" with error 0, as in Kafka up to DescribeGroups
        v5; pass ``not_found_error`` for v6+ to get GROUP_ID_NOT_FOUND instead.
        """
        out = []
        for group_id in group_ids:
            error = self._runtime.validate(group_id, require_id=False)
            group = None if error else self._runtime.store.get_group(group_id)
            if error:
                out.append(DescribedGroup(error, group_id))
            elif (consumer := self._consumer.describe_classic(group_id)) is not None:
                out.append(consumer)
            elif group is None:
                code = E.group_id_not_found if not_found_error else E.none
                out.append(DescribedGroup(code, group_id, S.DEAD.value))
            else:
                out.append(group.describe())
        return out

    # ================================================================ DeleteGroups

    async def delete_groups(self, group_ids: Iterable[str]) -> list[DeleteGroupResult]:
        """DeleteGroups: only groups without members (Empty) can go (NON_EMPTY_GROUP
        otherwise, also while an open transaction has offsets pending for the group: its
        marker would bring them back); their offsets and metadata get tombstones. One
        result per distinct id, in order."""
        results: dict[str, int] = {}
        deleting: dict[int, list[GroupMetadata]] = defaultdict(list)
        for group_id in group_ids:
            if group_id in results:
                continue
            error = self._runtime.validate(group_id, require_id=False)
            group = None if error else self._runtime.store.get_group(group_id)
            if error:
                results[group_id] = error
            elif (consumer := await self._consumer.delete(group_id)) is not None:
                results[group_id] = consumer
            elif group is None:
                results[group_id] = E.group_id_not_found
            elif not group.is_(S.EMPTY) or group.pending_txn_offsets:
                results[group_id] = E.non_empty_group
            else:
                # Out of the cache at once, so nothing new attaches to it while the
                # tombstones are written.
                self._runtime.detach(group)
                results[group_id] = E.none
                deleting[self._runtime.partition_for(group_id)].append(group)
        for partition, groups in deleting.items():
            error = await self._runtime.store.write_tombstones(
                partition,
                [(g.group_id, tp) for g in groups for tp in g.offsets],
                [g.group_id for g in groups if g.generation_id > 0],
            )
            for group in groups:
                if error:
                    self._runtime.reattach(group, {})
                    results[group.group_id] = group_store_error(error)
                else:
                    group.transition_to(S.DEAD, self._runtime.now())
        return [DeleteGroupResult(gid, code) for gid, code in results.items()]
