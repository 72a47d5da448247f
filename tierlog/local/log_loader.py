"""Loading a partition's log from disk: the start-up half of ``Log``.

Opens every segment; on every start, clean or not, CRC-checks the active segment's tail
from its last index entry and truncates a torn last batch; after an unclean stop,
re-checks every batch (length, magic, CRC-32C) from the segment holding the recovery point
to the end, truncating after the last valid batch and deleting any later segments (nothing
after a corrupt batch can be trusted); builds missing or unreadable indexes again; cleans
leftovers of interrupted work (``*.deleted``, ``*.tmp``, indexes without a log, a
compaction's ``*.cleaned`` files; a committed ``*.swap`` is completed); and
settles the log start, recovery point, leader epoch cache and producer state. Segments
below the recovery point are not rescanned (the background scrubber re-checks them).

A recovered segment's ``.txnindex`` is rebuilt (Kafka's ``LogSegment.recover`` with the
producer state): the producer state is reloaded from the latest snapshot at or below the
first recovered segment (later snapshots are deleted, as Kafka's ``truncateAndReload``
does) and replayed to the log end, indexing every aborted transaction from there on.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tierlog.local import damage_marks
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.index import CorruptIndexError
from tierlog.local.leader_epoch import LeaderEpochCache
from tierlog.local.log_segments import LogSegments
from tierlog.local.producer_replay import replay_producers
from tierlog.local.producer_state import ProducerStateManager
from tierlog.local.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from tierlog.local.segment_swap import finish_interrupted_swaps
from tierlog.records.errors import RecordsError
from tierlog.records.txn_index_codec import TXN_INDEX_SUFFIX

logger = logging.getLogger(__name__)


@dataclass
class LoadedLog:
    """What loading found: the ``Log`` is built from it."""

    segments: LogSegments
    log_start_offset: int
    recovery_point: int
    # Bytes of torn tails cut off (a crash mid-write).
    recovered_bytes_truncated: int = 0


def load(
    directory: Path,
    new_segment: Callable[[int], LogSegment],
    *,
    recovery_point: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
    leader_epoch_cache: LeaderEpochCache,
    producer_state: ProducerStateManager,
) -> LoadedLog:
    """Open every segment, recover those from the recovery point on after an unclean stop
    (or any whose indexes are missing or fail their check), and settle the log's offsets.

    Args:
        directory: the partition directory.
        new_segment: opens (or creates) the segment with a base offset, as the log does.
        recovery_point, log_start_offset: the checkpointed values.
        had_clean_shutdown: False re-checks every batch from the recovery point on.
        leader_epoch_cache, producer_state: the log's, settled here to the loaded range.
    """
    segments = LogSegments(directory)
    loaded = LoadedLog(segments, log_start_offset, recovery_point)
    bases = _clean_directory(directory)
    # Base offset of the first segment recover() rebuilt, whose .txnindex must be too.
    reindex_from: int | None = None
    first_recovered = len(bases)
    if not had_clean_shutdown and bases:
        first_recovered = max(0, bisect.bisect_right(bases, recovery_point) - 1)
    for n, base in enumerate(bases):
        segment = new_segment(base)
        # The segment notes missing/unreadable indexes as it opens them (checking
        # for the files here, after the open has created them, never saw one missing).
        if n >= first_recovered or segment.indexes_missing:
            truncated = segment.recover()
            reindex_from = base if reindex_from is None else reindex_from
            if segment.indexes_missing:
                logger.info("%s: rebuilt missing indexes", segment.path)
            if truncated:
                _drop_after_corruption(loaded, segment, truncated, new_segment)
                segments.append(segment)
                break
        else:
            problem = None
            try:
                # A closed segment damaged inside is kept with the damage marked (see
                # LogSegment.load); only the active one is truncated.
                segment.load(bases[n + 1] if n + 1 < len(bases) else None)
                if n == len(bases) - 1:
                    # Even after a clean stop (Kafka skips this): the active segment's
                    # tail is CRC-checked, or a torn last batch hides every later append.
                    torn = segment.first_invalid_in_tail()
                    if torn is not None:
                        problem = f"torn tail at position {torn[0]} ({torn[1]})"
            except (CorruptIndexError, RecordsError, CorruptSegmentError) as exc:
                problem = str(exc).removeprefix(f"{segment.path}: ")
            if problem is not None:
                logger.warning("%s: %s; recovering the segment", segment.path, problem)
                truncated = segment.recover()
                reindex_from = base if reindex_from is None else reindex_from
                if truncated:
                    segment.flush()
                    _drop_after_corruption(loaded, segment, truncated, new_segment)
                    segments.append(segment)
                    break
        segments.append(segment)
    if not segments:
        segments.append(new_segment(max(log_start_offset, 0)))
    for segment in segments[:-1]:
        segment.close_for_append()
    segments.active.make_active()
    log_end_offset = segments.active.next_offset
    loaded.log_start_offset = max(log_start_offset, segments.first.base_offset)
    if loaded.log_start_offset > log_end_offset:
        loaded.log_start_offset = log_end_offset
    if not had_clean_shutdown:
        # Recovered bytes may sit only in the page cache; make them durable once.
        for segment in segments[first_recovered:]:
            segment.flush()
    loaded.recovery_point = log_end_offset
    damage_marks.apply(segments)
    _rebuild_epoch_cache_if_empty(segments, leader_epoch_cache, loaded.log_start_offset)
    leader_epoch_cache.truncate_from_end(log_end_offset)
    leader_epoch_cache.truncate_from_start(loaded.log_start_offset)
    _load_producer_state(segments, producer_state, loaded.log_start_offset, reindex_from)
    return loaded


def _load_producer_state(
    segments: LogSegments,
    state: ProducerStateManager,
    log_start_offset: int,
    reindex_from: int | None,
) -> None:
    """The latest snapshot at or below the log end, then the batches after it (only the
    active segment after a clean stop or a roll)."""
    log_end_offset = segments.active.next_offset
    if reindex_from is not None and reindex_from < log_end_offset:
        reindex_from = max(reindex_from, log_start_offset)
        for segment in segments:
            if segment.base_offset >= reindex_from:
                segment.txn_index.reset()
        # Snapshots above the recovered range describe batches being re-checked: the
        # state and the index entries are derived again from the log itself.
        replay_from = state.load(log_start_offset, reindex_from)
        replay_producers(segments, state, replay_from, log_end_offset, index_from=reindex_from)
        # The recovery point moves to the log end: what was rebuilt must be durable.
        for segment in segments:
            if segment.base_offset >= reindex_from:
                segment.txn_index.flush()
                if segment is not segments.active:
                    segment.txn_index.close()
    else:
        replay_from = state.load(log_start_offset, log_end_offset)
        replay_producers(segments, state, replay_from, log_end_offset)
    if not state.is_empty() and state.latest_snapshot_offset() != log_end_offset:
        state.take_snapshot(log_end_offset)


def _clean_directory(directory: Path) -> list[int]:
    """Remove leftovers of interrupted work; return the base offsets of the segments."""
    finish_interrupted_swaps(directory)
    bases = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith((DELETED_SUFFIX, ".tmp")):
            os.unlink(entry.path)
        elif name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit():
            bases.append(int(name[: -len(LOG_SUFFIX)]))
    for entry in os.scandir(directory):
        stem, dot, suffix = entry.name.partition(".")
        if (
            dot
            and "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
            and stem.isdigit()
            and (int(stem) not in bases)
        ):
            os.unlink(entry.path)  # an index without its log is useless (Kafka does this)
    return sorted(bases)


def _drop_after_corruption(
    loaded: LoadedLog,
    segment: LogSegment,
    truncated: int,
    new_segment: Callable[[int], LogSegment],
) -> None:
    logger.warning(
        "%s: truncated %d corrupt bytes at offset %d; deleting later segments",
        segment.path,
        truncated,
        segment.next_offset,
    )
    loaded.recovered_bytes_truncated += truncated
    directory = loaded.segments.directory
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.name.endswith(LOG_SUFFIX) and entry.name[: -len(LOG_SUFFIX)].isdigit():
            base = int(entry.name[: -len(LOG_SUFFIX)])
            if base > segment.base_offset:
                later = new_segment(base)
                logger.warning("%s: deleted, it follows a corrupt segment", later.path)
                later.delete()


def _rebuild_epoch_cache_if_empty(
    segments: LogSegments, cache: LeaderEpochCache, log_start_offset: int
) -> None:
    """A missing or unreadable checkpoint is rebuilt from batch headers (KIP-101)."""
    if cache.entries or segments.active.next_offset == log_start_offset:
        return
    for segment in segments:
        try:
            for _, header in segment.batches():
                if header.partition_leader_epoch > cache.latest_epoch:
                    cache.assign(header.partition_leader_epoch, header.base_offset)
        except CorruptSegmentError:
            continue  # marked damaged by load: what it held cannot be read
