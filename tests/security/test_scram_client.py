"""The SCRAM client (``tierlog.security.scram_client``): RFC 7677's vector, a round trip
with tierlog's server, and the checks that protect the client from a rogue server."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.security.scram_store import MemoryScramStore
from tierlog.security.errors import AuthenticationError
from tierlog.security.password import Password
from tierlog.security.principal import KafkaPrincipal
from tierlog.security.scram import ScramSaslServer
from tierlog.security.scram_client import ScramSaslClient
from tierlog.security.scram_credentials import ScramMechanism

SHA256 = ScramMechanism.SCRAM_SHA_256
NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)


def vector_client() -> ScramSaslClient:
    return ScramSaslClient(SHA256, "user", Password("pencil"), nonce=lambda: NONCE)


def test_rfc_7677_test_vector() -> None:
    client = vector_client()
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final_message(SERVER_FIRST) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    assert client.complete


def test_a_wrong_server_signature_is_refused() -> None:
    client = vector_client()
    client.first_message()
    client.final_message(SERVER_FIRST)
    forged = base64.b64encode(bytes(32)).decode()
    with pytest.raises(AuthenticationError, match="server signature"):
        client.verify(f"v={forged}".encode())
    assert not client.complete


@pytest.mark.parametrize(
    ("server_first", "reason"),
    [
        (b"r=someoneElsesNonce123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1", "iterations"),
        (b"r=rOprNGfwEbeRWgbNEkqOxyz,i=4096", "format"),
        (b"e=unknown-user", "refused"),
    ],
)
def test_a_bad_server_first_is_refused(server_first: bytes, reason: str) -> None:
    client = vector_client()
    client.first_message()
    with pytest.raises(AuthenticationError, match=reason):
        client.final_message(server_first)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
@settings(max_examples=10, deadline=None)
@given(user=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1))
def test_round_trip_with_tierlogs_server(mechanism: ScramMechanism, user: str) -> None:
    store = MemoryScramStore()
    store.add_user(user, "s3cret, with = signs", mechanism)
    server = ScramSaslServer(mechanism, store)
    client = ScramSaslClient(mechanism, user, Password("s3cret, with = signs"))
    server_first = server.evaluate(client.first_message())
    server_final = server.evaluate(client.final_message(server_first))
    client.verify(server_final)
    assert client.complete
    assert server.outcome is not None
    assert server.outcome.principal == KafkaPrincipal.user(user)


def test_a_wrong_password_fails_at_the_server() -> None:
    store = MemoryScramStore()
    store.add_user("alice", "right", SHA256)
    server = ScramSaslServer(SHA256, store)
    client = ScramSaslClient(SHA256, "alice", Password("wrong"))
    server_first = server.evaluate(client.first_message())
    with pytest.raises(AuthenticationError):
        server.evaluate(client.final_message(server_first))
