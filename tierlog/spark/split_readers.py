"""Read one split into Arrow on an executor: remote splits from object storage (no broker
on that path), leader splits by Fetch from the partition's leader.

Both yield ``pyarrow.RecordBatch`` es of ``tierlog.records.arrow.KAFKA_SCHEMA`` holding
exactly the split's offsets ``[start, end)``; ``finish`` then shapes them to the query's
schema (headers dropped, tier column added).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa

from tierlog.client import EARLIEST, ClientError, LogClient
from tierlog.protocol.errors import ErrorCode
from tierlog.records.arrow import to_record_batches
from tierlog.records.header import HEADER_SIZE, parse_header
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.segment_reader import RemoteSegmentReader
from tierlog.spark.discovery import SourceError
from tierlog.spark.planning import LeaderSplit, RemoteSplit

log = logging.getLogger(__name__)

# Bytes read from object storage per request: big enough that per-request latency (S3:
# tens of ms) is amortised, small enough to bound an executor's memory per task.
REMOTE_CHUNK_BYTES = 16 << 20
# Fetch max bytes per request to the leader (Kafka's fetch.max.bytes default is 50 MiB).
FETCH_MAX_BYTES = 16 << 20


def whole_batches_end(buf: bytes | memoryview, start: int = 0) -> tuple[int, int]:
    """``(end, last_offset)``: the end of the whole batches from ``start`` and the last
    offset they hold (-1 when none is whole). Only headers are read."""
    pos, last = start, -1
    size = len(buf)
    while pos + HEADER_SIZE <= size:
        header = parse_header(buf, pos)
        if pos + header.size > size:
            break
        pos += header.size
        last = header.last_offset
    return pos, last


def read_remote(split: RemoteSplit, store: FsspecRemoteStore) -> Iterator[pa.RecordBatch]:
    """The split's records, read straight from its segment's ``.log`` object, starting at
    the batch the offset index points to, in ``REMOTE_CHUNK_BYTES`` ranges."""
    reader = RemoteSegmentReader(store, split.segment)
    position = reader.find_position(split.start)
    size = reader.size
    carry = b""
    while position < size:
        chunk = reader.fetch(position, min(position + REMOTE_CHUNK_BYTES, size))
        if not chunk:
            break
        position += len(chunk)
        buf = carry + chunk if carry else chunk
        end, last = whole_batches_end(buf)
        if end == 0 and position < size:
            carry = buf  # one batch bigger than a chunk: read on until it is whole
            continue
        yield from to_record_batches(
            memoryview(buf)[:end], split.topic, split.partition,
            start_offset=split.start, end_offset=split.end,
        )  # fmt: skip
        carry = bytes(buf[end:])
        if last >= split.end - 1:
            return


def read_leader(
    split: LeaderSplit, bootstrap: str, *, fail_on_data_loss: bool = True
) -> Iterator[pa.RecordBatch]:
    """The split's records fetched from the leader, one Fetch after another.

    A compacted topic's log has offset gaps (the cleaner removes superseded records and,
    past their delete horizon, tombstones, but never moves an offset): a Fetch at an
    offset that was cleaned away answers from the next batch kept, and batches may be
    empty (an idempotent producer's last one). Gaps are not data loss: what is below the
    high watermark and not returned is not in the log, as in Spark's Kafka source, which
    skips offsets a poll does not return. Only offsets below the log start are lost.

    Raises:
        SourceError: offsets of the split were deleted (retention) with failOnDataLoss,
            or the log ends before the split does (it was truncated).
    """
    with LogClient(bootstrap, client_id="tierlog-spark") as client:
        offset = split.start
        while offset < split.end:
            try:
                result = client.fetch(
                    split.topic, split.partition, offset, max_bytes=FETCH_MAX_BYTES
                )
            except ClientError as exc:
                if exc.error != ErrorCode.offset_out_of_range:
                    raise
                offset = _after_data_loss(client, split, offset, fail_on_data_loss)
                continue
            end, last = whole_batches_end(result.records)
            if last < 0 and not result.records and offset < result.high_watermark:
                # No batch at all in [offset, high watermark): a gap the cleaner left at
                # the end of the log (the last records were tombstones past their horizon).
                offset = result.high_watermark
                continue
            if last < 0:
                if result.high_watermark <= offset:
                    raise SourceError(
                        f"{split.topic}-{split.partition} ends at {result.high_watermark}, "
                        f"before offset {offset} the query planned to read up to "
                        f"{split.end} (the log was truncated)"
                    )
                raise SourceError(
                    f"{split.topic}-{split.partition}: no whole batch at offset {offset}"
                )
            yield from to_record_batches(
                memoryview(result.records)[:end], split.topic, split.partition,
                start_offset=offset, end_offset=split.end,
            )  # fmt: skip
            offset = last + 1


def _after_data_loss(client: LogClient, split: LeaderSplit, offset: int, fail: bool) -> int:
    key = (split.topic, split.partition)
    start = client.list_offsets({key: EARLIEST})[key]
    if fail or start <= offset:
        raise SourceError(
            f"{split.topic}-{split.partition}: offset {offset} is no longer available (log "
            f"start {start}; deleted by retention during the query); failOnDataLoss=false "
            "skips what was lost"
        )
    log.warning(
        "%s-%d: offsets %d..%d were lost; skipped", split.topic, split.partition, offset, start - 1
    )
    return start


def finish(batch: pa.RecordBatch, *, include_headers: bool, tier: str | None) -> pa.RecordBatch:
    """``batch`` in the query's schema: without headers unless asked, with ``tier``."""
    if not include_headers:
        batch = batch.drop_columns(["headers"])
    if tier is not None:
        batch = batch.append_column("tier", pa.repeat(pa.scalar(tier, pa.string()), batch.num_rows))
    return batch
