"""SCRAM credentials (RFC 5802, RFC 7677) and Kafka's stored form of them.

The server keeps, per user and mechanism, only what RFC 5802 section 3 calls for; never
the password::

    SaltedPassword = Hi(password, salt, iterations)      (PBKDF2 with the mechanism's HMAC)
    ClientKey      = HMAC(SaltedPassword, "Client Key")
    StoredKey      = H(ClientKey)
    ServerKey      = HMAC(SaltedPassword, "Server Key")

Kafka's text form (``ScramCredentialUtils``), the value of ``SCRAM-SHA-256`` in
``/config/users/<user>``, is ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
with standard base64. The password is used as its UTF-8 bytes, without SASLprep, as
Kafka's ``ScramFormatter.normalize`` does, so that credentials made by Kafka's tools and
by tierlog agree.

Iterations: at least 4096 for both mechanisms (RFC 7677 for SHA-256; Kafka applies the
same floor to SHA-512), and at most 16384 when a credential is created
(``ScramMechanism.maxIterations``, what ``kafka-configs`` and AlterUserScramCredentials
accept). Authentication refuses a stored credential below the floor.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import Enum
from typing import Final

from tierlog.security.password import Password

__all__ = [
    "DEFAULT_ITERATIONS",
    "ScramCredential",
    "ScramCredentialError",
    "ScramMechanism",
    "client_key",
    "hi",
    "make_credential",
    "parse_credential",
    "server_key",
]

DEFAULT_ITERATIONS: Final = 4096


class ScramCredentialError(ValueError):
    """A credential (text form, iterations) that Kafka would refuse; says why."""


class ScramMechanism(Enum):
    """A SCRAM mechanism: its SASL name, hash and iteration bounds (Kafka's enum)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 4096, 16384, 1)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 4096, 16384, 2)

    def __init__(
        self,
        mechanism_name: str,
        hash_name: str,
        min_iterations: int,
        max_iterations: int,
        type_id: int,
    ) -> None:
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.min_iterations = min_iterations
        self.max_iterations = max_iterations
        # The ScramMechanism byte of DescribeUserScramCredentials/AlterUserScramCredentials.
        self.type_id = type_id

    def hash(self, data: bytes) -> bytes:
        """H() of RFC 5802: the mechanism's hash of ``data``."""
        return hashlib.new(self.hash_name, data).digest()

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        for mechanism in cls:
            if mechanism.mechanism_name == name:
                return mechanism
        return None

    @classmethod
    def by_type(cls, type_id: int) -> ScramMechanism | None:
        for mechanism in cls:
            if mechanism.type_id == type_id:
                return mechanism
        return None


@dataclass(frozen=True)
class ScramCredential:
    """What the server stores for one user and mechanism. ``repr`` hides the keys."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka(self) -> str:
        """Kafka's text form: ``salt=..,stored_key=..,server_key=..,iterations=..``."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations}, keys=[hidden])"


def hi(mechanism: ScramMechanism, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC and its hash length."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password, salt, iterations)


def _hmac(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, mechanism.hash_name).digest()


def client_key(mechanism: ScramMechanism, salted_password: bytes) -> bytes:
    return _hmac(mechanism, salted_password, b"Client Key")


def server_key(mechanism: ScramMechanism, salted_password: bytes) -> bytes:
    return _hmac(mechanism, salted_password, b"Server Key")


def make_credential(
    mechanism: ScramMechanism,
    password: str | Password,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    """A new credential for ``password`` (the password itself is not kept).

    Raises:
        ScramCredentialError: ``iterations`` outside the mechanism's bounds.
    """
    check_iterations(mechanism, iterations)
    secret = password.value if isinstance(password, Password) else password
    salt = secrets.token_bytes(16) if salt is None else salt
    salted = hi(mechanism, secret.encode("utf-8"), salt, iterations)
    return from_salted_password(mechanism, salted, salt, iterations)


def from_salted_password(
    mechanism: ScramMechanism, salted_password: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential for an already salted password (AlterUserScramCredentials sends one)."""
    stored = mechanism.hash(client_key(mechanism, salted_password))
    return ScramCredential(salt, stored, server_key(mechanism, salted_password), iterations)


def check_iterations(mechanism: ScramMechanism, iterations: int) -> None:
    """Raises ``ScramCredentialError`` unless ``iterations`` is within Kafka's bounds."""
    if not mechanism.min_iterations <= iterations <= mechanism.max_iterations:
        raise ScramCredentialError(
            f"Iterations {iterations} outside [{mechanism.min_iterations}, "
            f"{mechanism.max_iterations}] for {mechanism.mechanism_name}"
        )


_FIELDS: Final = ("salt", "stored_key", "server_key", "iterations")


def parse_credential(text: str) -> ScramCredential:
    """Kafka's text form back to a credential.

    Raises:
        ScramCredentialError: a missing or repeated field, bad base64 or iterations.
    """
    fields: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or name in fields:
            raise ScramCredentialError(f"Credentials not valid: {part!r}")
        fields[name] = value
    missing = [name for name in _FIELDS if name not in fields]
    if missing or len(fields) != len(_FIELDS):
        raise ScramCredentialError(f"Credentials not valid: expected fields {', '.join(_FIELDS)}")
    try:
        salt, stored, server = (
            base64.b64decode(fields[name], validate=True) for name in _FIELDS[:3]
        )
        iterations = int(fields["iterations"])
    except (binascii.Error, ValueError):
        raise ScramCredentialError("Credentials not valid: bad base64 or iterations") from None
    if iterations <= 0:
        raise ScramCredentialError(f"Credentials not valid: iterations {iterations}")
    return ScramCredential(salt, stored, server, iterations)
