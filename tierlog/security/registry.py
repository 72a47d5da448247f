"""Security plugins opened by name: ``authorizer.class.name`` and
``principal.builder.class`` take Kafka's class names or tierlog's.

Like fsspec's registry: a name maps to ``"module:attribute"``, imported when first
opened, so naming a plugin costs nothing until it is used. Kafka's
``kafka.security.authorizer.AclAuthorizer`` (ZooKeeper mode) and
``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (KRaft) both open tierlog's
ACL authorizer: the decisions are the same, and the ACLs live in Kafka's ZooKeeper layout
or, in single-node mode, in the local metadata store.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Final, cast

from tierlog.security.api import AclStore, Authorizer
from tierlog.security.errors import SecurityConfigError

__all__ = ["AUTHENTICATORS", "AUTHORIZERS", "authenticator_class", "open_authorizer"]

_ACL_AUTHORIZER: Final = "tierlog.security.acl_authorizer:AclAuthorizer"
AUTHORIZERS: Final[Mapping[str, str]] = {
    "kafka.security.authorizer.AclAuthorizer": _ACL_AUTHORIZER,
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer": _ACL_AUTHORIZER,
    "tierlog.security.AclAuthorizer": _ACL_AUTHORIZER,
}
_LISTENER_AUTHENTICATOR: Final = "tierlog.security.authenticator:ListenerAuthenticator"
_KAFKA_PRINCIPAL_BUILDER: Final = (
    "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
)
AUTHENTICATORS: Final[Mapping[str, str]] = {
    _KAFKA_PRINCIPAL_BUILDER: _LISTENER_AUTHENTICATOR,
    "tierlog.security.ListenerAuthenticator": _LISTENER_AUTHENTICATOR,
}


def _load(table: Mapping[str, str], name: str, key: str) -> Any:
    target = table.get(name.strip())
    if target is None:
        raise SecurityConfigError(key, f"unknown class {name!r}; known: {', '.join(sorted(table))}")
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def open_authorizer(
    name: str | None, config: Mapping[str, str], store: AclStore | None = None
) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` names, configured from ``config``
    (``super.users``, ``allow.everyone.if.no.acl.found``) and keeping its ACLs in ``store``
    (memory when None); ``None`` when the name is empty (no authorization, Kafka's default).

    Raises:
        SecurityConfigError: an unknown class name, or a bad setting.
    """
    if not name or not name.strip():
        return None
    plugin = _load(AUTHORIZERS, name, "authorizer.class.name")
    return cast(Authorizer, plugin.from_config(dict(config), store))


def authenticator_class(name: str | None) -> Any:
    """The authenticator class ``principal.builder.class`` names (default: Kafka's
    ``DefaultKafkaPrincipalBuilder``); build it with its ``from_config``."""
    return _load(AUTHENTICATORS, name or _KAFKA_PRINCIPAL_BUILDER, "principal.builder.class")
