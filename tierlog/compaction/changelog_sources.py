"""Where a changelog rebuild reads record batches from: the partition leader, or the
remote tier's segment objects straight from object storage.

Both tiers hand out ``Chunk`` s: whole batches of one partition and the offset reading goes
on at (taken from batch headers, so offset gaps and empty batches left by the cleaner move
it along without decoding anything). Nothing here decodes records or applies changes;
``tierlog.compaction.changelog`` does.

* ``BrokerTier`` fetches through ``LogClient`` from the leader (which itself serves offsets
  below its local log start from the remote tier, KIP-405).
* ``StoreTier`` reads the committed segments of one manifest snapshot from object storage,
  as the Spark source's remote splits do (``tierlog.spark.split_readers``): no broker on
  that path. The hot part above the manifest's remote end then comes from the leader.

Not thread-safe (``LogClient`` is not): one reader per thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from tierlog.client import EARLIEST, LATEST, ClientError, LogClient
from tierlog.compaction.changelog_decode import whole_batches_next_offset
from tierlog.protocol.errors import ErrorCode
from tierlog.remote.api import RemoteResourceNotFoundError, RemoteStore
from tierlog.remote.manifest import Manifest, check_topic, committed_segments, end_offset
from tierlog.remote.segment_reader import RemoteSegmentReader

log = logging.getLogger(__name__)

BROKER = "broker"
STORE = "store"
# Per request: big enough that a request's round trip (object stores: tens of ms) is
# amortised, small enough to bound memory; the Spark source reads with the same sizes.
DEFAULT_FETCH_BYTES = 16 << 20
DEFAULT_STORE_CHUNK_BYTES = 16 << 20


class ChangelogReadError(Exception):
    """A partition cannot be read as a changelog (truncated under the reader, a batch
    that never arrives whole)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """Whole batches of ``partition`` read at ``position``; reading goes on at
    ``next_offset``. ``data`` may be empty when only the position moves."""

    partition: int
    data: bytes | memoryview
    position: int
    next_offset: int
    tier: str


class BrokerTier:
    """Offsets and batches of ``topic`` through its partitions' leaders."""

    def __init__(
        self, client: LogClient, topic: str, *, fetch_bytes: int = DEFAULT_FETCH_BYTES
    ) -> None:
        self.client = client
        self.topic = topic
        self.fetch_bytes = fetch_bytes

    def partitions(self) -> list[int]:
        return self.client.partitions(self.topic)

    def topic_id(self) -> str:
        return str(self.client.topic_id(self.topic))

    def bounds(self, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """``partition -> (log start, high watermark)`` now."""
        keys = [(self.topic, p) for p in partitions]
        earliest = self.client.list_offsets(dict.fromkeys(keys, EARLIEST))
        latest = self.client.list_offsets(dict.fromkeys(keys, LATEST))
        return {p: (earliest[self.topic, p], latest[self.topic, p]) for p in partitions}

    def fetch(self, partition: int, position: int, *, max_wait_ms: int = 0) -> Chunk:
        """One Fetch at ``position``: its whole batches (maybe none).

        Raises:
            ClientError: OFFSET_OUT_OF_RANGE (the caller decides), or an error that
                persisted through the client's retries.
        """
        result = self.client.fetch(
            self.topic, partition, position, max_bytes=self.fetch_bytes, max_wait_ms=max_wait_ms
        )
        size, next_offset = whole_batches_next_offset(result.records, position)
        if not result.records and position < result.high_watermark:
            # No batch at all in [position, high watermark): the cleaner removed the last
            # records of the log (tombstones past their delete horizon). A gap, not loss.
            next_offset = result.high_watermark
        data = memoryview(result.records)[:size]
        return Chunk(partition, data, position, next_offset, BROKER)

    def read(self, partition: int, position: int, end: int) -> Iterator[Chunk]:
        """Chunks from ``position`` until reading reaches ``end`` (a high watermark seen
        before). Offsets deleted by retention under the reader are skipped with a warning
        (a compact,delete topic); the first chunk after them starts at the new log start.

        Raises:
            ChangelogReadError: the log ends before ``end`` (truncated), or the leader
                answers no whole batch below its high watermark.
        """
        while position < end:
            try:
                chunk = self.fetch(partition, position)
            except ClientError as exc:
                if exc.error != ErrorCode.offset_out_of_range:
                    raise
                start, latest = self.bounds([partition])[partition]
                if position < start:
                    log.warning(
                        "%s-%d: offsets %d..%d were deleted by retention while reading; "
                        "skipped",
                        self.topic, partition, position, start - 1,
                    )  # fmt: skip
                    position = start
                    continue
                raise ChangelogReadError(
                    f"{self.topic}-{partition}: offset {position} is out of range "
                    f"[{start}, {latest}] (the log was truncated)"
                ) from exc
            if chunk.next_offset <= position:
                raise ChangelogReadError(
                    f"{self.topic}-{partition}: no whole batch at offset {position} below {end}"
                )
            yield chunk
            position = chunk.next_offset


class StoreTier:
    """The committed remote segments of ``topic`` straight from object storage."""

    def __init__(
        self,
        store: RemoteStore,
        topic: str,
        *,
        chunk_bytes: int = DEFAULT_STORE_CHUNK_BYTES,
    ) -> None:
        self.store = store
        self.topic = check_topic(topic)
        self.chunk_bytes = chunk_bytes

    def partitions(self) -> list[int]:
        """The ``<topic>-<n>`` directories under the remote root (no broker needed)."""
        try:
            return [partition for _, partition in self.store.list_partitions(self.topic)]
        except RemoteResourceNotFoundError:
            return []

    def manifest(self, partition: int) -> Manifest:
        return self.store.read_manifest(self.topic, partition)

    def read(self, manifest: Manifest, position: int) -> Iterator[Chunk]:
        """Chunks of every committed segment of ``manifest`` from ``position`` (at least
        the remote log start) to the manifest's remote end. Segments are immutable once
        committed (a cleaned replacement gets a new id), so one snapshot reads
        consistently even while the broker offloads, cleans or deletes behind it."""
        partition = manifest.partition
        position = max(position, manifest.log_start_offset)
        for segment in committed_segments(manifest):
            if segment.end_offset < position:
                continue
            reader = RemoteSegmentReader(self.store, segment)
            # Whole batches, each checked (a damaged one raises CorruptRemoteDataError
            # naming the object and offsets, rather than ending the segment early).
            for whole in reader.chunks(position, self.chunk_bytes):
                _, next_offset = whole_batches_next_offset(whole, position)
                yield Chunk(partition, whole, position, next_offset, STORE)
                position = max(position, next_offset)
            # Past the segment even if its last batches were removed by the cleaner.
            if segment.end_offset + 1 > position:
                yield Chunk(partition, b"", position, segment.end_offset + 1, STORE)
                position = segment.end_offset + 1

    @staticmethod
    def end(manifest: Manifest) -> int:
        """The first offset the manifest does not hold (0 when it holds nothing)."""
        return max(end_offset(manifest), 0)
