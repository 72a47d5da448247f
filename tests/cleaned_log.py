"""A small compacted log cleaned once, without a broker, for the tools' tests (tierlog's
dump-log and Kafka's DumpLogSegments read the same bytes).

What the first segment holds after the pass, offset by offset:

    0  a=1   producer 7, seq 0   gone (a is rewritten later)
    1  a=2   producer 7, seq 1   gone, its batch kept EMPTY: the producer's last sequence
    2  a=3                       kept
    3  b=1                       gone (b is deleted at 4)
    4  b=null                    kept, a tombstone: its batch gets a delete horizon
                                 (KIP-534: the pass's time + delete.retention.ms)
The active segment (base 5) holds c=1 and is never cleaned.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.compaction.conftest import T0, append, compacted
from tierlog.compaction.cleaner import CleanerConfig, LogCleaner
from tierlog.local.log_manager import LogManager
from tierlog.util.clock import ManualClock

TOPIC = "users"
DELETE_RETENTION_MS = 3_600_000
PRODUCER_ID = 7


@dataclass(frozen=True)
class CleanedLog:
    directory: Path  # <root>/users-0
    segment: Path  # the cleaned 00000000000000000000.log
    delete_horizon_ms: int
    kept: dict[int, tuple[bytes, bytes | None]]  # offset -> (key, value) in the segment


def clean_a_log(root: Path) -> CleanedLog:
    """Write the log of the module docstring under ``root``, clean it once, close it."""
    clock = ManualClock(T0)
    manager = LogManager([root], clock=clock)
    manager.startup()
    try:
        log = manager.get_or_create_log(
            TOPIC, 0, compacted(delete_retention_ms=DELETE_RETENTION_MS)
        )
        producer = {"producer_id": PRODUCER_ID, "producer_epoch": 0}
        append(log, [(b"a", b"1")], clock, base_sequence=0, **producer)
        append(log, [(b"a", b"2")], clock, base_sequence=1, **producer)
        append(log, [(b"a", b"3"), (b"b", b"1")], clock)
        append(log, [(b"b", None)], clock)
        log.roll()
        append(log, [(b"c", b"1")], clock)
        cleaner = LogCleaner(
            manager, CleanerConfig(dedupe_buffer_size=1 << 20), clock=clock, workers=0
        )
        assert cleaner.clean_once(), "the first segment is all dirty"
        directory = log.directory
    finally:
        manager.shutdown()
    return CleanedLog(
        directory,
        directory / "00000000000000000000.log",
        T0 + DELETE_RETENTION_MS,
        {2: (b"a", b"3"), 4: (b"b", None)},
    )
