"""Who a connection is: ``KafkaPrincipal`` (``User:alice``) and how its text is read.

A principal is a type and a name joined by the first ``:`` (Kafka's
``SecurityUtils.parseKafkaPrincipal``). Connections that did not authenticate (PLAINTEXT,
or SSL without a client certificate) are ``User:ANONYMOUS``. ACLs may name ``User:*``,
the wildcard principal that matches every user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tierlog.security.errors import InvalidAclError

__all__ = ["ANONYMOUS", "USER_TYPE", "WILDCARD_PRINCIPAL", "KafkaPrincipal", "parse_principal"]

USER_TYPE: Final = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """A principal type and name; ``str()`` gives Kafka's ``User:alice`` form.

    ``token_authenticated`` is set for SCRAM logins with a delegation token (Kafka's
    ``KafkaPrincipal.tokenAuthenticated``); it does not take part in equality.
    """

    principal_type: str
    name: str
    token_authenticated: bool = False

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KafkaPrincipal):
            return NotImplemented
        return (self.principal_type, self.name) == (other.principal_type, other.name)

    def __hash__(self) -> int:
        return hash((self.principal_type, self.name))

    @classmethod
    def user(cls, name: str, token_authenticated: bool = False) -> KafkaPrincipal:
        return cls(USER_TYPE, name, token_authenticated)


ANONYMOUS: Final = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
WILDCARD_PRINCIPAL: Final = KafkaPrincipal(USER_TYPE, "*")


def parse_principal(text: str) -> KafkaPrincipal:
    """``"User:alice"`` -> ``KafkaPrincipal("User", "alice")``.

    Raises:
        InvalidAclError: no ``:``, or an empty type or name (Kafka: "Invalid principal").
    """
    if text is None or ":" not in text:
        raise InvalidAclError(
            f"expected a string in format principalType:principalName but got {text!r}"
        )
    principal_type, name = text.split(":", 1)
    if not principal_type or not name:
        raise InvalidAclError(
            f"expected a string in format principalType:principalName but got {text!r}"
        )
    return KafkaPrincipal(principal_type, name)
