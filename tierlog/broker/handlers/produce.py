"""Produce: append each partition's batches as leader and answer with the offsets.

acks=0 gets no answer at all (kafka-wire.md); acks=1 is answered after the local append;
acks=all waits until each partition's high watermark passes its batch, for all partitions
at once and at most the request's ``timeout`` (Kafka's DelayedProduce): in a cluster,
until the followers in the ISR have fetched it (``Partition.wait_for_replication``, after
the ISR was checked against ``min.insync.replicas``); where the leader is the only ISR
member (single-node mode, or every follower dropped out) the high watermark has passed
the batch when the append returns, and the answer goes out at once. Internal topics
(``__consumer_offsets``) refuse clients' batches with INVALID_TOPIC_EXCEPTION, as Kafka's
ReplicaManager does.

Transactional batches need the request's transactional id (else the whole request is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as in Kafka) and, for a producer's first batch on a
partition in a transaction, the coordinator's word that the partition was added to it
(KIP-890 part 1, ``tierlog.broker.txn.verification``). A check the coordinator could not
answer (loading, moved, unreachable) is answered NOT_ENOUGH_REPLICAS, which every producer
retries, as Kafka's ReplicaManager does (KAFKA-15459, KAFKA-16386): the coordinator codes
themselves are not Produce errors, and a client may take them as fatal. With
``transaction.partition.verification.enable=false`` there is no check, as in Kafka.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from tierlog.broker.authorization import current_context
from tierlog.broker.errors import error_code
from tierlog.broker.network.quotas import PRODUCER_BYTE_RATE
from tierlog.broker.replication.replica_manager import INTERNAL_TOPICS
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import millis
from tierlog.protocol.produce_encoder import PartitionAnswer, encode_produce_response
from tierlog.records.header import HEADER_SIZE, Attr, parse_header
from tierlog.records.validate import RequestBudget

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

# Verification answers that only mean "ask again": Kafka's handleProduceAppend turns them
# into NOT_ENOUGH_REPLICAS, a retriable Produce error every client knows.
_VERIFY_RETRIABLE = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.network_exception,
    }
)


async def handle_produce(services: BrokerServices, request: Request) -> bytes | None:
    body: Any = request.body
    replicas = services.replicas
    acks = body.acks
    refuse: int | None = None
    if acks not in (0, 1, -1):
        refuse = ErrorCode.invalid_required_acks
    elif body.transactional_id is None and _has_transactional_batches(body):
        refuse = ErrorCode.transactional_id_authorization_failed
    authz = services.authz
    denied: Mapping[str, int] = {}
    if authz.enabled and refuse is None:
        # Write on the transactional id (for a transactional producer), Write on each topic.
        topic_data = body.topic_data
        topics = (
            (topic_data[0].name,)  # most requests: no comprehension's frame
            if len(topic_data) == 1
            else tuple(t.name for t in topic_data)
        )
        code, denied = authz.produce(request, body.transactional_id, topics)
        refuse = code or None
    verified: dict[tuple[str, int], tuple[int, object | None]] = {}
    verifying = (
        refuse is None
        and not denied
        and body.transactional_id is not None
        and services.transactions is not None
        and services.transactions.verification_enabled
    )
    if verifying:
        verified = await _verify_transactional(services, body)
    responses: list[tuple[str, list[PartitionAnswer]]] = []
    # acks=all partitions whose high watermark has not passed their batch yet:
    # (their topic's answers, the answer's position, the wait).
    waits: list[tuple[list[PartitionAnswer], int, Coroutine[Any, Any, int]]] = []
    timeout_s = max(0, millis(body.timeout)) / 1000
    budget = RequestBudget()  # what this request's checks may cost, all partitions
    for topic in body.topic_data:
        answers: list[PartitionAnswer] = []
        for data in topic.partition_data:
            index = data.index
            if refuse is not None:
                answers.append((index, refuse, -1, -1, -1))
                continue
            if topic.name in denied:
                answers.append((index, denied[topic.name], -1, -1, -1))
                continue
            if data.records is None:
                answers.append((index, ErrorCode.invalid_record, -1, -1, -1))
                continue
            if verified:
                code = verified.get((topic.name, index), (0, None))[0]
                if code:
                    if code in _VERIFY_RETRIABLE:
                        code = ErrorCode.not_enough_replicas
                    answers.append((index, code, -1, -1, -1))
                    continue
            try:
                records = data.records
                hosted = replicas.partition(topic.name, index)
                if (
                    hosted is not None
                    and hosted.is_leader
                    and topic.name not in INTERNAL_TOPICS  # refused by append_records
                ):
                    # Checked here rather than in the append (which takes them as they
                    # are): what needs decoding (a compacted topic's keys, a block that
                    # could be a bomb) is decoded off the event loop, within the request's
                    # budget (issue 10, item 6; issue 20, item 10).
                    records = hosted.local.validate(records, budget=budget)
                    if records.needs_decoding or records.needs_recompression:
                        # Re-encoding in the topic's compression.type too (Kafka's
                        # LogValidator): CPU-bound, so on the decode pool's thread.
                        await services.decoder.decode(records, budget)
                if verifying:
                    # Right before the append, with no await between: the transaction may
                    # have ended while this request waited (verification, key checks).
                    code = _transaction_ended(services, topic.name, index, data, verified)
                    if code:
                        answers.append((index, code, -1, -1, -1))
                        continue
                partition, info = replicas.append_records(topic.name, index, records, acks)
            except Exception as exc:
                answers.append((index, error_code(exc), -1, -1, -1))
                continue
            answers.append(
                (
                    index,
                    0,
                    info.first_offset,
                    info.log_append_time,
                    partition.local.log_start_offset,
                )
            )
            required = info.last_offset + 1
            if acks == -1 and partition.high_watermark < required:
                wait = partition.wait_for_replication(required, timeout_s)
                waits.append((answers, len(answers) - 1, wait))
        responses.append((topic.name, answers))
    if waits:
        codes = await asyncio.gather(*(wait for _, _, wait in waits))
        for (answers, position, _), code in zip(waits, codes, strict=True):
            if code:
                # Kafka keeps the append's offsets and sets the error (DelayedProduce).
                index, _, base_offset, append_time, log_start = answers[position]
                answers[position] = (index, code, base_offset, append_time, log_start)
    throttle_ms = 0
    quotas = services.quotas
    if quotas is not None and quotas.active():
        throttle_ms = quotas.record(
            PRODUCER_BYTE_RATE, request.client_id, request.size, current_context().principal.name
        )
        quotas.throttle("Produce", throttle_ms)
    if acks == 0:
        return None
    # Laid out by hand: the generic kio writer cost more than the append (profiled).
    return encode_produce_response(
        request.api_version, request.correlation_id, responses, throttle_time_ms=throttle_ms
    )


def _first_header(records: Any) -> Any:
    if records is None or len(records) < HEADER_SIZE:
        return None
    try:
        return parse_header(records)
    except Exception:
        return None  # the append rejects it with the right code


def _open_here(services: BrokerServices, topic: str, index: int, header: Any) -> bool:
    """Whether the producer has its transaction open in this partition's log already."""
    hosted = services.replicas.partition(topic, index)
    if hosted is None:
        return False
    entry = hosted.local.producer_state.last_entry(header.producer_id)
    return (
        entry is not None
        and entry.producer_epoch == header.producer_epoch
        and entry.current_txn_first_offset >= 0
    )


