from __future__ import annotations

import datetime
from typing import Any

import kio.schema.api_versions.v3.request as av3
import kio.schema.metadata.v12.request as m12
import kio.schema.sasl_authenticate.v0.request as sa0
import kio.schema.sasl_authenticate.v1.request as sa1
import kio.schema.sasl_authenticate.v2.request as sa2
import kio.schema.sasl_handshake.v0.request as sh0
import kio.schema.sasl_handshake.v1.request as sh1
import pytest
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import ScramClient
from kio.schema.errors import ErrorCode

from tests.security.scram_store import MemoryScramStore
from tierlog.protocol import decode_response, encode_request
from tierlog.security.oauth_unsecured import UnsecuredJwsValidator, unsecured_token
from tierlog.security.oauthbearer import OAuthBearerSaslServer
from tierlog.security.plain import PlainSaslServer, PlainUsers
from tierlog.security.principal import KafkaPrincipal
from tierlog.security.sasl_session import (
    Authenticated,
    Close,
    Fail,
    Forward,
    SaslSession,
    SaslState,
    Send,
)
from tierlog.security.scram import ScramSaslServer
from tierlog.security.scram_credentials import ScramMechanism
from tierlog.util.clock import ManualClock

SHA256 = ScramMechanism.SCRAM_SHA_256


def _frame(body: Any, correlation_id: int = 1) -> bytes:
    return encode_request(body, correlation_id)[4:]


def _answer(action: Any, api_key: int, version: int) -> Any:
    assert isinstance(action, Send | Fail), action
    data = action.data if isinstance(action, Send) else action.response
    assert data is not None
    return decode_response(data[4:], api_key, version)[1]


def _session(clock: ManualClock, **kwargs: Any) -> SaslSession:
    store = MemoryScramStore()
    store.add_user("alice", "alice-secret", SHA256)
    mechanisms = {
        "SCRAM-SHA-256": lambda: ScramSaslServer(SHA256, store),
        "PLAIN": lambda: PlainSaslServer(PlainUsers({"alice": "alice-secret"})),
        "OAUTHBEARER": lambda: OAuthBearerSaslServer(UnsecuredJwsValidator(clock)),
    }
    return SaslSession(mechanisms, clock, **kwargs)


def _authenticate(session: SaslSession, token: bytes, version: int = 2) -> list[Any]:
    body = {0: sa0, 1: sa1, 2: sa2}[version].SaslAuthenticateRequest(auth_bytes=token)
    return session.receive(_frame(body))


def _scram_login(
    session: SaslSession, password: str = "alice-secret", version: int = 2
) -> list[Any]:
    session.receive(_frame(sh1.SaslHandshakeRequest(mechanism="SCRAM-SHA-256")))
    client = ScramClient("alice", password, "SCRAM-SHA-256")
    first = _answer(_authenticate(session, client.first_message(), version)[0], 36, version)
    assert first.error_code == ErrorCode.none
    client.process_server_first_message(first.auth_bytes)
    return _authenticate(session, client.final_message(), version)


