"""Transaction markers: writing them here (WriteTxnMarkers) and sending them everywhere.

``write_markers`` is the partition leader's side (Kafka's
``KafkaApis.handleWriteTxnMarkersRequest``): each marker is appended as a control batch,
acks=all, to every listed partition this broker leads; on ``__consumer_offsets`` the
group coordinator then (once the marker is replicated) commits or drops the producer's
pending transactional offsets; and
any KIP-890 verification of that producer on the partition is cancelled (a produce
verified before the marker must not open a new transaction after it).

``MarkerSender`` is the coordinator's side (Kafka's ``TransactionMarkerChannelManager``):
it groups a transaction's partitions by leader, writes the local ones directly and sends
WriteTxnMarkers to the others, and retries what failed (leader moves, unavailable replicas)
until every partition has its marker or this broker stops coordinating the transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import kio.schema.write_txn_markers.v1.request as wtm

from tierlog.broker.errors import error_code
from tierlog.broker.txn.log_codec import topic_partitions
from tierlog.broker.txn.peers import PeerChannels, PeerUnavailableError
from tierlog.broker.txn.verification import VerificationGuards
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build

if TYPE_CHECKING:
    from tierlog.broker.group import GroupCoordinator
    from tierlog.broker.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)
E = ErrorCode

OFFSETS_TOPIC = "__consumer_offsets"
TopicPartition = tuple[str, int]

# Kafka's marker channel retries these; the transaction stays open on the partition until
# a marker lands, so it must keep trying.
RETRIABLE = frozenset(
    {
        E.not_leader_or_follower,
        E.not_enough_replicas,
        E.not_enough_replicas_after_append,
        E.request_timed_out,
        E.kafka_storage_error,
        E.unknown_server_error,
        E.coordinator_load_in_progress,
        E.network_exception,
    }
)
# The marker can never be written (topic deleted; a newer coordinator or producer epoch
# already wrote past it): the partition is done with, as in Kafka.
GIVE_UP = frozenset(
    {E.unknown_topic_or_partition, E.invalid_producer_epoch, E.transaction_coordinator_fenced}
)
MARKER_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Marker:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


async def write_markers(
    replicas: ReplicaManager,
    groups: GroupCoordinator | None,
    guards: VerificationGuards,
    markers: Iterable[Marker],
    timeout_s: float = MARKER_TIMEOUT_S,
) -> dict[tuple[int, TopicPartition], int]:
    """Append each marker to each of its partitions here; returns
    (producer id, partition) -> error code, 0 once the marker is replicated (acks=all)."""
    results: dict[tuple[int, TopicPartition], int] = {}
    waits: list[tuple[tuple[int, TopicPartition], bool, Any]] = []
    for marker in markers:
        for topic, index in marker.partitions:
            key = (marker.producer_id, (topic, index))
            guards.clear(topic, index, marker.producer_id)
            try:
                info = replicas.append_marker(
                    topic,
                    index,
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.coordinator_epoch,
                    marker.commit,
                )
            except Exception as exc:
                results[key] = error_code(exc)
                continue
            partition = replicas.partition(topic, index)
            if partition is None:
                results[key] = E.not_leader_or_follower
                continue
            wait = partition.wait_for_replication(info.last_offset + 1, timeout_s)
            waits.append((key, marker.commit, wait))
            results[key] = 0
    if waits:
        codes = await asyncio.gather(*(wait for _, _, wait in waits))
        for (key, commit, _), code in zip(waits, codes, strict=True):
            results[key] = int(code)
            producer_id, (topic, index) = key
            if code == 0 and topic == OFFSETS_TOPIC and groups is not None:
                # Only once the marker is replicated (Kafka too): a new leader without it
                # would not show these offsets.
                groups.complete_txn(index, producer_id, commit)
    return results


def write_txn_markers_request(markers: Iterable[Marker]) -> wtm.WriteTxnMarkersRequest:
    request: wtm.WriteTxnMarkersRequest = build(
        wtm.WriteTxnMarkersRequest,
        {
            "markers": [
                {
                    "producer_id": m.producer_id,
                    "producer_epoch": m.producer_epoch,
                    "transaction_result": m.commit,
                    "topics": [
                        {"name": topic, "partition_indexes": partitions}
                        for topic, partitions in topic_partitions(m.partitions).items()
                    ],
                    "coordinator_epoch": m.coordinator_epoch,
                }
                for m in markers
            ]
        },
    )
    return request


# (topic, partition) -> its leader's broker id; -1 while it has none, None once the topic
# is gone.
LeaderOf = Callable[[str, int], "int | None"]
LocalWrite = Callable[[list[Marker]], "Any"]


class MarkerSender:
    """Args:
    broker_id: this broker (its partitions are written directly).
    leader_of: where each partition's leader is now.
    local_write: ``write_markers`` bound to this broker's replicas.
    peers: connections to the other brokers.
    """

    def __init__(
        self,
        broker_id: int,
        leader_of: LeaderOf,
        local_write: LocalWrite,
        peers: PeerChannels,
    ) -> None:
        self.broker_id = broker_id
        self.leader_of = leader_of
        self.local_write = local_write
        self.peers = peers

    async def send(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: frozenset[TopicPartition],
        still_coordinator: Callable[[], bool],
    ) -> None:
        remaining = set(partitions)
        delay = 0.02
        while remaining and still_coordinator():
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):
                leader = self.leader_of(*tp)
                if leader is None:
                    log.info("%s-%d is gone: no marker for producer %d", *tp, producer_id)
                    remaining.discard(tp)
                elif leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            outcomes = await asyncio.gather(
                *(
                    self._send_to(
                        leader,
                        Marker(producer_id, producer_epoch, coordinator_epoch, commit, tuple(tps)),
                    )
                    for leader, tps in by_leader.items()
                )
            )
            for codes in outcomes:
                for tp, code in codes.items():
                    if code == 0:
                        remaining.discard(tp)
                    elif code in GIVE_UP:
                        log.warning(
                            "marker for producer %d on %s-%d not written (error %d): given up",
                            producer_id,
                            *tp,
                            code,
                        )
                        remaining.discard(tp)
            if remaining:
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)

    async def _send_to(self, leader: int, marker: Marker) -> dict[TopicPartition, int]:
        if leader == self.broker_id:
            results = await self.local_write([marker])
            return {tp: code for (_, tp), code in results.items()}
        try:
            answer: Any = await self.peers.request(leader, write_txn_markers_request([marker]))
        except PeerUnavailableError as exc:
            log.debug("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return dict.fromkeys(marker.partitions, int(E.network_exception))
        codes: dict[TopicPartition, int] = {}
        for result in answer.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    codes[(topic.name, int(p.partition_index))] = int(p.error_code)
        return codes
