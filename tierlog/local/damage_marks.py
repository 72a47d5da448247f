"""Damaged byte ranges of a partition's segments, kept across restarts (``damage-marks``).

The scrubber marks a range that fails its CRC-32C unreadable (``LogSegment.mark_damaged``);
the mark lived in memory, so after a restart the bad bytes were served again until the
scrubber, rate-limited, came back to them, hours later on a large disk. The marks are now
written to the partition directory whenever they change and applied again at load.

A mark names the file it is about by inode and size as well as base offset: a segment
replaced since (a compaction swap keeps the base offset, a truncation copies the kept
prefix to a new inode) is another file, and an old mark must not cut reads of it.

Byte format: Kafka-style text checkpoint (``checkpoint.py``), version 0, one entry per
range: ``base_offset inode size position end problem`` (the problem's spaces as ``_``)::

    0
    1
    1042 1835011 4000 312 396 crc_mismatch
"""

from __future__ import annotations

import logging
import os

from tierlog.local.checkpoint import CorruptCheckpointError, read_checkpoint, write_checkpoint
from tierlog.local.log_segments import LogSegments

log = logging.getLogger(__name__)

FILE_NAME = "damage-marks"


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        stat = os.fstat(fd)
    except OSError:
        return None
    return stat.st_ino, stat.st_size


def save(segments: LogSegments) -> None:
    """Write every segment's damaged ranges (or remove the file when there are none)."""
    entries = []
    for segment in segments:
        if not segment.damaged or segment.fd < 0:
            continue
        identity = _identity(segment.fd)
        if identity is None:
            continue
        for position, end, problem in segment.damaged:
            text = "_".join(problem.split()) or "damaged"
            entries.append((segment.base_offset, *identity, position, end, text))
    path = segments.directory / FILE_NAME
    if entries:
        write_checkpoint(path, entries)
    else:
        path.unlink(missing_ok=True)


def apply(segments: LogSegments) -> int:
    """Mark again the ranges saved for segments that are still the same files; returns
    how many were applied. Marks of replaced or deleted segments are dropped."""
    path = segments.directory / FILE_NAME
    try:
        rows = read_checkpoint(path, 6)
    except CorruptCheckpointError as exc:
        log.warning("%s; the scrubber will find the damage again", exc)
        return 0
    by_base = {segment.base_offset: segment for segment in segments}
    applied = 0
    for base, inode, size, position, end, problem in rows:
        try:
            segment = by_base.get(int(base))
            numbers = (int(inode), int(size), int(position), int(end))
        except ValueError:
            continue
        if segment is None or segment.fd < 0 or _identity(segment.fd) != numbers[:2]:
            continue
        text = problem.replace("_", " ")
        if not any(p == numbers[2] for p, _, _ in segment.damaged):
            segment.mark_damaged(numbers[2], numbers[3], text)
        next_base = segments.next_base(segment)
        if numbers[3] >= numbers[1] and next_base is not None:
            # Damage up to the end of the file: the offsets up to the next segment are
            # the damaged range's, including any the file no longer holds.
            segment.mark_missing(next_base, text)
        applied += 1
    if rows and applied != len(rows):
        save(segments)
    if applied:
        log.error(
            "%s: %d damaged range(s) found before the restart stay unreadable "
            "(KAFKA_STORAGE_ERROR) until their segments are replaced",
            segments.name,
            applied,
        )
    return applied
