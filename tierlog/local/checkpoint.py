"""Kafka's text checkpoint files, written atomically (temp file, fsync, rename).

Format (``CheckpointFile`` in Kafka), one file per log dir for offsets::

    0                      version
    2                      entry count
    orders 0 1042          one entry per line, space separated
    clicks 3 77

``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint`` use "topic partition offset" entries; a partition's
``leader-epoch-checkpoint`` uses "epoch startOffset" entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

# One implementation for every tier (tierlog.util.atomic_files); imported from here too.
from tierlog.util.atomic_files import atomic_write as atomic_write

VERSION = 0


class CorruptCheckpointError(Exception):
    """The file is not in checkpoint format; the message names the file and line."""


def encode_checkpoint(entries: Iterable[Sequence[object]]) -> bytes:
    """The file's bytes: version, count, one space-separated entry per line."""
    rows = [" ".join(str(field) for field in entry) for entry in entries]
    return ("\n".join([str(VERSION), str(len(rows)), *rows]) + "\n").encode()


def write_checkpoint(path: Path, entries: Iterable[Sequence[object]]) -> None:
    atomic_write(path, encode_checkpoint(entries))


def read_checkpoint(path: Path, fields: int) -> list[list[str]]:
    """Entries of ``fields`` space-separated strings; [] when the file does not exist.

    Raises:
        CorruptCheckpointError: wrong version, count or entry shape.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return decode_checkpoint(data, fields, str(path))


def decode_checkpoint(data: bytes, fields: int, name: str) -> list[list[str]]:
    """``read_checkpoint`` on bytes (an uploaded copy); ``name`` goes into errors.

    Raises:
        CorruptCheckpointError: not UTF-8, wrong version, count or entry shape.
    """
    path = name  # the messages below read as about a file
    try:
        lines = data.decode().splitlines()
    except UnicodeDecodeError:
        raise CorruptCheckpointError(f"{path}: not a text file") from None
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        raise CorruptCheckpointError(f"{path}: unsupported or missing version line")
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpointError(f"{path}: bad entry count {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CorruptCheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    for n, entry in enumerate(entries, start=3):
        if len(entry) != fields:
            raise CorruptCheckpointError(f"{path}:{n}: expected {fields} fields: {entry}")
    return entries


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """A "topic partition offset" checkpoint as ``{(topic, partition): offset}``."""
    try:
        return {(t, int(p)): int(o) for t, p, o in read_checkpoint(path, 3)}
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: {exc}") from None


def write_offsets(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    write_checkpoint(path, ((t, p, o) for (t, p), o in sorted(offsets.items())))
