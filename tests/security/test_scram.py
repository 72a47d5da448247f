from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.net.sasl.scram import ScramClient

from tests.security.scram_store import MemoryScramStore
from tierlog.security.errors import AuthenticationError, IllegalSaslStateError
from tierlog.security.principal import KafkaPrincipal
from tierlog.security.scram import (
    DelegationTokenCredential,
    ScramSaslServer,
    ScramState,
    sasl_name,
    username,
)
from tierlog.security.scram_credentials import ScramMechanism, make_credential

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def _store(*users: tuple[str, str, ScramMechanism]) -> MemoryScramStore:
    store = MemoryScramStore()
    for user, password, mechanism in users:
        store.add_user(user, password, mechanism)
    return store


def test_rfc_7677_test_vector() -> None:
    store = MemoryScramStore()
    store.users[("user", SHA256)] = make_credential(
        SHA256, "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    )
    server = ScramSaslServer(SHA256, store, nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server_first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert server_first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    server_final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.outcome is not None and server.outcome.principal == KafkaPrincipal.user("user")


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_kafka_python_client_authenticates(mechanism: ScramMechanism) -> None:
    server = ScramSaslServer(mechanism, _store(("alice", "alice-secret", mechanism)))
    client = ScramClient("alice", "alice-secret", mechanism.mechanism_name)
    client.process_server_first_message(server.evaluate(client.first_message()))
    server_final = server.evaluate(client.final_message())
    client.process_server_final_message(server_final)  # raises if the signature is wrong
    assert server.state is ScramState.COMPLETE
    assert server.outcome is not None and server.outcome.principal == KafkaPrincipal.user("alice")


def test_wrong_password_and_unknown_user_look_the_same_to_the_client() -> None:
    store = _store(("alice", "right", SHA256))
    wrong = ScramSaslServer(SHA256, store)
    client = ScramClient("alice", "wrong", "SCRAM-SHA-256")
    client.process_server_first_message(wrong.evaluate(client.first_message()))
    with pytest.raises(AuthenticationError) as bad_password:
        wrong.evaluate(client.final_message())
    unknown = ScramSaslServer(SHA256, store)
    with pytest.raises(AuthenticationError) as no_user:
        unknown.evaluate(ScramClient("mallory", "x", "SCRAM-SHA-256").first_message())
    assert bad_password.value.client_message is None and no_user.value.client_message is None
    assert wrong.state is ScramState.FAILED and unknown.state is ScramState.FAILED
    with pytest.raises(IllegalSaslStateError):
        wrong.evaluate(b"anything")


def _exchange(server: ScramSaslServer, client: ScramClient) -> bytes:
    client.process_server_first_message(server.evaluate(client.first_message()))
    return client.final_message()


def test_a_replayed_client_final_is_refused() -> None:
    store = _store(("alice", "pw", SHA256))
    client = ScramClient("alice", "pw", "SCRAM-SHA-256")
    first_server = ScramSaslServer(SHA256, store)
    recorded_first = client.first_message()
    client.process_server_first_message(first_server.evaluate(recorded_first))
    recorded_final = client.final_message()
    first_server.evaluate(recorded_final)  # the genuine exchange succeeds
    replay = ScramSaslServer(SHA256, store)
    replay.evaluate(recorded_first)  # a fresh server nonce
    with pytest.raises(AuthenticationError, match="nonce"):
        replay.evaluate(recorded_final)


@pytest.mark.parametrize("part", ["proof", "channel", "nonce"])
def test_a_tampered_client_final_is_refused(part: str) -> None:
    server = ScramSaslServer(SHA256, _store(("alice", "pw", SHA256)))
    final = _exchange(server, ScramClient("alice", "pw", "SCRAM-SHA-256")).decode()
    fields = dict(item.split("=", 1) for item in final.split(","))
    if part == "proof":
        proof = bytearray(base64.b64decode(fields["p"]))
        proof[0] ^= 1
        fields["p"] = base64.b64encode(bytes(proof)).decode()
    elif part == "channel":
        fields["c"] = base64.b64encode(b"n,a=bob,").decode()
    else:
        fields["r"] = fields["r"][:-1] + ("A" if fields["r"][-1] != "A" else "B")
    with pytest.raises(AuthenticationError):
        server.evaluate(",".join(f"{k}={v}" for k, v in fields.items()).encode())


def test_librdkafka_repeated_nonce_is_refused_and_named() -> None:
    # librdkafka < 2.6.1 sends r=<cnonce><cnonce><snonce> (librdkafka#4895); Kafka 4 refuses.
    server = ScramSaslServer(SHA256, _store(("alice", "pw", SHA256)), nonce=lambda: "SERVER")
    server.evaluate(b"n,,n=alice,r=CLIENT")
    with pytest.raises(AuthenticationError, match="librdkafka"):
        server.evaluate(b"c=biws,r=CLIENTCLIENTSERVER,p=AAAA")


def test_credential_below_the_minimum_iterations_is_refused() -> None:
    store = MemoryScramStore()
    credential = make_credential(SHA256, "pw", 4096)
    store.users[("alice", SHA256)] = type(credential)(
        credential.salt, credential.stored_key, credential.server_key, 1000
    )
    with pytest.raises(AuthenticationError, match="less than the minimum 4096"):
        ScramSaslServer(SHA256, store).evaluate(b"n,,n=alice,r=abc")


def test_authorization_id_must_be_the_user() -> None:
    server = ScramSaslServer(SHA256, _store(("alice", "pw", SHA256)))
    with pytest.raises(AuthenticationError) as caught:
        server.evaluate(b"n,a=bob,n=alice,r=abc")
    assert (
        caught.value.client_message is not None
        and "authorization id" in caught.value.client_message
    )


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"y,,n=alice,r=abc",
        b"n,,n=alice",
        b"n,,n=al,ice,r=abc",
        b"n,,n=a=b,r=abc",
        "n,,n=ä,r=x".encode(),
    ],
)
def test_malformed_client_first_messages(message: bytes) -> None:
    with pytest.raises(AuthenticationError):
        ScramSaslServer(SHA256, _store(("alice", "pw", SHA256))).evaluate(message)


