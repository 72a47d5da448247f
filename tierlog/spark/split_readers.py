"""Read one split into Arrow on an executor: remote splits from object storage (no broker
on that path), leader splits by Fetch from the partition's leader.

Both yield ``pyarrow.RecordBatch`` es of ``tierlog.records.arrow.KAFKA_SCHEMA`` holding
exactly the split's offsets ``[start, end)``; ``finish`` then shapes them to the query's
schema (headers dropped, tier column added). Transaction markers are never rows; with
read_committed, records of aborted transactions are dropped too, by Kafka's consumer rule
(``tierlog.records.aborted_filter``), the aborted transactions coming from the remote
``.txnindex`` objects (remote splits) or the leader's Fetch answers (leader splits).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa

from tierlog.client import EARLIEST, ClientError, LogClient
from tierlog.client.log_client import READ_COMMITTED, READ_UNCOMMITTED
from tierlog.protocol.errors import ErrorCode
from tierlog.records.aborted_filter import AbortedFilter, AbortedStart, search_index
from tierlog.records.arrow import to_record_batches
from tierlog.records.header import HEADER_SIZE, parse_header
from tierlog.records.txn_index_codec import CorruptTxnIndexError, decode_entries
from tierlog.remote.api import IndexKind, RemoteStore
from tierlog.remote.manifest import txn_index_object_name
from tierlog.remote.segment_reader import RemoteSegmentReader
from tierlog.security.client_config import ClientSecurity
from tierlog.spark.discovery import SourceError
from tierlog.spark.planning import LeaderSplit, RemoteSplit, Split

log = logging.getLogger(__name__)

# Bytes read from object storage per request: big enough that per-request latency (S3:
# tens of ms) is amortised, small enough to bound an executor's memory per task.
REMOTE_CHUNK_BYTES = 16 << 20
# Ranges of a split fetched while the one before is decoded (issue 24: parallel ranged GETs
# within a split): an executor holds at most (1 + this) x REMOTE_CHUNK_BYTES per task.
REMOTE_RANGES_AHEAD = 2
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


def remote_aborted(
    split: RemoteSplit,
    store: RemoteStore,
    bootstrap: str | None,
    security: ClientSecurity | None = None,
) -> list[AbortedStart]:
    """The aborted transactions a read_committed read of a remote split must drop:
    the ``.txnindex`` entries overlapping it, from its segment on, until Kafka's stop rule
    (``search_index``) says no later one can matter. When the remote indexes run out first,
    a transaction with records in the split may have its ABORT marker in a segment not
    offloaded yet: the leader, asked from the remote end with a read_committed Fetch, lists
    those (its answer includes every aborted transaction ending at or after the offset it
    is asked at, over ``security``). Without a ``bootstrap`` (remote-only reads) there is
    none to ask and no
    need: such reads end at the remote tier's own last stable offset (``remote_lso``),
    below which every transaction's marker, and so every abort's index entry, is remote.

    Raises:
        SourceError: a remote index is not a whole number of entries.
    """
    out: list[AbortedStart] = []
    for segment in split.txn_segments:
        name = txn_index_object_name(segment) or segment.segment_id
        try:
            entries = decode_entries(store.fetch_index(segment, IndexKind.TRANSACTION), name)
        except CorruptTxnIndexError as exc:
            raise SourceError(f"{split.topic}-{split.partition}: {exc}") from None
        found, complete = search_index(entries, split.start, split.end)
        out += found
        if complete:
            return out
    if bootstrap is not None:
        with LogClient(bootstrap, client_id="tierlog-spark", security=security) as client:
            answer = client.fetch(
                split.topic, split.partition, split.remote_end, max_bytes=1,
                isolation_level=READ_COMMITTED,
            )  # fmt: skip
        out += [t for t in answer.aborted_transactions if t.first_offset < split.end]
    return out


def read_remote(
    split: RemoteSplit,
    store: RemoteStore,
    *,
    read_committed: bool = False,
    bootstrap: str | None = None,
    security: ClientSecurity | None = None,
) -> Iterator[pa.RecordBatch]:
    """The split's records, read straight from its segment's ``.log`` object, starting at
    the batch the offset index points to, in ``REMOTE_CHUNK_BYTES`` ranges, every batch
    checked before it is decoded (``RemoteSegmentReader.chunks``). With ``read_committed``,
    without the records of aborted transactions (``remote_aborted`` says which;
    ``bootstrap`` is the leader's cluster to ask, None for none, over ``security``).

    Raises:
        CorruptRemoteDataError: a batch of the split is damaged in the store (the task
            fails naming the object, the offsets and the store; nothing after the damage
            is returned as if it were all there is).
    """
    filt = (
        AbortedFilter(remote_aborted(split, store, bootstrap, security)) if read_committed else None
    )
    reader = RemoteSegmentReader(store, split.segment)
    for whole in reader.chunks(split.start, REMOTE_CHUNK_BYTES, ahead=REMOTE_RANGES_AHEAD):
        yield from _decode(whole, split, split.start, filt)
        if whole_batches_end(whole)[1] >= split.end - 1:
            return


def _decode(
    whole: memoryview, split: Split, start: int, filt: AbortedFilter | None
) -> Iterator[pa.RecordBatch]:
    """Whole batches as rows of ``[start, split.end)``; through ``filt`` when given (the
    kept batches are decoded in place, run by run)."""
    if filt is None:
        yield from to_record_batches(
            whole, split.topic, split.partition, start_offset=start, end_offset=split.end
        )
        return
    # The filter reads headers only; to_record_batches checks the kept batches' CRCs.
    for lo, hi in filt.kept_ranges(whole, verify_crc=False):
        yield from to_record_batches(
            whole[lo:hi], split.topic, split.partition, start_offset=start, end_offset=split.end
        )


def read_leader(
    split: LeaderSplit,
    bootstrap: str,
    *,
    fail_on_data_loss: bool = True,
    read_committed: bool = False,
    security: ClientSecurity | None = None,
) -> Iterator[pa.RecordBatch]:
    """The split's records fetched from the leader, one Fetch after another (over
    ``security``'s TLS and SASL, when given).

    With ``read_committed`` each Fetch asks for read_committed (isolation level 1): the
    answer ends at the last stable offset, and its aborted transactions' records are
    dropped (a fresh ``AbortedFilter`` per answer, as Kafka's consumer has per fetch: the
    answer lists every aborted transaction overlapping what it returns). The split then
    ends at the LSO when the leader has nothing stable beyond it (a transaction still open
    when the query was planned, with HW-based offsets).

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
    with LogClient(bootstrap, client_id="tierlog-spark", security=security) as client:
        offset = split.start
        isolation = READ_COMMITTED if read_committed else READ_UNCOMMITTED
        while offset < split.end:
            try:
                result = client.fetch(
                    split.topic, split.partition, offset, max_bytes=FETCH_MAX_BYTES,
                    isolation_level=isolation,
                )  # fmt: skip
            except ClientError as exc:
                if exc.error != ErrorCode.offset_out_of_range:
                    raise
                offset = _after_data_loss(client, split, offset, fail_on_data_loss)
                continue
            end, last = whole_batches_end(result.records)
            if read_committed and last < 0 and 0 <= result.last_stable_offset <= offset:
                return  # nothing stable past here (yet): the read_committed end
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
            filt = AbortedFilter(result.aborted_transactions) if read_committed else None
            yield from _decode(memoryview(result.records)[:end], split, offset, filt)
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
