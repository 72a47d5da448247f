"""tierlog.security.sasl_client: the exchange hands back the session's lifetime the broker
gave (KIP-368), and when a client logs in again within it (the wire: tests/client/
test_reauthentication.py)."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from tierlog.protocol.kio_build import build
from tierlog.security.password import Password
from tierlog.security.sasl_client import (
    PlainSaslClient,
    reauthentication_delay_s,
    sasl_exchange,
)


def run_plain_exchange(lifetime: datetime.timedelta) -> int:
    steps = sasl_exchange(PlainSaslClient("alice", Password("secret")), "b:9092")
    next(steps)  # SaslHandshake
    steps.send(
        build(SaslHandshakeResponse, {"error_code": ErrorCode.none, "mechanisms": ["PLAIN"]})
    )
    answer = build(
        SaslAuthenticateResponse,
        {
            "error_code": ErrorCode.none,
            "error_message": None,
            "auth_bytes": b"",
            "session_lifetime": lifetime,
        },
    )
    with pytest.raises(StopIteration) as done:
        steps.send(answer)
    return int(done.value.value)


def test_the_exchange_returns_the_sessions_lifetime() -> None:
    assert run_plain_exchange(datetime.timedelta(milliseconds=90_000)) == 90_000
    assert run_plain_exchange(datetime.timedelta(0)) == 0


def test_a_client_logs_in_again_between_85_and_95_percent_of_the_lifetime() -> None:
    assert reauthentication_delay_s(10_000, draw=0.0) == pytest.approx(8.5)
    assert reauthentication_delay_s(10_000, draw=0.999999) == pytest.approx(9.5)
    drawn = [reauthentication_delay_s(10_000) for _ in range(200)]
    assert all(d is not None and 8.5 <= d < 9.5 for d in drawn)
    assert len(set(drawn)) > 1  # spread, so connections made together do not renew together


def test_a_session_that_does_not_expire_is_never_renewed() -> None:
    assert reauthentication_delay_s(0) is None
