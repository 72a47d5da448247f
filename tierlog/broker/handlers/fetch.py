"""Fetch: long-polling reads sent with sendfile.

A fetch reads every partition once; if fewer than ``min_bytes`` came back and ``max_wait``
has not passed, it waits until one of its partitions' high watermark moves, then reads
again (Kafka's DelayedFetch). Which tier serves an offset is decided below, in the
partition's ``UnifiedLog``; this module only translates the protocol.

A fetch naming a replica id (``replica_id`` below v15, ``replica_state.replica_id`` from
v15, KIP-903) comes from a follower: each partition is read with
``Partition.fetch_for_follower`` (up to the log end, recording the follower's progress),
whatever the isolation level, and a long poll waits for the leader's next append rather
than for the high watermark. A read_committed consumer reads up to the last stable offset
and is told the aborted transactions (producer id, first offset) overlapping what it got
(an empty list when none); other readers get null there (Kafka). With
``replica.selector.class`` set, a leader may answer a consumer's partition with a
preferred read replica in the consumer's rack instead of records (KIP-392,
``replica_selector.py``); every replica serves consumers' Fetch v11+ up to its high
watermark, and only the leader older ones.
Records go out as file slices (``encode_fetch_response``), never copied into Python.
Incremental fetch sessions (KIP-227, ``fetch_sessions.py``): a full fetch with epoch 0
opens one, later requests name only what changed and get only what changed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from tierlog.broker.authorization import current_context
from tierlog.broker.errors import error_code
from tierlog.broker.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    NO_SESSION,
    FetchSession,
    SessionPartition,
    partition_key,
)
from tierlog.broker.network.quotas import CONSUMER_BYTE_RATE
from tierlog.broker.replication.partition import Partition, PartitionError, ReadResult
from tierlog.broker.replication.replica_selector import ReplicaView, preferred_read_replica
from tierlog.broker.replication.replication_quota import (
    ReplicationQuota,
    leader_share,
    leader_throttles,
)
from tierlog.local.segment import FileSlice
from tierlog.protocol import (
    AbortedTransaction,
    EncodedFetchResponse,
    FetchPartitionData,
    FetchTopicData,
    Request,
    encode_fetch_response,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import field, millis
from tierlog.security.acl import ResourceType
from tierlog.security.authz_table import When

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

READ_COMMITTED = 1


class _Wanted:
    __slots__ = (
        "answer",
        "current_leader_epoch",
        "offset",
        "partition",
        "partition_max_bytes",
        "redirect",
    )

    def __init__(
        self,
        answer: FetchPartitionData,
        partition: Partition | None,
        offset: int,
        partition_max_bytes: int,
        current_leader_epoch: int,
    ) -> None:
        self.answer = answer
        self.partition = partition
        self.offset = offset
        self.partition_max_bytes = partition_max_bytes
        self.current_leader_epoch = current_leader_epoch
        # KIP-392: the follower this consumer should read the partition from; -1: here.
        self.redirect = -1


def _requested(services: BrokerServices, request: Request) -> list[SessionPartition]:
    """The partitions a Fetch names, in order, with topic names resolved (v13+ names
    topics by id; an unknown id keeps the name "")."""
    body: Any = request.body
    by_id = request.api_version >= 13
    replicas = services.replicas
    out = []
    for topic in body.topics:
        topic_id = topic.topic_id if by_id else None
        name = (replicas.topic_name(topic.topic_id) or "") if by_id else str(topic.topic)
        for p in topic.partitions:
            out.append(
                SessionPartition(
                    name,
                    topic_id,
                    int(p.partition),
                    int(p.fetch_offset),
                    int(p.partition_max_bytes),
                    int(field(p, "current_leader_epoch", -1)),
                )
            )
    return out


def _plan(
    services: BrokerServices, entries: Iterable[SessionPartition], by_id: bool
) -> tuple[list[FetchTopicData], list[_Wanted]]:
    """One answer per partition, grouped by topic in the order first named."""
    replicas = services.replicas
    topics: dict[object, FetchTopicData] = {}
    wanted: list[_Wanted] = []
    for entry in entries:
        key = entry.topic_id if by_id else entry.topic
        answer_topic = topics.get(key)
        if answer_topic is None:
            answer_topic = topics[key] = (
                FetchTopicData(topic_id=entry.topic_id)
                if by_id
                else FetchTopicData(topic=entry.topic)
            )
            answer_topic.partitions = []
        answer = FetchPartitionData(partition_index=entry.partition)
        partition = replicas.partition(entry.topic, entry.partition) if entry.topic else None
        if partition is None:
            answer.error_code = (
                ErrorCode.unknown_topic_id
                if by_id and not entry.topic
                else ErrorCode.unknown_topic_or_partition
            )
        assert isinstance(answer_topic.partitions, list)
        answer_topic.partitions.append(answer)
        wanted.append(
            _Wanted(
                answer,
                partition,
                entry.fetch_offset,
                entry.max_bytes,
                entry.current_leader_epoch,
            )
        )
    return list(topics.values()), wanted


def _authorize(
    services: BrokerServices,
    request: Request,
    entries: list[SessionPartition],
    wanted: list[_Wanted],
    from_follower: bool,
) -> None:
    """Kafka's checks: a follower's fetch needs ClusterAction (else every partition is
    TOPIC_AUTHORIZATION_FAILED, as KafkaApis answers), a consumer's Read on each topic; a
    refused partition is not read (and a topic not describable is not told apart from
    one that does not exist: the same code either way)."""
    authz = services.authz
    denied: dict[str, int] = {}
    if from_follower:
        if authz.request_error(request, None, When.FOLLOWER):
            denied = {e.topic: int(ErrorCode.topic_authorization_failed) for e in entries}
    else:
        named = [e.topic for e in entries if e.topic]
        denied = authz.denied(request, ResourceType.TOPIC, named, When.CONSUMER)
    if not denied:
        return
    for entry, w in zip(entries, wanted, strict=True):
        code = denied.get(entry.topic)
        if code:
            w.answer.error_code = code
            w.partition = None


# Fetch v10 is the first a consumer that reads zstd sends (KIP-110).
ZSTD_FETCH_VERSION = 10


def _refuse_zstd_topics(wanted: list[_Wanted]) -> None:
    """Kafka's answer to a consumer's Fetch below v10 for a topic whose compression.type is
    zstd: UNSUPPORTED_COMPRESSION_TYPE, and no records (KafkaApis checks the topic's config,
    not the batches; followers are not asked)."""
    for w in wanted:
        partition = w.partition
        if partition is not None and partition.local.config.compression_type == "zstd":
            w.answer.error_code = ErrorCode.unsupported_compression_type
            w.partition = None


# How one partition is read: (wanted, byte limit, first with data?) -> ReadResult.
PartitionRead = Callable[[_Wanted, int, bool], Awaitable[ReadResult]]


def consumer_read(read_committed: bool, *, from_followers: bool = True) -> PartitionRead:
    """A consumer's read: up to the high watermark (or LSO), from whichever tier holds the
    offset (the partition's ``UnifiedLog`` decides). ``from_followers``: a follower
    answers too (Fetch v11+, KIP-392); older fetches are for the leader only, as in
    Kafka, so a client with stale metadata is sent to the new leader at once."""

    async def read(w: _Wanted, limit: int, first: bool) -> ReadResult:
        assert w.partition is not None
        if not from_followers and not w.partition.is_leader:
            raise PartitionError(
                ErrorCode.not_leader_or_follower,
                f"broker {w.partition.broker_id} does not lead {w.partition}",
            )
        return await w.partition.read(
            w.offset,
            limit,
            read_committed=read_committed,
            min_one_batch=first,
            current_leader_epoch=w.current_leader_epoch,
        )

    return read


def follower_read(replica_id: int, quota: ReplicationQuota | None = None) -> PartitionRead:
    """A follower's read: up to the log end, local tier only; the answer's high watermark
    is the leader's after this fetch was recorded. A partition listed in its topic's
    ``leader.replication.throttled.replicas`` is held to ``quota`` while the follower is
    outside the ISR (``replication_quota``); it is still read with a limit of 0 when the
    quota is used up, so that the follower's progress is recorded as Kafka does."""

    async def read(w: _Wanted, limit: int, first: bool) -> ReadResult:
        partition = w.partition
        assert partition is not None
        throttled = quota is not None and leader_throttles(
            partition.local.config, partition.index, partition.broker_id
        )
        if quota is not None and throttled:
            limit, first = leader_share(
                quota,
                throttled=True,
                in_sync=replica_id in partition.state.isr,
                limit=limit,
                first=first,
            )
        result = partition.fetch_for_follower(
            replica_id, w.offset, limit, w.current_leader_epoch, min_one_batch=first
        )
        if quota is not None and throttled:
            quota.record(result.size)
        return result

    return read


async def _read_all(
    wanted: list[_Wanted], max_bytes: int, read: PartitionRead, *, follower: bool
) -> tuple[int, bool]:
    """Fill each answer; returns (bytes read, whether to answer at once: a partition has
    an error or a preferred read replica)."""
    total = 0
    errors = False
    for w in wanted:
        answer = w.answer
        partition = w.partition
        if partition is None:
            errors = True
            continue
        answer.error_code = 0
        if w.redirect >= 0:
            # No records: the client goes to the preferred replica, and at once (Kafka
            # answers a fetch with a redirection without waiting for min_bytes).
            answer.preferred_read_replica = w.redirect
            answer.high_watermark = partition.high_watermark
            answer.last_stable_offset = partition.last_stable_offset
            answer.log_start_offset = partition.log.earliest_offset()
            errors = True
            continue
        if isinstance(answer.records, FileSlice):
            # A long poll reads again: the earlier slice is dropped unsent, so its lease on
            # the segment file goes back now (the server releases only what it sends).
            answer.records.release()
        answer.records = b""
        answer.aborted_transactions = None
        # Kafka: the first partition with data may exceed the limits by one batch, so a
        # consumer always makes progress; later ones stop at the response limit.
        limit = min(w.partition_max_bytes, max(0, max_bytes - total))
        try:
            result = await read(w, limit, total == 0)
        except Exception as exc:
            answer.error_code = error_code(exc)
            answer.high_watermark = partition.high_watermark
            answer.last_stable_offset = partition.last_stable_offset
            # A follower copies the leader's local log only, so it is told where that starts.
            answer.log_start_offset = (
                partition.local.log_start_offset if follower else partition.log.earliest_offset()
            )
            errors = True
            continue
        answer.high_watermark = result.high_watermark
        answer.last_stable_offset = result.last_stable_offset
        answer.log_start_offset = result.log_start_offset
        if result.aborted_transactions is not None:
            answer.aborted_transactions = [
                AbortedTransaction(txn.producer_id, txn.first_offset)
                for txn in result.aborted_transactions
            ]
        answer.records = result.records if result.records is not None else b""
        total += result.size
    return total, errors


def replica_id_of(request: Request) -> int:
    """The fetching replica's broker id, -1 for a consumer (KIP-903 moved it into
    ``replica_state`` in v15)."""
    body: Any = request.body
    if request.api_version >= 15:
        return int(body.replica_state.replica_id)
    return int(field(body, "replica_id", -1))


async def handle_fetch(services: BrokerServices, request: Request) -> EncodedFetchResponse:
    body: Any = request.body
    by_id = request.api_version >= 13
    replica_id = replica_id_of(request)
    sessions = services.fetch_sessions
    session_id = field(body, "session_id", NO_SESSION)
    epoch = field(body, "session_epoch", FINAL_EPOCH)
    session: FetchSession | None = None
    requested = _requested(services, request)
    if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
        # A full fetch; it closes the session it names (KIP-227).
        if session_id != NO_SESSION and sessions is not None:
            sessions.remove(session_id)
        entries: Iterable[SessionPartition] = requested
    else:
        session = sessions.get(session_id) if sessions is not None and session_id else None
        code = 0
        if session is None:
            code = ErrorCode.fetch_session_id_not_found
        elif epoch != session.epoch:
            code = ErrorCode.invalid_fetch_session_epoch
        if session is None or code:
            return encode_fetch_response(
                request.api_version, request.correlation_id, [], error_code=code
            )
        _update_session(session, requested, body.forgotten_topics_data, by_id)
        entries = list(session.partitions.values())
    entries = list(entries)
    topics, wanted = _plan(services, entries, by_id)
    from_follower = replica_id >= 0
    if services.authz.enabled:
        _authorize(services, request, entries, wanted, from_follower)
    if not from_follower and request.api_version < ZSTD_FETCH_VERSION:
        _refuse_zstd_topics(wanted)
    read_committed = field(body, "isolation_level", 0) == READ_COMMITTED
    max_bytes = field(body, "max_bytes", 2**31 - 1)
    max_bytes = min(max_bytes, services.config["fetch.max.bytes"])
    min_bytes = body.min_bytes
    max_wait_s = max(0, millis(body.max_wait)) / 1000
    deadline = time.monotonic() + max_wait_s
    read = (
        follower_read(
            replica_id,
            services.replication_quotas.leader if services.replication_quotas else None,
        )
        if from_follower
        else consumer_read(read_committed, from_followers=request.api_version >= 11)
    )
    selector = services.config["replica.selector.class"]
    if selector and not from_follower and request.api_version >= 11:
        _choose_read_replicas(services, selector, field(body, "rack_id", ""), wanted)
    while True:
        total, errors = await _read_all(wanted, max_bytes, read, follower=from_follower)
        remaining = deadline - time.monotonic()
        lifecycle = services.lifecycle
        if total >= min_bytes or errors or remaining <= 0 or lifecycle.stopping:
            break
        # Consumers wait for the high watermark, followers for the next append.
        waiters = [
            w.partition.waiter(log_end=from_follower) for w in wanted if w.partition is not None
        ]
        if not waiters:
            break
        _, pending = await asyncio.wait(
            [*waiters, lifecycle.stop_waiter()],
            timeout=remaining,
            return_when=asyncio.FIRST_COMPLETED,
        )
        for future in pending:
            future.cancel()
    throttle_ms = 0
    quotas = services.quotas
    if quotas is not None and not from_follower:
        # Followers replicate under no client quota (Kafka throttles them separately).
        throttle_ms = quotas.record(
            CONSUMER_BYTE_RATE, request.client_id, total, current_context().principal.name
        )
        quotas.throttle("Fetch", throttle_ms)
    answered_session = NO_SESSION
    if session is not None:
        topics = _changed_only(topics, wanted, entries)
        # Partitions that got records go to the back, so that a response filled to its
        # byte limit does not starve the same partitions every time (Kafka does this too).
        for entry, w in zip(entries, wanted, strict=True):
            if w.answer.records:
                session.partitions.move_to_end(
                    partition_key(entry.topic, entry.topic_id, entry.partition)
                )
        session.advance()
        answered_session = session.session_id
    elif epoch == INITIAL_EPOCH and sessions is not None and request.api_version >= 7:
        for entry, w in zip(requested, wanted, strict=True):
            _note_answer(entry, w.answer)
        opened = sessions.open(requested, privileged=from_follower)
        answered_session = opened.session_id if opened is not None else NO_SESSION
    return encode_fetch_response(
        request.api_version,
        request.correlation_id,
        topics,
        throttle_time_ms=throttle_ms,
        session_id=answered_session,
    )


def _update_session(
    session: FetchSession, requested: list[SessionPartition], forgotten: Any, by_id: bool
) -> None:
    """An incremental request's partitions are added or updated (offset, byte limit,
    leader epoch; what the client was last told stays), its forgotten ones removed."""
    for entry in requested:
        key = partition_key(entry.topic, entry.topic_id, entry.partition)
        kept = session.partitions.get(key)
        if kept is None:
            session.partitions[key] = entry
        else:
            kept.fetch_offset = entry.fetch_offset
            kept.max_bytes = entry.max_bytes
            kept.current_leader_epoch = entry.current_leader_epoch
    for topic in forgotten:
        name = str(topic.topic_id) if by_id else str(topic.topic)
        for index in topic.partitions:
            session.partitions.pop((name, int(index)), None)


def _note_answer(entry: SessionPartition, answer: FetchPartitionData) -> bool:
    return entry.must_answer(
        bool(answer.records),
        answer.error_code,
        answer.high_watermark,
        answer.last_stable_offset,
        answer.log_start_offset,
        answer.preferred_read_replica >= 0,
    )


def _changed_only(
    topics: list[FetchTopicData], wanted: list[_Wanted], entries: Iterable[SessionPartition]
) -> list[FetchTopicData]:
    """An incremental answer: only the partitions with something new for the client."""
    keep = {
        id(w.answer)
        for entry, w in zip(entries, wanted, strict=True)
        if _note_answer(entry, w.answer)
    }
    out = []
    for topic in topics:
        partitions = [p for p in topic.partitions if id(p) in keep]
        if partitions:
            topic.partitions = partitions
            out.append(topic)
    return out


def _choose_read_replicas(
    services: BrokerServices, selector: str, client_rack: str, wanted: list[_Wanted]
) -> None:
    """KIP-392 on the leader: mark the partitions a follower in the consumer's rack
    should serve (``replica_selector``)."""
    if not client_rack:
        return
    brokers = {b.broker_id: b.rack for b in services.cluster.brokers()}
    for w in wanted:
        partition = w.partition
        if partition is None or not partition.is_leader:
            continue
        leader = ReplicaView(
            partition.broker_id,
            brokers.get(partition.broker_id),
            partition.local.log_end_offset,
            partition.now_ms(),
        )
        followers = []
        for replica_id in partition.replicas:
            progress = partition.follower(replica_id)
            if progress is None or replica_id not in brokers:
                continue
            followers.append(
                ReplicaView(
                    replica_id,
                    brokers[replica_id],
                    progress.log_end_offset,
                    progress.last_caught_up_time_ms,
                )
            )
        w.redirect = preferred_read_replica(selector, client_rack, leader, followers, w.offset)