def test_delegation_token_authentication() -> None:
    # tokenauth=true (KIP-48): n= is the token id, the principal is the token's owner.
    store = MemoryScramStore()
    credential = make_credential(SHA256, "token-hmac")
    owner = KafkaPrincipal.user("alice")
    store.tokens[("token-1", SHA256)] = DelegationTokenCredential(
        credential, owner, 1_900_000_000_000
    )
    server = ScramSaslServer(SHA256, store)
    client = ScramClient("token-1", "token-hmac", "SCRAM-SHA-256")
    first = client.first_message() + b",tokenauth=true"
    client.auth_message += b",tokenauth=true"  # the extension is part of client-first-bare
    client.process_server_first_message(server.evaluate(first))
    server.evaluate(client.final_message())
    assert server.outcome is not None
    assert server.outcome.principal == owner and server.outcome.principal.token_authenticated
    assert server.outcome.credential_expiry_ms == 1_900_000_000_000
    unknown = ScramSaslServer(SHA256, store)
    with pytest.raises(AuthenticationError, match="Invalid tokenId"):
        unknown.evaluate(b"n,,n=token-2,r=abc,tokenauth=true")


def test_unknown_extensions_are_ignored() -> None:
    server = ScramSaslServer(SHA256, _store(("alice", "pw", SHA256)))
    assert server.evaluate(b"n,,n=alice,r=abc,foo=bar").startswith(b"r=abc")


@given(st.text(st.characters(min_codepoint=1, max_codepoint=127), min_size=1, max_size=20))
def test_sasl_names_round_trip(user: str) -> None:
    assert username(sasl_name(user)) == user


@settings(max_examples=10, deadline=None)
@given(
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20),
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20),
)
def test_any_password_authenticates_and_only_it(password: str, other: str) -> None:
    store = _store(("u", password, SHA256))
    ok = ScramSaslServer(SHA256, store)
    client = ScramClient("u", password, "SCRAM-SHA-256")
    client.process_server_final_message(ok.evaluate(_exchange(ok, client)))
    if other != password:
        bad = ScramSaslServer(SHA256, store)
        with pytest.raises(AuthenticationError):
            bad.evaluate(_exchange(bad, ScramClient("u", other, "SCRAM-SHA-256")))
