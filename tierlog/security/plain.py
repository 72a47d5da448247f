"""SASL/PLAIN server (RFC 4616) against the users of a ``PlainLoginModule`` JAAS entry.

The client sends one message, ``[authzid] NUL authcid NUL passwd`` in UTF-8; the server
answers with an empty challenge and is done. Users are the entry's ``user_<name>="pw"``
options, as Kafka's ``PlainServerCallbackHandler`` reads them; passwords are compared in
constant time. PLAIN sends the password itself, so it belongs on TLS listeners only
(``SASL_SSL``). Errors carry Kafka's messages, which the client may see.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Final

from tierlog.security.errors import AuthenticationError, IllegalSaslStateError, SecurityConfigError
from tierlog.security.jaas import PLAIN_LOGIN_MODULE, JaasEntry
from tierlog.security.password import Password
from tierlog.security.principal import KafkaPrincipal
from tierlog.security.sasl_server import SaslOutcome

__all__ = ["PLAIN", "PlainSaslServer", "PlainUsers"]

PLAIN: Final = "PLAIN"
_USER_PREFIX: Final = "user_"


class PlainUsers:
    """The user -> password table of a PLAIN login entry; passwords kept as ``Password``."""

    def __init__(self, passwords: Mapping[str, str | Password]) -> None:
        self._passwords = {user: Password(pw) for user, pw in passwords.items()}

    @classmethod
    def from_jaas(cls, entry: JaasEntry, key: str = "sasl.jaas.config") -> PlainUsers:
        """The ``user_<name>`` options of a ``PlainLoginModule`` entry.

        Raises:
            SecurityConfigError: the entry is not PLAIN's login module.
        """
        if entry.login_module != PLAIN_LOGIN_MODULE:
            raise SecurityConfigError(
                key, f"PLAIN needs {PLAIN_LOGIN_MODULE}, got {entry.login_module}"
            )
        return cls(
            {
                name[len(_USER_PREFIX) :]: value
                for name, value in entry.options.items()
                if name.startswith(_USER_PREFIX)
            }
        )

    def authenticate(self, username: str, password: str) -> bool:
        expected = self._passwords.get(username)
        # Compare against something even for an unknown user, so timing tells nothing.
        reference = expected.value if expected is not None else "\0" * len(password)
        same = hmac.compare_digest(reference.encode("utf-8"), password.encode("utf-8"))
        return expected is not None and same

    def __repr__(self) -> str:
        return f"PlainUsers({sorted(self._passwords)})"


class PlainSaslServer:
    """One PLAIN authentication (``SaslServer``)."""

    mechanism = PLAIN

    def __init__(self, users: PlainUsers) -> None:
        self._users = users
        self._outcome: SaslOutcome | None = None
        self._done = False

    @property
    def outcome(self) -> SaslOutcome | None:
        return self._outcome

    def evaluate(self, token: bytes) -> bytes:
        if self._done:
            raise IllegalSaslStateError("PLAIN exchange already finished")
        self._done = True
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError("PLAIN message is not UTF-8") from None
        tokens = message.split("\0")
        if len(tokens) != 3:
            raise AuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authzid, username, password = tokens
        if not username:
            message = "Authentication failed: username not specified"
            raise AuthenticationError(message, message)
        if not password:
            message = "Authentication failed: password not specified"
            raise AuthenticationError(message, message)
        if not self._users.authenticate(username, password):
            raise AuthenticationError(
                f"PLAIN: invalid username or password for {username!r}",
                "Authentication failed: Invalid username or password",
            )
        if authzid and authzid != username:
            message = (
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
            raise AuthenticationError(message, message)
        self._outcome = SaslOutcome(KafkaPrincipal.user(username))
        return b""
