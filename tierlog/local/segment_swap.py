"""Replacing a run of segments with one cleaned segment, crash-safely (Kafka's swap).

The log cleaner writes a replacement beside the segments it replaces; this module owns
the file names of that exchange and the two places that act on them: ``swap_in`` (the
live log, on its own thread) and ``finish_interrupted_swaps`` (the loader, at start-up).

Files of one replacement, named by the base offset of the first replaced segment::

    <base>.log.cleaned  <base>.index.cleaned  <base>.timeindex.cleaned
    <base>.txnindex.cleaned       the aborted transactions kept (empty: none, and no index
                                  is left; without one from the cleaner, the replaced
                                  segments')
    <base>.swaprange.cleaned      one line: the end offset (exclusive) of the replaced run

A swap, in this order:

1. rename every ``*.cleaned`` to ``*.swap``, the ``.log`` last, and fsync the directory.
   ``<base>.log.swap`` existing is the commit point: from then on the replacement wins.
2. take the replaced segments out of the log (renamed ``*.deleted``, or unlinked; leases
   still send from their open files);
3. rename the ``*.swap`` files to their live names, fsync the directory, open the new
   segment and put it in the log's list.

At start-up, ``*.cleaned`` files are an unfinished cleaning: deleted. A ``<base>.log.swap``
is a committed replacement: every live segment whose base lies in [base, end) is deleted
and the swap files take their live names (a missing index is rebuilt by the loader). Other
``*.swap`` files without their ``.log.swap`` are deleted. Whatever the crash point, the log
holds the old segments or the new one, never a mix.

Why the range file: the replaced run's end cannot be read from the cleaned segment, whose
last records may all have been removed (a replaced segment holding only superseded
records leaves nothing of itself), and guessing it from the cleaned file would leave such
a segment live beside the replacement.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from tierlog.local.log_segments import LogSegments
from tierlog.local.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    SegmentState,
    segment_name,
)
from tierlog.records.errors import RecordsError
from tierlog.records.header import parse_header
from tierlog.records.txn_index_codec import TXN_INDEX_SUFFIX, encode_entries

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
RANGE_SUFFIX = ".swaprange"
# Renamed in this order; the .log last, as its .swap is the commit point.
_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, RANGE_SUFFIX, LOG_SUFFIX)


class StaleSwapError(Exception):
    """The segments a replacement was made from changed meanwhile (retention,
    truncation, another swap): the replacement is discarded, nothing is changed."""


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_range(directory: Path, base_offset: int, end_offset: int) -> None:
    """Write ``<base>.swaprange.cleaned`` (fsynced): the replaced run ends at ``end_offset``."""
    path = directory / (segment_name(base_offset) + RANGE_SUFFIX + CLEANED_SUFFIX)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{end_offset}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _path(directory: Path, base: int, suffix: str, stage: str = "") -> Path:
    return directory / (segment_name(base) + suffix + stage)


def discard_cleaned(directory: Path, base_offset: int) -> None:
    for suffix in _SUFFIXES:
        _path(directory, base_offset, suffix, CLEANED_SUFFIX).unlink(missing_ok=True)


def swap_in(
    segments: LogSegments,
    replaced: Sequence[LogSegment],
    sizes: Sequence[int],
    *,
    open_segment: Callable[[int], LogSegment],
    retire: Callable[[list[LogSegment]], None],
) -> LogSegment:
    """Replace ``replaced`` (consecutive closed segments of ``segments``, which had
    ``sizes`` bytes when they were cleaned) with the cleaned files named by the first
    one's base. ``Log.replace_segments`` is the way in; it passes how it opens a segment
    and how it retires removed ones (``file.delete.delay.ms``).

    Raises:
        StaleSwapError: the segments are no longer those that were cleaned; the cleaned
            files are deleted and the log is unchanged.
    """
    directory = segments.directory
    base = replaced[0].base_offset
    try:
        first = segments.index(replaced[0])
    except ValueError:
        first = -1
    current = segments[first : first + len(replaced)] if first >= 0 else []
    if (
        list(current) != list(replaced)
        or first + len(replaced) >= len(segments)  # the active segment is never replaced
        or any(s.state is not SegmentState.CLOSED for s in replaced)
        or [s.size for s in replaced] != list(sizes)
    ):
        discard_cleaned(directory, base)
        raise StaleSwapError(f"{segments.name}: segments from {base} changed while being cleaned")
    _carry_txn_index(directory, base, replaced)
    for suffix in _SUFFIXES:
        cleaned = _path(directory, base, suffix, CLEANED_SUFFIX)
        if cleaned.exists():
            os.rename(cleaned, _path(directory, base, suffix, SWAP_SUFFIX))
    _fsync_dir(directory)
    next_base = segments[first + len(replaced)].base_offset
    segments.remove_all(replaced)
    retire(list(replaced))
    _promote(directory, base)
    segment = open_segment(base)
    segment.load(next_base)
    segment.close_for_append()
    segments.insert(segment)
    return segment


def _carry_txn_index(directory: Path, base: int, replaced: Sequence[LogSegment]) -> None:
    """A cleaner that wrote no ``<base>.txnindex.cleaned`` leaves the replaced segments'
    aborted transactions to the replacement: compaction keeps offsets, so every entry
    still names the same records, and dropping them would show aborted records to
    read_committed consumers. Written before the commit point, like the other files."""
    cleaned = _path(directory, base, TXN_INDEX_SUFFIX, CLEANED_SUFFIX)
    if cleaned.exists():
        return
    entries = [txn for segment in replaced for txn in segment.txn_index.entries]
    if not entries:
        return
    fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, encode_entries(entries))
        os.fsync(fd)
    finally:
        os.close(fd)


def _promote(directory: Path, base: int) -> None:
    """The swap files take their live names (the range file is no longer needed)."""
    for suffix in _SUFFIXES:
        swap = _path(directory, base, suffix, SWAP_SUFFIX)
        if suffix == RANGE_SUFFIX:
            continue
        if suffix == TXN_INDEX_SUFFIX and swap.exists() and swap.stat().st_size == 0:
            # The cleaner kept no aborted transaction (an empty file only told the swap
            # not to carry the replaced ones over): no empty index is left (Kafka).
            swap.unlink()
        elif swap.exists():
            os.replace(swap, _path(directory, base, suffix))
    _path(directory, base, RANGE_SUFFIX, SWAP_SUFFIX).unlink(missing_ok=True)
    _fsync_dir(directory)


def _swap_end(directory: Path, base: int) -> int:
    """The end of the run a committed swap replaces: its range file, or (when that is
    unreadable, which a crash cannot cause as it is written first) the swap log's end."""
    range_path = _path(directory, base, RANGE_SUFFIX, SWAP_SUFFIX)
    try:
        return int(range_path.read_text().strip())
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable (%s); using the swapped segment's own end", range_path, exc)
    data = _path(directory, base, LOG_SUFFIX, SWAP_SUFFIX).read_bytes()
    end, position = base, 0
    try:
        while position < len(data):
            header = parse_header(data, position)
            end = header.next_offset
            position += header.size
    except RecordsError:
        pass
    return end


def finish_interrupted_swaps(directory: Path) -> None:
    """Start-up: drop unfinished cleanings, complete committed swaps (module docstring)."""
    names = os.listdir(directory)
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            os.unlink(directory / name)
    committed = sorted(
        int(name.split(".")[0])
        for name in names
        if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and name.split(".")[0].isdigit()
    )
    for base in committed:
        end = _swap_end(directory, base)
        for name in os.listdir(directory):
            stem, _, suffix = name.partition(".")
            if (
                stem.isdigit()
                and base <= int(stem) < end
                and "." + suffix
                in (
                    LOG_SUFFIX,
                    INDEX_SUFFIX,
                    TIME_INDEX_SUFFIX,
                    TXN_INDEX_SUFFIX,
                )
            ):
                os.unlink(directory / name)
        log.warning(
            "%s: completing an interrupted compaction swap of offsets %d-%d",
            directory / segment_name(base),
            base,
            end - 1,
        )
        _promote(directory, base)
    for name in os.listdir(directory):
        if name.endswith(SWAP_SUFFIX):  # a swap that never committed
            os.unlink(directory / name)
