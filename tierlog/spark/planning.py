"""Turn offset ranges into Spark partitions ("splits"), tier by tier (sans-I/O).

For each partition's range ``[start, end)`` and the manifest read at planning time:

* every committed remote segment overlapping the range becomes one ``RemoteSplit``,
  clipped to the range — executors read it straight from object storage;
* what lies at or above the manifest's remote end becomes ``LeaderSplit`` s of at most
  ``leader_split_offsets`` offsets each — executors fetch them from the leader.

For read_committed, a remote split also carries the committed segments from its own on
that have a ``.txnindex`` (an aborted transaction's marker may be in a later segment than
its records), and the remote end, from where the leader knows the rest.

Why no offset is read twice or skipped at the boundary, even while offload runs during
the query: the boundary is fixed once, here, from one manifest snapshot. Segments the
broker offloads later stay in the leader's splits, and if the broker also drops their
local copies, it serves those offsets from the remote tier itself (a Fetch below the
local log start). Committed remote segments are immutable until retention deletes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tierlog.remote.api import RemoteSegment
from tierlog.remote.manifest import Manifest, committed_segments, end_offset

REMOTE = "remote"
LOCAL = "local"


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True, slots=True)
class RemoteSplit:
    """Offsets ``[start, end)`` inside one committed remote segment."""

    topic: str
    partition: int
    start: int
    end: int
    segment: RemoteSegment
    # read_committed only: segments from ``segment`` on with an aborted-txn index, in
    # offset order, and the remote tier's end when planned.
    txn_segments: tuple[RemoteSegment, ...] = ()
    remote_end: int = 0

    tier = REMOTE


@dataclass(frozen=True, slots=True)
class LeaderSplit:
    """Offsets ``[start, end)`` fetched from the partition's leader."""

    topic: str
    partition: int
    start: int
    end: int

    tier = LOCAL


Split = RemoteSplit | LeaderSplit


def remote_end(manifest: Manifest | None) -> int:
    """The first offset the remote tier does not hold (0 when it holds nothing)."""
    if manifest is None:
        return 0
    return max(end_offset(manifest), 0)


def plan_range(
    offsets: OffsetRange,
    manifest: Manifest | None,
    leader_split_offsets: int,
    *,
    read_committed: bool = False,
) -> list[Split]:
    """The splits of one partition's range, in offset order, covering it exactly."""
    if offsets.size == 0:
        return []
    splits: list[Split] = []
    hot_start = offsets.start
    if manifest is not None:
        committed = committed_segments(manifest)
        end = remote_end(manifest)
        for n, segment in enumerate(committed):
            lo = max(offsets.start, segment.base_offset)
            hi = min(offsets.end, segment.end_offset + 1)
            if lo >= hi:
                continue
            txn: tuple[RemoteSegment, ...] = ()
            if read_committed:
                txn = tuple(s for s in committed[n:] if s.has_txn_index)
            splits.append(RemoteSplit(offsets.topic, offsets.partition, lo, hi, segment, txn, end))
        hot_start = max(offsets.start, remote_end(manifest))
    for lo in range(hot_start, offsets.end, leader_split_offsets):
        hi = min(lo + leader_split_offsets, offsets.end)
        splits.append(LeaderSplit(offsets.topic, offsets.partition, lo, hi))
    return splits


def plan(
    ranges: Iterable[OffsetRange],
    manifests: dict[tuple[str, int], Manifest | None],
    leader_split_offsets: int,
    *,
    read_committed: bool = False,
) -> list[Split]:
    """Splits of every range; remote ones first (they are the big, independent reads)."""
    splits: list[Split] = []
    for offsets in ranges:
        manifest = manifests.get((offsets.topic, offsets.partition))
        splits.extend(
            plan_range(offsets, manifest, leader_split_offsets, read_committed=read_committed)
        )
    return sorted(splits, key=lambda s: (s.tier != REMOTE, s.topic, s.partition, s.start))


def limit_ranges(ranges: list[OffsetRange], max_offsets: int | None) -> list[OffsetRange]:
    """``maxOffsetsPerTrigger``: shrink the ranges to about ``max_offsets`` in total, each
    partition taking its share in proportion to its backlog (Spark's Kafka source rule),
    at least one offset for every partition that has any."""
    total = sum(r.size for r in ranges)
    if max_offsets is None or total <= max_offsets:
        return ranges
    out = []
    for r in ranges:
        if r.size == 0:
            out.append(r)
            continue
        share = max(1, int(r.size * max_offsets / total))
        out.append(OffsetRange(r.topic, r.partition, r.start, min(r.end, r.start + share)))
    return out
