"""The partitions this broker hosts, kept in line with the coordination metadata, and the
record operations handlers ask of them (append, delete records).

Composed of: ``metadata_applier`` (when and how much of a metadata change is applied: the
queues and the drain in slices), ``topic_admin`` (create, delete, grow topics and alter
their configs: ``ReplicaManager.admin``), ``high_watermarks`` (Kafka's
``replication-offset-checkpoint``) and ``replica_assignment`` (where new replicas go). What
stays here is the partition map and what applying the metadata does to it: host a
partition, become leader or follower, drop it, set aside stray logs.

Topic configuration: a topic's effective ``LogConfig`` is the broker's ``log.*`` defaults
overlaid with the topic's overrides (Kafka names), validated before anything is stored.
Not thread-safe: used from the broker's event loop.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tierlog.broker.coordination.api import (
    AlterPartitionError,
    CoordinationError,
    Coordinator,
    MetadataChange,
    PartitionState,
    TopicMetadata,
)
from tierlog.broker.counters import BrokerMetrics
from tierlog.broker.replication.high_watermarks import (
    read_high_watermarks,
    write_high_watermarks,
)
from tierlog.broker.replication.leadership import LeadershipChanges
from tierlog.broker.replication.metadata_applier import MetadataApplier
from tierlog.broker.replication.partition import Partition
from tierlog.broker.replication.partition_limits import (
    PartitionLimits,
    fd_limit,
)
from tierlog.broker.replication.partition_map import PartitionMap
from tierlog.broker.replication.topic_admin import TopicAdmin
from tierlog.broker.replication.topic_error import (
    INVALID_CONFIG,
    INVALID_TOPIC_EXCEPTION,
    NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION,
    TopicError,
)
from tierlog.local.config import LogConfig
from tierlog.local.log import AppendInfo, Log
from tierlog.local.log_manager import (
    LogManager,
    TopicPartition,
)
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.remote.unified_log import UnifiedLog
from tierlog.util.clock import Clock, SystemClock

if TYPE_CHECKING:
    from tierlog.broker.replication.replica_fetcher import ReplicaFetcherManager

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        coordinator: Coordinator,
        default_log_config: LogConfig,
        remote: RemoteLogManager | None = None,
        *,
        remote_storage_system_enabled: bool = True,
        replica_lag_time_max_ms: int = 30_000,
        clock: Clock | None = None,
        keep_strays: bool = False,
        limits: PartitionLimits | None = None,
        partitions: PartitionMap | None = None,
        fetchers: ReplicaFetcherManager | None = None,
        leadership: LeadershipChanges | None = None,
    ) -> None:
        """Args (besides the obvious):
        partitions: the map of hosted partitions, shared with the log manager's
            ``committed_offset`` (a new one when None: tools and tests).
        fetchers: cluster mode's replica fetchers of the partitions this broker follows.
        leadership: told whenever a partition becomes leader or stops being it (the
            coordinators of the internal topics subscribe to it).
        """
        self.broker_id = broker_id
        # How many partitions this broker and the cluster may hold (CreateTopics,
        # CreatePartitions); Kafka's defaults, no limit but the fd budget, when None.
        limits = limits or PartitionLimits(2**31 - 1, 2**31 - 1, fd_limit())
        # Strays (``_set_aside_strays``) are kept aside instead of removed: a single node
        # whose metadata file is new beside existing logs (moved away by its operator).
        self.keep_strays = keep_strays
        self.log_manager = log_manager
        self.coordinator = coordinator
        self.default_log_config = default_log_config
        self.remote = remote
        self.partitions = partitions if partitions is not None else PartitionMap()
        self.remote_storage_system_enabled = remote_storage_system_enabled
        self._by_id: dict[uuid.UUID, str] = {}
        self._checkpointed_high_watermarks = read_high_watermarks(self.log_manager.log_dirs)
        self.fetchers = fetchers
        self.leadership = leadership or LeadershipChanges()
        self.clock = clock or SystemClock()
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.metrics = BrokerMetrics()
        self._applier = MetadataApplier(self, self.clock)
        # CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs of topics.
        self.admin = TopicAdmin(self, coordinator, limits)

    # -- high watermarks -----------------------------------------------------------------

    def checkpoint_high_watermarks(self) -> None:
        """Write each log dir's ``replication-offset-checkpoint`` (Kafka does it every
        replica.high.watermark.checkpoint.interval.ms and at shutdown)."""
        by_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_manager.log_dirs}
        for tp, partition in self.partitions.items():
            if self.log_manager.get_log(*tp) is partition.local:
                by_dir[self.log_manager.log_dir_of(*tp)][tp] = partition.high_watermark
        write_high_watermarks(by_dir)

    # -- configuration -------------------------------------------------------------------

    def topic_config(self, overrides: Mapping[str, str]) -> LogConfig:
        """Effective config; raises TopicError(INVALID_CONFIG) naming the bad key."""
        try:
            config = self.default_log_config.with_overrides(overrides)
        except ValueError as exc:
            raise TopicError(INVALID_CONFIG, str(exc)) from None
        if config.remote_storage_enable and not self.remote_storage_system_enabled:
            # Kafka refuses it too: nothing would ever offload, so nothing local could go.
            raise TopicError(
                INVALID_CONFIG,
                "config 'remote.storage.enable': the broker's "
                "remote tier is off (remote.log.storage.system.enable=false)",
            )
        return config

    def set_default_log_config(self, config: LogConfig) -> None:
        """New broker defaults for topic configs (dynamic ``log.*`` keys, KIP-226): every
        hosted topic's logs take their effective config again at once, so a topic without
        its own override follows the new default.

        Raises:
            TopicError: INVALID_CONFIG, a topic's overrides no longer fit (left as they
                were; the others are applied).
        """
        self.default_log_config = config
        self.log_manager.default_config = config
        refused = []
        for name, topic in self.coordinator.topics().items():
            try:
                self.log_manager.update_config(name, self.topic_config(topic.configs))
            except TopicError as exc:
                refused.append(f"{name}: {exc}")
        if refused:
            raise TopicError(INVALID_CONFIG, "; ".join(refused))

    # -- metadata -> partitions ----------------------------------------------------------

    def sync(self, change: MetadataChange | None = None) -> None:
        """Host every partition the metadata assigns here and apply its state (become
        leader or follower, new ISR); drop (and delete the logs of) partitions no longer
        assigned here and topics that no longer exist. Called at start-up and after every
        metadata change, on the event loop. Without ``change`` everything, now; with it,
        what it names, in slices (``metadata_applier``)."""
        self._applier.sync(change)

    async def apply_topics(self, names: Collection[str]) -> None:
        """Apply what the metadata now says of ``names`` (this broker's own create, grow
        or delete) and return once it is done (``MetadataApplier.apply_topics``)."""
        await self._applier.apply_topics(names)

    # What the applier asks (``HostedReplicas``).

    def current_topics(self, *, reindex: bool) -> Mapping[str, TopicMetadata]:
        topics = self.coordinator.topics()
        if reindex:
            self._by_id = {t.topic_id: n for n, t in topics.items()}
        return topics

    def drop_unassigned(self, name: str, topic: TopicMetadata | None) -> None:
        for tp in [tp for tp in self.partitions if tp[0] == name]:
            if not self._assigned_here(topic, tp[1], self.partitions[tp].topic_id):
                self._drop(self.partitions[tp])

    def assigned_here(self, name: str, topic: TopicMetadata) -> Iterator[tuple[int, LogConfig]]:
        topic_config = self.topic_config(topic.configs)
        for p in sorted(topic.replicas):
            if self.broker_id in topic.replicas[p]:
                yield p, topic_config

    def apply_partition(
        self, name: str, topic: TopicMetadata | None, p: int, config: LogConfig | None
    ) -> None:
        if topic is None:
            return  # deleted: its topic change drops it
        partition = self.partitions.get((name, p))
        if config is None and partition is not None:
            config = partition.local.config
        if not self._sync_partition(name, topic, p, config) and partition is not None:
            self._drop(partition)

    def apply_all(self) -> None:
        """Everything, now: deletions first, then hosting, then strays.

        Deletions come first because they free space and need none: with the disk full,
        hosting a partition fails with ENOSPC, and a DeleteTopics whose sync tried to host
        ``__consumer_offsets`` first answered KAFKA_STORAGE_ERROR and freed nothing, the
        one way out of a full disk closed (issue 20, item 9). One topic that cannot be
        hosted does not stop the others either; the first failure is raised at the end."""
        topics = self.current_topics(reindex=True)
        for tp, partition in list(self.partitions.items()):
            if not self._assigned_here(topics.get(tp[0]), tp[1], partition.topic_id):
                self._drop(partition)
        wanted: set[TopicPartition] = set()
        failed: set[str] = set()
        failure: Exception | None = None
        for name, topic in topics.items():
            try:
                wanted |= self._sync_topic(name, topic)
            except Exception as exc:
                failed.add(name)
                if failure is None:
                    failure = exc
                if not isinstance(exc, OSError):
                    log.exception("%s: applying its metadata failed", name)
                else:
                    log.warning("%s: cannot host its partitions: %s", name, exc)
        for tp in list(self.partitions):
            if tp not in wanted and tp[0] not in failed:
                self._drop(self.partitions[tp])
        self._set_aside_strays(topics)
        if failure is not None:
            raise failure

    def _assigned_here(self, topic: TopicMetadata | None, p: int, topic_id: uuid.UUID) -> bool:
        """Whether partition ``p`` of this topic incarnation is assigned to this broker."""
        return (
            topic is not None
            and topic.topic_id == topic_id
            and self.broker_id in topic.replicas.get(p, ())
        )

    def _set_aside_strays(self, topics: Mapping[str, TopicMetadata]) -> None:
        """Logs on disk that no hosted partition owns and the metadata does not want here:
        what a deletion or a reassignment left when the broker died in the middle of it
        or was down meanwhile (issue 20, item 5). Kafka keeps pending deletions in
        ZooKeeper until every replica has deleted; here the metadata is the record, and a
        log it does not account for is never served: set aside (``LogManager.set_aside``),
        removed, or kept when the metadata itself is new beside old logs (``keep_strays``).
        A partition of this broker whose leader is not elected yet is not a stray."""
        for tp in [tp for tp in self.log_manager.logs if tp not in self.partitions]:
            name, p = tp
            topic = topics.get(name)
            found = self.log_manager.topic_id_of(name, p)
            if topic is None:
                reason = f"topic {name!r} is not in the metadata (deleted)"
            elif found is not None and found != topic.topic_id:
                reason = (
                    f"it belongs to an earlier topic {name!r} (id {found}), deleted; the "
                    f"topic now has id {topic.topic_id}"
                )
            elif self.broker_id not in topic.replicas.get(p, ()):
                reason = f"partition {p} of {name!r} is not assigned to broker {self.broker_id}"
            else:
                continue
            try:
                self.log_manager.set_aside(name, p, reason, keep=self.keep_strays)
            except OSError as exc:
                log.error("stray log %s-%d: cannot set it aside: %s", name, p, exc)

    def _sync_topic(self, name: str, topic: TopicMetadata) -> set[TopicPartition]:
        """Host and apply every partition of ``topic`` assigned here; returns them."""
        config = self.topic_config(topic.configs)
        return {(name, p) for p in topic.replicas if self._sync_partition(name, topic, p, config)}

    def _sync_partition(
        self, name: str, topic: TopicMetadata, p: int, config: LogConfig | None
    ) -> bool:
        """Host partition ``p`` of ``topic`` if it is assigned here and has a state, and
        apply that state; False if it is not to be hosted here. ``config``: the topic's
        effective config, None to compute it."""
        replicas = topic.replicas.get(p)
        state = topic.partition_states.get(p)
        if replicas is None or self.broker_id not in replicas or state is None:
            return False  # not ours, or the controller has not elected a leader yet
        partition = self.partitions.get((name, p))
        if partition is not None and partition.topic_id != topic.topic_id:
            self._drop(partition)  # the topic was deleted and created again
            partition = None
        if config is None:
            config = self.topic_config(topic.configs)
        new = partition is None
        if partition is None:
            partition = self._host(name, topic.topic_id, p, config, state, replicas)
        elif partition.local.config != config:
            partition.local.config = config  # configs changed (AlterConfigs)
        self._apply(partition, state, replicas, new=new)
        return True

    def _host(
        self,
        name: str,
        topic_id: uuid.UUID,
        p: int,
        config: LogConfig,
        state: PartitionState,
        replicas: list[int],
    ) -> Partition:
        # With the topic id: a directory of an earlier topic of this name is never adopted.
        topic_log = self.log_manager.get_or_create_log(name, p, config, topic_id)
        topic_log.config = config
        partition = Partition(
            name,
            topic_id,
            p,
            UnifiedLog(topic_log, self.remote, name, p),
            replace(state, isr=list(state.isr)),
            self.broker_id,
            high_watermark=self._checkpointed_high_watermarks.get((name, p), 0),
            replicas=list(replicas),
            clock=self.clock,
            alter_isr=self._alter_isr,
        )
        self.partitions[(name, p)] = partition
        return partition

    def _apply(
        self, partition: Partition, state: PartitionState, replicas: list[int], *, new: bool
    ) -> None:
        """Become leader or follower as ``state`` says; a state older than the partition's
        (a lower leader epoch) changes nothing (Partition refuses it)."""
        was_leader = partition.is_leader and not new
        copy = replace(state, isr=list(state.isr))
        if state.leader == self.broker_id:
            changed = partition.make_leader(copy, list(replicas))
            if changed and self.fetchers is not None:
                self.fetchers.remove(partition)
        else:
            changed = partition.make_follower(copy, list(replicas))
            if changed and self.fetchers is not None:
                if state.leader >= 0:
                    self.fetchers.add(partition, state.leader)
                else:
                    self.fetchers.remove(partition)  # offline: nobody to follow
        if (changed or new) and was_leader != partition.is_leader:
            log.info(
                "%s: %s (leader epoch %d, ISR %s)",
                partition,
                "leader" if partition.is_leader else f"follower of {state.leader}",
                state.leader_epoch,
                state.isr,
            )
            self.leadership.publish(partition)

    def replace_local_log(self, partition: Partition, local: Log) -> None:
        """The partition's log was opened again elsewhere (moved between log dirs,
        ``log_dir_mover``): serve from it."""
        partition.replace_log(UnifiedLog(local, self.remote, partition.topic, partition.index))

    def _drop(self, partition: Partition) -> None:
        """Stop hosting a replica (its topic is gone, or it moved away) and delete its log."""
        tp = (partition.topic, partition.index)
        if self.fetchers is not None:
            self.fetchers.remove(partition)
        partition.stop_hosting()
        del self.partitions[tp]
        self.log_manager.delete_log(*tp)

    async def _alter_isr(self, partition: Partition, isr: list[int]) -> PartitionState | None:
        """AlterPartition for ``partition`` (the leader's ISR change), through the
        coordination metadata: the controller in cluster mode."""
        state = partition.state
        try:
            stored = await self.coordinator.alter_partition(
                partition.topic,
                partition.index,
                self.broker_id,
                state.leader_epoch,
                isr,
                state.partition_epoch,
            )
            self.metrics.record_isr_change(len(state.isr), len(stored.isr))
            return stored
        except AlterPartitionError as exc:
            log.info("%s: ISR change to %s refused: %s", partition, isr, exc)
            return None
        except CoordinationError as exc:
            log.warning("%s: ISR change to %s failed: %s (will retry)", partition, isr, exc)
            return None

    def maybe_shrink_isr(self) -> None:
        """Periodic (Kafka: every replica.lag.time.max.ms / 2): each partition this broker
        leads drops followers that have not caught up for replica.lag.time.max.ms."""
        now = self.clock.milliseconds()
        for partition in list(self.partitions.values()):
            if partition.is_leader:
                partition.maybe_shrink_isr(now, self.replica_lag_time_max_ms)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._by_id.get(topic_id)

    # -- record operations ---------------------------------------------------------------

    def _hosted(self, topic: str, index: int, *, internal_allowed: bool) -> Partition:
        if topic in INTERNAL_TOPICS and not internal_allowed:
            # Kafka's ReplicaManager.appendToLocalLog: only the broker itself writes to
            # internal topics; a client's batch in __consumer_offsets would corrupt every
            # group's committed offsets.
            raise TopicError(INVALID_TOPIC_EXCEPTION, f"cannot write to internal topic {topic}")
        partition = self.partitions.get((topic, index))
        if partition is None:
            known = self.coordinator.topic(topic)
            if known is not None and index in known.replicas:
                # Another broker's partition: the client's metadata is stale (Kafka answers
                # so too, and clients refresh their metadata and retry).
                raise TopicError(
                    NOT_LEADER_OR_FOLLOWER,
                    f"broker {self.broker_id} has no replica of {topic}-{index}",
                )
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {topic}-{index}")
        return partition

    def append_records(
        self,
        topic: str,
        index: int,
        records: bytes | memoryview,
        acks: int,
        *,
        internal_allowed: bool = False,
    ) -> tuple[Partition, AppendInfo]:
        """Append a producer's batches to a partition this broker leads.
        ``internal_allowed`` is the broker's own coordinators writing (Kafka's
        ``AppendOrigin.COORDINATOR``): transactional offset commits carry no sequence."""
        partition = self._hosted(topic, index, internal_allowed=internal_allowed)
        info = partition.append(
            records,
            acks,
            partition.local.config.min_insync_replicas,
            coordinator=internal_allowed,
        )
        if not internal_allowed:
            self.metrics.bytes_in += info.size
            self.metrics.messages_in += info.record_count
        return partition, info

    def append_marker(
        self,
        topic: str,
        index: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
    ) -> AppendInfo:
        """Write a COMMIT or ABORT marker to a partition this broker leads (WriteTxnMarkers;
        internal topics too: transactional offset commits end with a marker in
        ``__consumer_offsets``). Wait for acks=all with the partition's
        ``wait_for_replication(info.last_offset + 1, ...)``.

        Raises:
            TopicError: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (no replica).
            PartitionError: NOT_LEADER_OR_FOLLOWER (a follower here).
            ProducerStateError: INVALID_PRODUCER_EPOCH (47), TRANSACTION_COORDINATOR_FENCED
                (52); each carries its ``code``.
        """
        partition = self._hosted(topic, index, internal_allowed=True)
        return partition.append_marker(producer_id, producer_epoch, coordinator_epoch, commit)

    async def delete_records(self, topic: str, index: int, offset: int) -> int:
        """DeleteRecords: returns the new low watermark, checkpointed at once so a crash
        cannot bring the deleted records back."""
        partition = self._hosted(topic, index, internal_allowed=False)
        low_watermark = await partition.delete_records(offset)
        self.log_manager.checkpoint()
        return low_watermark
