"""Consumer group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, TxnOffsetCommit, OffsetFetch, ListGroups, DescribeGroups and DeleteGroups.

The work is the ``GroupCoordinator``'s (``tierlog.broker.group``); these functions only
translate every request version to its calls and its results back. The classic APIs serve
classic groups and, for KIP-848's online migration, the classic members of consumer groups
alike; the consumer protocol's own APIs are ``tierlog.broker.handlers.consumer_groups``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tierlog.broker.group.placement import OFFSETS_TOPIC
from tierlog.broker.handlers.authorized_ops import authorized_operations
from tierlog.broker.handlers.listener_endpoints import address_for_client
from tierlog.broker.handlers.metadata import request_response_type
from tierlog.broker.handlers.transactions import transaction_coordinator_for
from tierlog.broker.network.connection_context import CLIENT_ADDRESS
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, field, millis
from tierlog.security.acl import ResourceType
from tierlog.security.authz_table import When

if TYPE_CHECKING:
    from tierlog.broker.group import FetchedOffset
    from tierlog.broker.services import BrokerServices

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
GROUP = ResourceType.GROUP


def _group_error(services: BrokerServices, request: Request, group_id: str) -> int:
    """The request's whole-request checks on its group (Read for the group APIs)."""
    return services.authz.request_error(request, {GROUP: group_id})


def _answer(request: Request, data: dict[str, Any]) -> Any:
    return build(request_response_type(request), {"throttle_time": 0, **data})


async def _coordinator_for(services: BrokerServices, key: str, key_type: int) -> dict[str, Any]:
    if key_type == KEY_TYPE_TRANSACTION:
        return {
            "node_id": -1,
            "host": "",
            "port": -1,
            **(await transaction_coordinator_for(services, key)),
        }
    if key_type != KEY_TYPE_GROUP:
        # Share groups (KIP-932) have no coordinator here.
        return {
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": "share groups are not supported",
            "node_id": -1,
            "host": "",
            "port": -1,
        }
    if not key:
        return {
            "error_code": ErrorCode.invalid_request,
            "error_message": "empty group id",
            "node_id": -1,
            "host": "",
            "port": -1,
        }
    leader = await services.offsets_topic.coordinator_node(key)
    # The coordinator's address on the request's listener (KIP-103); without one, it is
    # not available to this client, as in Kafka.
    address = address_for_client(leader) if leader is not None else None
    if leader is None or address is None:
        return {
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": None,
            "node_id": -1,
            "host": "",
            "port": -1,
        }
    return {
        "error_code": 0,
        "error_message": None,
        "node_id": leader.broker_id,
        "host": address[0],
        "port": address[1],
    }


async def handle_find_coordinator(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    key_type = field(body, "key_type", KEY_TYPE_GROUP)
    keys = body.coordinator_keys if request.api_version >= 4 else [body.key]
    # Describe on the group or the transactional id the key names.
    resource, condition = (
        (ResourceType.TRANSACTIONAL_ID, When.TRANSACTION_KEY)
        if key_type == KEY_TYPE_TRANSACTION
        else (GROUP, When.GROUP_KEY)
    )
    denied = services.authz.denied(request, resource, keys, condition)
    answers = []
    for key in keys:
        if key in denied:
            answer = {"error_code": denied[key], "error_message": None, "node_id": -1}
            answers.append({"key": key, **answer, "host": "", "port": -1})
        else:
            answers.append({"key": key, **(await _coordinator_for(services, key, key_type))})
    if request.api_version >= 4:
        return _answer(request, {"coordinators": answers})
    return _answer(request, answers[0])


async def handle_join_group(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    refused = _group_error(services, request, body.group_id)
    if refused:
        return _answer(
            request,
            {
                "error_code": refused,
                "generation_id": -1,
                "protocol_name": None if request.api_version >= 7 else "",
                "leader": "",
                "member_id": "",
                "members": [],
            },
        )
    session_ms = millis(body.session_timeout)
    result = await services.groups.join_group(
        body.group_id,
        body.member_id,
        request.client_id or "",
        CLIENT_ADDRESS.get(),
        session_ms,
        millis(field(body, "rebalance_timeout", session_ms)),
        body.protocol_type,
        [(p.name, p.metadata) for p in body.protocols],
        group_instance_id=field(body, "group_instance_id"),
        require_known_member_id=request.api_version >= 4,
        supports_skip_assignment=request.api_version >= 9,
        reason=field(body, "reason"),
    )
    return _answer(
        request,
        {
            "error_code": result.error,
            "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            # Non-null before v7: an empty name stands for "none".
            "protocol_name": result.protocol_name
            if request.api_version >= 7
            else (result.protocol_name or ""),
            "leader": result.leader,
            "skip_assignment": result.skip_assignment,
            "member_id": result.member_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata,
                }
                for m in result.members
            ],
        },
    )


