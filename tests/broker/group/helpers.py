"""Shared helpers for the group coordinator tests: a fake ``__consumer_offsets`` log,
a coordinator factory, and bounded ``asyncio.run``."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, TypeVar

from tierlog.broker.group import GroupConfig, GroupCoordinator, JoinGroupResult
from tierlog.broker.group.manager import AppendError, LogBatch
from tierlog.broker.group.offsets_codec import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from tierlog.records.builder import ControlType, build_control_batch
from tierlog.records.header import parse_header, rewrite_prefix
from tierlog.records.reader import DecodedRecord, decode_batch, iter_records
from tierlog.util.clock import ManualClock

T = TypeVar("T")
NUM_PARTITIONS = 4
PROTOCOLS = [("range", b"range-meta"), ("roundrobin", b"rr-meta")]


def run(coro: Coroutine[Any, Any, T], timeout: float = 5.0) -> T:
    """``asyncio.run`` with a bound, so a hung future fails the test instead of the suite."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


class FakeLog:
    """An in-memory ``__consumer_offsets``: collects appended batches per partition.

    ``fail_with`` makes appends raise (an int becomes ``AppendError``); ``gate``, when
    set, holds every append until the event is set.
    """

    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = defaultdict(list)
        self.fail_with: int | Exception | None = None
        self.gate: asyncio.Event | None = None
        self.calls = 0

    async def append(self, partition: int, batch: bytes) -> None:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if isinstance(self.fail_with, int):
            raise AppendError(self.fail_with)
        if self.fail_with is not None:
            raise self.fail_with
        self.batches[partition].append(batch)

    def marker(self, partition: int, producer_id: int, commit: bool, epoch: int = 0) -> None:
        """Append a transaction marker (COMMIT or ABORT) of ``producer_id``, as the
        WriteTxnMarkers handler does before it calls ``complete_txn``."""
        kind = ControlType.COMMIT if commit else ControlType.ABORT
        self.batches[partition].append(
            build_control_batch(kind, producer_id=producer_id, producer_epoch=epoch, timestamp=0)
        )

    def log_batches(self, partition: int) -> list[LogBatch]:
        """The partition's batches with the offsets a log would give them, as the broker
        reads them to load a partition (``offsets_topic.read_batches``)."""
        out: list[LogBatch] = []
        next_offset = 0
        for batch in self.batches[partition]:
            header = parse_header(batch)
            placed = rewrite_prefix(batch, next_offset, header.partition_leader_epoch)
            out.append(decode_batch(placed + batch[len(placed) :]))
            next_offset = out[-1][0].next_offset
        return out

    def records(self, partition: int) -> list[DecodedRecord]:
        """The partition's records with log offsets, as the broker would read them."""
        out: list[DecodedRecord] = []
        for batch in self.batches[partition]:
            for rec in iter_records(batch):
                out.append(rec._replace(offset=len(out)))
        return out

    def decoded(self, partition: int) -> list[tuple[Any, Any]]:
        """(key, value) pairs decoded with offsets_codec; value None for tombstones."""
        out: list[tuple[Any, Any]] = []
        for rec in self.records(partition):
            assert rec.key is not None
            key = decode_key(rec.key)
            value: Any = None
            if rec.value is not None:
                if isinstance(key, OffsetCommitKey):
                    value = decode_offset_commit_value(rec.value)
                elif isinstance(key, GroupMetadataKey):
                    value = decode_group_metadata_value(rec.value)
            out.append((key, value))
        return out

    def all_decoded(self) -> list[tuple[Any, Any]]:
        return [kv for p in sorted(self.batches) for kv in self.decoded(p)]


def make_coordinator(
    log: FakeLog | None = None,
    *,
    clock: ManualClock | None = None,
    partitions: Sequence[int] | None = None,
    **overrides: Any,
) -> GroupCoordinator:
    """A coordinator owning ``partitions`` (all by default) with test-sized timeouts."""
    settings: dict[str, Any] = {
        "num_partitions": NUM_PARTITIONS,
        "min_session_timeout_ms": 10,
        "initial_rebalance_delay_ms": 0,
    }
    consumer_config = overrides.pop("consumer_config", None)
    topics = overrides.pop("topics", None)
    settings.update(overrides)
    coordinator = GroupCoordinator(
        (log or FakeLog()).append,
        config=GroupConfig(**settings),
        clock=clock or ManualClock(),
        consumer_config=consumer_config,
        topics=topics,
    )
    for p in range(NUM_PARTITIONS) if partitions is None else partitions:
        coordinator.load_partition(p, [])
    return coordinator


def join(
    c: GroupCoordinator,
    group_id: str = "g",
    member_id: str = "",
    *,
    client_id: str = "client",
    session_timeout_ms: int = 1000,
    rebalance_timeout_ms: int = 1000,
    protocol_type: str = "consumer",
    protocols: Sequence[tuple[str, bytes]] = PROTOCOLS,
    group_instance_id: str | None = None,
    require_known_member_id: bool = False,
    supports_skip_assignment: bool = False,
) -> Awaitable[JoinGroupResult]:
    return c.join_group(
        group_id,
        member_id,
        client_id,
        "/127.0.0.1",
        session_timeout_ms,
        rebalance_timeout_ms,
        protocol_type,
        protocols,
        group_instance_id=group_instance_id,
        require_known_member_id=require_known_member_id,
        supports_skip_assignment=supports_skip_assignment,
    )


async def stable_group(
    c: GroupCoordinator,
    n: int,
    group_id: str = "g",
    *,
    instance_ids: Sequence[str | None] | None = None,
    **join_args: Any,
) -> list[JoinGroupResult]:
    """Join ``n`` members concurrently and sync them to Stable; returns their joins
    (leader first). Assignments are ``b"assign-<i>"`` in join order."""
    ids = instance_ids or [None] * n
    tasks = []
    for i in range(n):
        tasks.append(
            asyncio.ensure_future(
                join(c, group_id, client_id=f"c{i}", group_instance_id=ids[i], **join_args)
            )
        )
        await asyncio.sleep(0)  # keep join order = leader order
    results = list(await asyncio.gather(*tasks))
    leader = next(r for r in results if r.member_id == r.leader)
    assignments = {r.member_id: f"assign-{i}".encode() for i, r in enumerate(results)}
    syncs = [
        c.sync_group(group_id, r.member_id, r.generation_id, assignments if r is leader else {})
        for r in results
    ]
    for s in await asyncio.gather(*syncs):
        assert s.error == 0, s
    return [leader] + [r for r in results if r is not leader]
