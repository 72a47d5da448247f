"""Loading a partition's log from disk: the start-up half of ``Log``.

Opens every segment and returns them as a ``LogSegments`` with the offsets it settled
(``LoadedLog``); the ``Log`` is built from that. On every start, clean or not, the active
segment's tail is CRC-checked from its last index entry; after an unclean stop, every
batch (length, magic, CRC-32C, rising offsets) from the segment holding the recovery point
to the end. It also builds missing or unreadable indexes again, cleans leftovers of
interrupted work (``*.deleted``, ``*.tmp``, indexes without a log, a compaction's
``*.cleaned`` files; a committed ``*.swap`` is completed), and settles the log start,
recovery point, leader epoch cache and producer state. Segments below the recovery point
are not rescanned (the background scrubber re-checks them).

What a bad batch does (issue 20, item 1). Only the *tail of the log past the recovery
point* is truncated: bytes never known flushed, which a crash may have torn. Anything
else was acknowledged: a batch failing its CRC-32C is marked damaged and the check goes on
after it; a batch whose length or header cannot be trusted marks the rest of its file,
whose offsets then run to the next segment's base (later segments are always kept); in
the last segment, below the recovery point, the log end stays at the recovery point and
a new active segment starts there, so no offset is ever handed out twice. Marked ranges
answer KAFKA_STORAGE_ERROR, are saved in ``damage-marks``, and in a cluster are repaired
from an in-sync replica (``tierlog/broker/replication/segment_repair.py``). Before this, one cut
segment truncated the log there and deleted every later segment.

Missing offsets (issue 20, item 2): a segment file deleted leaves offsets no file holds.
Loading looks for them, on evidence only (``_mark_missing_offsets``): the leader-epoch
checkpoint naming an epoch that starts before the first segment (retention moves the
epoch history before it deletes segments, so a crash in between cannot look like a
loss; skipped for tiered topics, whose local start follows the remote tier); two
segments whose offsets do not meet, in a topic never compacted (compaction leaves such
gaps, and may remove the very batch an epoch started at); a clean stop's recovery point
(the log end) past the last segment. The segment before the missing offsets then answers for them
(``LogSegment.mark_missing``): reads of them raise instead of going on to the next
segment, an ERROR line names them, and the log start and end stay where they were.

A recovered segment's ``.txnindex`` is rebuilt (Kafka's ``LogSegment.recover`` with the
producer state): the producer state is reloaded from the latest snapshot at or below the
first recovered segment (later snapshots are deleted, as Kafka's ``truncateAndReload``
does) and replayed to the log end, indexing every aborted transaction from there on.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tierlog.local import damage_marks
from tierlog.local.config import LogConfig
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.index import CorruptIndexError
from tierlog.local.leader_epoch import EpochEntry, LeaderEpochCache
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
    config: LogConfig,
    recovery_point: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
    leader_epoch_cache: LeaderEpochCache,
    producer_state: ProducerStateManager,
    cleaned_up_to: int | None = None,
) -> LoadedLog:
    """Open every segment, check those an unclean stop may have torn (and any whose
    indexes are missing or fail their check), find missing offsets, and settle the log's
    offsets (module docstring).

    Args:
        directory: the partition directory.
        new_segment: opens (or creates) the segment with a base offset, as the log does.
        config: the topic's: whether its offsets are dense (not compacted) and whether
            its start may move for the remote tier.
        recovery_point, log_start_offset: the checkpointed values.
        had_clean_shutdown: False re-checks every batch from the recovery point on.
        leader_epoch_cache, producer_state: the log's, settled here to the loaded range.
        cleaned_up_to: how far the log cleaner has cleaned this log, if ever (its
            checkpoint): gaps below are compaction's, even if the topic is no longer
            compacted.
    """
    segments = LogSegments(directory)
    loaded = LoadedLog(segments, log_start_offset, recovery_point)
    bases = _clean_directory(directory)
    # The epoch history as the checkpoint had it: evidence of offsets that existed.
    epochs = list(leader_epoch_cache.entries)
    # Base offset of the first segment recover() rebuilt, whose .txnindex must be too.
    reindex_from: int | None = None
    first_recovered = len(bases)
    if not had_clean_shutdown and bases:
        first_recovered = max(0, bisect.bisect_right(bases, recovery_point) - 1)
    for n, base in enumerate(bases):
        segment = new_segment(base)
        last = n == len(bases) - 1
        next_base = None if last else bases[n + 1]
        # The segment notes missing/unreadable indexes as it opens them (checking
        # for the files here, after the open has created them, never saw one missing).
        check = n >= first_recovered or segment.indexes_missing
        if not check:
            problem = None
            try:
                # A closed segment damaged inside is kept with the damage marked (see
                # LogSegment.load).
                segment.load(next_base)
                if last:
                    # Even after a clean stop (Kafka skips this): the active segment's
                    # tail is CRC-checked, or a torn last batch hides every later append.
                    torn = segment.first_invalid_in_tail()
                    if torn is not None:
                        problem = f"torn tail at position {torn[0]} ({torn[1]})"
            except (CorruptIndexError, RecordsError, CorruptSegmentError) as exc:
                problem = str(exc).removeprefix(f"{segment.path}: ")
            if problem is not None:
                logger.warning("%s: %s; recovering the segment", segment.path, problem)
                check = True
        if check:
            # Only the last segment's tail, and only past the recovery point, may be
            # truncated: anything else is acknowledged data (issue 20, item 1).
            truncated = segment.recover(recovery_point if last else None, next_base)
            reindex_from = base if reindex_from is None else reindex_from
            if segment.indexes_missing:
                logger.info("%s: rebuilt missing indexes", segment.path)
            if truncated:
                segment.flush()
                loaded.recovered_bytes_truncated += truncated
                logger.warning(
                    "%s: truncated %d corrupt bytes at offset %d (past the recovery point "
                    "%d: never flushed)",
                    segment.path,
                    truncated,
                    segment.next_offset,
                    recovery_point,
                )
        segments.append(segment)
    found_damage = any(segment.damaged for segment in segments)
    damage_marks.apply(segments)
    if segments:
        found_damage |= _mark_missing_offsets(
            loaded, config, epochs, had_clean_shutdown, new_segment, cleaned_up_to
        )
    else:
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
    if found_damage:
        damage_marks.save(segments)  # found at load: a restart marks them without a scan
    _rebuild_epoch_cache_if_empty(segments, leader_epoch_cache, loaded.log_start_offset)
    leader_epoch_cache.truncate_from_end(log_end_offset)
    leader_epoch_cache.truncate_from_start(loaded.log_start_offset)
    _load_producer_state(segments, producer_state, loaded.log_start_offset, reindex_from)
    # Closed segments hold no descriptor until they are read (issue 20, item 8): a broker
    # with more of them on disk than it has descriptors still starts.
    for segment in segments[:-1]:
        segment.release_files()
    return loaded


def _mark_missing_offsets(
    loaded: LoadedLog,
    config: LogConfig,
    epochs: list[EpochEntry],
    had_clean_shutdown: bool,
    new_segment: Callable[[int], LogSegment],
    cleaned_up_to: int | None,
) -> bool:
    """Find offsets the log must hold but no segment file does, and make the segment
    before them answer for them (``LogSegment.mark_missing``); returns whether any were
    found. The evidence, never a guess (module docstring):

    * before the first segment: the leader-epoch checkpoint names an epoch starting
      below it (retention moves the epoch history before it deletes a segment);
    * between two segments: offsets that do not meet, in a topic whose offsets are dense:
      never compacted (compaction leaves gaps; it may even remove the batch an epoch
      started at, so the epoch history proves nothing there);
    * after the last segment: the recovery point is past it, after a clean stop (the
      recovery point is then the log end) or with damage found in the last segment.
    """
    segments = loaded.segments
    found = False
    first = segments.first
    if epochs and not config.remote_storage_enable:
        # A tiered log's local start moves with its remote tier (KIP-405 follower
        # bootstrap restores epochs below it): what lies below is the remote tier's.
        expected = max(loaded.log_start_offset, epochs[0].start_offset)
        if expected < first.base_offset:
            start = new_segment(expected)
            _say_missing(start, expected, first.base_offset, "no segment file holds them")
            start.mark_missing(first.base_offset, "segment file missing")
            segments.insert(start)
            found = True
    for before, after in itertools.pairwise(list(segments)):
        gap = (before.next_offset, after.base_offset)
        if gap[0] >= gap[1] or config.compact:
            continue
        if cleaned_up_to is not None and gap[0] < cleaned_up_to:
            continue  # compacted once (cleanup.policy changed since): its gaps are normal
        _say_missing(before, gap[0], gap[1], f"the segment chain jumps to {after.path.name}")
        before.mark_missing(gap[1], "segment file missing")
        found = True
    last = segments.active
    recovery_point = loaded.recovery_point
    if last.next_offset < recovery_point and (had_clean_shutdown or last.damaged):
        _say_missing(
            last,
            last.next_offset,
            recovery_point,
            f"the recovery point is {recovery_point}; appends go on from there",
        )
        last.mark_missing(recovery_point, "cut short below the recovery point")
        segments.append(new_segment(recovery_point))
        found = True
    return found


def _say_missing(segment: LogSegment, first: int, end: int, why: str) -> None:
    logger.error(
        "%s: offsets %d-%d are missing (%s); reads of them answer KAFKA_STORAGE_ERROR until "
        "they are repaired from a replica or DeleteRecords moves the log start past them",
        segment.path,
        first,
        end - 1,
        why,
    )


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
