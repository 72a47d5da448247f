from __future__ import annotations

import logging

import pytest

from tierlog.security.password import HIDDEN, Password, is_secret_key


def test_a_password_never_shows_itself() -> None:
    secret = Password("s3cret!")
    assert secret.value == "s3cret!"
    for shown in (
        repr(secret),
        str(secret),
        f"{secret}",
        f"{secret!r}",
        str([secret]),
        str({"k": secret}),
    ):
        assert "s3cret" not in shown
    assert str(secret) == HIDDEN


def test_a_logged_password_is_hidden(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        logging.getLogger("test").info(
            "configured %s and %r", Password("hunter2"), Password("hunter2")
        )
    assert "hunter2" not in caplog.text
    assert HIDDEN in caplog.text


def test_equality_compares_the_values() -> None:
    assert Password("a") == Password("a")
    assert Password("a") != Password("b")
    assert Password(Password("x")).value == "x"
    with pytest.raises(TypeError):
        Password(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("ssl.key.password", True),
        ("ssl.keystore.key", True),
        ("sasl.jaas.config", True),
        ("user_alice", True),
        ("sasl.oauthbearer.client.secret", True),
        ("ssl.keystore.location", False),
        ("ssl.truststore.certificates", False),
        ("username", False),
    ],
)
def test_which_keys_are_secret(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret
