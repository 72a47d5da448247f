"""Transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, DescribeTransactions, ListTransactions and DescribeProducers, and the
transaction side of FindCoordinator.

The work is the transaction coordinator's (``tierlog.broker.txn``) and the partitions'; these
functions translate each request version to its calls and the results back. Error codes
follow the request version: a producer fenced by a newer instance is PRODUCER_FENCED from
the versions that know it (KIP-588) and INVALID_PRODUCER_EPOCH before.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from tierlog.broker.group.placement import partition_for
from tierlog.broker.handlers.listener_endpoints import address_for_client
from tierlog.broker.handlers.metadata import request_response_type
from tierlog.broker.txn.id_pattern import InvalidIdPatternError, compile_id_pattern
from tierlog.broker.txn.log_codec import STATE_BY_NAME, topic_partitions
from tierlog.broker.txn.markers import OFFSETS_TOPIC, Marker
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, field, millis
from tierlog.security.acl import ResourceType
from tierlog.security.authz_table import When

TXN_ID, TOPIC = ResourceType.TRANSACTIONAL_ID, ResourceType.TOPIC

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices
    from tierlog.broker.txn import Transactions

E = ErrorCode
# DescribeTransactions' start time is a non-null timestamp; Kafka sends -1 for "none", which
# kio represents as the millisecond before the epoch.
NO_START_TIME = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) - datetime.timedelta(
    milliseconds=1
)


def _answer(request: Request, data: dict[str, Any]) -> Any:
    return build(request_response_type(request), {"throttle_time": 0, **data})


def _fenced(request: Request, first_version_with_producer_fenced: int) -> int:
    if request.api_version >= first_version_with_producer_fenced:
        return E.producer_fenced
    return E.invalid_producer_epoch


def _txns(services: BrokerServices) -> Transactions:
    assert services.transactions is not None
    return services.transactions


async def transaction_coordinator_for(services: BrokerServices, key: str) -> dict[str, Any]:
    """FindCoordinator with key type 1: the leader of the id's ``__transaction_state``
    partition."""
    if not key:
        return {"error_code": E.invalid_request, "error_message": "empty transactional id"}
    node = await _txns(services).state_topic.coordinator_node(key)
    address = address_for_client(node) if node is not None else None  # KIP-103
    if node is None or address is None:
        return {"error_code": E.coordinator_not_available, "error_message": None}
    return {
        "error_code": 0,
        "error_message": None,
        "node_id": node.broker_id,
        "host": address[0],
        "port": address[1],
    }


async def handle_init_producer_id(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    answer: dict[str, Any] = {"error_code": 0, "producer_id": -1, "producer_epoch": -1}
    # Write on the transactional id; an idempotent producer needs IdempotentWrite on the
    # cluster, or Write on some topic (KIP-679).
    condition = When.IDEMPOTENT if body.transactional_id is None else When.TRANSACTIONAL
    refused = services.authz.request_error(request, {TXN_ID: body.transactional_id}, condition)
    if refused:
        return _answer(request, {**answer, "error_code": refused})
    if body.transactional_id is None:
        # An idempotent producer gets a fresh id every time (epoch 0), as from Kafka.
        answer.update(producer_id=await services.producer_ids.next_id(), producer_epoch=0)
        return _answer(request, answer)
    transactions = _txns(services)
    if not transactions.state_topic.exists:
        await transactions.state_topic.coordinator_node(body.transactional_id)
    result = await transactions.coordinator.init_producer_id(
        body.transactional_id,
        millis(body.transaction_timeout),
        int(field(body, "producer_id", -1)),
        int(field(body, "producer_epoch", -1)),
        fenced=_fenced(request, 4),
    )
    answer.update(
        error_code=result.error,
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
    return _answer(request, answer)


def _partition_errors(
    services: BrokerServices, topics: dict[str, list[int]]
) -> dict[tuple[str, int], int]:
    """Partitions that cannot join a transaction (unknown ones), by Kafka's rule."""
    errors = {}
    for topic, indexes in topics.items():
        known = services.cluster.topic(topic)
        for index in indexes:
            if known is None or index not in known.replicas:
                errors[(topic, index)] = int(E.unknown_topic_or_partition)
    return errors


