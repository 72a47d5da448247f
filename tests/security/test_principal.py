from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.security.errors import InvalidAclError
from tierlog.security.principal import ANONYMOUS, KafkaPrincipal, parse_principal


def test_kafka_forms() -> None:
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert parse_principal("User:alice") == KafkaPrincipal.user("alice")
    # Only the first ':' separates: names may hold colons (e.g. mapped DNs).
    assert parse_principal("User:CN=a:b").name == "CN=a:b"
    # Token authentication does not change who the principal is.
    assert KafkaPrincipal.user("bob", token_authenticated=True) == KafkaPrincipal.user("bob")


@pytest.mark.parametrize("text", ["alice", ":alice", "User:", ""])
def test_malformed_principals_are_refused(text: str) -> None:
    with pytest.raises(InvalidAclError):
        parse_principal(text)


@given(st.text(min_size=1).filter(lambda s: ":" not in s), st.text(min_size=1))
def test_round_trip(principal_type: str, name: str) -> None:
    principal = KafkaPrincipal(principal_type, name)
    assert parse_principal(str(principal)) == principal
