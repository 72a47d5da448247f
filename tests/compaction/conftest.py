"""Shared helpers for the cleaner's tests: a log manager on a manual clock, keyed batches,
and reading a log back whole."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tierlog.compaction.cleaner import CleanerConfig, LogCleaner
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.local.log_manager import LogManager
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import Compression
from tierlog.records.reader import DecodedRecord, decode_batch
from tierlog.util.clock import ManualClock

T0 = 1_700_000_000_000
KeyValue = tuple[bytes, bytes | None]


def compacted(**props: object) -> LogConfig:
    """A compacted topic's config: small segments, cleaned as soon as anything is dirty."""
    base = {
        "cleanup.policy": "compact",
        "segment.bytes": 4096,
        "min.cleanable.dirty.ratio": 0.01,
    }
    base.update({k.replace("_", "."): v for k, v in props.items()})
    return LogConfig.from_props(base)


def append(
    log: Log,
    items: Sequence[KeyValue],
    clock: ManualClock,
    codec: Compression = Compression.NONE,
    **producer: Any,
) -> tuple[int, int]:
    """Append one batch of ``items`` stamped with the clock; returns (first, last) offset."""
    now = clock.milliseconds()
    batch = build_batch(
        [Record(k, v, timestamp=now) for k, v in items], compression=codec, **producer
    )
    info = log.append(batch)
    return info.first_offset, info.last_offset


def read_all(log: Log) -> list[DecodedRecord]:
    """Every record from the log start, through ``Log.read`` as a fetch would get them."""
    out: list[DecodedRecord] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        found = log.read(offset, 1 << 20)
        if found is None:
            break
        data = found.read()
        found.release()
        position = 0
        while position < len(data):
            header, records = decode_batch(data, position)
            out.extend(records)
            position += header.size
            offset = header.next_offset
    return out


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def manager(tmp_path: Path, clock: ManualClock) -> Iterator[LogManager]:
    log_manager = LogManager([tmp_path / "logs"], clock=clock)
    log_manager.startup()
    yield log_manager
    if log_manager.started:
        log_manager.shutdown()


@pytest.fixture
def cleaner(manager: LogManager, clock: ManualClock) -> LogCleaner:
    return LogCleaner(manager, CleanerConfig(dedupe_buffer_size=1 << 20), clock=clock, workers=0)
