"""``Password``: a secret config value that never shows itself in a repr, str or log.

Kafka's ``org.apache.kafka.common.config.types.Password`` prints ``[hidden]``; so does this.
The value is read only through ``.value`` (one greppable place), and equality is constant
time so that comparing a client's password leaks nothing through timing.
"""

from __future__ import annotations

import hmac
from typing import Final

__all__ = ["HIDDEN", "Password", "is_secret_key"]

HIDDEN: Final = "[hidden]"

# Config and JAAS option names whose values are secrets: Kafka's PASSWORD-typed keys
# (ssl.key.password, ssl.keystore.password, ssl.truststore.password, ssl.keystore.key,
# sasl.jaas.config, sasl.oauthbearer.client.secret...) and PLAIN's user_<name> options.
_SECRET_WORDS: Final = ("password", "secret", "jaas.config", "keystore.key", "credential")


def is_secret_key(key: str) -> bool:
    """Whether a config key or JAAS option name holds a secret (masked when shown)."""
    lowered = key.lower()
    return lowered.startswith("user_") or any(word in lowered for word in _SECRET_WORDS)


class Password:
    """A secret string; ``repr``/``str`` show ``[hidden]``, ``.value`` gives the secret."""

    __slots__ = ("_value",)

    def __init__(self, value: str | Password) -> None:
        if isinstance(value, Password):
            value = value.value
        if not isinstance(value, str):
            raise TypeError(f"a password is a str, not {type(value).__name__}")
        self._value = value

    @property
    def value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Password({HIDDEN})"

    def __str__(self) -> str:
        return HIDDEN

    def __format__(self, spec: str) -> str:
        return HIDDEN

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Password):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)
