"""Cross-checks with kafka-python's own record code (kafka.record), for every codec.

Batches kafka-python builds must decode identically in tierlog, and tierlog's batches
must decode in kafka-python. kafka-python's snappy writes xerial framing (its
``snappy_encode`` defaults to xerial_compatible=True), like the Java client; its LZ4
frames use python-lz4 defaults (content size stored), unlike ours.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.codecs import XERIAL_MAGIC
from tierlog.records.header import HEADER_SIZE, Compression, TimestampType, validate_batch
from tierlog.records.reader import iter_batches_records, iter_records

with warnings.catch_warnings():
    # kafka-python's package import trips importlib.resources deprecation warnings.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

CODECS = list(Compression)


def sample_records(n: int = 30) -> list[Record]:
    # Compressible values: kafka-python silently sends a batch uncompressed when the codec
    # does not make it smaller, which would skip the codec under test.
    return [
        Record(
            key=None if i % 5 == 0 else b"key-%d" % i,
            value=None if i % 7 == 3 else b"value %d " % i * 20,
            headers=(("trace", b"%d" % i), ("empty", None)) if i % 3 == 0 else (),
            timestamp=1_700_000_000_000 + i * 37 - (50 if i % 4 == 0 else 0),
        )
        for i in range(n)
    ]


def kafka_python_batch(records: list[Record], codec: Compression, **producer: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        batch_size=1 << 22,
    )
    for offset, record in enumerate(records):
        metadata = builder.append(
            offset, record.timestamp, record.key, record.value, list(record.headers)
        )
        assert metadata is not None
    return bytes(builder.build())


def kafka_python_decode(buf: bytes) -> list[tuple[object, ...]]:
    out = []
    records = MemoryRecords(buf)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, tuple(r.headers)))
    return out


def tierlog_decode(buf: bytes) -> list[tuple[object, ...]]:
    return [tuple(r) for _, records in iter_batches_records(buf) for r in records]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode_in_tierlog(codec: Compression) -> None:
    records = sample_records()
    batch = kafka_python_batch(records, codec, producer_id=9, producer_epoch=1, base_sequence=4)
    header = validate_batch(batch)
    assert header.compression is codec  # really compressed, not the fallback
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 1, 4)
    assert [tuple(r) for r in iter_records(batch)] == kafka_python_decode(batch)
    assert [r.key for r in iter_records(batch)] == [r.key for r in records]


@pytest.mark.parametrize("codec", CODECS)
def test_tierlog_batches_decode_in_kafka_python(codec: Compression) -> None:
    records = sample_records()
    batch = build_batch(records, base_offset=1000, compression=codec)
    decoded = kafka_python_decode(batch)
    assert decoded == tierlog_decode(batch)
    assert [d[0] for d in decoded] == list(range(1000, 1030))
    assert [d[3] for d in decoded] == [r.value for r in records]
    native = DefaultRecordBatch(batch)
    assert (native.compression_type, native.records_count) == (int(codec), 30)
    assert (native.first_timestamp, native.max_timestamp) == (parse_base_and_max(records))


def parse_base_and_max(records: list[Record]) -> tuple[int, int]:
    stamps = [r.timestamp for r in records if r.timestamp is not None]
    return stamps[0], max(stamps)


def test_uncompressed_batches_are_byte_identical() -> None:
    # Same inputs, same bytes: kafka-python writes partitionLeaderEpoch 0, so match it.
    records = sample_records()
    ours = build_batch(records, partition_leader_epoch=0)
    assert ours == kafka_python_batch(records, Compression.NONE)


def test_kafka_python_snappy_is_xerial_framed() -> None:
    batch = kafka_python_batch(sample_records(), Compression.SNAPPY)
    assert batch[HEADER_SIZE : HEADER_SIZE + 8] == XERIAL_MAGIC
    ours = build_batch(sample_records(), compression=Compression.SNAPPY)
    assert ours[HEADER_SIZE : HEADER_SIZE + 8] == XERIAL_MAGIC


def test_memory_records_builder_buffer_with_several_batches() -> None:
    buf = b""
    for base in (0, 10):
        builder = MemoryRecordsBuilder(
            magic=2, compression_type=int(Compression.ZSTD), batch_size=1 << 20, offset=base
        )
        for i in range(10):
            builder.append(timestamp=1000 + i, key=None, value=b"payload" * 30, headers=[])
        builder.close()
        buf += bytes(builder.buffer())
    assert tierlog_decode(buf) == kafka_python_decode(buf)
    assert [r[0] for r in tierlog_decode(buf)] == list(range(20))


def test_control_batches_decode_in_kafka_python() -> None:
    for kind in ControlType:
        batch = build_control_batch(
            kind, producer_id=5, producer_epoch=2, base_offset=77, timestamp=99
        )
        native = DefaultRecordBatch(batch)
        assert native.is_control_batch and native.is_transactional
        assert native.validate_crc()
        (record,) = list(native)
        assert (record.offset, record.version, record.type) == (77, 0, int(kind))
        assert record.commit is (kind is ControlType.COMMIT)


def test_log_append_time_and_producer_fields_in_kafka_python() -> None:
    batch = build_batch(
        sample_records(3),
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        base_timestamp=123_456,
        producer_id=3,
        producer_epoch=4,
        base_sequence=2**31 - 2,
        transactional=True,
    )
    native = DefaultRecordBatch(batch)
    assert native.timestamp_type == 1
    assert [r.timestamp for r in native] == [123_456] * 3
    native = DefaultRecordBatch(batch)
    assert (native.producer_id, native.producer_epoch, native.is_transactional) == (3, 4, True)
    assert native.last_sequence == validate_batch(batch).last_sequence == 0


record_st = st.builds(
    Record,
    key=st.none() | st.binary(max_size=20),
    value=st.none() | st.binary(max_size=200),
    headers=st.lists(
        st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8)), max_size=2
    ).map(tuple),
    timestamp=st.integers(min_value=0, max_value=2**42),
)


@settings(max_examples=40, deadline=None)
@given(records=st.lists(record_st, min_size=1, max_size=12), codec=st.sampled_from(CODECS))
def test_round_trip_both_ways(records: list[Record], codec: Compression) -> None:
    ours = build_batch(records, compression=codec)
    assert kafka_python_decode(ours) == tierlog_decode(ours)
    theirs = kafka_python_batch(records, codec)
    assert tierlog_decode(theirs) == kafka_python_decode(theirs)
    assert tierlog_decode(theirs) == tierlog_decode(ours)
