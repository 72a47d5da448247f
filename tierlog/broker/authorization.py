"""The handlers' one seam to authorization: who asks (a ``RequestContext`` per request) and
what the checks of Kafka's table (``tierlog.security.authz_table``) answer for it.

A handler never names an operation: it says which API it serves (the request), which
resources it touches and which of the table's conditions hold (``When``), and gets Kafka's
error codes back:

- ``request_error``: the checks whose refusal fails the whole request (JoinGroup's Read on
  the group, EndTxn's Write on the transactional id, DescribeAcls' Describe on the
  cluster...); 0 when they pass.
- ``denied``: per resource, the code of each refused name (Produce's Write on a topic).
  A cluster check with a per-resource fallback (CreateTopics: Create on the cluster, else
  Create on each topic) is tried first, silently.
- ``checks``: ``request_error``, then ``denied``, in one call; ``produce`` is it for a
  Produce.
- ``visible``: the names a filtering check keeps (Metadata's listing of every topic,
  ListGroups, ListTransactions): the others are left out without an error.
- ``authorized_operations``: KIP-430's bit field for Metadata, DescribeGroups and
  DescribeCluster.

Who asks: the network layer sets ``CONNECTION_PRINCIPAL`` in each connection's task
(``User:ANONYMOUS`` until authentication says otherwise) and ``CLIENT_ADDRESS``; the
broker's dispatch makes the ``RequestContext`` of each request from them
(``bind_request``). With no authorizer configured every check passes, as in Kafka.

What passed is remembered per connection: the shape of a request (API, names, conditions)
whose every check passed is answered from memory while the connection's principal and
host and the authorizer's ``decisions_version`` (``MemoizableAuthorizer``) stay the same.
Refusals are never remembered, so each is decided and audited again.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Final

from tierlog.broker.network.connection_context import CLIENT_ADDRESS, CONNECTION_PRINCIPAL
from tierlog.protocol import Request
from tierlog.security.acl import CLUSTER_NAME, AclOperation, ResourcePattern, ResourceType
from tierlog.security.api import (
    Action,
    AuthorizationResult,
    Authorizer,
    MemoizableAuthorizer,
    RequestContext,
)
from tierlog.security.authz_table import AUTHORIZATION, Check, Denial, When, denial_error
from tierlog.security.principal import ANONYMOUS

__all__ = [
    "CONNECTION_PRINCIPAL",
    "OPERATIONS_NOT_REQUESTED",
    "SUPPORTED_OPERATIONS",
    "RequestAuthorizer",
    "bind_request",
    "current_context",
]

_REQUEST_CONTEXT: ContextVar[RequestContext | None] = ContextVar("request_context", default=None)


class _PassedShapes:
    """The request shapes that passed on one connection (its task's context), while its
    principal, its host and the authorizer's decisions stay as they were. ``produce``:
    Produce's, by (transactional id, topics) alone (``RequestAuthorizer.produce``)."""

    __slots__ = ("context", "host", "owner", "principal", "produce", "shapes", "version")

    def __init__(self, owner: object, context: RequestContext, version: int) -> None:
        self.owner = owner
        self.principal = context.principal
        self.host = context.client_host
        self.version = version
        self.shapes: set[tuple[Any, ...]] = set()
        self.produce: set[tuple[str | None, tuple[str, ...]]] = set()
        # The request context last seen to hold this principal and host: while the
        # connection's requests keep it (``bind_request`` reuses it), the principal and
        # host need no comparing (``RequestAuthorizer.produce``).
        self.context = context


_PASSED: ContextVar[_PassedShapes | None] = ContextVar("passed_shapes", default=None)
# What ``produce`` answers when nothing is refused: one shared, read-only mapping.
_NONE_REFUSED: Final[tuple[int, Mapping[str, int]]] = (0, MappingProxyType({}))

Op, Res = AclOperation, ResourceType
# KIP-430: the operations reported per resource type (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS: Final[Mapping[ResourceType, tuple[AclOperation, ...]]] = {
    Res.TOPIC: (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ),
    # Kafka 4 groups have configs (KIP-848), so their config operations are reported too.
    Res.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    Res.CLUSTER: (
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    ),
    Res.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    Res.DELEGATION_TOKEN: (Op.DESCRIBE,),
    Res.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}
