"""Fuzz entry point for the parsers of untrusted input in ``tierlog.security``.

``fuzz_one_input(data)`` (atheris-compatible) feeds the same bytes to every parser a peer
or a config can reach -- SCRAM, PLAIN and OAUTHBEARER messages, SaslHandshake and
SaslAuthenticate frames through a fresh ``SaslSession``, DNs, ACL znodes and change
notifications, JAAS text and mapping rules -- and lets only their documented errors
through: anything else escaping is a bug. ``python -m tierlog.security.fuzz [iterations]
[seed]`` runs seeded mutations of a built-in corpus.
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Sequence
from typing import Final

from tierlog.protocol import ProtocolError
from tierlog.protocol.fuzz import mutate
from tierlog.security.acl_zk import decode_acl_change, decode_acls
from tierlog.security.dn import rfc2253_name
from tierlog.security.errors import SecurityError
from tierlog.security.jaas import parse_jaas_entries
from tierlog.security.oauth_unsecured import UnsecuredJwsValidator, unsecured_token
from tierlog.security.oauthbearer import OAuthBearerSaslServer, parse_client_initial_response
from tierlog.security.plain import PlainSaslServer, PlainUsers
from tierlog.security.sasl_session import SaslSession
from tierlog.security.scram import (
    DelegationTokenCredential,
    ScramSaslServer,
    parse_client_final,
    parse_client_first,
)
from tierlog.security.scram_credentials import ScramCredential, ScramMechanism, make_credential
from tierlog.security.ssl_principal_mapper import NoMatchingRuleError, SslPrincipalMapper
from tierlog.util.clock import ManualClock
from tierlog.util.configdef import ConfigError

__all__ = ["builtin_corpus", "fuzz_one_input", "main", "run"]

_EXPECTED: Final = (SecurityError, ProtocolError, ConfigError)
_CREDENTIAL: Final = make_credential(ScramMechanism.SCRAM_SHA_256, "pw", salt=b"fuzz-salt")


class _Store:
    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return _CREDENTIAL if user == "alice" else None

    def delegation_token(
        self, token_id: str, mechanism: ScramMechanism
    ) -> DelegationTokenCredential | None:
        return None


def _servers(clock: ManualClock) -> dict[str, object]:
    return {
        "PLAIN": lambda: PlainSaslServer(PlainUsers({"alice": "pw"})),
        "SCRAM-SHA-256": lambda: ScramSaslServer(ScramMechanism.SCRAM_SHA_256, _Store()),
        "OAUTHBEARER": lambda: OAuthBearerSaslServer(UnsecuredJwsValidator(clock)),
    }


def fuzz_one_input(data: bytes) -> None:
    """Every parser on ``data``; only their documented errors may escape (see docstring)."""
    clock = ManualClock()
    for parse in (
        parse_client_first,
        parse_client_final,
        parse_client_initial_response,
        decode_acls,
    ):
        with contextlib.suppress(*_EXPECTED):
            parse(data)
    for extended in (False, True):
        with contextlib.suppress(*_EXPECTED):
            decode_acl_change(data, extended)
    with contextlib.suppress(*_EXPECTED):
        rfc2253_name(data)
    text = data.decode("utf-8", errors="replace")
    with contextlib.suppress(*_EXPECTED):
        parse_jaas_entries(text)
    with contextlib.suppress(*_EXPECTED, NoMatchingRuleError):
        SslPrincipalMapper(text).name("CN=alice,OU=fuzz")
    with contextlib.suppress(*_EXPECTED, NoMatchingRuleError):
        SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1/L,DEFAULT").name(text)
    servers = _servers(clock)
    for factory in servers.values():
        server = factory()  # type: ignore[operator]
        for chunk in (data, data[: len(data) // 2], b"\x01"):
            with contextlib.suppress(*_EXPECTED):
                server.evaluate(chunk)
    session = SaslSession(servers, clock)  # type: ignore[arg-type]
    for chunk in (data, data, data[::-1]):
        session.receive(chunk)


def builtin_corpus() -> list[bytes]:
    """Valid messages of each kind, for mutation."""
    token = unsecured_token({"sub": "alice", "exp": 2_000_000_000, "iat": 1_000_000_000})
    handshake = bytes.fromhex("0011000100000007") + b"\x00\x06fuzzer" + b"\x00\x0dSCRAM-SHA-256"
    authenticate = (
        bytes.fromhex("0024000100000008") + b"\x00\x06fuzzer" + b"\x00\x00\x00\x0dn,,n=alice,r=x"
    )
    return [
        b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL",
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        b"\x00alice\x00pw",
        f"n,,\x01auth=Bearer {token}\x01ext=v\x01\x01".encode(),
        handshake,
        authenticate,
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}',
        b'{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}',
        b"org.apache.kafka.common.security.plain.PlainLoginModule required "
        b'username="a" password="b";',
        b"RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L,DEFAULT",
        bytes.fromhex("3021310b300906035504061302555331123010060355040313096c6f63616c686f7374"),
    ]


def run(corpus: Sequence[bytes], iterations: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    for _ in range(iterations):
        fuzz_one_input(mutate(rng, rng.choice(corpus)))


def main(argv: Sequence[str] = ()) -> int:
    iterations = int(argv[0]) if argv else 2_000
    seed = int(argv[1]) if len(argv) > 1 else 0
    run(builtin_corpus(), iterations, seed)
    print(f"{iterations} mutated inputs, no unexpected exception")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
