"""tierlog.records.record_walk: counting records by their length prefixes, against the
header, the reference decoder (``iter_records``) and a plain one-record-at-a-time walk."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.records import record_walk, walk_jit
from tierlog.records.builder import Record, build_batch
from tierlog.records.errors import RecordsError
from tierlog.records.header import HEADER_SIZE, parse_header
from tierlog.records.reader import iter_records
from tierlog.records.record_walk import NOT_WHOLE, count_records
from tierlog.records.varint import decode_varint

# Values of every length-code size: one byte (< 64), two bytes (< 8 KiB), three bytes.
value_st = st.one_of(
    st.none(),
    st.binary(max_size=70),
    st.integers(0, 20_000).map(lambda n: b"v" * n),
    st.sampled_from([b"x" * n for n in (56, 57, 58, 63, 64, 8170, 8180, 8191, 8192)]),
)
records_st = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=40)), value_st),
    min_size=1,
    max_size=30,
)


@pytest.fixture(scope="module", params=["python", "compiled"], autouse=True)
def walk(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test twice: with the Python walk, and with numba's compiled walk taking every
    block (a dev dependency, so it must load: never a skip)."""
    saved = record_walk._jit_walk, record_walk.JIT_MIN_BYTES
    if request.param == "python":
        # Even where a broker in this process has loaded the compiled walk.
        record_walk._jit_walk = None
    else:
        compiled = walk_jit.compile_walk()
        assert compiled is not None, "numba did not load; `make test` installs it"
        record_walk._jit_walk, record_walk.JIT_MIN_BYTES = compiled, 0
    try:
        yield request.param
    finally:
        record_walk._jit_walk, record_walk.JIT_MIN_BYTES = saved


def batch_of(records: list[tuple[bytes | None, bytes | None]]) -> bytes:
    return build_batch([Record(k, v, timestamp=1_700_000_000_000) for k, v in records])


def reference_walk(data: bytes, start: int, end: int) -> int:
    """The obvious walk, one decoded length at a time: what count_records must agree with."""
    pos, n = start, 0
    while pos < end:
        try:
            length, pos = decode_varint(data, pos)
        except RecordsError:
            return NOT_WHOLE
        if length < 6:  # negative, or too short for the record's fixed fields
            return NOT_WHOLE
        pos += length
        n += 1
    return n if pos == end else NOT_WHOLE


@settings(max_examples=150, deadline=None)
@given(records_st)
def test_counts_match_the_header_and_the_decoder(
    records: list[tuple[bytes | None, bytes | None]],
) -> None:
    data = batch_of(records)
    assert parse_header(data).record_count == len(records)
    assert count_records(data, HEADER_SIZE, len(data)) == len(records)
    assert len(list(iter_records(data))) == len(records)
    # A memoryview over a larger buffer (a produce request), at either byte parity,
    # counts the same: the bytes around the batch are never part of the answer.
    for before in (b"", b"\x00", b"\x00" * 5):
        framed = before + data + b"\x07" * 9
        view = memoryview(framed)[len(before) : len(before) + len(data)]
        assert count_records(view, HEADER_SIZE, len(data)) == len(records)
        assert count_records(framed, len(before) + HEADER_SIZE, len(before) + len(data)) == len(
            records
        )


@settings(max_examples=400, deadline=None)
@given(records_st, st.randoms(use_true_random=False), st.binary(max_size=3))
def test_damaged_records_walk_like_the_reference(
    records: list[tuple[bytes | None, bytes | None]], rng: random.Random, tail: bytes
) -> None:
    data = bytearray(batch_of(records))
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(HEADER_SIZE, len(data))] = rng.randrange(256)
    cut = rng.choice([len(data), rng.randrange(HEADER_SIZE, len(data) + 1)])
    damaged = bytes(data) + tail  # bytes past ``cut`` may be read but must not count
    expected = reference_walk(damaged, HEADER_SIZE, cut)
    assert count_records(damaged, HEADER_SIZE, cut) == expected
    assert count_records(memoryview(damaged), HEADER_SIZE, cut) == expected
    if expected != NOT_WHOLE:
        assert expected >= 0


