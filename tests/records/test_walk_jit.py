"""The compiled record walk: when it loads, and that count_records hands it large blocks
only (its answers are checked against the Python walk's in test_record_walk.py)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tierlog.records import record_walk, walk_jit
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import HEADER_SIZE


@pytest.fixture
def fresh_loader(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """record_walk as if use_jit had never run in this process."""
    monkeypatch.setattr(record_walk, "_jit_walk", None)
    monkeypatch.setattr(record_walk, "_jit_tried", False)
    yield


def test_it_compiles_and_counts_read_only_and_writable_bytes() -> None:
    compiled = walk_jit.compile_walk()
    assert compiled is not None
    data = build_batch([Record(None, b"v" * n, timestamp=0) for n in range(50, 250)])
    for octets in (np.frombuffer(data, np.uint8), np.frombuffer(bytearray(data), np.uint8)):
        assert compiled(octets, HEADER_SIZE, len(data)) == 200
        assert compiled(octets, HEADER_SIZE, len(data) - 1) == walk_jit.NOT_WHOLE


@pytest.mark.parametrize(
    ("setting", "wanted"),
    [("1", True), ("true", True), (" On ", True), ("0", False), ("", False), ("no", False)],
)
def test_tierlog_jit_says_whether_a_broker_loads_it(setting: str, wanted: bool) -> None:
    assert walk_jit.wanted({"TIERLOG_JIT": setting}) is wanted
    assert walk_jit.wanted({}) is False  # opt-in: numba costs ~110 MB of RSS


def test_use_jit_loads_once_and_count_records_takes_large_blocks_to_it(
    monkeypatch: pytest.MonkeyPatch, fresh_loader: None
) -> None:
    assert record_walk.use_jit() is True
    loaded = record_walk._jit_walk
    assert loaded is not None
    assert record_walk.use_jit() is True and record_walk._jit_walk is loaded
    calls: list[tuple[int, int]] = []

    def counting(octets: np.ndarray, start: int, end: int) -> int:
        calls.append((start, end))
        return loaded(octets, start, end)

    monkeypatch.setattr(record_walk, "_jit_walk", counting)
    small = build_batch([Record(None, b"s" * 100, timestamp=0)] * 5)
    large = build_batch([Record(None, b"l" * n, timestamp=0) for n in range(100, 300)])
    assert len(small) - HEADER_SIZE < record_walk.JIT_MIN_BYTES <= len(large) - HEADER_SIZE
    assert record_walk.count_records(small, HEADER_SIZE, len(small)) == 5
    assert calls == []
    # A memoryview into a larger buffer, as a produce request hands it over.
    framed = memoryview(b"\x00" * 3 + large + b"\x07" * 5)[3 : 3 + len(large)]
    assert record_walk.count_records(framed, HEADER_SIZE, len(large)) == 200
    assert calls == [(HEADER_SIZE, len(large))]


def test_the_walk_run_as_python_gives_the_compiled_walks_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What numba compiles is plain Python: run uncompiled, it must agree (a compiler that
    # changed the answer would show here as a difference between the two).
    monkeypatch.setattr(record_walk, "_jit_walk", None)  # count_records: the Python walk
    compiled = walk_jit.compile_walk()
    assert compiled is not None
    data = bytearray(build_batch([Record(b"k", b"v" * n, timestamp=0) for n in range(0, 400, 7)]))
    cases = [(bytes(data), len(data)), (bytes(data), len(data) - 3)]
    for at, octet in ((HEADER_SIZE, 0x7F), (HEADER_SIZE + 40, 0x01), (len(data) - 2, 0xFF)):
        damaged = bytearray(data)
        damaged[at] = octet
        cases.append((bytes(damaged), len(damaged)))
    cases.append((bytes(data[: HEADER_SIZE + 1]) + b"\xff\xff\xff\xff\xff\x01", HEADER_SIZE + 7))
    for buffer, end in cases:
        octets = np.frombuffer(buffer, np.uint8)
        expected = record_walk.count_records(buffer, HEADER_SIZE, end)
        assert walk_jit._walk(octets, HEADER_SIZE, end) == expected
        assert compiled(octets, HEADER_SIZE, end) == expected