def test_api_versions_then_scram_over_sasl_authenticate_v2() -> None:
    clock = ManualClock()
    session = _session(clock)
    versions = _frame(av3.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    assert session.receive(versions) == [Forward(versions)]
    actions = _scram_login(session)
    final = _answer(actions[0], 36, 2)
    assert final.error_code == ErrorCode.none and final.auth_bytes.startswith(b"v=")
    assert actions[1] == Authenticated(KafkaPrincipal.user("alice"), "SCRAM-SHA-256", 0, False)
    assert session.authenticated
    metadata = _frame(m12.MetadataRequest(topics=None, include_topic_authorized_operations=False))
    assert session.receive(metadata) == [Forward(metadata)]


def test_handshake_lists_the_enabled_mechanisms_and_refuses_others() -> None:
    session = _session(ManualClock(), failed_authentication_delay_ms=250)
    actions = session.receive(_frame(sh1.SaslHandshakeRequest(mechanism="GSSAPI")))
    assert len(actions) == 1 and isinstance(actions[0], Fail) and actions[0].delay_ms == 250
    answer = _answer(actions[0], 17, 1)
    assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
    assert answer.mechanisms == ("SCRAM-SHA-256", "PLAIN", "OAUTHBEARER")
    assert session.receive(b"more") == [Close("frame after a failed authentication")]


def test_wrong_password_is_58_after_the_delay_with_the_generic_message() -> None:
    session = _session(ManualClock(), failed_authentication_delay_ms=100)
    actions = _scram_login(session, password="wrong")
    assert len(actions) == 1 and isinstance(actions[0], Fail) and actions[0].delay_ms == 100
    answer = _answer(actions[0], 36, 2)
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    assert session.state is SaslState.FAILED


@pytest.mark.parametrize(
    "body",
    [
        m12.MetadataRequest(topics=None, include_topic_authorized_operations=False),
        sa2.SaslAuthenticateRequest(auth_bytes=b"x"),
    ],
)
def test_requests_before_authentication_fail_the_connection(body: Any) -> None:
    actions = _session(ManualClock()).receive(_frame(body))
    assert len(actions) == 1 and isinstance(actions[0], Fail) and actions[0].response is None


def test_a_second_api_versions_or_garbage_fails() -> None:
    versions = _frame(av3.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    session = _session(ManualClock())
    session.receive(versions)
    assert isinstance(session.receive(versions)[0], Fail)
    for garbage in (b"", b"\x00", b"\x00\x11\x00\x01\x00", b"\x00\x11\x00\x09\x00\x00\x00\x01"):
        assert isinstance(_session(ManualClock()).receive(garbage)[0], Fail)


def test_oversized_frames_before_authentication_fail() -> None:
    session = _session(ManualClock(), max_receive_bytes=1024)
    actions = session.receive(_frame(sh1.SaslHandshakeRequest(mechanism="PLAIN" + "x" * 2000)))
    assert isinstance(actions[0], Fail) and "receive size" in actions[0].reason


def test_handshake_v0_then_raw_tokens() -> None:
    session = _session(ManualClock())
    answer = _answer(session.receive(_frame(sh0.SaslHandshakeRequest(mechanism="PLAIN")))[0], 17, 0)
    assert answer.error_code == ErrorCode.none
    client = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    actions = session.receive(client.auth_bytes())  # a raw token, no Kafka header
    assert actions == [
        Send(b"\x00\x00\x00\x00"),
        Authenticated(KafkaPrincipal.user("alice"), "PLAIN", 0, False),
    ]
    bad = _session(ManualClock())
    bad.receive(_frame(sh0.SaslHandshakeRequest(mechanism="PLAIN")))
    failed = bad.receive(b"\x00alice\x00nope")
    assert isinstance(failed[0], Fail) and failed[0].response is None  # v0: no error frame


def test_session_lifetime_is_the_shorter_of_max_reauth_and_token_expiry() -> None:
    clock = ManualClock(1_700_000_000_000)
    session = _session(clock, max_reauth_ms={"OAUTHBEARER": 600_000})
    session.receive(_frame(sh1.SaslHandshakeRequest(mechanism="OAUTHBEARER")))
    token = unsecured_token({"sub": "alice", "exp": 1_700_000_300})
    actions = _authenticate(session, f"n,,\x01auth=Bearer {token}\x01\x01".encode(), version=1)
    answer = _answer(actions[0], 36, 1)
    assert answer.session_lifetime == datetime.timedelta(milliseconds=300_000)
    assert actions[1].session_lifetime_ms == 300_000


def test_expired_session_closes_unless_reauthenticating() -> None:
    clock = ManualClock()
    session = _session(clock, max_reauth_ms={"SCRAM-SHA-256": 1000})
    actions = _scram_login(session)
    assert actions[1].session_lifetime_ms == 1000
    metadata = _frame(m12.MetadataRequest(topics=None, include_topic_authorized_operations=False))
    clock.advance(1001)
    assert isinstance(session.receive(metadata)[0], Close)
    # KIP-368: a client that spoke SaslAuthenticate v1+ re-authenticates in time instead.
    clock2 = ManualClock()
    session = _session(clock2, max_reauth_ms={"SCRAM-SHA-256": 1000})
    _scram_login(session)
    clock2.advance(1001)
    reauth = _scram_login(session)
    assert isinstance(reauth[1], Authenticated) and reauth[1].reauthenticated
    assert session.receive(metadata) == [Forward(metadata)]


def test_reauthentication_must_keep_the_mechanism() -> None:
    session = _session(ManualClock())
    _scram_login(session)
    actions = session.receive(_frame(sh1.SaslHandshakeRequest(mechanism="PLAIN")))
    assert isinstance(actions[0], Fail) and "re-authentication" in actions[0].reason


def test_reauthentication_must_keep_the_principal() -> None:
    store = MemoryScramStore()
    store.add_user("alice", "a", SHA256)
    store.add_user("bob", "b", SHA256)
    session = SaslSession({"SCRAM-SHA-256": lambda: ScramSaslServer(SHA256, store)}, ManualClock())
    session.receive(_frame(sh1.SaslHandshakeRequest(mechanism="SCRAM-SHA-256")))

    def login(user: str, password: str) -> list[Any]:
        client = ScramClient(user, password, "SCRAM-SHA-256")
        first = _answer(_authenticate(session, client.first_message())[0], 36, 2)
        client.process_server_first_message(first.auth_bytes)
        return _authenticate(session, client.final_message())

    assert isinstance(login("alice", "a")[1], Authenticated)
    session.receive(_frame(sh1.SaslHandshakeRequest(mechanism="SCRAM-SHA-256")))
    actions = login("bob", "b")
    assert isinstance(actions[0], Fail)
    assert "Cannot change principals" in _answer(actions[0], 36, 2).error_message


def test_v0_clients_cannot_reauthenticate_and_late_authenticate_is_illegal() -> None:
    session = _session(ManualClock())
    _scram_login(session, version=0)
    handshake = session.receive(_frame(sh1.SaslHandshakeRequest(mechanism="SCRAM-SHA-256")))
    assert _answer(handshake[0], 17, 1).error_code == ErrorCode.illegal_sasl_state
    late = session.receive(_frame(sa2.SaslAuthenticateRequest(auth_bytes=b"x")))
    assert _answer(late[0], 36, 2).error_code == ErrorCode.illegal_sasl_state
    assert session.authenticated
