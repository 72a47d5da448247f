"""KIP-848's consumer group APIs: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

The work is the group coordinator's consumer protocol (``tierlog.broker.group``, the
``ConsumerGroups`` component); these functions translate the requests of every version
to its values and its answers back. ConsumerGroupHeartbeat v1 adds the regex subscription
and requires the client to make its member id (KIP-1082); ConsumerGroupDescribe v1 adds
each member's type (KIP-1099).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierlog.broker.group.consumer.describe import DescribedGroup, DescribedPartitions
from tierlog.broker.group.consumer.member import Assignment
from tierlog.broker.group.consumer.requests import HeartbeatRequest
from tierlog.broker.handlers.authorized_ops import OMITTED, authorized_operations
from tierlog.broker.handlers.metadata import request_response_type
from tierlog.broker.network.connection_context import CLIENT_ADDRESS
from tierlog.protocol import Request
from tierlog.protocol.kio_build import build, field, millis
from tierlog.security.acl import ResourceType

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

GROUP = ResourceType.GROUP


def _answer(request: Request, data: dict[str, Any]) -> Any:
    return build(request_response_type(request), {"throttle_time": 0, **data})


def heartbeat_request(request: Request) -> HeartbeatRequest:
    """The request's fields as the protocol takes them (``None``: not sent)."""
    body: Any = request.body
    owned = body.topic_partitions
    names = body.subscribed_topic_names
    return HeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=int(body.member_epoch),
        instance_id=field(body, "instance_id"),
        rack_id=field(body, "rack_id"),
        rebalance_timeout_ms=millis(body.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(names),
        # Version 1 added the regex subscription.
        subscribed_topic_regex=field(body, "subscribed_topic_regex"),
        server_assignor=field(body, "server_assignor"),
        topic_partitions=(
            None
            if owned is None
            else tuple((t.topic_id, tuple(int(p) for p in t.partitions)) for t in owned)
        ),
        api_version=request.api_version,
        client_id=request.client_id or "",
        client_host=CLIENT_ADDRESS.get(),
    )


def _assignment(assignment: Assignment) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "partitions": sorted(partitions)}
            for topic_id, partitions in sorted(assignment.items())
        ]
    }


async def handle_consumer_group_heartbeat(services: BrokerServices, request: Request) -> Any:
    # Kafka: Read on the group, or GROUP_AUTHORIZATION_FAILED for the whole request.
    body: Any = request.body
    refused = services.authz.request_error(request, {GROUP: body.group_id})
    answer = (
        None
        if refused
        else await services.groups.consumer_group_heartbeat(heartbeat_request(request))
    )
    response = None if answer is None else answer.response
    if answer is None or answer.error or response is None:
        return _answer(
            request,
            {
                "error_code": refused if answer is None else answer.error,
                "error_message": None if answer is None else answer.message,
                "member_id": None,
                "member_epoch": -1,
                "heartbeat_interval": 0,
                "assignment": None,
            },
        )
    return _answer(
        request,
        {
            "error_code": 0,
            "error_message": None,
            "member_id": response.member_id,
            "member_epoch": response.member_epoch,
            "heartbeat_interval": response.heartbeat_interval_ms,
            "assignment": (
                None if response.assignment is None else _assignment(response.assignment)
            ),
        },
    )


def _described_partitions(parts: tuple[DescribedPartitions, ...]) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": d.topic_id, "topic_name": d.topic_name, "partitions": list(d.partitions)}
            for d in parts
        ]
    }


def _described_group(group: DescribedGroup) -> dict[str, Any]:
    return {
        "error_code": group.error_code,
        "error_message": group.error_message,
        "group_id": group.group_id,
        "group_state": group.group_state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.assignor_name,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": _described_partitions(m.assignment),
                "target_assignment": _described_partitions(m.target_assignment),
                "member_type": m.member_type,
            }
            for m in group.members
        ],
    }


async def handle_consumer_group_describe(services: BrokerServices, request: Request) -> Any:
    # Kafka: Describe on each group; a refused one is answered GROUP_AUTHORIZATION_FAILED.
    body: Any = request.body
    authz = services.authz
    denied = authz.denied(request, GROUP, body.group_ids)
    described = services.groups.consumer_group_describe(
        [g for g in body.group_ids if g not in denied]
    )
    operations = field(body, "include_authorized_operations", False)
    groups = [
        {
            **_described_group(g),
            # KIP-430, when asked.
            "authorized_operations": authorized_operations(
                services, GROUP, g.group_id, requested=operations
            ),
        }
        for g in described
    ]
    groups += [
        {
            "error_code": code,
            "error_message": None,
            "group_id": group,
            "group_state": "",
            "group_epoch": 0,
            "assignment_epoch": 0,
            "assignor_name": "",
            "members": [],
            "authorized_operations": OMITTED,
        }
        for group, code in denied.items()
    ]
    return _answer(request, {"groups": groups})
