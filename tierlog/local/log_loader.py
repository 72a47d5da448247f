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
from typing import TYPE_CHECKING

from tierlog.local import damage_marks
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.index import CorruptIndexError
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

if TYPE_CHECKING:
    from tierlog.local.log import Log

logger = logging.getLogger(__name__)


def load(log: Log, had_clean_shutdown: bool) -> None:
    """Open every segment, recover those from the recovery point on after an unclean stop
    (or any whose indexes are missing or fail their check), and settle the log's offsets."""
    bases = _clean_directory(log)
    # Base offset of the first segment recover() rebuilt, whose .txnindex must be too.
    reindex_from: int | None = None
    first_recovered = len(bases)
    if not had_clean_shutdown and bases:
        first_recovered = max(0, bisect.bisect_right(bases, log.recovery_point) - 1)
    for n, base in enumerate(bases):
        segment = log._open_segment(base)
        # The segment notes missing/unreadable indexes as it opens them (checking
        # for the files here, after the open has created them, never saw one missing).
        if n >= first_recovered or segment.indexes_missing:
            truncated = segment.recover()
            reindex_from = base if reindex_from is None else reindex_from
            if segment.indexes_missing:
                logger.info("%s: rebuilt missing indexes", segment.path)
            if truncated:
                _drop_after_corruption(log, segment, truncated)
                log._append_segment(segment)
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
                    _drop_after_corruption(log, segment, truncated)
                    log._append_segment(segment)
                    break
        log._append_segment(segment)
    if not log.segments:
        start = max(log.log_start_offset, 0)
        log._append_segment(log._open_segment(start))
    for segment in log.segments[:-1]:
        segment.close_for_append()
    log.active_segment.make_active()
    log.log_start_offset = max(log.log_start_offset, log.segments[0].base_offset)
    if log.log_start_offset > log.log_end_offset:
        log.log_start_offset = log.log_end_offset
    if not had_clean_shutdown:
        # Recovered bytes may sit only in the page cache; make them durable once.
        for segment in log.segments[first_recovered:]:
            segment.flush()
    log.recovery_point = log.log_end_offset
    damage_marks.apply(log)
    _rebuild_epoch_cache_if_empty(log)
    log.leader_epoch_cache.truncate_from_end(log.log_end_offset)
    log.leader_epoch_cache.truncate_from_start(log.log_start_offset)
    # Producer state: the latest snapshot at or below the log end, then the batches after
    # it (only the active segment after a clean stop or a roll).
    state = log.producer_state
    if reindex_from is not None and reindex_from < log.log_end_offset:
        reindex_from = max(reindex_from, log.log_start_offset)
        for segment in log.segments:
            if segment.base_offset >= reindex_from:
                segment.txn_index.reset()
        # Snapshots above the recovered range describe batches being re-checked: the
        # state and the index entries are derived again from the log itself.
        replay_from = state.load(log.log_start_offset, reindex_from)
        log.rebuild_producer_state(replay_from, index_from=reindex_from)
        # The recovery point moves to the log end below: what was rebuilt must be durable.
        for segment in log.segments:
            if segment.base_offset >= reindex_from:
                segment.txn_index.flush()
                if segment is not log.active_segment:
                    segment.txn_index.close()
    else:
        log.rebuild_producer_state(state.load(log.log_start_offset, log.log_end_offset))
    if not log.producer_state.is_empty() and (
        log.producer_state.latest_snapshot_offset() != log.log_end_offset
    ):
        log.producer_state.take_snapshot(log.log_end_offset)


def _clean_directory(log: Log) -> list[int]:
    """Remove leftovers of interrupted work; return the base offsets of the segments."""
    finish_interrupted_swaps(log.directory)
    bases = []
    for entry in os.scandir(log.directory):
        name = entry.name
        if name.endswith((DELETED_SUFFIX, ".tmp")):
            os.unlink(entry.path)
        elif name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit():
            bases.append(int(name[: -len(LOG_SUFFIX)]))
    for entry in os.scandir(log.directory):
        stem, dot, suffix = entry.name.partition(".")
        if (
            dot
            and "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
            and stem.isdigit()
            and (int(stem) not in bases)
        ):
            os.unlink(entry.path)  # an index without its log is useless (Kafka does this)
    return sorted(bases)


def _drop_after_corruption(log: Log, segment: LogSegment, truncated: int) -> None:
    logger.warning(
        "%s: truncated %d corrupt bytes at offset %d; deleting later segments",
        segment.path,
        truncated,
        segment.next_offset,
    )
    log.recovered_bytes_truncated += truncated
    for entry in sorted(os.scandir(log.directory), key=lambda e: e.name):
        if entry.name.endswith(LOG_SUFFIX) and entry.name[: -len(LOG_SUFFIX)].isdigit():
            base = int(entry.name[: -len(LOG_SUFFIX)])
            if base > segment.base_offset:
                later = log._open_segment(base)
                logger.warning("%s: deleted, it follows a corrupt segment", later.path)
                later.delete()


def _rebuild_epoch_cache_if_empty(log: Log) -> None:
    """A missing or unreadable checkpoint is rebuilt from batch headers (KIP-101)."""
    if log.leader_epoch_cache.entries or log.log_end_offset == log.log_start_offset:
        return
    for segment in log.segments:
        try:
            for _, header in segment.batches():
                if header.partition_leader_epoch > log.leader_epoch_cache.latest_epoch:
                    log.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        except CorruptSegmentError:
            continue  # marked damaged by load: what it held cannot be read
