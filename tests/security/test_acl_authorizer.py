from __future__ import annotations

import asyncio
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.security.acl import (
    IMPLIED_BY,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from tierlog.security.acl_authorizer import AclAuthorizer, parse_super_users
from tierlog.security.api import Action, AuthorizationResult, RequestContext
from tierlog.security.errors import SecurityConfigError
from tierlog.security.principal import KafkaPrincipal

Op, Perm = AclOperation, AclPermissionType
TOPIC = ResourceType.TOPIC
ALICE = KafkaPrincipal.user("alice")


def _binding(
    name: str,
    principal: str,
    op: Op,
    perm: Perm = Perm.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
    host: str = "*",
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern), AccessControlEntry(principal, host, op, perm)
    )


def _authorizer(*bindings: AclBinding, **kwargs: object) -> AclAuthorizer:
    authorizer = AclAuthorizer(**kwargs)  # type: ignore[arg-type]
    assert all(r.error is None for r in asyncio.run(authorizer.create_acls(bindings)))
    return authorizer


def _topic(name: str) -> ResourcePattern:
    return ResourcePattern(TOPIC, name)


def test_literal_prefixed_and_wildcard_grants() -> None:
    authorizer = _authorizer(
        _binding("orders", "User:alice", Op.READ),
        _binding("etl-", "User:alice", Op.WRITE, pattern=PatternType.PREFIXED),
        _binding("*", "User:*", Op.DESCRIBE),
    )
    assert authorizer.allowed(ALICE, "10.0.0.1", Op.READ, _topic("orders"))
    assert not authorizer.allowed(ALICE, "10.0.0.1", Op.READ, _topic("orders2"))
    assert authorizer.allowed(ALICE, "10.0.0.1", Op.WRITE, _topic("etl-daily"))
    assert not authorizer.allowed(ALICE, "10.0.0.1", Op.WRITE, _topic("etl"))
    assert authorizer.allowed(KafkaPrincipal.user("bob"), "h", Op.DESCRIBE, _topic("anything"))


def test_a_remembered_decision_follows_every_acl_change() -> None:
    """Decisions are remembered between requests; any change of the ACLs, here or arriving
    from the store (``set_entries``), must not be answered from the old ones."""
    authorizer = _authorizer()
    orders = _topic("orders")
    assert not authorizer.allowed(ALICE, "h", Op.WRITE, orders)
    grant = _binding("ord", "User:alice", Op.WRITE, pattern=PatternType.PREFIXED)
    assert all(r.error is None for r in asyncio.run(authorizer.create_acls([grant])))
    assert authorizer.allowed(ALICE, "h", Op.WRITE, orders)
    deny = _binding("orders", "User:*", Op.WRITE, Perm.DENY)
    authorizer.cache.set_entries(deny.pattern, frozenset({deny.entry}))  # as a store's change
    assert not authorizer.allowed(ALICE, "h", Op.WRITE, orders)
    authorizer.cache.set_entries(deny.pattern, frozenset())
    assert authorizer.allowed(ALICE, "h", Op.WRITE, orders)


def test_deny_wins_and_is_not_widened_by_implication() -> None:
    authorizer = _authorizer(
        _binding("orders", "User:alice", Op.ALL),
        _binding("ord", "User:alice", Op.WRITE, Perm.DENY, PatternType.PREFIXED),
        _binding("orders", "User:alice", Op.READ, Perm.DENY, host="10.0.0.9"),
    )
    assert not authorizer.allowed(ALICE, "10.0.0.1", Op.WRITE, _topic("orders"))
    assert authorizer.allowed(ALICE, "10.0.0.1", Op.READ, _topic("orders"))
    assert not authorizer.allowed(ALICE, "10.0.0.9", Op.READ, _topic("orders"))
    # A Deny of Read does not deny Describe (implication only widens Allow).
    assert authorizer.allowed(ALICE, "10.0.0.9", Op.DESCRIBE, _topic("orders"))


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_describe_is_implied(granted: Op) -> None:
    authorizer = _authorizer(_binding("t", "User:alice", granted))
    assert authorizer.allowed(ALICE, "h", Op.DESCRIBE, _topic("t"))
    assert not authorizer.allowed(ALICE, "h", Op.DESCRIBE_CONFIGS, _topic("t"))


def test_describe_configs_is_implied_by_alter_configs() -> None:
    authorizer = _authorizer(_binding("t", "User:alice", Op.ALTER_CONFIGS))
    assert authorizer.allowed(ALICE, "h", Op.DESCRIBE_CONFIGS, _topic("t"))
    assert not authorizer.allowed(ALICE, "h", Op.DESCRIBE, _topic("t"))


def test_super_users_and_no_acl_found() -> None:
    deny_all = _binding("t", "User:*", Op.ALL, Perm.DENY)
    authorizer = _authorizer(deny_all, super_users=parse_super_users("User:admin; User:broker"))
    assert authorizer.allowed(KafkaPrincipal.user("admin"), "h", Op.DELETE, _topic("t"))
    assert not authorizer.allowed(ALICE, "h", Op.READ, _topic("t"))
    assert not authorizer.allowed(ALICE, "h", Op.READ, _topic("no-acls"))
    permissive = _authorizer(deny_all, allow_everyone_if_no_acl_found=True)
    assert permissive.allowed(ALICE, "h", Op.READ, _topic("no-acls"))
    assert not permissive.allowed(ALICE, "h", Op.READ, _topic("t"))
    with pytest.raises(SecurityConfigError):
        parse_super_users("admin")


