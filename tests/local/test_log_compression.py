"""Log.append on a topic whose compression.type is not ``producer``: batches are stored in
the topic's codec (Kafka's LogValidator), offsets, producer state and timestamps as for
any append; a follower stores its leader's bytes as they are."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.builder import Record, build_batch
from tierlog.records.errors import CorruptBatchError
from tierlog.records.header import HEADER_SIZE, Attr, Compression, TimestampType, compute_crc
from tierlog.records.reader import iter_records
from tierlog.util.clock import ManualClock

from .conftest import (
    T0,
    LogFactory,
    all_batches,
    all_records,
    assert_dense,
    dir_snapshot,
    make_batch,
    with_offsets,
)

TOPIC_CODECS = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


def codecs_of(log: Log) -> list[int]:
    return [h.attributes & Attr.COMPRESSION_MASK for h in all_batches(log)]


@pytest.mark.parametrize("topic_codec", TOPIC_CODECS)
@pytest.mark.parametrize("sent", list(Compression))
def test_batches_are_stored_in_the_topics_codec(
    make_log: LogFactory, topic_codec: str, sent: Compression
) -> None:
    lg = make_log(compression_type=topic_codec)
    infos = [lg.append(make_batch(4, compression=sent)) for _ in range(2)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 3), (4, 7)]
    assert codecs_of(lg) == [TOPIC_CODECS[topic_codec]] * 2
    assert_dense(lg)
    expected = list(iter_records(make_batch(4))) * 2
    got = all_records(lg)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (r.key, r.value, r.headers, r.timestamp) for r in expected
    ]
    assert [r.offset for r in got] == list(range(8))


def test_producer_keeps_the_producers_codec(make_log: LogFactory) -> None:
    lg = make_log()
    sent = [make_batch(3, compression=c) for c in Compression]
    for batch in sent:
        lg.append(batch)
    stored = lg.segments[0].path.read_bytes()
    # Only baseOffset and partitionLeaderEpoch differ: everything from the magic byte on is
    # the producer's.
    pos = 0
    for batch in sent:
        assert stored[pos + 16 : pos + len(batch)] == batch[16:]
        pos += len(batch)


def test_idempotent_retry_of_a_recompressed_batch_is_a_duplicate(make_log: LogFactory) -> None:
    lg = make_log(compression_type="zstd")
    batch = make_batch(5, producer_id=7, producer_epoch=1, base_sequence=0)
    first = lg.append(batch)
    again = lg.append(batch)
    assert again.duplicate and (again.first_offset, again.last_offset) == (0, 4)
    assert (first.first_offset, first.last_offset) == (0, 4)
    assert lg.log_end_offset == 5
    (header,) = all_batches(lg)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 0)
    assert header.attributes & Attr.COMPRESSION_MASK == Compression.ZSTD
    assert lg.producer_state.last_entry(7) is not None


def test_transactional_batches_and_markers(make_log: LogFactory) -> None:
    lg = make_log(compression_type="gzip")
    records = [Record(b"k%d" % i, b"v", timestamp=T0) for i in range(3)]
    txn = build_batch(records, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    lg.append(txn)
    assert lg.first_unstable_offset == 0
    lg.append_marker(9, 0, 0, commit=False, leader_epoch=0)
    headers = list(all_batches(lg))
    assert headers[0].is_transactional
    assert headers[0].attributes & Attr.COMPRESSION_MASK == Compression.GZIP
    # The marker is written uncompressed and stays so.
    assert headers[1].is_control and headers[1].attributes & Attr.COMPRESSION_MASK == 0
    assert [a.producer_id for a in lg.collect_aborted_transactions(0, 10)] == [9]


def test_log_append_time_after_recompression(make_log: LogFactory, clock: ManualClock) -> None:
    lg = make_log(compression_type="lz4", message_timestamp_type="LogAppendTime")
    clock.advance(5000)
    now = clock.milliseconds()
    info = lg.append(make_batch(3, base_timestamp=1000))
    assert info.log_append_time == now
    (header,) = all_batches(lg)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.attributes & Attr.COMPRESSION_MASK == Compression.LZ4
    assert (header.base_timestamp, header.max_timestamp) == (1000, now)
    assert [r.timestamp for r in all_records(lg)] == [now] * 3


def test_create_time_timestamps_are_kept(make_log: LogFactory) -> None:
    lg = make_log(compression_type="snappy")
    stamps = [T0 + 30, T0 + 10, T0 + 20]
    lg.append(make_batch(3, timestamps=stamps, compression=Compression.ZSTD))
    (header,) = all_batches(lg)
    assert (header.base_timestamp, header.max_timestamp) == (T0 + 30, T0 + 30)
    assert [r.timestamp for r in all_records(lg)] == stamps


def test_a_batch_that_does_not_decompress_appends_nothing(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log(compression_type="zstd")
    lg.append(make_batch(2))
    before = dir_snapshot(log_dir)
    good = make_batch(3, compression=Compression.GZIP)
    bad = bytearray(good[:HEADER_SIZE]) + good[HEADER_SIZE : HEADER_SIZE + 10] + b"\x00" * 40
    struct.pack_into(">i", bad, 8, len(bad) - 12)  # a whole batch, CRC right: a bad block
    struct.pack_into(">I", bad, 17, compute_crc(bad))
    with pytest.raises(CorruptBatchError):
        lg.append(bad)
    assert dir_snapshot(log_dir) == before
    assert lg.log_end_offset == 2


def test_a_follower_stores_the_leaders_bytes(make_log: LogFactory) -> None:
    lg = make_log(compression_type="zstd")
    data = with_offsets(make_batch(3, compression=Compression.GZIP), 0, leader_epoch=1)
    lg.append_as_follower(data)
    assert lg.segments[0].path.read_bytes() == data


def test_compression_config_values() -> None:
    assert LogConfig().target_compression is None
    config = LogConfig.from_props({"compression.type": "gzip", "compression.gzip.level": "9"})
    assert config.target_compression is not None
    assert (config.target_compression.codec, config.target_compression.level) == (
        Compression.GZIP,
        9,
    )
    snappy = LogConfig.from_props({"compression.type": "snappy"}).target_compression
    assert snappy is not None and snappy.level is None
