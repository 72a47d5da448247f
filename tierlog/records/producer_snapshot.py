"""The bytes of a partition's producer snapshot (``<20-digit offset>.snapshot``), sans I/O.

Kafka's ``ProducerSnapshot`` message, version 1, big-endian, so Kafka's tools read our
files and ours read theirs; the version is written first, as
``MessageUtil.toVersionPrefixedByteBuffer`` does::

     0  version                   int16   always 1
     2  crc                       uint32  CRC-32C of bytes 6..end
     6  producer_entries count    int32   array length, sorted by producer id here
    10  per entry, 46 bytes:
         +0  producer_id              int64
         +8  epoch                    int16
        +10  last_sequence            int32   -1 when the producer has no data batch
        +14  last_offset              int64   -1 likewise
        +22  offset_delta             int32   last_offset - first offset of the last batch
        +26  timestamp                int64   max timestamp of the last batch
        +34  coordinator_epoch        int32   -1 until a marker was written for it
        +38  current_txn_first_offset int64   -1 when no transaction is open

The local tier writes and loads these files
(``tierlog.local.producer_state``); the remote tier uploads them beside their segments
(KIP-405), and readers of the remote tier (a new follower, Spark's last stable offset)
decode them with this module, without the local tier.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

from crc32c import crc32c

SNAPSHOT_VERSION = 1

_PREFIX = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # the CRC covers everything after version and crc


class CorruptSnapshotError(ValueError):
    """A snapshot has a wrong version, length or CRC; the message names the file."""


class SnapshotEntry(NamedTuple):
    """One ``producer_entries`` element of a snapshot, in file order."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """The bytes of a version 1 snapshot holding ``entries`` in the order given."""
    rows = list(entries)
    body = bytearray(_PREFIX.pack(SNAPSHOT_VERSION, 0, len(rows)))
    for row in rows:
        body += _ENTRY.pack(*row)
    struct.pack_into(">I", body, 2, int(crc32c(memoryview(body)[_CRC_START:])))
    return bytes(body)


def decode_snapshot(data: bytes, name: str = "snapshot") -> list[SnapshotEntry]:
    """Entries of a version 1 snapshot.

    Raises:
        CorruptSnapshotError: short file, unknown version, bad count/length or CRC mismatch.
    """
    if len(data) < _PREFIX.size:
        raise CorruptSnapshotError(f"{name}: {len(data)} bytes is shorter than the header")
    version, crc, count = _PREFIX.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{name}: unknown snapshot version {version}")
    actual = int(crc32c(memoryview(data)[_CRC_START:]))
    if actual != crc:
        raise CorruptSnapshotError(f"{name}: CRC-32C {actual:#010x} != stored {crc:#010x}")
    if count < 0 or len(data) != _PREFIX.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{name}: {len(data)} bytes do not hold {count} entries")
    return [
        SnapshotEntry._make(_ENTRY.unpack_from(data, _PREFIX.size + n * _ENTRY.size))
        for n in range(count)
    ]