# What the authorized-operations fields hold when the client did not ask (Int.MinValue).
OPERATIONS_NOT_REQUESTED: Final = -(2**31)


def bind_request(request: Request) -> RequestContext:
    """Make (and keep, for this request's handler) the context of ``request``.

    A connection's requests mostly repeat the last one's API, client id and principal: the
    context it left is reused then (every request pays this; building a frozen dataclass
    cost more than the rest of the check, profiled)."""
    principal = CONNECTION_PRINCIPAL.get()
    address = CLIENT_ADDRESS.get()
    host = address[1:] if address.startswith("/") else address
    last = _REQUEST_CONTEXT.get()
    if (
        last is not None
        and last.api_key == request.api_key
        and last.principal is principal
        and last.client_id == request.client_id
        and last.client_host == host
    ):
        return last
    context = RequestContext(
        principal=principal, client_host=host, api_key=request.api_key, client_id=request.client_id
    )
    _REQUEST_CONTEXT.set(context)
    return context


def current_context() -> RequestContext:
    """The context of the request being handled (ANONYMOUS on no host outside one)."""
    context = _REQUEST_CONTEXT.get()
    return context if context is not None else RequestContext(ANONYMOUS, "")


def _applies(check: Check, conditions: frozenset[When]) -> bool:
    return check.when is When.ALWAYS or check.when in conditions


_ACTIONS_KEPT: Final = 4096
_SHAPES_KEPT: Final = 4096


@functools.cache
def _per_resource_checks(
    api_key: int, resource_type: ResourceType, holding: frozenset[When]
) -> tuple[tuple[Check, bool], ...]:
    """The checks of ``api_key`` answered per resource of ``resource_type`` (``denied``),
    each with whether the cluster is asked first (its Allow covers every resource), worked
    out once per API: the table does not change, and Produce asks on every request."""
    found = []
    for check in AUTHORIZATION[api_key].checks:
        if not _applies(check, holding):
            continue
        fallback = check.fallback
        if check.denial is Denial.PER_RESOURCE and check.resource is resource_type:
            found.append((check, False))
        elif (
            check.resource is Res.CLUSTER
            and check.denial is Denial.FILTERED
            and fallback is not None
            and fallback.resource is resource_type
            and fallback.denial is Denial.PER_RESOURCE
            and _applies(fallback, holding)
        ):
            found.append((check, True))
    return tuple(found)


