"""Planning: splits cover each range exactly once, remote below the manifest's end, leader
above it; maxOffsetsPerTrigger shares the limit by backlog."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from tierlog.remote.api import RemoteSegment, SegmentState
from tierlog.remote.manifest import Manifest
from tierlog.spark.planning import (
    LeaderSplit,
    OffsetRange,
    RemoteSplit,
    limit_ranges,
    plan,
    plan_range,
    remote_end,
)


def segment(base: int, end: int, state: SegmentState = SegmentState.COPY_FINISHED) -> RemoteSegment:
    return RemoteSegment(
        topic="t",
        partition=0,
        topic_id=uuid.UUID(int=0),
        base_offset=base,
        end_offset=end,
        segment_id=str(uuid.uuid4()),
        size_bytes=100,
        max_timestamp=-1,
        first_batch_timestamp=-1,
        leader_epochs=((0, base),),
        state=state,
        created_ms=0,
    )


def manifest(*bounds: tuple[int, int], start: int = 0) -> Manifest:
    return Manifest(
        "t", 0, log_start_offset=start, segments=tuple(segment(b, e) for b, e in bounds)
    )


def offsets_of(splits: list) -> list[int]:
    return [o for s in splits for o in range(s.start, s.end)]


def test_remote_segments_then_leader_chunks() -> None:
    m = manifest((0, 99), (100, 249))
    splits = plan_range(OffsetRange("t", 0, 50, 1000), m, leader_split_offsets=400)
    assert [(type(s).__name__, s.start, s.end) for s in splits] == [
        ("RemoteSplit", 50, 100),
        ("RemoteSplit", 100, 250),
        ("LeaderSplit", 250, 650),
        ("LeaderSplit", 650, 1000),
    ]
    assert remote_end(m) == 250


def test_uncommitted_segments_are_read_from_the_leader() -> None:
    m = Manifest("t", 0, segments=(segment(0, 99), segment(100, 199, SegmentState.COPY_STARTED)))
    splits = plan_range(OffsetRange("t", 0, 0, 300), m, leader_split_offsets=1000)
    assert [(s.tier, s.start, s.end) for s in splits] == [("remote", 0, 100), ("local", 100, 300)]


def test_no_manifest_means_everything_from_the_leader() -> None:
    splits = plan_range(OffsetRange("t", 0, 10, 20), None, leader_split_offsets=1000)
    assert splits == [LeaderSplit("t", 0, 10, 20)]
    assert plan_range(OffsetRange("t", 0, 5, 5), None, 1000) == []


def test_plan_puts_remote_splits_first() -> None:
    manifests = {("t", 0): manifest((0, 9)), ("t", 1): None}
    splits = plan([OffsetRange("t", 1, 0, 5), OffsetRange("t", 0, 0, 20)], manifests, 100)
    assert isinstance(splits[0], RemoteSplit)
    assert {(s.partition, s.start, s.end) for s in splits} == {(0, 0, 10), (0, 10, 20), (1, 0, 5)}


@given(
    lengths=st.lists(st.integers(1, 50), max_size=6),
    start=st.integers(0, 400),
    size=st.integers(0, 400),
    chunk=st.integers(1, 120),
)
def test_splits_cover_the_range_exactly_once(
    lengths: list[int], start: int, size: int, chunk: int
) -> None:
    bounds, base = [], 0
    for n in lengths:
        bounds.append((base, base + n - 1))
        base += n
    m = manifest(*bounds)
    splits = plan_range(OffsetRange("t", 0, start, start + size), m, chunk)
    assert offsets_of(splits) == list(range(start, start + size))
    boundary = remote_end(m)
    assert all(s.end <= boundary for s in splits if isinstance(s, RemoteSplit))
    assert all(s.start >= boundary for s in splits if isinstance(s, LeaderSplit))
    assert all(s.end - s.start <= chunk for s in splits if isinstance(s, LeaderSplit))


def test_limit_shares_by_backlog_and_keeps_every_partition_moving() -> None:
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 0, 100), OffsetRange("t", 2, 7, 7)]
    limited = limit_ranges(ranges, 100)
    assert [r.size for r in limited] == [90, 10, 0]
    tiny = limit_ranges(ranges, 2)
    assert [r.size for r in tiny] == [1, 1, 0]
    assert limit_ranges(ranges, None) == ranges
    assert limit_ranges(ranges, 5000) == ranges


def test_read_committed_remote_splits_carry_the_later_txn_indexes() -> None:
    import dataclasses

    segs = [segment(0, 9), segment(10, 19), segment(20, 29), segment(30, 39)]
    segs[1] = dataclasses.replace(segs[1], has_txn_index=True)
    segs[3] = dataclasses.replace(segs[3], has_txn_index=True)
    m = Manifest("t", 0, segments=tuple(segs))
    rng = OffsetRange("t", 0, 5, 45)
    committed = [
        s for s in plan_range(rng, m, 100, read_committed=True) if isinstance(s, RemoteSplit)
    ]
    assert [s.txn_segments for s in committed] == [
        (segs[1], segs[3]), (segs[1], segs[3]), (segs[3],), (segs[3],)
    ]  # fmt: skip
    assert {s.remote_end for s in committed} == {40}
    uncommitted = [s for s in plan_range(rng, m, 100) if isinstance(s, RemoteSplit)]
    assert all(s.txn_segments == () for s in uncommitted)
