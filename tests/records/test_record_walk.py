"""tierlog.records.record_walk: counting records by their length prefixes, in Python and
in C, against the reference decoder."""

from __future__ import annotations

import os
import random
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.records import record_walk
from tierlog.records.builder import Record, build_batch
from tierlog.records.errors import RecordsError
from tierlog.records.header import HEADER_SIZE, parse_header
from tierlog.records.reader import iter_records
from tierlog.records.record_walk import NOT_WHOLE, count_records, count_records_py

records_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=20_000)),
    ),
    min_size=1,
    max_size=30,
)


def batch_of(records: list[tuple[bytes | None, bytes | None]]) -> bytes:
    return build_batch([Record(k, v, timestamp=1_700_000_000_000) for k, v in records])


def both(data: bytes) -> tuple[int, int]:
    return count_records_py(data, HEADER_SIZE, len(data)), count_records(
        data, HEADER_SIZE, len(data)
    )


@pytest.mark.skipif(
    shutil.which(os.environ.get("CC", "cc")) is None or os.environ.get("TIERLOG_NATIVE") == "0",
    reason="no C compiler, or the native walk is turned off",
)
def test_the_native_walk_builds_here() -> None:
    # With a C compiler the native walk must load; without one the Python walk is used
    # (the same answers, slower appends: BENCHMARKS.md).
    assert record_walk.native_available()


@settings(max_examples=150, deadline=None)
@given(records_st)
def test_counts_match_the_header(records: list[tuple[bytes | None, bytes | None]]) -> None:
    data = batch_of(records)
    assert both(data) == (len(records), len(records))
    # A memoryview over a larger buffer (a produce request) counts the same.
    framed = b"\x00" * 5 + data + b"\x07" * 9
    view = memoryview(framed)[5 : 5 + len(data)]
    assert count_records(view, HEADER_SIZE, len(data)) == len(records)
    assert count_records_py(view, HEADER_SIZE, len(data)) == len(records)


@settings(max_examples=300, deadline=None)
@given(records_st, st.randoms(use_true_random=False))
def test_python_and_native_agree_on_damaged_records(
    records: list[tuple[bytes | None, bytes | None]], rng: random.Random
) -> None:
    data = bytearray(batch_of(records))
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(HEADER_SIZE, len(data))] = rng.randrange(256)
    cut = rng.choice([len(data), rng.randrange(HEADER_SIZE, len(data) + 1)])
    damaged = bytes(data[:cut])
    py, native = both(damaged)
    assert py == native
    if py != NOT_WHOLE:
        assert py >= 0


def test_a_batch_that_claims_more_records_than_it_holds() -> None:
    data = batch_of([(b"k", b"v")] * 3)
    header = parse_header(data)
    assert header.record_count == 3
    assert both(data) == (3, 3)
    assert both(data[:-1]) == (NOT_WHOLE, NOT_WHOLE)
    assert both(data + b"\x02" * 7) == (NOT_WHOLE, NOT_WHOLE)  # a 1-byte body: too short
    assert count_records(data, HEADER_SIZE, HEADER_SIZE) == 0


def test_walk_agrees_with_the_decoder_when_it_accepts() -> None:
    rng = random.Random(7)
    data = batch_of([(b"key", b"x" * n) for n in (0, 1, 63, 64, 8191, 8192, 70000)])
    for _ in range(300):
        mutant = bytearray(data)
        mutant[rng.randrange(HEADER_SIZE, len(mutant))] ^= 1 << rng.randrange(8)
        count = count_records(bytes(mutant), HEADER_SIZE, len(mutant))
        if count == 7:
            continue  # a value byte changed: still 7 records
        with pytest.raises(RecordsError):
            list(iter_records(bytes(mutant), check_crc=False))