@pytest.mark.parametrize("count", range(1, 11))
@pytest.mark.parametrize("size", [10, 200, 1000, 9000])
def test_every_group_boundary(count: int, size: int) -> None:
    # The walk takes four records per check of the end: every remainder, and every
    # overrun by a record, must come out exact.
    data = batch_of([(None, b"a" * size)] * count)
    assert count_records(data, HEADER_SIZE, len(data)) == count
    assert count_records(data + b"\x00" * 3, HEADER_SIZE, len(data)) == count
    assert count_records(data, HEADER_SIZE, len(data) - 1) == NOT_WHOLE
    assert count_records(data + b"\x02" * 7, HEADER_SIZE, len(data) + 7) == NOT_WHOLE


def test_mixed_length_codes() -> None:
    sizes = [1, 200, 20_000, 5, 9000, 70, 70, 70, 70, 70, 100_000, 3]
    data = batch_of([(b"k", b"v" * n) for n in sizes])
    assert count_records(data, HEADER_SIZE, len(data)) == len(sizes)
    assert count_records(memoryview(b"?" + data)[1:], HEADER_SIZE, len(data)) == len(sizes)


def test_a_batch_that_claims_more_records_than_it_holds() -> None:
    data = batch_of([(b"k", b"v")] * 3)
    header = parse_header(data)
    assert header.record_count == 3
    assert count_records(data, HEADER_SIZE, len(data)) == 3
    assert count_records(data[:-1], HEADER_SIZE, len(data) - 1) == NOT_WHOLE
    too_short = data + b"\x02" * 7  # a record whose body is 1 byte: too short
    assert count_records(too_short, HEADER_SIZE, len(too_short)) == NOT_WHOLE
    assert count_records(data, HEADER_SIZE, HEADER_SIZE) == 0
    assert count_records(data, HEADER_SIZE, HEADER_SIZE + 3) == NOT_WHOLE


def test_negative_and_overlong_lengths() -> None:
    data = batch_of([(b"k", b"v")] * 5)
    first = HEADER_SIZE
    negative = bytearray(data)
    negative[first] = 0x01  # zigzag 1 = -1
    assert count_records(bytes(negative), HEADER_SIZE, len(data)) == NOT_WHOLE
    overlong = data[:first] + b"\xff" * 6 + data[first + 6 :]
    assert count_records(overlong, HEADER_SIZE, len(overlong)) == NOT_WHOLE


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


# Batches long enough for runs of same-size records (the numpy compare), with sizes from a
# small set so that runs start, end and restart anywhere: the count must still be the
# reference walk's, damaged or not.
run_sizes_st = st.lists(st.sampled_from([0, 5, 60, 61, 200, 8190]), min_size=1, max_size=3)


@settings(max_examples=120, deadline=None)
@given(
    run_sizes_st,
    st.integers(40, 400),
    st.randoms(use_true_random=False),
    st.integers(0, 4),
)
def test_runs_of_same_size_records_count_like_the_reference(
    sizes: list[int], count: int, rng: random.Random, damage: int
) -> None:
    values = []
    while len(values) < count:  # runs of random lengths, sizes drawn from the set
        values += [b"r" * rng.choice(sizes)] * rng.randint(1, 120)
    data = bytearray(batch_of([(None, v) for v in values[:count]]))
    assert count_records(bytes(data), HEADER_SIZE, len(data)) == count
    for _ in range(damage):
        data[rng.randrange(HEADER_SIZE, len(data))] = rng.randrange(256)
    cut = rng.choice([len(data), rng.randrange(HEADER_SIZE, len(data) + 1)])
    damaged = bytes(data) + b"\x02" * rng.randint(0, 9)
    expected = reference_walk(damaged, HEADER_SIZE, cut)
    assert count_records(damaged, HEADER_SIZE, cut) == expected
    framed = b"\x00" + damaged
    assert count_records(memoryview(framed)[1:], HEADER_SIZE, cut) == expected


def test_a_run_broken_by_one_record_of_another_size() -> None:
    # 300 records of one size with one odd record at every place a run could stop.
    for odd in (0, 1, 2, 31, 32, 33, 63, 64, 65, 150, 298, 299):
        values = [b"x" * 100] * 300
        values[odd] = b"x" * 101
        data = batch_of([(None, v) for v in values])
        assert count_records(data, HEADER_SIZE, len(data)) == 300, odd
        assert count_records(data, HEADER_SIZE, len(data) - 1) == NOT_WHOLE, odd
