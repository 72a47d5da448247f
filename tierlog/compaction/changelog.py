"""Rebuild state from a compacted topic's whole history, both tiers, and keep following it.

A compacted topic is a changelog: the latest value of every key, kept indefinitely, with
tombstones (null values) for deleted keys (Kafka design, "Log compaction": restoring state,
reloading caches). ``ChangelogReader`` reads every partition from its sink's position to
the end and hands each partition's changes, in offset order, to a sink
(``tierlog.compaction.changelog_sinks``: a dict, or a SQLite table that remembers what it
applied and resumes there)::

    cache = rebuild_dict("users", bootstrap="127.0.0.1:9092", value_decoder=bytes.decode)

    with SqliteSink("cache.db") as sink, ChangelogReader(
        "users", bootstrap="127.0.0.1:9092", remote_url="s3://bucket/tierlog"
    ) as reader:
        reader.catch_up(sink)               # whole history, or from where it stopped
        reader.follow(sink, timeout_s=60)   # then new records as they arrive

Where it reads from:

* ``bootstrap`` only: everything through the partition leaders (the broker reads its
  remote tier for offsets below its local log start);
* ``bootstrap`` and ``remote_url``: the committed remote segments straight from object
  storage (the manifest, as the Spark source does: no broker on that path), then the hot
  part above the manifest's remote end from the leader;
* ``remote_url`` only: the remote tier alone, up to its end (an offline rebuild; no
  ``follow``).

The rules of a change (gaps, empty batches, tombstones, keyless records) are in
``tierlog.compaction.changelog_decode``. Not thread-safe: one reader per thread.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tierlog.client import ClientError, LogClient
from tierlog.compaction.changelog_decode import Changes, decode_changes, empty_changes
from tierlog.compaction.changelog_sinks import (
    ChangelogMismatchError,
    Decoder,
    DictSink,
    Sink,
    SqliteSink,
)
from tierlog.compaction.changelog_sources import (
    BROKER,
    DEFAULT_FETCH_BYTES,
    DEFAULT_STORE_CHUNK_BYTES,
    BrokerTier,
    ChangelogReadError,
    Chunk,
    StoreTier,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.remote.api import RemoteResourceNotFoundError, RemoteStore
from tierlog.remote.manifest import ZERO_UUID, Manifest
from tierlog.remote.registry import open_store
from tierlog.security.client_config import ClientSecurity

log = logging.getLogger(__name__)

__all__ = [
    "ChangelogMismatchError",
    "ChangelogReadError",
    "ChangelogReader",
    "DictSink",
    "RebuildStats",
    "SqliteSink",
    "rebuild_dict",
    "rebuild_sqlite",
]

# Fresh manifests read when a segment of the snapshot being read was cleaned away.
STORE_ATTEMPTS = 5
# Kafka consumers' default fetch.max.wait.ms is 500 ms; between empty polls of every
# partition the follower sleeps this long instead (each fetch returns at once).
DEFAULT_POLL_INTERVAL_S = 0.2


@dataclass
class RebuildStats:
    """What a ``catch_up`` or ``follow`` did.

    Attributes:
        changes: records applied (sets and tombstones).
        tombstones: of those, tombstones.
        keyless: records skipped because their key was null.
        from_store, from_broker: changes read straight from object storage / via brokers.
        skipped: per partition, offsets deleted by retention before they could be read
            (``[first, last]``; a compact,delete topic read from an old position).
        positions: per partition, the next offset to read afterwards.
        seconds: wall time.
    """

    changes: int = 0
    tombstones: int = 0
    keyless: int = 0
    from_store: int = 0
    from_broker: int = 0
    skipped: dict[int, list[int]] = field(default_factory=dict)
    positions: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0

    def count(self, changes: Changes, tier: str) -> None:
        self.changes += len(changes)
        self.tombstones += len(changes.tombstones)
        self.keyless += changes.keyless
        if tier == BROKER:
            self.from_broker += len(changes)
        else:
            self.from_store += len(changes)


class ChangelogReader:
    """Reads a compacted topic into sinks (see the module docstring).

    Args:
        topic: the compacted topic.
        bootstrap: ``bootstrap.servers``; None reads the remote tier only.
        remote_url, storage_options: the remote root (``remote.log.storage.url`` and its
            options) to read the cold part from directly; None reads it through brokers.
        partitions: only these partitions (default: all).
        fetch_bytes: max bytes per Fetch.
        store_chunk_bytes: bytes per ranged read of a remote segment.
        client, store: instances to use instead of building them (tests).
        clock, sleep: monotonic seconds and the pause between empty polls (tests).
        security: TLS and SASL of the connections to the brokers (None: PLAINTEXT).
    """

    def __init__(
        self,
        topic: str,
        *,
        bootstrap: str | None = None,
        remote_url: str | None = None,
        storage_options: dict[str, Any] | None = None,
        partitions: Iterable[int] | None = None,
        fetch_bytes: int = DEFAULT_FETCH_BYTES,
        store_chunk_bytes: int = DEFAULT_STORE_CHUNK_BYTES,
        client: LogClient | None = None,
        store: RemoteStore | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        security: ClientSecurity | None = None,
    ) -> None:
        if bootstrap is None and client is None and remote_url is None and store is None:
            raise ValueError("give bootstrap servers, a remote URL, or both")
        self.topic = topic
        self._own_client = client is None and bootstrap is not None
        if client is None and bootstrap is not None:
            client = LogClient(bootstrap, client_id="tierlog-changelog", security=security)
        if store is None and remote_url is not None:
            store = open_store(remote_url, storage_options)
        self.broker = None if client is None else BrokerTier(client, topic, fetch_bytes=fetch_bytes)
        self.store = (
            None if store is None else StoreTier(store, topic, chunk_bytes=store_chunk_bytes)
        )
        self._partitions = None if partitions is None else sorted(set(partitions))
        self.clock = clock
        self.sleep = sleep
        self._positions: dict[int, int] = {}

    def close(self) -> None:
        if self._own_client and self.broker is not None:
            self.broker.client.close()

    def __enter__(self) -> ChangelogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- catching up ---------------------------------------------------------------------

    def catch_up(self, sink: Sink) -> RebuildStats:
        """Apply every change from the sink's positions to the log end as of now (the
        remote end when there is no broker).

        Raises:
            ChangelogMismatchError: the sink holds another topic's state, or is ahead of
                the log (the topic was truncated or recreated).
            ChangelogReadError, ClientError, RemoteStorageError: reading failed; what was
                applied before stays applied (a SQLite sink resumes after it).
        """
        started = self.clock()
        stats = RebuildStats()
        partitions = self._partition_list()
        manifests = self._manifests(partitions)
        topic_id = self._topic_id(manifests)
        positions = sink.start(self.topic, topic_id)
        bounds = self._bounds(partitions, manifests)
        for partition in partitions:
            start, end = bounds[partition]
            position = positions.get(partition)
            if position is None:
                position = start
            elif position > end:
                raise ChangelogMismatchError(
                    f"{self.topic}-{partition}: the sink has applied offsets up to "
                    f"{position - 1} but the log ends at {end} (truncated or recreated); "
                    "rebuild into a fresh sink"
                )
            elif position < start:
                log.warning(
                    "%s-%d: offsets %d..%d were deleted by retention before they were read",
                    self.topic, partition, position, start - 1,
                )  # fmt: skip
                stats.skipped[partition] = [position, start - 1]
                position = start
            position = self._read_partition(
                sink, partition, position, end, manifests.get(partition), stats
            )
            self._positions[partition] = position
            stats.positions[partition] = position
        stats.seconds = self.clock() - started
        return stats

    def _read_partition(
        self,
        sink: Sink,
        partition: int,
        position: int,
        end: int,
        manifest: Manifest | None,
        stats: RebuildStats,
    ) -> int:
        if self.store is not None and manifest is not None:
            position, manifest = self._read_store(sink, manifest, position, stats)
        if self.broker is not None:
            remote = manifest if self.store is not None else None
            for chunk in _broker_from_remote_end(self.broker, partition, remote, position, end):
                position = self._apply(sink, chunk, position, stats)
        if position < end and self.broker is None:
            # Remote only: nothing past the remote end; the position stays at it.
            position = max(position, end)
            sink.apply(empty_changes(partition, position))
        return position

    def _read_store(
        self, sink: Sink, manifest: Manifest, position: int, stats: RebuildStats
    ) -> tuple[int, Manifest]:
        """The committed remote segments from ``position``: the position after them and
        the manifest read last.

        The leader's cleaner may replace segments of the snapshot being read and delete
        the old objects (after ``file.delete.delay.ms``). The replacement covers the same
        offsets with the same latest value per key, so reading goes on from the position
        in a fresh manifest. (As with any Kafka consumer of a compacted topic, a reader
        that takes longer than ``delete.retention.ms`` may miss a tombstone.)
        """
        assert self.store is not None
        for attempt in range(STORE_ATTEMPTS):
            try:
                for chunk in self.store.read(manifest, position):
                    position = self._apply(sink, chunk, position, stats)
                return position, manifest
            except RemoteResourceNotFoundError:
                if attempt == STORE_ATTEMPTS - 1:
                    raise
                log.info(
                    "%s-%d: a remote segment was replaced while reading at offset %d; "
                    "reading on from the new manifest",
                    self.topic, manifest.partition, position,
                )  # fmt: skip
                manifest = self.store.manifest(manifest.partition)
        raise AssertionError("unreachable")  # pragma: no cover

    def _apply(self, sink: Sink, chunk: Chunk, position: int, stats: RebuildStats) -> int:
        if chunk.next_offset <= position and not chunk.data:
            return position
        if chunk.data:
            changes = decode_changes(chunk.data, chunk.partition, position)
        else:
            changes = empty_changes(chunk.partition, chunk.next_offset)
        sink.apply(changes)
        stats.count(changes, chunk.tier)
        return max(position, changes.next_offset)

    # -- following -----------------------------------------------------------------------

    def follow(
        self,
        sink: Sink,
        *,
        timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
    ) -> RebuildStats:
        """Catch up, then keep applying new records until ``stop()`` is true or
        ``timeout_s`` has passed (at least one is needed, so a caller always ends).

        Raises:
            ValueError: no stop condition, or no broker to follow.
            As ``catch_up``.
        """
        if timeout_s is None and stop is None:
            raise ValueError("follow needs timeout_s or stop")
        if self.broker is None:
            raise ValueError("follow reads new records from the brokers: give bootstrap")
        started = self.clock()
        deadline = None if timeout_s is None else started + timeout_s
        stats = self.catch_up(sink)
        while not (stop is not None and stop()) and (deadline is None or self.clock() < deadline):
            moved = False
            for partition, position in sorted(self._positions.items()):
                try:
                    chunk = self.broker.fetch(partition, position)
                except ClientError as exc:
                    if exc.error != ErrorCode.offset_out_of_range:
                        raise
                    # Retention or truncation under a follower: catch_up sorts out which.
                    stats = _merged(stats, self.catch_up(sink))
                    moved = True
                    break
                if chunk.next_offset > position:
                    new_position = self._apply(sink, chunk, position, stats)
                    self._positions[partition] = new_position
                    stats.positions[partition] = new_position
                    moved = True
            if not moved:
                self.sleep(poll_interval_s)
        stats.seconds = self.clock() - started
        return stats

    # -- partitions, bounds, identity ----------------------------------------------------

    def _partition_list(self) -> list[int]:
        if self._partitions is not None:
            return self._partitions
        if self.broker is not None:
            return self.broker.partitions()
        assert self.store is not None
        return self.store.partitions()

    def _manifests(self, partitions: Sequence[int]) -> dict[int, Manifest]:
        if self.store is None:
            return {}
        out = {}
        broker_id = self.broker.topic_id() if self.broker is not None else str(ZERO_UUID)
        for partition in partitions:
            manifest = self.store.manifest(partition)
            stored = str(manifest.topic_id)
            if str(ZERO_UUID) not in (broker_id, stored) and stored != broker_id:
                # Left by a deleted topic of the same name: none of it is this topic's.
                continue
            out[partition] = manifest
        return out

    def _topic_id(self, manifests: dict[int, Manifest]) -> str:
        if self.broker is not None:
            return self.broker.topic_id()
        ids = {str(m.topic_id) for m in manifests.values()} - {str(ZERO_UUID)}
        return ids.pop() if len(ids) == 1 else str(ZERO_UUID)

    def _bounds(
        self, partitions: list[int], manifests: dict[int, Manifest]
    ) -> dict[int, tuple[int, int]]:
        if self.broker is not None:
            return self.broker.bounds(partitions)
        out = {}
        for partition in partitions:
            manifest = manifests.get(partition)
            end = 0 if manifest is None else StoreTier.end(manifest)
            start = 0 if manifest is None else min(manifest.log_start_offset, end)
            out[partition] = (start, end)
        return out


def _broker_from_remote_end(
    broker: BrokerTier, partition: int, manifest: Manifest | None, position: int, end: int
) -> Iterator[Chunk]:
    """The leader's chunks from ``position``, or from the remote end when the store tier
    has read below it: the boundary is fixed by the one manifest snapshot read, so no
    offset is read twice or skipped (``tierlog.spark.planning`` does the same)."""
    if manifest is not None:
        position = max(position, StoreTier.end(manifest))
    return broker.read(partition, position, end)


def _merged(a: RebuildStats, b: RebuildStats) -> RebuildStats:
    out = RebuildStats(
        a.changes + b.changes,
        a.tombstones + b.tombstones,
        a.keyless + b.keyless,
        a.from_store + b.from_store,
        a.from_broker + b.from_broker,
        {**a.skipped, **b.skipped},
        {**a.positions, **b.positions},
        a.seconds,
    )
    return out


# -- one call each -------------------------------------------------------------------------


def rebuild_dict(
    topic: str,
    *,
    key_decoder: Decoder | None = None,
    value_decoder: Decoder | None = None,
    **reader_options: Any,
) -> dict[Any, Any]:
    """The topic's current state as a dict: ``key -> value`` of every key not deleted.

    ``reader_options`` are ``ChangelogReader``'s (``bootstrap``, ``remote_url``...).
    """
    sink = DictSink(key_decoder=key_decoder, value_decoder=value_decoder)
    with ChangelogReader(topic, **reader_options) as reader:
        reader.catch_up(sink)
    return dict(sink.data)


def rebuild_sqlite(
    database: str | Path,
    topic: str,
    *,
    table: str = "changelog",
    key_decoder: Decoder | None = None,
    value_decoder: Decoder | None = None,
    follow_s: float | None = None,
    **reader_options: Any,
) -> RebuildStats:
    """Bring the SQLite table ``table`` in ``database`` up to date with the topic (from
    where it stopped), then follow it for ``follow_s`` seconds when given."""
    with (
        SqliteSink(
            database, table=table, key_decoder=key_decoder, value_decoder=value_decoder
        ) as sink,
        ChangelogReader(topic, **reader_options) as reader,
    ):
        if follow_s:
            return reader.follow(sink, timeout_s=follow_s)
        return reader.catch_up(sink)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tierlog.compaction.changelog``: rebuild (and follow) into SQLite; prints
    the stats as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("topic")
    parser.add_argument("--sqlite", required=True, help="database file")
    parser.add_argument("--table", default="changelog")
    parser.add_argument("--bootstrap-server", dest="bootstrap")
    parser.add_argument("--remote-url", help="read the cold tier straight from here")
    parser.add_argument("--follow-seconds", type=float)
    parser.add_argument("--fetch-bytes", type=int, default=DEFAULT_FETCH_BYTES)
    args = parser.parse_args(argv)
    stats = rebuild_sqlite(
        args.sqlite,
        args.topic,
        table=args.table,
        follow_s=args.follow_seconds,
        bootstrap=args.bootstrap,
        remote_url=args.remote_url,
        fetch_bytes=args.fetch_bytes,
    )
    print(json.dumps(asdict(stats), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
