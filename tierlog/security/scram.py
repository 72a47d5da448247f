"""SCRAM-SHA-256 / SCRAM-SHA-512 server (RFC 5802, RFC 7677) as Kafka runs it.

The exchange, one ``evaluate`` per client message::

    RECEIVE_CLIENT_FIRST --client-first--> RECEIVE_CLIENT_FINAL --client-final--> COMPLETE
          |  unknown user, bad syntax,            |  nonce, channel binding or
          |  iterations < 4096                    |  proof wrong
          v                                       v
        FAILED <----------------------------------+

- client-first ``n,[a=<authzid>],n=<user>,r=<cnonce>[,<ext>=<value>]*`` (only gs2 header
  ``n``: no channel binding, as Kafka). ``a=`` must be empty or the user. Extensions
  are ignored except ``tokenauth=true`` (KIP-48 delegation tokens): then ``n=`` is a token
  id, the credential is the token's HMAC, and the principal is the token's owner.
- server-first ``r=<cnonce><snonce>,s=<salt b64>,i=<iterations>``: a fresh server nonce
  per exchange, so a recorded client-final cannot be replayed into another exchange.
- client-final ``c=<b64 gs2 header>,r=<nonce>,p=<proof b64>``: ``r`` must *equal*
  cnonce+snonce and ``c`` the client-first's gs2 header (RFC 5802 section 5.1); the proof
  is checked against StoredKey in constant time.
- server-final ``v=<server signature b64>``.

librdkafka before 2.6.1 sends cnonce+cnonce+snonce in its client-final (librdkafka#4895,
a bug since v0.0.99). Kafka 3.8.1-3.9 tolerated it (``endsWith``); Kafka 4 checks
equality again (the CVE-2024-56128 fix), so those clients cannot log in to Kafka 4.
tierlog accepts what Kafka 4 accepts: the nonce must be equal. The broker's log names the
bug when it sees that exact shape, so the operator knows to upgrade the client.

Messages to the client follow Kafka: failures from bad credentials get the generic
"invalid credentials" text (``client_message=None``), so an unknown user and a wrong
password look the same from outside.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, Protocol

from tierlog.security.errors import AuthenticationError, IllegalSaslStateError
from tierlog.security.principal import KafkaPrincipal
from tierlog.security.sasl_server import SaslOutcome
from tierlog.security.scram_credentials import ScramCredential, ScramMechanism

__all__ = [
    "TOKEN_AUTH",
    "ClientFinal",
    "ClientFirst",
    "DelegationTokenCredential",
    "ScramCredentials",
    "ScramSaslServer",
    "ScramState",
    "parse_client_final",
    "parse_client_first",
    "sasl_name",
    "username",
]

TOKEN_AUTH: Final = "tokenauth"

# Kafka's ScramMessages grammar (ASCII only, as RFC 5802's printable/value rules).
_SASLNAME: Final = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_VALUE: Final = r"[\x01-\x2B\x2D-\x7F]+"
_PRINTABLE: Final = r"[\x21-\x2B\x2D-\x7E]+"
_BASE64: Final = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_RESERVED: Final = rf"(?:m={_VALUE},)?"
_EXTENSIONS: Final = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST: Final = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,){_RESERVED}n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})"
)
_CLIENT_FINAL: Final = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})"
)


def username(name: str) -> str:
    """A SCRAM saslname back to a user name (``=2C`` -> ``,``, ``=3D`` -> ``=``).

    Raises:
        ValueError: a ``=`` that is not part of an escape.
    """
    unescaped = name.replace("=2C", ",")
    if "=" in unescaped.replace("=3D", ""):
        raise ValueError(f"Invalid username: {name}")
    return unescaped.replace("=3D", "=")


def sasl_name(user: str) -> str:
    """A user name as a SCRAM saslname (``=`` -> ``=3D``, ``,`` -> ``=2C``)."""
    return user.replace("=", "=3D").replace(",", "=2C")


@dataclass(frozen=True)
class ClientFirst:
    """A parsed client-first message; ``bare`` is it without the gs2 header."""

    gs2_header: str
    authorization_id: str
    user: str
    nonce: str
    extensions: dict[str, str] = field(default_factory=dict)
    bare: str = ""


@dataclass(frozen=True)
class ClientFinal:
    """A parsed client-final message; ``without_proof`` enters the AuthMessage."""

    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str


def _text(message: bytes, what: str) -> str:
    try:
        return message.decode("ascii")
    except UnicodeDecodeError:
        raise AuthenticationError(f"Invalid SCRAM {what} message format: not ASCII") from None


def parse_client_first(message: bytes) -> ClientFirst:
    """Raises ``AuthenticationError`` unless ``message`` is a client-first Kafka accepts."""
    text = _text(message, "client first")
    match = _CLIENT_FIRST.fullmatch(text)
    if match is None:
        raise AuthenticationError("Invalid SCRAM client first message format")
    extensions: dict[str, str] = {}
    for part in filter(None, match.group("extensions").split(",")):
        name, _, value = part.partition("=")
        extensions[name] = value
    try:
        user = username(match.group("saslname"))
        authzid = username(match.group("authzid")) if match.group("authzid") else ""
    except ValueError as exc:
        raise AuthenticationError(str(exc)) from None
    gs2 = match.group("gs2")
    return ClientFirst(gs2, authzid, user, match.group("nonce"), extensions, text[len(gs2) :])


def parse_client_final(message: bytes) -> ClientFinal:
    """Raises ``AuthenticationError`` unless ``message`` is a well-formed client-final."""
    text = _text(message, "client final")
    match = _CLIENT_FINAL.fullmatch(text)
    if match is None:
        raise AuthenticationError("Invalid SCRAM client final message format")
    try:
        channel = base64.b64decode(match.group("channel"), validate=True)
        proof = base64.b64decode(match.group("proof"), validate=True)
    except binascii.Error:
        raise AuthenticationError("Invalid SCRAM client final message format: base64") from None
    return ClientFinal(channel, match.group("nonce"), proof, match.group("without_proof"))


@dataclass(frozen=True)
class DelegationTokenCredential:
    """A delegation token as SCRAM sees it: its credential, owner and expiry (epoch ms)."""

    credential: ScramCredential
    owner: KafkaPrincipal
    expiry_ms: int


class ScramCredentials(Protocol):
    """Where the server finds credentials (ZooKeeper's ``/config/users``, a local store)."""

    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None: ...

    def delegation_token(
        self, token_id: str, mechanism: ScramMechanism
    ) -> DelegationTokenCredential | None: ...


class ScramState(Enum):
    RECEIVE_CLIENT_FIRST = "RECEIVE_CLIENT_FIRST"
    RECEIVE_CLIENT_FINAL = "RECEIVE_CLIENT_FINAL"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


def _server_nonce() -> str:
    # Kafka: new BigInteger(130, SecureRandom).toString(36); any printable without ','.
    return base36(secrets.randbits(130))


def base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if not number:
            return out


class ScramSaslServer:
    """One SCRAM authentication (``SaslServer``); the state machine of the module docstring.

    Args:
        mechanism: SHA-256 or SHA-512.
        credentials: the credential store.
        nonce: makes server nonces (tests pass a fixed one for RFC 7677's vector).
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        credentials: ScramCredentials,
        nonce: Callable[[], str] = _server_nonce,
    ) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._credentials = credentials
        self._nonce = nonce
        self.state = ScramState.RECEIVE_CLIENT_FIRST
        self._outcome: SaslOutcome | None = None
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._principal: KafkaPrincipal | None = None
        self._expiry_ms: int | None = None

    @property
    def outcome(self) -> SaslOutcome | None:
        return self._outcome

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self.state is ScramState.RECEIVE_CLIENT_FIRST:
                return self._client_first(token)
            if self.state is ScramState.RECEIVE_CLIENT_FINAL:
                return self._client_final(token)
        except AuthenticationError:
            self._fail()
            raise
        raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {self.state.value}")

    def _fail(self) -> None:
        self.state = ScramState.FAILED
        self._credential = None
        self._first = None

    def _client_first(self, token: bytes) -> bytes:
        first = parse_client_first(token)
        token_auth = first.extensions.get(TOKEN_AUTH, "").lower() == "true"
        if token_auth:
            found = self._credentials.delegation_token(first.user, self._scram)
            if found is None:
                raise AuthenticationError(
                    f"Token Authentication failed: Invalid tokenId : {first.user}"
                )
            credential = found.credential
            self._principal = KafkaPrincipal(
                found.owner.principal_type, found.owner.name, token_authenticated=True
            )
            self._expiry_ms = found.expiry_ms
        else:
            stored = self._credentials.scram_credential(first.user, self._scram)
            if stored is None:
                raise AuthenticationError(
                    f"Authentication failed: Invalid user credentials for {first.user!r}"
                )
            credential = stored
            self._principal = KafkaPrincipal.user(first.user)
        if first.authorization_id and first.authorization_id != first.user:
            message = (
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
            raise AuthenticationError(message, message)
        if credential.iterations < self._scram.min_iterations:
            raise AuthenticationError(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self._scram.min_iterations} for {self.mechanism}"
            )
        self._first = first
        self._credential = credential
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={first.nonce}{self._nonce()},s={salt},i={credential.iterations}"
        self.state = ScramState.RECEIVE_CLIENT_FINAL
        return self._server_first.encode("ascii")

    def _client_final(self, token: bytes) -> bytes:
        first, credential, principal = self._first, self._credential, self._principal
        assert first is not None and credential is not None and principal is not None
        final = parse_client_final(token)
        expected_nonce = self._server_first[2 : self._server_first.index(",")]
        if final.nonce != expected_nonce:
            if final.nonce == first.nonce + expected_nonce:
                raise AuthenticationError(
                    "Invalid client nonce in the final client message: the client nonce is "
                    "repeated, as librdkafka < 2.6.1 sends it (librdkafka#4895); Kafka 4 "
                    "refuses it too: upgrade the client"
                )
            raise AuthenticationError("Invalid client nonce in the final client message.")
        if final.channel_binding != first.gs2_header.encode("ascii"):
            raise AuthenticationError("Invalid channel binding in the final client message")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode("ascii")
        signature = hmac.new(credential.stored_key, auth_message, self._scram.hash_name).digest()
        if len(final.proof) != len(signature):
            raise AuthenticationError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(final.proof, signature, strict=True))
        if not hmac.compare_digest(self._scram.hash(client_key), credential.stored_key):
            raise AuthenticationError(f"Invalid client credentials for {principal}")
        server_signature = hmac.new(
            credential.server_key, auth_message, self._scram.hash_name
        ).digest()
        extensions = {k: v for k, v in first.extensions.items() if k == TOKEN_AUTH}
        self._outcome = SaslOutcome(principal, self._expiry_ms, extensions)
        self.state = ScramState.COMPLETE
        self._credential = None
        return b"v=" + base64.b64encode(server_signature)
