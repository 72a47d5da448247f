from __future__ import annotations

import pytest
from kafka.net.sasl.plain import SaslMechanismPlain

from tierlog.security.errors import AuthenticationError, IllegalSaslStateError, SecurityConfigError
from tierlog.security.jaas import parse_jaas_config
from tierlog.security.plain import PlainSaslServer, PlainUsers
from tierlog.security.principal import KafkaPrincipal

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def _users() -> PlainUsers:
    return PlainUsers.from_jaas(parse_jaas_config(JAAS))


def test_kafka_python_client_authenticates() -> None:
    client = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    server = PlainSaslServer(_users())
    client.receive(server.evaluate(client.auth_bytes()))
    assert client.is_authenticated()
    assert server.outcome is not None and server.outcome.principal == KafkaPrincipal.user("alice")
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(client.auth_bytes())


def test_users_come_from_user_options_only() -> None:
    users = _users()
    assert users.authenticate("admin", "admin-secret")
    # username/password are the broker's own login, not a user entry by themselves.
    assert not PlainUsers.from_jaas(
        parse_jaas_config(
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="x" password="y";'
        )
    ).authenticate("x", "y")
    assert "alice-secret" not in repr(users)


@pytest.mark.parametrize(
    ("message", "client_sees"),
    [
        (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
        (b"\x00mallory\x00alice-secret", "Authentication failed: Invalid username or password"),
        (b"\x00\x00pw", "Authentication failed: username not specified"),
        (b"\x00alice\x00", "Authentication failed: password not specified"),
        (b"bob\x00alice\x00alice-secret", "different from username"),
        (b"alice\x00alice-secret", None),
        (b"\xff\x00a\x00b", None),
    ],
)
def test_refusals(message: bytes, client_sees: str | None) -> None:
    with pytest.raises(AuthenticationError) as caught:
        PlainSaslServer(_users()).evaluate(message)
    if client_sees is None:
        assert caught.value.client_message is None
    else:
        assert (
            caught.value.client_message is not None and client_sees in caught.value.client_message
        )
    assert "alice-secret" not in str(caught.value)


def test_wrong_login_module_is_a_config_error() -> None:
    with pytest.raises(SecurityConfigError, match="PlainLoginModule"):
        PlainUsers.from_jaas(
            parse_jaas_config("org.apache.kafka.common.security.scram.ScramLoginModule required;")
        )
