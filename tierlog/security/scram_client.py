"""SCRAM-SHA-256 / SCRAM-SHA-512 client (RFC 5802, RFC 7677): the other half of ``scram``.

The exchange, one call per step::

    first_message() -> client-first  ``n,,n=<saslname>,r=<cnonce>``
    final_message(server-first)      ``r=<cnonce><snonce>,s=<salt>,i=<iterations>``
        -> client-final              ``c=biws,r=<cnonce><snonce>,p=<proof>``
    verify(server-final)             ``v=<server signature>`` (or ``e=<error>``)

Rules Kafka's ``ScramSaslClient`` keeps, kept here: the server nonce must start with the
client's own nonce (else a replayed or foreign server-first); the iterations must be at
least the mechanism's minimum (4096), so a rogue server cannot ask for a cheap proof;
the server signature is compared in constant time and a client that has not seen the
right one is not authenticated (mutual authentication, RFC 5802 section 5). The password
is used as its UTF-8 bytes without SASLprep, as Kafka's ``ScramFormatter`` does, so the
proof matches credentials made by Kafka's tools. Only the gs2 header ``n,,`` (no channel
binding, no authorization id) is sent, as Kafka's client does.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets
from collections.abc import Callable
from typing import Final

from tierlog.security.errors import AuthenticationError
from tierlog.security.password import Password
from tierlog.security.scram import base36, sasl_name
from tierlog.security.scram_credentials import ScramMechanism, client_key, hi, server_key

__all__ = ["ScramSaslClient"]

_GS2_HEADER: Final = "n,,"
_SERVER_FIRST: Final = re.compile(
    r"(?:m=[^,]*,)?r=(?P<nonce>[\x21-\x2B\x2D-\x7E]+),s=(?P<salt>[A-Za-z0-9+/=]+),"
    r"i=(?P<iterations>[0-9]+)(?:,.*)?"
)


def _client_nonce() -> str:
    # Kafka's ScramFormatter.secureRandomString: 130 random bits in base 36.
    return base36(secrets.randbits(130))


class ScramSaslClient:
    """One SCRAM login as ``user``.

    Args:
        mechanism: SHA-256 or SHA-512.
        user, password: the credentials (the password is read once, for the proof).
        nonce: makes the client nonce (tests pass a fixed one for RFC 7677's vector).
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        user: str,
        password: Password,
        nonce: Callable[[], str] = _client_nonce,
    ) -> None:
        self.mechanism = mechanism
        self._user = user
        self._password = password
        self._nonce = nonce()
        self._first_bare = ""
        self._auth_message = b""
        self._salted_password = b""
        self.complete = False

    def first_message(self) -> bytes:
        self._first_bare = f"n={sasl_name(self._user)},r={self._nonce}"
        return (_GS2_HEADER + self._first_bare).encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        """The client-final answering ``server_first``.

        Raises:
            AuthenticationError: the server-first is malformed, its nonce does not extend
                ours, or it asks for fewer iterations than the mechanism's minimum.
        """
        try:
            text = server_first.decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationError("Invalid SCRAM server first message: not ASCII") from None
        if text.startswith("e="):
            raise AuthenticationError(f"the server refused the SCRAM login: {text[2:]}")
        match = _SERVER_FIRST.fullmatch(text)
        if match is None:
            raise AuthenticationError("Invalid SCRAM server first message format")
        nonce = match.group("nonce")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise AuthenticationError("Invalid server nonce: does not extend the client nonce")
        iterations = int(match.group("iterations"))
        if iterations < self.mechanism.min_iterations:
            raise AuthenticationError(
                f"Requested iterations {iterations} is less than the minimum "
                f"{self.mechanism.min_iterations} for {self.mechanism.mechanism_name}"
            )
        try:
            salt = base64.b64decode(match.group("salt"), validate=True)
        except binascii.Error:
            raise AuthenticationError("Invalid SCRAM server first message: salt") from None
        self._salted_password = hi(
            self.mechanism, self._password.value.encode("utf-8"), salt, iterations
        )
        channel = base64.b64encode(_GS2_HEADER.encode("ascii")).decode("ascii")
        without_proof = f"c={channel},r={nonce}"
        self._auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        key = client_key(self.mechanism, self._salted_password)
        signature = hmac.new(
            self.mechanism.hash(key), self._auth_message, self.mechanism.hash_name
        ).digest()
        proof = bytes(a ^ b for a, b in zip(key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("ascii")

    def verify(self, server_final: bytes) -> None:
        """Checks the server's signature; sets ``complete``.

        Raises:
            AuthenticationError: an ``e=`` error, a malformed message, or a wrong
                signature (the server does not know the credential: not our broker).
        """
        text = server_final.decode("ascii", errors="replace")
        if text.startswith("e="):
            raise AuthenticationError(f"the server refused the SCRAM login: {text[2:]}")
        if not text.startswith("v=") or not self._auth_message:
            raise AuthenticationError("Invalid SCRAM server final message format")
        try:
            received = base64.b64decode(text[2:].split(",", 1)[0], validate=True)
        except binascii.Error:
            raise AuthenticationError("Invalid SCRAM server final message: base64") from None
        expected = hmac.new(
            server_key(self.mechanism, self._salted_password),
            self._auth_message,
            self.mechanism.hash_name,
        ).digest()
        if not hmac.compare_digest(received, expected):
            raise AuthenticationError("Invalid server signature in the SCRAM server final message")
        self.complete = True
