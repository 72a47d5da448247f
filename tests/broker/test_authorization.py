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


def ask(authz: RequestAuthorizer, principal: KafkaPrincipal, host: str = "10.0.0.1",
        txn: str | None = None) -> tuple[int, dict[str, int]]:  # fmt: skip
    """One produce request's checks, as handlers/produce.py makes them, from ``principal``
    connected from ``host`` (in a context of its own, as each connection's task is)."""

    def checks() -> tuple[int, dict[str, int]]:
        CONNECTION_PRINCIPAL.set(principal)
        CLIENT_ADDRESS.set(f"/{host}")
        request = produce()
        bind_request(request)
        conditions = (When.TRANSACTIONAL,) if txn is not None else ()
        code = authz.request_error(request, {TXN: txn}, *conditions)
        return code, authz.denied(request, TOPIC, (name for name in ("etl-a", "etl-a")))

    return contextvars.copy_context().run(checks)


def authorizer_of(*bindings: AclBinding) -> CountingAclAuthorizer:
    authorizer = CountingAclAuthorizer()
    assert all(r.error is None for r in asyncio.run(authorizer.create_acls(bindings)))
    return authorizer


def test_a_passing_shape_is_answered_without_the_authorizer() -> None:
    authorizer = authorizer_of(binding("etl-", "User:alice"), binding("t", "User:alice", rtype=TXN))
    authz = RequestAuthorizer(authorizer)
    assert ask(authz, ALICE, txn="t1") == (0, {})
    first = authorizer.asked
    assert first >= 2  # Write on the transactional id and on the topic
    for _ in range(3):
        assert ask(authz, ALICE, txn="t1") == (0, {})
    assert authorizer.asked == first


def test_every_acl_change_is_followed() -> None:
    authorizer = authorizer_of(binding("etl-", "User:alice"), binding("t", "User:alice", rtype=TXN))
    authz = RequestAuthorizer(authorizer)
    assert ask(authz, ALICE, txn="t1") == (0, {})
    deny = binding("etl-a", "User:*", Perm.DENY, pattern=PatternType.LITERAL)
    authorizer.cache.set_entries(deny.pattern, frozenset({deny.entry}))  # as a store's change
    assert ask(authz, ALICE, txn="t1") == (0, {"etl-a": WRITE_DENIED})
    authorizer.cache.set_entries(deny.pattern, frozenset())
    assert ask(authz, ALICE, txn="t1") == (0, {})
    txn_deny = binding("t1", "User:alice", Perm.DENY, rtype=TXN, pattern=PatternType.LITERAL)
    assert all(r.error is None for r in asyncio.run(authorizer.create_acls([txn_deny])))
    assert ask(authz, ALICE, txn="t1")[0] == TXN_DENIED


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
    with caplog.at_level(logging.INFO, logger=AUDIT):
        for _ in range(3):
            assert ask(authz, BOB) == (0, {"etl-a": WRITE_DENIED})
    denials = [r for r in caplog.records if r.name == AUDIT and "Denied" in r.getMessage()]
    assert len(denials) == 3


def test_grants_audited_at_debug_are_each_decided(caplog: pytest.LogCaptureFixture) -> None:
    authorizer = authorizer_of(binding("etl-", "User:alice"))
    authz = RequestAuthorizer(authorizer)
    assert ask(authz, ALICE) == (0, {})
    with caplog.at_level(logging.DEBUG, logger=AUDIT):
        for _ in range(3):
            assert ask(authz, ALICE) == (0, {})
    grants = [r for r in caplog.records if r.name == AUDIT and "Allowed" in r.getMessage()]
    assert len(grants) == 3
