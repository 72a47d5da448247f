"""ElectLeaders (API 43, KIP-183/KIP-460), AlterPartitionReassignments (45, KIP-455) and
ListPartitionReassignments (46, KIP-455): the operator's controller APIs.

As in Kafka's ZooKeeper mode, clients send them to the controller (Java's admin client and
librdkafka pick the broker Metadata names as controller); any other broker answers
NOT_CONTROLLER (41) and the client refreshes its metadata and retries there. On a single
node (no controller) the broker answers for itself: nothing can move, so reassignments are
refused unless they change nothing and elections are never needed.

Protocol only: the decisions are the controller's (``BrokerServices.controller``), called
off the event loop because they wait for the controller's thread.

ElectLeaders answers once this broker's metadata shows every partition elected with its new
leader (a higher leader epoch), as Kafka's ``DelayedElectLeader`` waits for its metadata
cache: a tool that describes the topic right after sees the election. A partition not
seen in time (the request's ``timeout_ms``) answers REQUEST_TIMED_OUT, as in Kafka.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tierlog.broker.handlers.metadata import request_response_type
from tierlog.protocol import Request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build, millis

if TYPE_CHECKING:
    from tierlog.broker.services import BrokerServices

T = TypeVar("T")

NONE = int(ErrorCode.none)
NOT_CONTROLLER = int(ErrorCode.not_controller)
REQUEST_TIMED_OUT = int(ErrorCode.request_timed_out)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.unknown_topic_or_partition)
ELECTION_NOT_NEEDED = int(ErrorCode.election_not_needed)
INVALID_REQUEST = int(ErrorCode.invalid_request)
INVALID_REPLICA_ASSIGNMENT = int(ErrorCode.invalid_replica_assignment)
NO_REASSIGNMENT_IN_PROGRESS = int(ErrorCode.no_reassignment_in_progress)

PREFERRED = 0


def _message(code: int, detail: str = "") -> str | None:
    """Kafka sends null for success and a message with every error."""
    if code == NONE:
        return None
    return detail or ErrorCode(code).name


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


async def _ask_controller(services: BrokerServices, call: Callable[[Any], T]) -> T:
    """Run ``call(controller)`` off the loop; _Refused with NOT_CONTROLLER when this broker
    is not the active controller, REQUEST_TIMED_OUT when it does not answer in time."""
    from tierlog.broker.controller.controller import NotControllerError

    controller = services.controller
    assert controller is not None
    if not controller.is_active:
        raise _Refused(NOT_CONTROLLER, "this broker is not the controller")
    try:
        return await asyncio.get_running_loop().run_in_executor(None, call, controller)
    except NotControllerError as exc:
        raise _Refused(NOT_CONTROLLER, str(exc)) from None
    except TimeoutError as exc:
        raise _Refused(REQUEST_TIMED_OUT, str(exc)) from None


# -- ElectLeaders ---------------------------------------------------------------------------


async def handle_elect_leaders(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    response_type = request_response_type(request)
    # v0 has no election type: it is preferred-replica election (KIP-183).
    election_type = int(getattr(body, "election_type", PREFERRED))
    wanted: list[tuple[str, int]] | None = (
        None
        if body.topic_partitions is None
        else [(t.topic, int(p)) for t in body.topic_partitions for p in t.partitions]
    )
    top_error = services.authz.request_error(request)  # Alter on the cluster
    results: dict[tuple[str, int], int] = {}
    if top_error:
        pass
    elif election_type not in (0, 1):
        top_error = INVALID_REQUEST
    elif services.controller is None:
        for topic, p in wanted or []:
            metadata = services.cluster.topic(topic)
            known = metadata is not None and p in metadata.replicas
            results[(topic, p)] = ELECTION_NOT_NEEDED if known else UNKNOWN_TOPIC_OR_PARTITION
    else:
        epochs_before = _leader_epochs(services)
        try:
            results = await _ask_controller(
                services, lambda c: c.elect_leaders(election_type, wanted)
            )
        except _Refused as exc:
            top_error = exc.code
        else:
            timeout_ms = millis(getattr(body, "timeout", None))
            await _await_elected(services, results, epochs_before, timeout_ms)
    if top_error and request.response_version == 0:
        # v0 has no top-level error: every partition asked for gets it.
        results = dict.fromkeys(wanted or [], top_error)
        top_error = NONE
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), code in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            {"partition_id": p, "error_code": code, "error_message": _message(code)}
        )
    return build(
        response_type,
        {
            "throttle_time": 0,
            "error_code": top_error,
            "replica_election_results": [
                {"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()
            ],
        },
    )


def _leader_epochs(services: BrokerServices) -> dict[tuple[str, int], int]:
    return {
        (name, p): state.leader_epoch
        for name, topic in services.cluster.topics().items()
        for p, state in topic.partition_states.items()
    }


async def _await_elected(
    services: BrokerServices,
    results: dict[tuple[str, int], int],
    epochs_before: dict[tuple[str, int], int],
    timeout_ms: int,
) -> None:
    """Wait until this broker's metadata shows a new leader (a higher epoch) for every
    partition ``results`` says was elected; those still not shown become REQUEST_TIMED_OUT."""
    elected = [tp for tp, code in results.items() if code == NONE]

    def shown(topics: dict[str, Any], tp: tuple[str, int]) -> bool:
        topic = topics.get(tp[0])
        state = topic.partition_states.get(tp[1]) if topic is not None else None
        return (
            state is not None
            and state.leader >= 0
            and state.leader_epoch > epochs_before.get(tp, -1)
        )

    if not elected:
        return
    timeout_s = (timeout_ms if timeout_ms > 0 else 30_000) / 1000
    if await services.cluster.wait_for_topics(
        lambda topics: all(shown(topics, tp) for tp in elected), timeout_s
    ):
        return
    topics = services.cluster.topics()
    for tp in elected:
        if not shown(topics, tp):
            results[tp] = REQUEST_TIMED_OUT


# -- AlterPartitionReassignments ------------------------------------------------------------


async def handle_alter_partition_reassignments(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    response_type = request_response_type(request)
    allow_rf_change = bool(getattr(body, "allow_replication_factor_change", True))
    wanted: dict[tuple[str, int], list[int] | None] = {}
    for topic in body.topics:
        for p in topic.partitions:
            replicas = None if p.replicas is None else [int(r) for r in p.replicas]
            wanted[(topic.name, int(p.partition_index))] = replicas
    top_error, top_message = services.authz.request_error(request), None
    outcomes: dict[tuple[str, int], tuple[int, str]] = {}
    if top_error:
        pass
    elif services.controller is None:
        outcomes = {tp: _single_node_reassignment(services, tp, r) for tp, r in wanted.items()}
    else:
        try:
            outcomes = await _ask_controller(
                services,
                lambda c: c.alter_partition_reassignments(
                    wanted, allow_replication_factor_change=allow_rf_change
                ),
            )
        except _Refused as exc:
            top_error, top_message = exc.code, str(exc)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), (code, detail) in sorted(outcomes.items()):
        by_topic.setdefault(topic, []).append(
            {"partition_index": p, "error_code": code, "error_message": _message(code, detail)}
        )
    return build(
        response_type,
        {
            "throttle_time": 0,
            "allow_replication_factor_change": allow_rf_change,
            "error_code": top_error,
            "error_message": top_message,
            "responses": [
                {"name": topic, "partitions": parts} for topic, parts in by_topic.items()
            ],
        },
    )


def _single_node_reassignment(
    services: BrokerServices, tp: tuple[str, int], target: list[int] | None
) -> tuple[int, str]:
    metadata = services.cluster.topic(tp[0])
    if metadata is None or tp[1] not in metadata.replicas:
        return UNKNOWN_TOPIC_OR_PARTITION, "unknown partition"
    if target is None:
        return NO_REASSIGNMENT_IN_PROGRESS, "no reassignment in progress"
    if target == list(metadata.replicas[tp[1]]):
        return NONE, ""
    return INVALID_REPLICA_ASSIGNMENT, "a single node cannot move partitions"


# -- ListPartitionReassignments -------------------------------------------------------------


async def handle_list_partition_reassignments(services: BrokerServices, request: Request) -> Any:
    body: Any = request.body
    response_type = request_response_type(request)
    wanted: list[tuple[str, int]] | None = (
        None
        if body.topics is None
        else [(t.name, int(p)) for t in body.topics for p in t.partition_indexes]
    )
    top_error, top_message = services.authz.request_error(request), None
    ongoing: dict[tuple[str, int], Any] = {}
    if not top_error and services.controller is not None:
        try:
            ongoing = await _ask_controller(
                services, lambda c: c.list_partition_reassignments(wanted)
            )
        except _Refused as exc:
            top_error, top_message = exc.code, str(exc)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), assignment in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": p,
                "replicas": list(assignment.replicas),
                "adding_replicas": list(assignment.adding),
                "removing_replicas": list(assignment.removing),
            }
        )
    return build(
        response_type,
        {
            "throttle_time": 0,
            "error_code": top_error,
            "error_message": top_message,
            "topics": [{"name": topic, "partitions": parts} for topic, parts in by_topic.items()],
        },
    )