async def handle_sync_group(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    refused = _group_error(services, request, body.group_id)
    if refused:
        return _answer(request, {"error_code": refused, "assignment": b""})
    result = await services.groups.sync_group(
        body.group_id,
        body.member_id,
        body.generation_id,
        {a.member_id: a.assignment for a in body.assignments},
        group_instance_id=field(body, "group_instance_id"),
        protocol_type=field(body, "protocol_type"),
        protocol_name=field(body, "protocol_name"),
    )
    return _answer(
        request,
        {
            "error_code": result.error,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name,
            "assignment": result.assignment,
        },
    )


async def handle_heartbeat(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    refused = _group_error(services, request, body.group_id)
    if refused:
        return _answer(request, {"error_code": refused})
    result = services.groups.heartbeat(
        body.group_id, body.member_id, body.generation_id, field(body, "group_instance_id")
    )
    return _answer(request, {"error_code": result.error})


async def handle_leave_group(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    refused = _group_error(services, request, body.group_id)
    if refused:
        return _answer(request, {"error_code": refused, "members": []})
    if request.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        members = [(body.member_id, None)]
    result = await services.groups.leave_group(body.group_id, members)
    if request.api_version < 3:
        error = result.error or (result.members[0].error if result.members else 0)
        return _answer(request, {"error_code": error})
    return _answer(
        request,
        {
            "error_code": result.error,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "error_code": m.error,
                }
                for m in result.members
            ],
        },
    )


def _commit_entries(body: Any) -> dict[tuple[str, int], tuple[int, int, str | None]]:
    """(topic, partition) -> (offset, leader epoch, metadata) of an OffsetCommit or
    TxnOffsetCommit request; the leader epoch is -1 in versions without it."""
    return {
        (t.name, p.partition_index): (
            p.committed_offset,
            field(p, "committed_leader_epoch", -1),
            p.committed_metadata,
        )
        for t in body.topics
        for p in t.partitions
    }


def _commit_topics(
    offsets: dict[tuple[str, int], Any], partitions: dict[tuple[str, int], int], error: int
) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t, p in offsets:
        topics[t].append({"partition_index": p, "error_code": partitions.get((t, p), error)})
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


async def handle_offset_commit(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    offsets = _commit_entries(body)
    refused = _group_error(services, request, body.group_id)
    if refused:
        return _answer(request, {"topics": _commit_topics(offsets, {}, refused)})
    # Read on each topic: refused partitions answer TOPIC_AUTHORIZATION_FAILED.
    denied = services.authz.denied(request, ResourceType.TOPIC, (t for t, _ in offsets))
    if denied:
        result_partitions = {tp: denied[tp[0]] for tp in offsets if tp[0] in denied}
        allowed = {tp: v for tp, v in offsets.items() if tp[0] not in denied}
        if not allowed:
            return _answer(request, {"topics": _commit_topics(offsets, result_partitions, 0)})
    retention = field(body, "retention_time")
    result = await services.groups.commit_offsets(
        body.group_id,
        body.member_id,
        body.generation_id_or_member_epoch,
        allowed if denied else offsets,
        group_instance_id=field(body, "group_instance_id"),
        retention_time_ms=millis(retention) if retention is not None else -1,
        api_version=request.api_version,
    )
    if denied:
        codes = {tp: result.partitions.get(tp, result.error) for tp in allowed}
        return _answer(
            request, {"topics": _commit_topics(offsets, {**codes, **result_partitions}, 0)}
        )
    return _answer(request, {"topics": _commit_topics(offsets, result.partitions, result.error)})


async def handle_txn_offset_commit(services: BrokerServices, request: Request) -> Any:
    """TxnOffsetCommit v0-v4 (KIP-98): the offsets join the producer's transaction and
    become visible when it commits. v3+ carry the consumer's member id, generation and
    group.instance.id (KIP-447), which the coordinator checks like OffsetCommit's; older
    versions send none (-1, "", null) and skip those checks. The transaction coordinator
    must list the group's offsets partition in the producer's ongoing transaction first
    (KIP-890 part 1, ``_verify_txn_offsets``)."""
    body: Any = request.body
    offsets = _commit_entries(body)
    # Write on the transactional id and Read on the group (whole request), Read on topics.
    names = {ResourceType.TRANSACTIONAL_ID: body.transactional_id, GROUP: body.group_id}
    refused = services.authz.request_error(request, names)
    if refused:
        return _answer(request, {"topics": _commit_topics(offsets, {}, refused)})
    denied = services.authz.denied(request, ResourceType.TOPIC, (t for t, _ in offsets))
    if denied:
        codes = {tp: denied.get(tp[0], ErrorCode.unknown_topic_or_partition) for tp in offsets}
        return _answer(request, {"topics": _commit_topics(offsets, codes, 0)})
    error, guard = await _verify_txn_offsets(services, body)
    if error:
        return _answer(request, {"topics": _commit_topics(offsets, {}, error)})
    result = await services.groups.txn_offset_commit(
        body.group_id,
        body.producer_id,
        body.producer_epoch,
        field(body, "member_id", ""),
        field(body, "generation_id", -1),
        field(body, "group_instance_id"),
        offsets,
        guard=guard,
    )
    return _answer(request, {"topics": _commit_topics(offsets, result.partitions, result.error)})


# Verification answers a client would not retry a TxnOffsetCommit on: the transaction
# coordinator could not be asked. COORDINATOR_LOAD_IN_PROGRESS makes it retry here without
# a new FindCoordinator (Kafka converts NETWORK_EXCEPTION so, GroupMetadataManager).
_VERIFY_RETRY = {
    ErrorCode.network_exception,
    ErrorCode.not_enough_replicas,
    ErrorCode.request_timed_out,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
}


async def _verify_txn_offsets(
    services: BrokerServices, body: Any
) -> tuple[int, Callable[[], bool] | None]:
    """KIP-890 part 1 for the group's ``__consumer_offsets`` partition, as Produce does
    for data partitions: unless the producer already has its transaction open in that
    log, ask the transaction coordinator whether the partition is in it (AddOffsetsToTxn
    put it there). Returns an error code, or 0 and the guard the coordinator checks
    just before its append (a marker since the check clears it)."""
    transactions = services.transactions
    if transactions is None or not transactions.verification_enabled or not body.group_id:
        return 0, None  # transaction.partition.verification.enable=false: no check
    index = services.groups.partition_for(body.group_id)
    hosted = services.replicas.partition(OFFSETS_TOPIC, index)
    if hosted is None or not hosted.is_leader:
        return 0, None  # the coordinator answers NOT_COORDINATOR
    producer_id, epoch = body.producer_id, body.producer_epoch
    entry = hosted.local.producer_state.last_entry(producer_id)
    if entry is not None and entry.producer_epoch == epoch and entry.current_txn_first_offset >= 0:
        return 0, None  # already in the producer's open transaction here
    tp = (OFFSETS_TOPIC, index)
    code, token = (
        await transactions.verify_produce(body.transactional_id, {tp: (producer_id, epoch)})
    )[tp]
    if code:
        return (ErrorCode.coordinator_load_in_progress if code in _VERIFY_RETRY else code), None
    guards = transactions.guards
    return 0, lambda: guards.holds(OFFSETS_TOPIC, index, producer_id, token)


def _fetched(result_partitions: dict[tuple[str, int], FetchedOffset]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (t, p), fetched in sorted(result_partitions.items()):
        topics[t].append(
            {
                "partition_index": p,
                "committed_offset": fetched.offset,
                "committed_leader_epoch": fetched.leader_epoch,
                "metadata": fetched.metadata,
                "error_code": fetched.error,
            }
        )
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


def _wanted(topics: Any) -> list[tuple[str, int]] | None:
    if topics is None:
        return None  # every partition the group has committed
    return [(t.name, p) for t in topics for p in t.partition_indexes]


def _group_error_per_group(services: BrokerServices, request: Request, group_id: str) -> int:
    """OffsetFetch: Describe on the group, answered in the group's error code."""
    denied = services.authz.denied(request, GROUP, [group_id])
    return denied.get(group_id, 0)


def _describable(
    services: BrokerServices,
    request: Request,
    asked: Any,
    partitions: dict[tuple[str, int], FetchedOffset],
) -> dict[tuple[str, int], FetchedOffset]:
    """Kafka: offsets of topics the principal may not Describe are marked
    TOPIC_AUTHORIZATION_FAILED when asked for by name, left out when every partition was
    asked for."""
    denied = services.authz.denied(
        request, ResourceType.TOPIC, {t for t, _ in partitions}, log=asked is not None
    )
    if not denied:
        return partitions
    if asked is None:
        return {tp: f for tp, f in partitions.items() if tp[0] not in denied}
    return {
        tp: (replace(f, offset=-1, metadata="", error=denied[tp[0]]) if tp[0] in denied else f)
        for tp, f in partitions.items()
    }


async def handle_offset_fetch(services: BrokerServices, request: Request) -> Any:
    """OffsetFetch v1-v9. ``require_stable`` (v7+, KIP-447): a partition whose offset is
    pending in an open transaction answers UNSTABLE_OFFSET_COMMIT (per partition; the
    consumer retries) instead of the last committed offset. v9 carries the member id and
    epoch of a KIP-848 member, checked against its consumer group (STALE_MEMBER_EPOCH)."""
    body: Any = request.body
    stable = bool(field(body, "require_stable", False))
    if request.api_version >= 8:
        groups = []
        for g in body.groups:
            refused = _group_error_per_group(services, request, g.group_id)
            if refused:
                groups.append({"group_id": g.group_id, "topics": [], "error_code": refused})
                continue
            result = services.groups.fetch_offsets(
                g.group_id,
                _wanted(g.topics),
                require_stable=stable,
                member_id=field(g, "member_id"),
                member_epoch=int(field(g, "member_epoch", -1)),
            )
            groups.append(
                {
                    "group_id": g.group_id,
                    "topics": _fetched(
                        _describable(services, request, g.topics, result.partitions)
                    ),
                    "error_code": result.error,
                }
            )
        return _answer(request, {"groups": groups})
    refused = _group_error_per_group(services, request, body.group_id)
    if refused:
        return _answer(request, {"topics": [], "error_code": refused})
    result = services.groups.fetch_offsets(
        body.group_id, _wanted(body.topics), require_stable=stable
    )
    topics = _fetched(_describable(services, request, body.topics, result.partitions))
    if request.api_version < 2 and result.error:
        # v0/v1 have no top-level error: it is reported on every partition.
        for t in topics:
            for p in t["partitions"]:
                p["error_code"] = result.error
    return _answer(request, {"topics": topics, "error_code": result.error})


async def handle_list_groups(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    result = services.groups.list_groups(
        field(body, "states_filter") or None, field(body, "types_filter") or None
    )
    # Describe on the cluster, else only the groups the principal may Describe.
    visible = set(services.authz.visible(request, GROUP, [g.group_id for g in result.groups]))
    return _answer(
        request,
        {
            "error_code": result.error,
            "groups": [
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "group_state": g.state,
                    "group_type": g.group_type,
                }
                for g in result.groups
                if g.group_id in visible
            ],
        },
    )


async def handle_describe_groups(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    authz = services.authz
    denied = authz.denied(request, GROUP, body.groups)
    described = services.groups.describe_groups(
        [g for g in body.groups if g not in denied], not_found_error=request.api_version >= 6
    )
    with_ops = field(body, "include_authorized_operations", False)
    return _answer(
        request,
        {
            "groups": [
                {
                    "error_code": g.error,
                    "error_message": None,
                    "group_id": g.group_id,
                    "group_state": g.state,
                    "protocol_type": g.protocol_type,
                    "protocol_data": g.protocol,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "member_metadata": m.metadata,
                            "member_assignment": m.assignment,
                        }
                        for m in g.members
                    ],
                    # KIP-430 (v3+), when asked.
                    "authorized_operations": authorized_operations(
                        services, GROUP, g.group_id, requested=with_ops
                    ),
                }
                for g in described
            ]
            + [
                {
                    "error_code": code,
                    "error_message": None,
                    "group_id": group,
                    "group_state": "",
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": [],
                }
                for group, code in denied.items()
            ]
        },
    )


async def handle_delete_groups(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    denied = services.authz.denied(request, GROUP, body.groups_names)
    results = await services.groups.delete_groups([g for g in body.groups_names if g not in denied])
    answers = [{"group_id": r.group_id, "error_code": r.error} for r in results]
    answers += [{"group_id": g, "error_code": code} for g, code in denied.items()]
    return _answer(request, {"results": answers})


async def handle_offset_delete(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    wanted = [(str(t.name), int(p.partition_index)) for t in body.topics for p in t.partitions]
    refused = _group_error(services, request, body.group_id)
    if refused:
        return _answer(request, {"error_code": refused, "topics": []})
    denied = services.authz.denied(request, ResourceType.TOPIC, (t for t, _ in wanted))
    error, partitions = await services.groups.delete_offsets(
        body.group_id, [tp for tp in wanted if tp[0] not in denied]
    )
    partitions = {**partitions, **{tp: denied[tp[0]] for tp in wanted if tp[0] in denied}}
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, index), code in partitions.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": code})
    return _answer(
        request,
        {
            "error_code": error,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        },
    )
