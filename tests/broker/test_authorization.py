"""The handlers' seam to authorization (tierlog/broker/authorization.py): request shapes
that passed are remembered, and never past a change of what the authorizer would answer,
for another principal or host, for a refusal, or while grants are audited."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Sequence

import pytest

from tierlog.broker.authorization import RequestAuthorizer, bind_request
from tierlog.broker.network.connection_context import CLIENT_ADDRESS, CONNECTION_PRINCIPAL
from tierlog.protocol import ApiKey, Request
from tierlog.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tierlog.security.acl_authorizer import AclAuthorizer
from tierlog.security.api import Action, AuthorizationResult, RequestContext
from tierlog.security.authz_table import When
from tierlog.security.principal import KafkaPrincipal

Op, Perm = AclOperation, AclPermissionType
TOPIC, TXN = ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID
ALICE, BOB = KafkaPrincipal.user("alice"), KafkaPrincipal.user("bob")
WRITE_DENIED = 29  # TOPIC_AUTHORIZATION_FAILED
TXN_DENIED = 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
AUDIT = "kafka.authorizer.logger"


class CountingAclAuthorizer(AclAuthorizer):
    """The real authorizer, counting the decisions that reach it."""

    asked = 0

    def authorize(
        self, context: RequestContext, actions: Sequence[Action]
    ) -> list[AuthorizationResult]:
        self.asked += len(actions)
        return super().authorize(context, actions)


def binding(name: str, principal: str, perm: Perm = Perm.ALLOW, rtype: ResourceType = TOPIC,
            pattern: PatternType = PatternType.PREFIXED) -> AclBinding:  # fmt: skip
    return AclBinding(
        ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, "*", Op.WRITE, perm)
    )


def produce() -> Request:
    return Request(ApiKey.PRODUCE, 9, 7, "client", None, None, 9, 0)  # type: ignore[arg-type]


class Connection:
    """One client connection: its task's context, which holds who it is and from where,
    and what the broker remembers for it."""

    def __init__(self, principal: KafkaPrincipal, host: str = "10.0.0.1") -> None:
        self.context = contextvars.copy_context()
        self.context.run(CONNECTION_PRINCIPAL.set, principal)
        self.context.run(CLIENT_ADDRESS.set, f"/{host}")

    def produce(
        self, authz: RequestAuthorizer, txn: str | None = None
    ) -> tuple[int, dict[str, int]]:
        """One produce request's checks, as handlers/produce.py makes them."""
        return self._request(authz, txn, "produce")

    def checks(
        self, authz: RequestAuthorizer, txn: str | None = None
    ) -> tuple[int, dict[str, int]]:
        """The same through the general ``checks`` (names, resources, conditions)."""
        return self._request(authz, txn, "checks")

    def separately(
        self, authz: RequestAuthorizer, txn: str | None = None
    ) -> tuple[int, dict[str, int]]:
        """The same two questions asked one by one (``request_error``, ``denied``)."""
        return self._request(authz, txn, "separately")

    def _request(
        self, authz: RequestAuthorizer, txn: str | None, way: str
    ) -> tuple[int, dict[str, int]]:
        def checks() -> tuple[int, dict[str, int]]:
            request = produce()
            bind_request(request)
            topics = ("etl-a", "etl-a")
            if way == "produce":
                return authz.produce(request, txn, topics)
            conditions = (When.TRANSACTIONAL,) if txn is not None else ()
            if way == "checks":
                return authz.checks(request, {TXN: txn}, TOPIC, topics, *conditions)
            code = authz.request_error(request, {TXN: txn}, *conditions)
            return code, authz.denied(request, TOPIC, (n for n in topics))

        return self.context.run(checks)


def ask(authz: RequestAuthorizer, principal: KafkaPrincipal, host: str = "10.0.0.1",
        txn: str | None = None) -> tuple[int, dict[str, int]]:  # fmt: skip
    """Every way on one connection, which must agree."""
    connection = Connection(principal, host)
    answer = connection.produce(authz, txn)
    assert connection.checks(authz, txn) == answer
    assert connection.separately(authz, txn) == answer
    return answer


def authorizer_of(*bindings: AclBinding) -> CountingAclAuthorizer:
    authorizer = CountingAclAuthorizer()
    assert all(r.error is None for r in asyncio.run(authorizer.create_acls(bindings)))
    return authorizer


@pytest.mark.parametrize("way", ["produce", "checks", "separately"])
def test_a_passing_shape_is_answered_without_the_authorizer(way: str) -> None:
    authorizer = authorizer_of(binding("etl-", "User:alice"), binding("t", "User:alice", rtype=TXN))
    authz = RequestAuthorizer(authorizer)
    connection = Connection(ALICE)
    assert getattr(connection, way)(authz, txn="t1") == (0, {})
    first = authorizer.asked
    assert first >= 2  # Write on the transactional id and on the topic
    for _ in range(3):
        assert getattr(connection, way)(authz, txn="t1") == (0, {})
    assert authorizer.asked == first
    # Another connection of the same user is decided for itself.
    assert getattr(Connection(ALICE), way)(authz, txn="t1") == (0, {})
    assert authorizer.asked > first