class RequestAuthorizer:
    """Answers the table's checks for the request being handled (module docstring).

    Args:
        authorizer: ``authorizer.class.name``'s plugin; None: no authorization.
    """

    def __init__(self, authorizer: Authorizer | None = None) -> None:
        self._authorizer = authorizer
        # The Actions asked before, by (operation, resource type, name, log): a Produce
        # asks the same few on every request, and building the frozen pattern and action
        # took as long as the decision itself (bench/acl_produce.py). Bounded: cleared
        # when full.
        self._actions: dict[tuple[AclOperation, ResourceType, str, bool], Action] = {}
        # Request shapes (API, names, conditions) whose every check passed, kept per
        # connection while the authorizer's decisions stay as they are (``_PassedShapes``):
        # a client's produce requests repeat one shape, and walking the table's checks for
        # it cost as much again as the decisions (bench/acl_produce.py, one record per
        # request). Only full passes are kept: a refusal is asked again, so it is audited
        # each time, as in Kafka.
        self._memoizable = authorizer if isinstance(authorizer, MemoizableAuthorizer) else None
        # An attribute, not a property: every produce and fetch request reads it.
        self.enabled: Final = authorizer is not None

    @property
    def authorizer(self) -> Authorizer | None:
        return self._authorizer

    def allowed(
        self, operation: AclOperation, resource_type: ResourceType, name: str, *, log: bool = True
    ) -> bool:
        """One decision for the current request (audited when refused and ``log``)."""
        if self._authorizer is None:
            return True
        key = (operation, resource_type, name, log)
        action = self._actions.get(key)
        if action is None:
            if len(self._actions) >= _ACTIONS_KEPT:
                self._actions.clear()
            # Kafka's KafkaApis audits client-visible checks both ways: denials at INFO,
            # grants at DEBUG (kafka.authorizer.logger at DEBUG shows them).
            action = self._actions[key] = Action(
                operation,
                ResourcePattern(resource_type, name),
                log_if_allowed=log,
                log_if_denied=log,
            )
        [result] = self._authorizer.authorize(current_context(), [action])
        return result is AuthorizationResult.ALLOWED

    def _passed_shapes(self) -> set[tuple[Any, ...]] | None:
        """The shapes known to pass for this connection under the authorizer's current
        decisions; None when they may not be remembered."""
        passed = self._passed()
        return None if passed is None else passed.shapes

    def _passed(self) -> _PassedShapes | None:
        """This connection's memory of what passed (``_passed_shapes``)."""
        source = self._memoizable
        version = source.decisions_version if source is not None else None
        if version is None:
            return None
        context = _REQUEST_CONTEXT.get() or current_context()
        passed = _PASSED.get()
        if (
            passed is None
            or passed.owner is not self
            or passed.version != version
            or passed.principal is not context.principal
            or passed.host != context.client_host
            or len(passed.shapes) + len(passed.produce) >= _SHAPES_KEPT
        ):
            passed = _PassedShapes(self, context, version)
            _PASSED.set(passed)
        return passed

    def _passes(self, check: Check, name: str, conditions: frozenset[When], log: bool) -> bool:
        if self.allowed(check.operation, check.resource, name, log=log and not check.fallback):
            return True
        fallback = check.fallback
        if fallback is None or not _applies(fallback, conditions):
            return False
        if fallback.denial is Denial.BY_RESOURCE_TYPE:
            assert self._authorizer is not None
            result = self._authorizer.authorize_by_resource_type(
                current_context(), fallback.operation, fallback.resource
            )
            return result is AuthorizationResult.ALLOWED
        fallback_name = CLUSTER_NAME if fallback.resource is Res.CLUSTER else name
        return self.allowed(fallback.operation, fallback.resource, fallback_name, log=log)

    def request_error(
        self,
        request: Request,
        names: Mapping[ResourceType, str | None] | None = None,
        *conditions: When,
    ) -> int:
        """Kafka's code for the first refused whole-request check of ``request``'s API,
        else 0. ``names``: the group, transactional id... the request names (the cluster
        needs none); a check on a resource not named does not apply."""
        if self._authorizer is None:
            return 0
        passed = self._passed_shapes()
        if passed is not None:
            shape = ("request", request.api_key, tuple(names.items()) if names else (), conditions)
            if shape in passed:
                return 0
        holding = frozenset(conditions)
        for check in AUTHORIZATION[request.api_key].checks:
            if check.denial is not Denial.REQUEST or not _applies(check, holding):
                continue
            if check.resource is Res.CLUSTER:
                name: str | None = CLUSTER_NAME
            else:
                name = (names or {}).get(check.resource)
            if name is None:
                continue
            if not self._passes(check, name, holding, log=True):
                return denial_error(check.resource)
        if passed is not None:
            passed.add(shape)
        return 0

    def checks(
        self,
        request: Request,
        names: Mapping[ResourceType, str | None],
        resource_type: ResourceType,
        resources: Sequence[str],
        *conditions: When,
    ) -> tuple[int, dict[str, int]]:
        """``request_error`` and then, when it passes, ``denied`` for ``resources``: a
        Produce's two questions, with one remembered shape for both (the path that every
        unbatched produce request takes, so one lookup, not two)."""
        if self._authorizer is None:
            return 0, {}
        passed = self._passed_shapes()
        if passed is not None:
            shape = (request.api_key, tuple(names.items()), resource_type, resources, conditions)
            if shape in passed:
                return 0, {}
        code = self.request_error(request, names, *conditions)
        refused = {} if code else self.denied(request, resource_type, resources, *conditions)
        if passed is not None and not code and not refused:
            passed.add(shape)
        return code, refused

    def produce(
        self, request: Request, transactional_id: str | None, topics: tuple[str, ...]
    ) -> tuple[int, Mapping[str, int]]:
        """``checks`` for a Produce: Write on its transactional id (when it has one), Write
        on each topic. A Produce's shape is the same but for these two, so a connection
        remembers them alone, and a request that passed before costs one lookup and no
        mapping built (a producer sending one record per request pays this per record:
        bench/acl_produce.py)."""
        source = self._memoizable
        if source is None:
            if self._authorizer is None:
                return _NONE_REFUSED
        else:
            # The path of every request after a connection's first: a handful of reads
            # and no call but the version's (each Python step costs ~50-200 ns on a busy
            # event loop; this path was 1.1 us in the broker, bench/acl_produce.py).
            key = (transactional_id, topics)
            passed = _PASSED.get()
            if (
                passed is not None
                and key in passed.produce
                and passed.owner is self
                and passed.context is _REQUEST_CONTEXT.get()
                and passed.version == source.decisions_version
            ):
                return _NONE_REFUSED
        passed = self._passed()
        key = (transactional_id, topics)
        if passed is not None and key in passed.produce:
            passed.context = current_context()
            return _NONE_REFUSED
        names = {Res.TRANSACTIONAL_ID: transactional_id}
        conditions = (When.TRANSACTIONAL,) if transactional_id is not None else ()
        code, refused = self.checks(request, names, Res.TOPIC, topics, *conditions)
        if passed is not None and not code and not refused:
            passed.produce.add(key)
            passed.context = current_context()
        return code, refused

    def denied(
        self,
        request: Request,
        resource_type: ResourceType,
        names: Iterable[str],
        *conditions: When,
        log: bool = True,
    ) -> dict[str, int]:
        """Each of ``names`` (resources of ``resource_type``) that a per-resource check
        refuses, with Kafka's code; names allowed are not in the answer. ``log=False``
        for a listing that only leaves the refused out (no audit line, as Kafka)."""
        if self._authorizer is None:
            return {}
        unique = tuple(dict.fromkeys(names))
        passed = self._passed_shapes()
        if passed is not None:
            shape = ("denied", request.api_key, resource_type, unique, conditions, log)
            if shape in passed:
                return {}
        refused: dict[str, int] = {}
        for check, cluster_first in _per_resource_checks(
            request.api_key, resource_type, frozenset(conditions)
        ):
            if cluster_first:
                if self.allowed(check.operation, Res.CLUSTER, CLUSTER_NAME, log=False):
                    continue
                assert check.fallback is not None
                check = check.fallback
            for name in unique:
                if name not in refused and not self.allowed(
                    check.operation, resource_type, name, log=log
                ):
                    refused[name] = denial_error(resource_type)
        if passed is not None and not refused:
            passed.add(shape)
        return refused

    def visible(
        self,
        request: Request,
        resource_type: ResourceType,
        names: Iterable[str],
        *conditions: When,
    ) -> list[str]:
        """The names a filtering check keeps (no error for the others, no audit line)."""
        kept = list(names)
        if self._authorizer is None:
            return kept
        holding = frozenset(conditions)
        for check in AUTHORIZATION[request.api_key].checks:
            if check.denial is not Denial.FILTERED or not _applies(check, holding):
                continue
            if check.resource is resource_type:
                kept = [
                    n for n in kept if self.allowed(check.operation, resource_type, n, log=False)
                ]
                continue
            fallback = check.fallback
            if (
                check.resource is Res.CLUSTER
                and fallback is not None
                and fallback.resource is resource_type
                and fallback.denial is Denial.FILTERED
            ):
                if self.allowed(check.operation, Res.CLUSTER, CLUSTER_NAME, log=False):
                    continue
                kept = [
                    n for n in kept if self.allowed(fallback.operation, resource_type, n, log=False)
                ]
        return kept

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """KIP-430: bit ``1 << operation`` set for each supported operation allowed, asked
        without an audit line; the cluster's only to who may describe it (Kafka's
        ``AuthHelper``)."""
        if resource_type is Res.CLUSTER and not self.allowed(
            Op.DESCRIBE, resource_type, name, log=False
        ):
            return 0
        bits = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.allowed(operation, resource_type, name, log=False):
                bits |= 1 << operation
        return bits
