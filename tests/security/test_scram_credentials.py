from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.security.scram_credentials import (
    ScramCredential,
    ScramCredentialError,
    ScramMechanism,
    make_credential,
    parse_credential,
)

SHA256 = ScramMechanism.SCRAM_SHA_256


def test_rfc_7677_credential() -> None:
    # RFC 7677 section 3: user "user", password "pencil", this salt, 4096 iterations; the
    # exchange in test_scram.py checks these keys produce the RFC's proof and signature.
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = make_credential(SHA256, "pencil", 4096, salt)
    assert credential.salt == salt and credential.iterations == 4096
    assert len(credential.stored_key) == len(credential.server_key) == 32
    assert len(make_credential(ScramMechanism.SCRAM_SHA_512, "pencil", 4096, salt).stored_key) == 64


def test_kafka_text_form() -> None:
    credential = ScramCredential(b"salt", b"stored", b"server", 4096)
    text = credential.to_kafka()
    assert text == "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"
    assert parse_credential(text) == credential


def test_repr_hides_keys() -> None:
    credential = make_credential(SHA256, "pw", salt=b"x" * 16)
    assert base64.b64encode(credential.stored_key).decode() not in repr(credential)


@pytest.mark.parametrize("iterations", [4095, 16385, 0])
def test_iterations_outside_kafkas_bounds_are_refused(iterations: int) -> None:
    with pytest.raises(ScramCredentialError, match=str(iterations)):
        make_credential(SHA256, "pw", iterations)


@pytest.mark.parametrize(
    "text",
    [
        "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy",
        "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=x",
        "salt=!!,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096",
        "salt=c2FsdA==,salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096",
        "",
    ],
)
def test_bad_text_forms_are_refused(text: str) -> None:
    with pytest.raises(ScramCredentialError):
        parse_credential(text)


@settings(max_examples=25, deadline=None)
@given(
    st.binary(min_size=1, max_size=32),
    st.binary(max_size=64),
    st.binary(max_size=64),
    st.integers(1, 1 << 30),
)
def test_text_form_round_trips(salt: bytes, stored: bytes, server: bytes, iterations: int) -> None:
    credential = ScramCredential(salt, stored, server, iterations)
    assert parse_credential(credential.to_kafka()) == credential
