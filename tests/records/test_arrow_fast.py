"""Tests for the fast path of tierlog.records.arrow (numpy) against the reference path.

Every input must give the same RecordBatches, or the same exception, with
``FAST_DECODE`` on and off; well-formed producer batches must actually take the fast
path (``_decode_fast`` must not give up on them).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.records import arrow, fuzz, reader
from tierlog.records.arrow import to_record_batches
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.codecs import decompress
from tierlog.records.errors import CorruptBatchError
from tierlog.records.header import HEADER_SIZE, Compression, TimestampType, parse_header
from tierlog.records.reader import iter_whole_batches, record_starts, records_block
from tierlog.records.varint import INT64_MAX, encode_varint, encode_varlong

CODECS = list(Compression)


def decode_both(buf: bytes, **kwargs: object) -> object:
    """to_record_batches with and without the fast path; asserts they agree.

    Returns the RecordBatches, or the exception both raised.
    """
    results = []
    for fast in (True, False):
        arrow.FAST_DECODE = fast
        try:
            results.append(to_record_batches(buf, "topic", 3, **kwargs))
        except Exception as exc:
            results.append(exc)
        finally:
            arrow.FAST_DECODE = arrow.HAVE_NUMPY
    fast_result, reference = results
    if isinstance(reference, Exception):
        assert type(fast_result) is type(reference)
        assert str(fast_result) == str(reference)
        return reference
    assert isinstance(fast_result, list)
    assert len(fast_result) == len(reference)
    for got, want in zip(fast_result, reference, strict=True):
        got.validate(full=True)
        assert got.schema == want.schema
        assert got.equals(want), (got.to_pylist(), want.to_pylist())
    return reference


def fast_columns(buf: bytes) -> arrow._Columns:
    """_decode_fast on a buffer of whole batches (raises _GiveUp if it gives up)."""
    blocks = []
    joined = []
    size = 0
    for pos, header in iter_whole_batches(buf):
        data, start, end = records_block(buf, pos, header)
        joined.append(bytes(memoryview(data)[start:end]))
        blocks.append((header, size, size + end - start))
        size += end - start
    return arrow._decode_fast(b"".join(joined), blocks)


@pytest.fixture(autouse=True)
def _restore_switch() -> Iterator[None]:
    yield
    arrow.FAST_DECODE = arrow.HAVE_NUMPY


def test_numpy_is_there() -> None:
    # The fast path is what the benchmarks measure; without numpy it silently is not.
    assert arrow.HAVE_NUMPY and arrow.FAST_DECODE


def test_producer_batches_take_the_fast_path() -> None:
    records = [
        Record(
            None if i % 5 == 0 else b"user-%d" % i,
            None if i % 11 == 3 else b'{"n":%d}' % i * (i % 40),
            (("trace", b"%d" % i),) if i % 7 == 0 else (),
            1_700_000_000_000 + i * 3 - (40 if i % 9 == 0 else 0),
        )
        for i in range(300)
    ]
    buf = b"".join(
        build_batch(records[i : i + 100], base_offset=i, compression=codec)
        for i, codec in zip(range(0, 300, 100), CODECS[1:], strict=False)
    )
    cols = fast_columns(buf)
    assert cols.offsets.tolist() == list(range(300))
    assert cols.millis.tolist() == [r.timestamp for r in records]
    assert cols.key_nulls.tolist() == [r.key is None for r in records]
    assert cols.header_counts.tolist() == [int(i % 7 == 0) for i in range(300)]
    assert cols.header_keys.to_pylist() == ["trace"] * 43
    decode_both(buf)


def test_multi_byte_varints_and_big_values() -> None:
    records = [
        Record(b"a" * 63, b"b" * 63, timestamp=1_000_000_000_000),
        Record(b"a" * 64, b"b" * 8191, timestamp=1_000_000_000_063),
        Record(b"a" * 8192, b"b" * 70_000, timestamp=1_000_000_008_000),
        Record(None, b"", timestamp=1_005_000_000_000),
        Record(None, b"", timestamp=999_000_000_000),  # negative delta
    ]
    batch = build_batch(records, offset_deltas=[0, 63, 64, 8192, 100_000], base_offset=5)
    cols = fast_columns(batch)
    assert cols.offsets.tolist() == [5, 68, 69, 8197, 100_005]
    decode_both(batch)
    decode_both(batch, start_offset=69, end_offset=8198)


def test_log_append_time_and_control_batches() -> None:
    data = build_batch(
        [Record(b"k", b"v", timestamp=3)] * 3,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        base_timestamp=9_000,
        producer_id=4,
        producer_epoch=0,
        transactional=True,
    )
    marker = build_control_batch(
        ControlType.ABORT, producer_id=4, producer_epoch=0, base_offset=3, timestamp=7
    )
    after = build_batch([Record(None, b"x", timestamp=11)], base_offset=4)
    (batch,) = decode_both(data + marker + after)
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [9_000_000] * 3 + [11_000]
    assert batch.column("timestampType").to_pylist() == [1, 1, 1, 0]


def test_gives_up_on_what_it_does_not_take() -> None:
    # Deltas past 8 bytes, bases near the int64 edge: the reference path decides.
    far = build_batch([Record(None, b"a", timestamp=0), Record(None, b"b", timestamp=2**62)])
    edge = build_batch([Record(None, b"a")] * 2, base_offset=INT64_MAX - 1)
    for buf in (far, edge):
        with pytest.raises(arrow._GiveUp):
            fast_columns(buf)
    decode_both(far)
    assert isinstance(decode_both(edge), list)
    overflow = build_batch([Record(None, b"x")] * 2, base_offset=INT64_MAX)
    assert isinstance(decode_both(overflow), CorruptBatchError)


def record_bytes(
    key_len: bytes,
    key: bytes,
    value_len: bytes,
    value: bytes,
    headers: bytes = b"\x00",
    *,
    offset_delta: bytes = encode_varint(0),
    extra: bytes = b"",
) -> bytes:
    """One record from raw field codes; ``extra`` goes after its headers, inside it."""
    body = b"\x00" + encode_varlong(0) + offset_delta + key_len + key + value_len + value
    body += headers + extra
    return encode_varint(len(body)) + body


def hand_batch(block: bytes, count: int) -> bytes:
    header = bytearray(build_batch([Record(None, b"")])[:HEADER_SIZE])
    struct.pack_into(">i", header, 8, HEADER_SIZE - 12 + len(block))
    struct.pack_into(">i", header, 57, count)
    return bytes(header) + block


@pytest.mark.parametrize(
    "block",
    [
        record_bytes(b"\x82\x00", b"k", b"\x02", b"v"),  # padded 2-byte key length
        record_bytes(b"\x82\x80\x80\x80\x00", b"k", b"\x02", b"v"),  # 5 bytes: reference
        record_bytes(b"\x02", b"k", b"\x02", b"v", b"\x80\x00"),  # padded zero header count
        record_bytes(b"\x02", b"k", b"\x02", b"v", b"\x02\x02h\x01"),  # one header
        record_bytes(b"\x01", b"", b"\x01", b""),  # null key and value
    ],
)
def test_unusual_but_valid_encodings(block: bytes) -> None:
    result = decode_both(hand_batch(block, 1), verify_crc=False)
    assert isinstance(result, list) and result[0].num_rows == 1


@pytest.mark.parametrize(
    ("block", "count"),
    [
        (record_bytes(b"\x02", b"k", b"\x02", b"v") * 2, 3),
        (record_bytes(b"\x02", b"k", b"\x02", b"v") * 2, 1),
        (record_bytes(b"\x0a", b"k", b"\x02", b"v"), 1),  # key overruns
        (record_bytes(b"\x03", b"k", b"\x02", b"v"), 1),  # key length -2
        (record_bytes(b"\x02", b"k", b"\x03", b""), 1),  # value length -2
        (record_bytes(b"\x02", b"k", b"\x02", b"v", extra=b"\x00\x00"), 1),  # bytes left
        (record_bytes(b"\x02", b"k", b"\x02", b"v", offset_delta=b"\x80\x80\x80\x80\x10"), 1),
        (record_bytes(b"\x02", b"k", b"\x02", b"v", b"\x01"), 1),  # header count -1
        (record_bytes(b"\x02", b"k", b"\x02", b"v", b"\x02\x04\xff\xfe\x00"), 1),  # not UTF-8
        (record_bytes(b"\x02", b"k", b"\x02", b"v", b"\x02\x01"), 1),  # header key -1
        (record_bytes(b"\x02", b"k", b"\x02", b"v", b"\x02\x05\x00"), 1),  # header key -3
        (record_bytes(b"\x02", b"k", b"\x02", b"v", b"\x02\x02h\x03"), 1),  # value -2
        (record_bytes(b"\x02", b"k", b"\x02", b"v", b"\x02\x02h\x08ab"), 1),  # overrun
        (encode_varint(-20) + bytes(30), 1),  # a negative record length
        (encode_varint(6) + b"\x00" + b"\xff" * 11, 1),
        (record_bytes(b"\x02", b"k", b"\x02", b"v")[:-1], 1),
    ],
)
def test_malformed_records_raise_the_reference_error(block: bytes, count: int) -> None:
    assert isinstance(decode_both(hand_batch(block, count), verify_crc=False), CorruptBatchError)


def test_record_starts() -> None:
    batch = build_batch([Record(b"k", b"v" * 100), Record(None, b"w" * 9000)])
    found = record_starts(batch, [(HEADER_SIZE, len(batch), 2)])
    assert found is not None and found.tolist() == [HEADER_SIZE, HEADER_SIZE + 110]
    assert record_starts(batch, [(HEADER_SIZE, len(batch), 3)]) is None
    assert record_starts(batch, [(HEADER_SIZE, len(batch), 1)]) is None
    assert record_starts(batch, [(HEADER_SIZE, len(batch) - 1, 2)]) is None
    assert record_starts(b"\xff" * 20, [(0, 20, 1)]) is None


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0, 7, 60, 61, 300]), st.integers(1, 150)),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 3),
    st.randoms(use_true_random=False),
)
def test_record_starts_with_runs_of_same_size_records(
    runs: list[tuple[int, int]], blocks: int, rng: random.Random
) -> None:
    # Long runs of one size (found with a numpy compare) between records of other sizes,
    # over several blocks: the positions are the one-at-a-time walk's.
    values = [b"r" * size for size, length in runs for _ in range(length)]
    data = b""
    spans = []
    for _ in range(blocks):
        batch = build_batch([Record(None, v) for v in values])
        spans.append((len(data) + HEADER_SIZE, len(data) + len(batch), len(values)))
        data += batch
    found = record_starts(data, spans)
    expected = reader._record_starts_any_length(data, spans)
    assert found is not None and expected is not None
    assert found.tolist() == expected.tolist()
    # A wrong count, or a damaged byte that breaks the tiling, gives None on both walks.
    start, end, count = spans[-1]
    wrong = [*spans[:-1], (start, end, count + rng.choice([-1, 1]))]
    assert record_starts(data, wrong) is None
    damaged = bytearray(data)
    at = rng.randrange(spans[0][0], spans[-1][1])
    damaged[at] ^= 1 << rng.randrange(8)
    mutant = record_starts(bytes(damaged), spans)
    reference = reader._record_starts_any_length(bytes(damaged), spans)
    assert (mutant is None) == (reference is None)
    if mutant is not None and reference is not None:
        assert mutant.tolist() == reference.tolist()


@pytest.mark.parametrize("length_code", [0x01, 0x03, 0x00, 0x02])
@pytest.mark.parametrize("at", [0, 40])
def test_record_starts_with_a_length_too_short_for_a_record(length_code: int, at: int) -> None:
    # zigzag -1, -2, 0 and 1: a record "size" of 0 or less, or under 7 bytes, repeated at
    # every hop (a damaged length); no run may be taken on it (found once as a division by
    # zero), and both walks say the block does not tile.
    batch = bytearray(build_batch([Record(None, b"v" * 60) for _ in range(96)]))
    spans = [(HEADER_SIZE, len(batch), 96)]
    start = reader._record_starts_any_length(bytes(batch), spans)
    assert start is not None
    batch[int(start[at])] = length_code
    assert record_starts(bytes(batch), spans) is None
    assert reader._record_starts_any_length(bytes(batch), spans) is None


def test_record_starts_when_a_negative_length_walks_back_before_the_block() -> None:
    # A length code of -113 (step -111) takes the walk back before the block, where
    # Python's negative indexing wraps round to the next batch's bytes; three same-size
    # codes there once looked like a run, and a compare over an empty slice raised
    # ValueError instead of the decoder's CorruptBatchError (found in review).
    first = bytearray(build_batch([Record(None, b"v" * 10) for _ in range(96)]))
    first[HEADER_SIZE : HEADER_SIZE + 2] = b"\xe1\x01"
    fuzz._reseal(first, False)
    value = bytearray(b"\x0c" * 100)
    value[93] = 0x55
    buf = bytes(first) + build_batch([Record(None, bytes(value))])
    spans = [(HEADER_SIZE, len(first), 96)]
    found = record_starts(buf, spans)
    expected = reader._record_starts_any_length(buf, spans)
    assert (found is None) == (expected is None)
    assert found is None or expected is None or found.tolist() == expected.tolist()
    assert isinstance(decode_both(buf, verify_crc=False), CorruptBatchError)


def test_mutants_agree() -> None:
    # The fuzzer's mutations (most re-sealed with a valid CRC) reach the record decoder;
    # both paths must raise the same error or return the same batches.
    rng = random.Random(77)
    corpus = fuzz.seed_corpus()
    for _ in range(1500):
        data = rng.choice(corpus)
        for _ in range(rng.randrange(1, 3)):
            data = fuzz.mutate(rng, data, corpus)
        decode_both(data, max_decompressed_size=fuzz.FUZZ_MAX_SIZE)
        decode_both(data, verify_crc=False, max_decompressed_size=fuzz.FUZZ_MAX_SIZE)


def blob(max_size: int) -> st.SearchStrategy[bytes]:
    # Sizes around the 1/2-byte varint boundaries, with compressible and random content.
    size = st.sampled_from([0, 1, 5, 62, 63, 64, 65, 200, 8191, 8192]) | st.integers(0, max_size)
    return st.builds(
        lambda n, b: (b * (n // max(1, len(b)) + 1))[:n], size, st.binary(min_size=1, max_size=8)
    )


record_st = st.builds(
    Record,
    key=st.none() | blob(100),
    value=st.none() | blob(9000),
    headers=st.lists(
        st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=2
    ).map(tuple),
    timestamp=st.none()
    | st.integers(1_700_000_000_000 - 100_000, 1_700_000_000_000 + 10_000_000)
    | st.integers(-(2**62), 2**62),
)


@settings(max_examples=150, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.sampled_from(CODECS),
            st.lists(record_st, min_size=1, max_size=8),
            st.booleans(),
            st.integers(0, 3),
        ),
        max_size=5,
    ),
    base=st.sampled_from([0, 1000, 2**40, INT64_MAX - 2**28]),
    bounds=st.tuples(st.none() | st.integers(0, 60), st.none() | st.integers(0, 60)),
    tail=st.integers(0, 80),
)
def test_random_batches_agree(
    batches: list[tuple[Compression, list[Record], bool, int]],
    base: int,
    bounds: tuple[int | None, int | None],
    tail: int,
) -> None:
    buf, offset = b"", base
    for codec, records, log_append, gap in batches:
        deltas = [i * (gap + 1) for i in range(len(records))]  # compaction leaves gaps
        try:
            batch = build_batch(
                records,
                base_offset=offset,
                compression=codec,
                offset_deltas=deltas,
                timestamp_type=TimestampType.LOG_APPEND_TIME
                if log_append
                else TimestampType.CREATE_TIME,
            )
        except ValueError:  # timestamps too far apart for a varlong delta
            continue
        buf += batch
        offset += deltas[-1] + 2
    buf += build_batch([Record(b"k", b"tail")], base_offset=offset)[:tail]
    start, end = bounds
    lo = None if start is None else base + start
    hi = None if end is None else base + end
    decode_both(buf, start_offset=lo, end_offset=hi)
    decode_both(buf)


def test_kafka_python_batches_take_the_fast_path() -> None:
    from tests.records.test_kafka_python_compat import (
        kafka_python_batch,
        kafka_python_decode,
        sample_records,
    )

    for codec in CODECS:
        buf = kafka_python_batch(sample_records(200), codec)
        cols = fast_columns(buf)
        want = kafka_python_decode(buf)
        assert cols.offsets.tolist() == [r[0] for r in want]
        assert cols.millis.tolist() == [r[1] for r in want]
        (batch,) = decode_both(buf)
        assert batch.column("key").to_pylist() == [r[2] for r in want]
        assert batch.column("value").to_pylist() == [r[3] for r in want]
        header = parse_header(buf)
        assert header.compression == codec or codec is Compression.NONE
        assert len(decompress(header.compression, buf[HEADER_SIZE:])) > 0


def test_many_headers_go_to_the_reference_path() -> None:
    headers = tuple((f"h{i}", b"%d" % i if i % 3 else None) for i in range(40))
    buf = build_batch([Record(b"k", b"v", headers), Record(b"k", b"w", headers[:2])])
    with pytest.raises(arrow._GiveUp):
        fast_columns(buf)
    (batch,) = decode_both(buf)
    assert len(batch.column("headers")[0]) == 40


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.binary(max_size=6), st.none() | st.binary(max_size=70)), max_size=4),
        min_size=1,
        max_size=6,
    )
)
def test_header_keys_of_any_bytes(records: list[list[tuple[bytes, bytes | None]]]) -> None:
    # Keys that are not UTF-8 must fail the same way on both paths.
    block = b""
    for i, headers in enumerate(records):
        field = encode_varint(len(headers))
        for key, value in headers:
            field += encode_varint(len(key)) + key
            field += encode_varint(-1) if value is None else encode_varint(len(value)) + value
        block += record_bytes(b"\x02", b"k", b"\x02", b"v", field, offset_delta=encode_varint(i))
    decode_both(hand_batch(block, len(records)), verify_crc=False)
