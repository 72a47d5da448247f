"""Shared helpers for the local-tier tests: batch building, a log factory, log walkers.

``make_batch`` is the one place that builds record batches, so the builder behind it can
be switched without touching the tests.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.local.segment import LogSegment
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import BatchHeader, Compression, iter_batches, parse_header
from tierlog.records.reader import DecodedRecord, iter_records
from tierlog.util.clock import ManualClock
from tierlog.util.scheduler import ManualScheduler

# ManualClock's default start: record timestamps near "now" unless a test says otherwise.
T0 = 1_700_000_000_000


def make_batch(
    n: int = 1,
    value_size: int = 10,
    base_timestamp: int | None = T0,
    *,
    timestamps: Sequence[int] | None = None,
    key_prefix: bytes = b"k",
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    control: bool = False,
) -> bytes:
    """One v2 batch of ``n`` records; record i has timestamp ``base_timestamp + i`` (or
    ``timestamps[i]``), key ``key_prefix + i`` and a value of ``value_size`` bytes."""
    if timestamps is None:
        ts: list[int | None] = [
            None if base_timestamp is None else base_timestamp + i for i in range(n)
        ]
    else:
        assert len(timestamps) == n
        ts = list(timestamps)
    records = [
        Record(key_prefix + str(i).encode(), bytes([65 + i % 26]) * value_size, timestamp=ts[i])
        for i in range(n)
    ]
    return build_batch(
        records,
        base_offset=base_offset,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        control=control,
        base_timestamp=base_timestamp if timestamps is None else None,
    )


def with_offsets(batch: bytes, base_offset: int, leader_epoch: int = 0) -> bytes:
    """``batch`` with baseOffset and partitionLeaderEpoch set (both outside the CRC), as a
    leader would send it to a follower."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, leader_epoch)
    return bytes(out)


def headers_of(data: bytes) -> list[BatchHeader]:
    """Headers of every batch in ``data``, each CRC-validated."""
    return [header for _, header in iter_batches(data)]


def segment_bytes(log: Log) -> list[bytes]:
    """Raw ``.log`` bytes of each segment, oldest first."""
    return [seg.path.read_bytes() for seg in log.segments]


def all_batches(log: Log) -> Iterator[BatchHeader]:
    """Every batch of every segment, CRC-validated (raises on a bad one)."""
    for data in segment_bytes(log):
        yield from headers_of(data)


def all_records(log: Log) -> list[DecodedRecord]:
    """Every record of the log decoded from the segment files, oldest first."""
    out: list[DecodedRecord] = []
    for data in segment_bytes(log):
        for pos, header in iter_batches(data):
            out.extend(iter_records(data[pos : pos + header.size]))
    return out


def assert_dense(log: Log) -> list[BatchHeader]:
    """The log's batches validate, and their offsets run without gap from the first
    segment's base offset to the log end."""
    expected = log.segments[0].base_offset
    headers = []
    for seg in log.segments:
        for header in headers_of(seg.path.read_bytes()):
            assert header.base_offset == expected, (seg, header)
            expected = header.next_offset
            headers.append(header)
        assert seg.next_offset == expected
    assert log.log_end_offset == expected
    return headers


def dir_snapshot(directory: Path) -> dict[str, bytes]:
    """Name -> bytes of every file in a partition directory."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def header_at(data: bytes, pos: int = 0) -> BatchHeader:
    return parse_header(data, pos)


def crash(log: Log) -> None:
    """Drop a log as ``kill -9`` would: release its file descriptors and maps without
    flushing, trimming indexes or writing anything (what reached the page cache stays)."""
    for seg in log.segments:
        seg.release_files()
    log.closed = True


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def scheduler(clock: ManualClock) -> ManualScheduler:
    return ManualScheduler(clock)


LogFactory = Callable[..., Log]


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


@pytest.fixture
def make_log(log_dir: Path, clock: ManualClock) -> Iterator[LogFactory]:
    """``make_log(directory=None, *, scheduler=None, recovery_point=0, log_start_offset=0,
    had_clean_shutdown=False, verify_reads=True, open_files=..., **props)``: a Log on
    ``log_dir`` with Kafka-named config props (``"segment.bytes"`` etc. passed as
    ``segment_bytes=``); closed at teardown."""
    opened: list[Log] = []

    def factory(directory: Path | None = None, *, scheduler: Any = None, **kwargs: Any) -> Log:
        log_kwargs = {
            k: kwargs.pop(k)
            for k in (
                "recovery_point",
                "log_start_offset",
                "had_clean_shutdown",
                "verify_reads",
                "open_files",
                "cleaned_up_to",
            )
            if k in kwargs
        }
        props = {k.replace("_", "."): v for k, v in kwargs.items()}
        lg = Log(
            directory or log_dir,
            LogConfig.from_props(props),
            clock=clock,
            scheduler=scheduler,
            **log_kwargs,
        )
        opened.append(lg)
        return lg

    yield factory
    for lg in opened:
        if not lg.closed:
            lg.close()


@pytest.fixture
def counted_recover(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Base offsets of the segments ``LogSegment.recover`` is called on, in call order."""
    calls: list[int] = []
    real = LogSegment.recover

    def counting(self: LogSegment, *args: Any) -> int:
        calls.append(self.base_offset)
        return real(self, *args)

    monkeypatch.setattr(LogSegment, "recover", counting)
    return calls
