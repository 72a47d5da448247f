"""Which part of a log may be cleaned now, and how dirty it is (Kafka's
``LogCleanerManager.cleanableOffsets`` and dirty ratio).

A log's segments, oldest first, fall in three parts::

    log start .. first dirty      clean: cleaned by an earlier pass
    first dirty .. first uncleanable    dirty: written since
    first uncleanable .. log end  not to be touched yet

The first uncleanable offset is the lowest of: the active segment's base (the active
segment is never cleaned), the high watermark (records not yet committed may still be
truncated; ``committed`` below), the first unstable offset (the first offset of the
earliest open transaction, KIP-98: whether its records are aborted is not known yet;
Kafka's ``firstUncleanableDirtyOffset``), and the base of the first segment holding a
record newer than ``min.compaction.lag.ms``. It is rounded down to a segment boundary, as a pass
rewrites whole segments. The dirty ratio is the dirty part's bytes over the clean and
dirty parts' bytes.

A log must be cleaned whatever its ratio (``must_clean``) when its oldest dirty record is
older than ``max.compaction.lag.ms`` (KIP-354), or when a tombstone it keeps has passed
its delete horizon (KIP-534), since only a pass removes it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tierlog.local.log import Log
from tierlog.local.segment import LogSegment


@dataclass(slots=True)
class Cleanable:
    """A log's cleanable part: ``segments`` are its closed segments from the log start
    up to the first uncleanable offset, ``ends`` where each one's offsets end (the next
    segment's base)."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    segments: list[LogSegment]
    ends: list[int]
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def due(self) -> bool:
        """Worth a pass now: dirty enough, or forced by a time rule."""
        if self.dirty_bytes == 0 and not self.must_clean:
            return False
        # Strictly above, as Kafka compares (a log at exactly the ratio waits).
        return self.must_clean or self.dirty_ratio > self.log.config.min_cleanable_dirty_ratio


def first_timestamp(segment: LogSegment) -> int:
    """The segment's first batch's timestamp, or its creation time when it has none."""
    ts = segment.first_batch_timestamp
    return ts if ts is not None and ts >= 0 else segment.created_ms


def cleanable_part(
    log: Log,
    checkpointed_dirty_offset: int,
    *,
    committed: int | None,
    now_ms: int,
    next_delete_horizon_ms: int = -1,
) -> Cleanable:
    """The cleanable part of ``log`` now (see the module docstring)."""
    config = log.config
    segments = log.segments
    limit = segments[-1].base_offset
    if committed is not None:
        limit = min(limit, committed)
    first_unstable = log.first_unstable_offset
    if first_unstable is not None:
        limit = min(limit, first_unstable)
    if config.min_compaction_lag_ms > 0:
        newest_allowed = now_ms - config.min_compaction_lag_ms
        for segment in segments[:-1]:
            if segment.largest_timestamp > newest_allowed:
                limit = min(limit, segment.base_offset)
                break
    # A closed segment covers offsets up to the next one's base: a cleaned segment may
    # have lost its last records (or all of them) without its range shrinking.
    closed: list[LogSegment] = []
    ends: list[int] = []
    for segment, following in itertools.pairwise(segments):
        if following.base_offset > limit:
            break
        closed.append(segment)
        ends.append(following.base_offset)
    first_uncleanable = ends[-1] if ends else segments[0].base_offset
    first_dirty = checkpointed_dirty_offset
    if first_dirty < log.log_start_offset or first_dirty > first_uncleanable:
        # No checkpoint, or one from before a truncation or DeleteRecords: all dirty.
        first_dirty = max(log.log_start_offset, segments[0].base_offset)
    clean_bytes = sum(s.size for s, end in zip(closed, ends, strict=True) if end <= first_dirty)
    dirty = [s for s, end in zip(closed, ends, strict=True) if end > first_dirty]
    dirty_bytes = sum(s.size for s in dirty)
    must_clean = False
    if dirty and config.max_compaction_lag_ms < 2**63 - 1:
        must_clean = now_ms - first_timestamp(dirty[0]) > config.max_compaction_lag_ms
    if 0 <= next_delete_horizon_ms <= now_ms and closed:
        must_clean = True
    return Cleanable(
        log, first_dirty, first_uncleanable, closed, ends, clean_bytes, dirty_bytes, must_clean
    )