async def _add_partitions(
    services: BrokerServices,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    topics: dict[str, list[int]],
    *,
    verify_only: bool,
    fenced: int,
) -> dict[tuple[str, int], int]:
    wanted = [(topic, index) for topic, indexes in topics.items() for index in indexes]
    coordinator = _txns(services).coordinator
    if verify_only:
        return coordinator.verify(transactional_id, producer_id, epoch, wanted)
    unknown = _partition_errors(services, topics)
    if unknown:
        # One bad partition fails the request; the others were not attempted (Kafka).
        return {tp: unknown.get(tp, int(E.operation_not_attempted)) for tp in wanted}
    code = await coordinator.add_partitions(
        transactional_id, producer_id, epoch, wanted, fenced=fenced
    )
    return dict.fromkeys(wanted, code)


def _topic_results(codes: dict[tuple[str, int], int]) -> list[dict[str, Any]]:
    return [
        {
            "name": topic,
            "results_by_partition": [
                {"partition_index": index, "partition_error_code": codes[(topic, index)]}
                for index in indexes
            ],
        }
        for topic, indexes in topic_partitions(codes).items()
    ]


async def handle_add_partitions_to_txn(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    fenced = _fenced(request, 2)
    authz = services.authz
    if request.api_version <= 3:
        topics = {t.name: [int(p) for p in t.partitions] for t in body.v3_and_below_topics}
        # Write on the transactional id, then on each topic; one refusal fails the rest
        # with OPERATION_NOT_ATTEMPTED (Kafka).
        wanted = [(t, i) for t, indexes in topics.items() for i in indexes]
        txn_id = body.v3_and_below_transactional_id
        refused = authz.request_error(request, {TXN_ID: txn_id}, When.CLIENT_VERSION)
        denied = {} if refused else authz.denied(request, TOPIC, topics, When.CLIENT_VERSION)
        if refused or denied:
            codes = {
                tp: refused or denied.get(tp[0], int(E.operation_not_attempted)) for tp in wanted
            }
            return _answer(request, {"results_by_topic_v3_and_below": _topic_results(codes)})
        codes = await _add_partitions(
            services,
            body.v3_and_below_transactional_id,
            int(body.v3_and_below_producer_id),
            int(body.v3_and_below_producer_epoch),
            topics,
            verify_only=False,
            fenced=fenced,
        )
        return _answer(request, {"results_by_topic_v3_and_below": _topic_results(codes)})
    # v4+: brokers batch several transactions, verify-only (KIP-890): ClusterAction.
    refused = authz.request_error(request, None, When.BROKER_VERSION)
    if refused:
        return _answer(request, {"error_code": refused, "results_by_transaction": []})
    results = []
    for txn in body.transactions:
        topics = {t.name: [int(p) for p in t.partitions] for t in txn.topics}
        codes = await _add_partitions(
            services,
            txn.transactional_id,
            int(txn.producer_id),
            int(txn.producer_epoch),
            topics,
            verify_only=bool(txn.verify_only),
            fenced=fenced,
        )
        results.append(
            {"transactional_id": txn.transactional_id, "topic_results": _topic_results(codes)}
        )
    return _answer(request, {"error_code": 0, "results_by_transaction": results})


async def handle_add_offsets_to_txn(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    names = {TXN_ID: body.transactional_id, ResourceType.GROUP: body.group_id}
    refused = services.authz.request_error(request, names)
    if refused:
        return _answer(request, {"error_code": refused})
    transactions = _txns(services)
    offsets_topic = services.offsets_topic
    try:
        await offsets_topic.ensure_created()
    except Exception:
        return _answer(request, {"error_code": E.coordinator_not_available})
    partition = partition_for(body.group_id, offsets_topic.partitions)
    code = await transactions.coordinator.add_partitions(
        body.transactional_id,
        int(body.producer_id),
        int(body.producer_epoch),
        [(OFFSETS_TOPIC, partition)],
        fenced=_fenced(request, 2),
    )
    return _answer(request, {"error_code": code})


async def handle_end_txn(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    refused = services.authz.request_error(request, {TXN_ID: body.transactional_id})
    if refused:
        return _answer(request, {"error_code": refused})
    code = await _txns(services).coordinator.end_txn(
        body.transactional_id,
        int(body.producer_id),
        int(body.producer_epoch),
        bool(body.committed),
        fenced=_fenced(request, 2),
    )
    return _answer(request, {"error_code": code})


async def handle_write_txn_markers(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    markers = [
        Marker(
            int(m.producer_id),
            int(m.producer_epoch),
            int(m.coordinator_epoch),
            bool(m.transaction_result),
            tuple((t.name, int(p)) for t in m.topics for p in t.partition_indexes),
        )
        for m in body.markers
    ]
    refused = services.authz.request_error(request)  # Alter, else ClusterAction
    if refused:
        codes = {(m.producer_id, tp): refused for m in markers for tp in m.partitions}
    else:
        codes = await _txns(services).write_markers(markers)
    return build(
        request_response_type(request),
        {
            "markers": [
                {
                    "producer_id": m.producer_id,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [
                                {
                                    "partition_index": index,
                                    "error_code": codes[(m.producer_id, (topic, index))],
                                }
                                for index in indexes
                            ],
                        }
                        for topic, indexes in topic_partitions(m.partitions).items()
                    ],
                }
                for m in markers
            ]
        },
    )


async def handle_describe_transactions(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    coordinator = _txns(services).coordinator
    authz = services.authz
    denied = authz.denied(request, TXN_ID, body.transactional_ids)
    states = []
    for transactional_id in body.transactional_ids:
        code, md = coordinator.describe(transactional_id)
        if transactional_id in denied:
            code, md = denied[transactional_id], None
        state: dict[str, Any] = {
            "error_code": code,
            "transactional_id": transactional_id,
            "transaction_state": "",
            "transaction_timeout": 0,
            "transaction_start_time": NO_START_TIME,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        if md is not None:
            state.update(
                transaction_state=md.state.display_name,
                transaction_timeout=md.timeout_ms,
                transaction_start_time=md.start_ms if md.start_ms >= 0 else NO_START_TIME,
                producer_id=md.producer_id,
                producer_epoch=md.producer_epoch,
                # Topics the principal may not Describe are left out (Kafka).
                topics=[
                    {"topic": topic, "partitions": indexes}
                    for topic, indexes in topic_partitions(md.partitions).items()
                    if authz.visible(request, TOPIC, [topic])
                ],
            )
        states.append(state)
    return _answer(request, {"transaction_states": states})


async def handle_list_transactions(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    # v2 (KIP-1152): ids matching a regular expression; empty or null means all.
    pattern_text = field(body, "transactional_id_pattern", None)
    id_pattern = None
    if pattern_text:
        try:
            id_pattern = compile_id_pattern(pattern_text)
        except InvalidIdPatternError:
            return _answer(
                request,
                {
                    "error_code": E.invalid_regular_expression,
                    "unknown_state_filters": [],
                    "transaction_states": [],
                },
            )
    names = list(body.state_filters)
    unknown = [name for name in names if name not in STATE_BY_NAME]
    states = frozenset(STATE_BY_NAME[name] for name in names if name in STATE_BY_NAME)
    found = []
    if not unknown or states:
        found = _txns(services).coordinator.list(
            states or None,
            frozenset(int(p) for p in body.producer_id_filters) or None,
            int(field(body, "duration_filter", -1)),
            id_pattern,
        )
        visible = set(services.authz.visible(request, TXN_ID, (m.transactional_id for m in found)))
        found = [md for md in found if md.transactional_id in visible]
    return _answer(
        request,
        {
            "error_code": 0,
            "unknown_state_filters": unknown,
            "transaction_states": [
                {
                    "transactional_id": md.transactional_id,
                    "producer_id": md.producer_id,
                    "transaction_state": md.state.display_name,
                }
                for md in found
            ],
        },
    )


async def handle_describe_producers(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    denied = services.authz.denied(request, TOPIC, (t.name for t in body.topics))
    topics = []
    for topic in body.topics:
        answers = []
        for index in topic.partition_indexes:
            answer: dict[str, Any] = {
                "partition_index": index,
                "error_code": 0,
                "active_producers": [],
            }
            if topic.name in denied:
                answer["error_code"] = denied[topic.name]
                answers.append(answer)
                continue
            partition = services.replicas.partition(topic.name, int(index))
            # Any replica answers from its own producer state, as Kafka's
            # Partition.activeProducerState: the admin client sends to the leader unless
            # told a broker id (kafka-transactions describe-producers --broker-id, and
            # find-hanging --broker-id asks one broker for every partition it hosts).
            if partition is None or not partition.hosted:
                known = services.cluster.topic(topic.name)
                answer["error_code"] = (
                    E.not_leader_or_follower
                    if known is not None and int(index) in known.replicas
                    else E.unknown_topic_or_partition
                )
            else:
                answer["active_producers"] = [
                    {
                        "producer_id": entry.producer_id,
                        "producer_epoch": entry.producer_epoch,
                        "last_sequence": entry.last_seq,
                        "last_timestamp": entry.last_timestamp,
                        "coordinator_epoch": entry.coordinator_epoch,
                        "current_txn_start_offset": entry.current_txn_first_offset,
                    }
                    for entry in partition.local.producer_state.producers.values()
                ]
            answers.append(answer)
        topics.append({"name": topic.name, "partitions": answers})
    return _answer(request, {"topics": topics})