@pytest.mark.parametrize("way", ["produce", "checks", "separately"])
def test_every_acl_change_is_followed(way: str) -> None:
    authorizer = authorizer_of(binding("etl-", "User:alice"), binding("t", "User:alice", rtype=TXN))
    authz = RequestAuthorizer(authorizer)
    connection = Connection(ALICE)
    assert getattr(connection, way)(authz, txn="t1") == (0, {})
    deny = binding("etl-a", "User:*", Perm.DENY, pattern=PatternType.LITERAL)
    authorizer.cache.set_entries(deny.pattern, frozenset({deny.entry}))  # as a store's change
    assert getattr(connection, way)(authz, txn="t1") == (0, {"etl-a": WRITE_DENIED})
    authorizer.cache.set_entries(deny.pattern, frozenset())
    assert getattr(connection, way)(authz, txn="t1") == (0, {})
    txn_deny = binding("t1", "User:alice", Perm.DENY, rtype=TXN, pattern=PatternType.LITERAL)
    assert all(r.error is None for r in asyncio.run(authorizer.create_acls([txn_deny])))
    assert getattr(connection, way)(authz, txn="t1")[0] == TXN_DENIED


def test_another_api_between_two_produces_keeps_what_passed() -> None:
    # A Metadata request between two produces gives the connection a new request context
    # (bind_request); the principal and host are the same, so nothing is asked again.
    authorizer = authorizer_of(binding("etl-", "User:alice"))
    authz = RequestAuthorizer(authorizer)
    connection = Connection(ALICE)
    assert connection.produce(authz) == (0, {})
    asked = authorizer.asked
    metadata = Request(ApiKey.METADATA, 12, 8, "client", None, None, 12, 0)  # type: ignore[arg-type]
    for _ in range(2):
        connection.context.run(bind_request, metadata)
        assert connection.produce(authz) == (0, {})
        assert connection.produce(authz) == (0, {})
    assert authorizer.asked == asked


def test_a_connection_that_authenticates_is_decided_as_its_new_principal() -> None:
    authz = RequestAuthorizer(authorizer_of(binding("etl-", "User:alice")))
    connection = Connection(ALICE)
    assert connection.produce(authz) == (0, {})
    connection.context.run(CONNECTION_PRINCIPAL.set, BOB)  # e.g. re-authenticated
    assert connection.produce(authz) == (0, {"etl-a": WRITE_DENIED})


def test_a_refused_transactional_id_asks_nothing_of_the_topics() -> None:
    authorizer = authorizer_of(binding("etl-", "User:alice"))
    assert Connection(ALICE).produce(RequestAuthorizer(authorizer), txn="t1") == (TXN_DENIED, {})
    assert authorizer.asked == 1  # as Kafka, which answers before looking at the topics


def test_another_principal_or_host_is_decided_afresh() -> None:
    authorizer = authorizer_of(
        AclBinding(
            ResourcePattern(TOPIC, "etl-", PatternType.PREFIXED),
            AccessControlEntry("User:alice", "10.0.0.1", Op.WRITE, Perm.ALLOW),
        )
    )
    authz = RequestAuthorizer(authorizer)
    assert ask(authz, ALICE) == (0, {})
    assert ask(authz, BOB) == (0, {"etl-a": WRITE_DENIED})
    assert ask(authz, ALICE, host="10.0.0.2") == (0, {"etl-a": WRITE_DENIED})
    assert ask(authz, ALICE) == (0, {})


def test_a_refusal_is_asked_and_audited_every_time(caplog: pytest.LogCaptureFixture) -> None:
    authz = RequestAuthorizer(authorizer_of())
    connection = Connection(BOB)
    with caplog.at_level(logging.INFO, logger=AUDIT):
        for _ in range(3):
            assert connection.produce(authz) == (0, {"etl-a": WRITE_DENIED})
    denials = [r for r in caplog.records if r.name == AUDIT and "Denied" in r.getMessage()]
    assert len(denials) == 3


def test_grants_audited_at_debug_are_each_decided(caplog: pytest.LogCaptureFixture) -> None:
    authorizer = authorizer_of(binding("etl-", "User:alice"))
    authz = RequestAuthorizer(authorizer)
    connection = Connection(ALICE)
    assert connection.produce(authz) == (0, {})
    with caplog.at_level(logging.DEBUG, logger=AUDIT):
        for _ in range(3):
            assert connection.produce(authz) == (0, {})
    grants = [r for r in caplog.records if r.name == AUDIT and "Allowed" in r.getMessage()]
    assert len(grants) == 3
