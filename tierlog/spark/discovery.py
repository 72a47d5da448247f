"""What a query reads: its partitions, their manifests and their offset bounds (driver side).

The broker (``LogClient``) answers topics, partitions and offsets; the object store answers
manifests. With ``tierlog.tiers=remote`` there is no broker: partitions are the
``<topic>-<n>`` directories under the remote root and offsets come from the manifests
(earliest = remote log start, latest = remote end, or for read_committed the remote tier's
own last stable offset, ``remote_lso``), timestamps from remote time indexes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tierlog.client import EARLIEST, LATEST, ClientError, LogClient
from tierlog.client.log_client import READ_COMMITTED, READ_UNCOMMITTED
from tierlog.records.producer_snapshot import CorruptSnapshotError
from tierlog.remote.api import CorruptRemoteDataError, RemoteResourceNotFoundError, RemoteStore
from tierlog.remote.manifest import ZERO_UUID, Manifest, check_topic, segments_for_timestamp
from tierlog.remote.registry import open_store
from tierlog.remote.segment_reader import RemoteSegmentReader
from tierlog.spark.options import OffsetBound, SourceOptions
from tierlog.spark.planning import OffsetRange, remote_end
from tierlog.spark.remote_lso import remote_last_stable_offset

TopicPartition = tuple[str, int]


class SourceError(Exception):
    """The query cannot be planned or read as asked (missing topic, data loss...)."""


class Discovery:
    """Planning-time lookups for one query; ``close()`` when done.

    Args:
        options: the parsed source options.
        client: a ``LogClient`` to use instead of one built from the options (tests).
        store: a remote store to use instead of one built from the options (tests).
    """

    def __init__(
        self,
        options: SourceOptions,
        *,
        client: LogClient | None = None,
        store: RemoteStore | None = None,
    ) -> None:
        self.options = options
        self.client = client
        if self.client is None and options.bootstrap_servers and not options.remote_only:
            self.client = LogClient(
                options.bootstrap_servers,
                client_id="tierlog-spark",
                security=options.client_security(),
            )
        self.store = store
        if self.store is None and options.remote_url:
            self.store = open_store(options.remote_url, options.storage_options)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def __enter__(self) -> Discovery:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- partitions ----------------------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        """The subscribed partitions, sorted.

        Raises:
            SourceError: a subscribed topic does not exist.
        """
        opts = self.options
        if opts.assign:
            return sorted(opts.assign)
        if opts.subscribe_pattern is not None:
            topics = [t for t in self._all_topics() if opts.topic_matches(t)]
        else:
            topics = list(opts.subscribe)
        out: list[TopicPartition] = []
        for topic in topics:
            parts = self._partitions_of(topic)
            if not parts and opts.subscribe_pattern is None:
                where = self.store.url if opts.remote_only and self.store else "the cluster"
                raise SourceError(f"topic {topic!r} has no partition in {where}")
            out.extend((topic, p) for p in parts)
        return sorted(out)

    def _all_topics(self) -> list[str]:
        if self.client is not None:
            return self.client.topics()
        return sorted({topic for topic, _ in self._listed()})

    def _partitions_of(self, topic: str) -> list[int]:
        if self.client is not None:
            try:
                return self.client.partitions(topic)
            except ClientError as exc:
                raise SourceError(str(exc)) from exc
        check_topic(topic)
        return [partition for _, partition in self._listed(topic)]

    def _listed(self, topic: str | None = None) -> list[tuple[str, int]]:
        """The store's partitions (of ``topic``); none when its root does not exist."""
        assert self.store is not None
        try:
            return self.store.list_partitions(topic)
        except RemoteResourceNotFoundError:
            return []

    # -- manifests and offsets -----------------------------------------------------------

    def manifests(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, Manifest | None]:
        """Each partition's manifest now (None for every partition without a store)."""
        if self.store is None:
            return dict.fromkeys(partitions)
        partitions = list(partitions)
        if self.client is not None:
            # Topic ids, to tell this topic's manifest from a deleted namesake's; the
            # metadata partitions() just read already has them.
            unknown = {t for t, _ in partitions if self.client.topic_id(t) == ZERO_UUID}
            if unknown:
                self.client.refresh(unknown)
        out: dict[TopicPartition, Manifest | None] = {}
        for tp in partitions:
            manifest: Manifest | None = self.store.read_manifest(*tp)
            topic_id = self.client.topic_id(tp[0]) if self.client is not None else ZERO_UUID
            stored_id = manifest.topic_id if manifest is not None else ZERO_UUID
            if ZERO_UUID not in (topic_id, stored_id) and stored_id != topic_id:
                # Left by a deleted topic of the same name, not yet cleaned up by the
                # broker: none of it is this topic's; read everything from the leader.
                manifest = None
            out[tp] = manifest
        return out

    def earliest_latest(
        self, partitions: list[TopicPartition], manifests: dict[TopicPartition, Manifest | None]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Log start and end offset of each partition (remote-only: of its remote tier).
        The end is the last stable offset for read_committed (Kafka's ``endOffsets`` of a
        read_committed consumer, which Spark's Kafka source uses): the leader's, or with no
        broker the remote tier's own (``remote_lso``), so that neither a batch read nor a
        micro-batch passes a transaction whose marker is not remote yet.

        Raises:
            SourceError: a remote producer snapshot is corrupt, or fails the CRC-32C the
                manifest recorded for it (read_committed, remote-only).
        """
        if self.client is None:
            earliest = {}
            latest = {}
            for tp in partitions:
                manifest = manifests.get(tp)
                end = remote_end(manifest)
                earliest[tp] = start = min(manifest.log_start_offset if manifest else 0, end)
                if self.options.read_committed and manifest is not None:
                    end = max(start, self._remote_lso(manifest, start))
                latest[tp] = end
            return earliest, latest
        answer = self._list_offsets({tp: EARLIEST for tp in partitions})
        earliest = dict(answer)
        latest = self._list_offsets(
            {tp: LATEST for tp in partitions},
            isolation_level=READ_COMMITTED if self.options.read_committed else READ_UNCOMMITTED,
        )
        return earliest, latest

    def _remote_lso(self, manifest: Manifest, floor: int) -> int:
        assert self.store is not None
        try:
            return remote_last_stable_offset(self.store, manifest, floor)
        except (CorruptSnapshotError, CorruptRemoteDataError) as exc:
            raise SourceError(
                f"{manifest.topic}-{manifest.partition}: {exc}; a read_committed read of the "
                "remote tier alone needs it to know where the open transactions begin"
            ) from None

    def _list_offsets(
        self, wanted: dict[TopicPartition, int], isolation_level: int = READ_UNCOMMITTED
    ) -> dict[TopicPartition, int]:
        assert self.client is not None
        try:
            return self.client.list_offsets(wanted, isolation_level=isolation_level)
        except ClientError as exc:
            raise SourceError(str(exc)) from exc

    def resolve(
        self,
        bound: OffsetBound,
        partitions: list[TopicPartition],
        manifests: dict[TopicPartition, Manifest | None],
        earliest: dict[TopicPartition, int],
        latest: dict[TopicPartition, int],
        *,
        starting: bool,
    ) -> dict[TopicPartition, int]:
        """``bound`` as one offset per partition, within ``[earliest, latest]``.

        Raises:
            SourceError: an explicit offset below the log start with failOnDataLoss, or a
                starting timestamp no record reaches with the "error" strategy.
        """
        out: dict[TopicPartition, int] = {}
        if bound.kind in ("earliest", "latest"):
            source = earliest if bound.kind == "earliest" else latest
            return {tp: source[tp] for tp in partitions}
        if bound.kind == "offsets":
            for tp in partitions:
                value = bound.offsets.get(tp, EARLIEST if starting else LATEST)
                if value == EARLIEST:
                    out[tp] = earliest[tp]
                elif value == LATEST:
                    out[tp] = latest[tp]
                else:
                    out[tp] = self._clamp(tp, value, earliest[tp], latest[tp])
            return out
        stamps = (
            dict.fromkeys(partitions, bound.timestamp)
            if bound.kind == "timestamp"
            else {tp: bound.offsets[tp] for tp in partitions if tp in bound.offsets}
        )
        found = self._offsets_for_times(stamps, manifests)
        for tp in partitions:
            if tp not in stamps:
                out[tp] = earliest[tp] if starting else latest[tp]
            elif found.get(tp, -1) >= 0:
                out[tp] = max(earliest[tp], min(found[tp], latest[tp]))
            elif starting and self.options.timestamp_strategy == "error":
                raise SourceError(
                    f"{tp[0]}-{tp[1]} has no record at or after timestamp {stamps[tp]} "
                    "(startingOffsetsByTimestampStrategy=latest starts at the end instead)"
                )
            else:
                out[tp] = latest[tp]
        return out

    def _clamp(self, tp: TopicPartition, offset: int, earliest: int, latest: int) -> int:
        if offset < earliest:
            if self.options.fail_on_data_loss:
                raise SourceError(
                    f"{tp[0]}-{tp[1]}: offset {offset} is below the log start {earliest} "
                    "(deleted by retention); failOnDataLoss=false starts at the log start"
                )
            return earliest
        return min(offset, latest)

    def offsets_for_times(
        self,
        stamps: Mapping[TopicPartition, int],
        manifests: Mapping[TopicPartition, Manifest | None],
    ) -> dict[TopicPartition, int]:
        """Each partition's first offset whose timestamp is at or after its stamp (-1:
        none): from the broker, or with none from the remote tier."""
        return self._offsets_for_times(dict(stamps), dict(manifests))

    def _offsets_for_times(
        self, stamps: dict[TopicPartition, int], manifests: dict[TopicPartition, Manifest | None]
    ) -> dict[TopicPartition, int]:
        if not stamps:
            return {}
        if self.client is not None:
            return self._list_offsets(stamps)
        out = {}
        for tp, stamp in stamps.items():
            out[tp] = self._remote_offset_for_time(manifests.get(tp), stamp)
        return out

    def _remote_offset_for_time(self, manifest: Manifest | None, stamp: int) -> int:
        if manifest is None or self.store is None:
            return -1
        for segment in segments_for_timestamp(manifest, stamp):
            hit = RemoteSegmentReader(self.store, segment).offset_for_timestamp(
                stamp, manifest.log_start_offset
            )
            if hit is not None:
                return hit[0]
        return -1

    def ranges(
        self, starting: OffsetBound, ending: OffsetBound
    ) -> tuple[list[OffsetRange], dict[TopicPartition, Manifest | None]]:
        """The batch query's ranges and the manifests they were planned with."""
        partitions = self.partitions()
        manifests = self.manifests(partitions)
        earliest, latest = self.earliest_latest(partitions, manifests)
        start = self.resolve(starting, partitions, manifests, earliest, latest, starting=True)
        end = self.resolve(ending, partitions, manifests, earliest, latest, starting=False)
        return [
            OffsetRange(t, p, start[t, p], max(start[t, p], end[t, p])) for t, p in partitions
        ], manifests