def _transaction_ended(
    services: BrokerServices,
    topic: str,
    index: int,
    data: Any,
    verified: dict[tuple[str, int], tuple[int, object | None]],
) -> int:
    """INVALID_TXN_STATE when a transactional batch would open a transaction nobody
    verified (Kafka's log-side VerificationGuard check): its check's guard was cleared by a
    marker, or, for a batch that needed none because the transaction was open here, a
    marker has closed it since. 0 when the append may go ahead."""
    header = _first_header(data.records)
    if header is None or not header.attributes & Attr.TRANSACTIONAL:
        return 0
    hosted = services.replicas.partition(topic, index)
    if hosted is None or not hosted.is_leader:
        return 0  # the append answers NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION
    if _open_here(services, topic, index, header):
        return 0
    transactions = services.transactions
    token = verified.get((topic, index), (0, None))[1]
    if (
        token is not None
        and transactions is not None
        and transactions.guards.holds(topic, index, header.producer_id, token)
    ):
        return 0
    return int(ErrorCode.invalid_txn_state)


def _has_transactional_batches(body: Any) -> bool:
    # Runs for every produce request: one byte per partition, not a parsed header (the
    # attributes' low byte is at offset 22).
    for topic in body.topic_data:
        for data in topic.partition_data:
            records = data.records
            if records is not None and len(records) > 22 and records[22] & Attr.TRANSACTIONAL:
                return True
    return False


async def _verify_transactional(
    services: BrokerServices, body: Any
) -> dict[tuple[str, int], tuple[int, object | None]]:
    """The partitions whose transactional batch opens the producer's transaction there,
    checked with the coordinator: (topic, partition) -> (error code, guard token)."""
    transactions = services.transactions
    wanted: dict[tuple[str, int], tuple[int, int]] = {}
    for topic in body.topic_data:
        for data in topic.partition_data:
            header = _first_header(data.records)
            if header is None or not header.attributes & Attr.TRANSACTIONAL:
                continue
            hosted = services.replicas.partition(topic.name, data.index)
            if hosted is None or not hosted.is_leader:
                continue  # the append answers NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC
            if _open_here(services, topic.name, data.index, header):
                continue  # already in the producer's open transaction here
            wanted[(topic.name, data.index)] = (header.producer_id, header.producer_epoch)
    if not wanted or transactions is None:
        return {}
    return await transactions.verify_produce(body.transactional_id, wanted)