def test_from_config() -> None:
    authorizer = AclAuthorizer.from_config(
        {"super.users": "User:root", "allow.everyone.if.no.acl.found": "true"}
    )
    assert authorizer.allowed(ALICE, "h", Op.READ, _topic("x"))
    with pytest.raises(SecurityConfigError, match=r"allow\.everyone\.if\.no\.acl\.found"):
        AclAuthorizer.from_config({"allow.everyone.if.no.acl.found": "yes"})


def test_denials_are_audited_once(caplog: pytest.LogCaptureFixture) -> None:
    authorizer = _authorizer(_binding("t", "User:alice", Op.READ))
    context = RequestContext(ALICE, "10.1.2.3", api_key=0)
    with caplog.at_level(logging.INFO, logger="kafka.authorizer.logger"):
        results = authorizer.authorize(
            context, [Action(Op.READ, _topic("t")), Action(Op.WRITE, _topic("t"))]
        )
    assert results == [AuthorizationResult.ALLOWED, AuthorizationResult.DENIED]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "Principal = User:alice is Denied operation = Write from host = 10.1.2.3 on resource = "
        "Topic:LITERAL:t for request = 0 with resourceRefCount = 1"
    ]


def test_by_resource_type_kip_679() -> None:
    context = RequestContext(ALICE, "h")
    authorizer = _authorizer(_binding("orders", "User:alice", Op.WRITE))
    assert (
        authorizer.authorize_by_resource_type(context, Op.WRITE, TOPIC)
        is AuthorizationResult.ALLOWED
    )
    denied_prefix = _authorizer(
        _binding("orders", "User:alice", Op.WRITE),
        _binding("ord", "User:alice", Op.WRITE, Perm.DENY, PatternType.PREFIXED),
    )
    assert (
        denied_prefix.authorize_by_resource_type(context, Op.WRITE, TOPIC)
        is AuthorizationResult.DENIED
    )
    wildcard_deny = _authorizer(
        _binding("orders", "User:alice", Op.WRITE), _binding("*", "User:*", Op.WRITE, Perm.DENY)
    )
    assert (
        wildcard_deny.authorize_by_resource_type(context, Op.WRITE, TOPIC)
        is AuthorizationResult.DENIED
    )
    assert (
        _authorizer().authorize_by_resource_type(context, Op.WRITE, TOPIC)
        is AuthorizationResult.DENIED
    )


def test_describe_and_delete_acls_with_filters() -> None:
    authorizer = _authorizer(
        _binding("orders", "User:alice", Op.READ),
        _binding("ord", "User:bob", Op.WRITE, pattern=PatternType.PREFIXED),
        _binding("g", "User:alice", Op.READ, resource_type=ResourceType.GROUP),
    )
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH))
    assert len(authorizer.acls(match)) == 2
    alice = AclBindingFilter(entry=AccessControlEntryFilter(principal="User:alice"))
    [result] = asyncio.run(authorizer.delete_acls([alice]))
    assert result.error is None and len(result.deleted) == 2
    assert [b.entry.principal for b in authorizer.acls(AclBindingFilter())] == ["User:bob"]
    [bad] = asyncio.run(authorizer.create_acls([_binding("", "User:x", Op.READ)]))
    assert bad.error is not None and "empty" in bad.error


# --- the index against a brute-force reference ----------------------------------------

_names = st.text(st.sampled_from("ab"), min_size=1, max_size=3)
_bindings = st.builds(
    _binding,
    st.one_of(_names, st.just("*")),
    st.sampled_from(["User:alice", "User:bob", "User:*"]),
    st.sampled_from(
        [Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]
    ),
    st.sampled_from([Perm.ALLOW, Perm.DENY]),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    st.sampled_from(["*", "h1"]),
)


def _reference(
    bindings: list[AclBinding],
    principal: str,
    host: str,
    op: Op,
    name: str,
    super_user: bool,
    allow_if_none: bool,
) -> bool:
    if super_user:
        return True
    applicable = [
        b.entry
        for b in bindings
        if (b.pattern.pattern_type is PatternType.LITERAL and b.pattern.name in (name, "*"))
        or (b.pattern.pattern_type is PatternType.PREFIXED and name.startswith(b.pattern.name))
    ]
    if not applicable:
        return allow_if_none
    mine = [e for e in applicable if e.principal in (principal, "User:*") and e.host in (host, "*")]
    if any(e.permission_type is Perm.DENY and e.operation in (op, Op.ALL) for e in mine):
        return False
    granting = {op, Op.ALL} | IMPLIED_BY.get(op, frozenset())
    return any(e.permission_type is Perm.ALLOW and e.operation in granting for e in mine)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_bindings, max_size=12),
    st.sampled_from(["alice", "bob", "carol"]),
    st.sampled_from(["h1", "h2"]),
    st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.DELETE]),
    _names,
    st.booleans(),
    st.booleans(),
)
def test_index_decides_like_a_scan_of_every_acl(
    bindings: list[AclBinding],
    user: str,
    host: str,
    op: Op,
    name: str,
    super_user: bool,
    allow_if_none: bool,
) -> None:
    principal = KafkaPrincipal.user(user)
    authorizer = _authorizer(
        *bindings,
        super_users={principal} if super_user else set(),
        allow_everyone_if_no_acl_found=allow_if_none,
    )
    expected = _reference(bindings, str(principal), host, op, name, super_user, allow_if_none)
    assert authorizer.allowed(principal, host, op, _topic(name)) is expected
    # Removing everything again leaves an empty index.
    asyncio.run(authorizer.delete_acls([AclBindingFilter()]))
    assert len(authorizer.cache) == 0
    assert authorizer.allowed(principal, host, op, _topic(name)) is (super_user or allow_if_none)
