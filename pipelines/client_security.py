"""How pipelines and notebooks reach a secured cluster (issue 22): a Kafka client
properties file named by ``TIERLOG_CLIENT_CONFIG``, as Kafka's tools take
``--command-config``. It holds ``security.protocol`` and the ``ssl.*`` / ``sasl.*`` keys
in Kafka's (Java) names; its values may be ``${env:VAR}`` or ``${file:path:key}``
references (KIP-297, with ``config.providers`` in the same file), so that neither the file
nor a notebook's parameters carry a password.

Every client a pipeline opens takes the settings from here: the ``tierlog`` Spark source
and sink as ``kafka.``-prefixed options (as Spark's Kafka source takes them), confluent-
kafka in librdkafka's keys, tierlog's own client as a ``ClientSecurity``. Nothing here
prints or logs a value: a secret reaches the clients only, never a notebook's output or
an HTML report.
"""

from __future__ import annotations

import os
from pathlib import Path

from tierlog.security.client_config import ClientSecurity, librdkafka_config
from tierlog.security.config_providers import is_provider_key
from tierlog.security.config_providers import resolve as resolve_providers
from tierlog.util.configdef import ConfigError
from tierlog.util.properties import load_properties

ENV = "TIERLOG_CLIENT_CONFIG"


def _is_security_key(key: str) -> bool:
    return key == "security.protocol" or key.startswith(("ssl.", "sasl."))


def _properties(path: str) -> dict[str, str]:
    try:
        raw = load_properties(Path(path))
    except OSError as exc:
        raise ConfigError(ENV, f"cannot read {path}: {exc.strerror}") from None
    resolved = resolve_providers(raw)
    return {
        k: str(v) for k, v in resolved.items() if not is_provider_key(k) and _is_security_key(k)
    }


def client_properties() -> dict[str, str]:
    """The security settings in Kafka's keys; {} when ``TIERLOG_CLIENT_CONFIG`` is unset
    (PLAINTEXT).

    Raises:
        ConfigError: naming ``TIERLOG_CLIENT_CONFIG`` (an unreadable file) or the key
            whose reference cannot be resolved.
    """
    path = os.environ.get(ENV, "").strip()
    return _properties(path) if path else {}


def spark_options() -> dict[str, str]:
    """The settings as options of the ``tierlog`` source and sink (``kafka.<key>``)."""
    return {f"kafka.{k}": v for k, v in client_properties().items()}


def client_security() -> ClientSecurity | None:
    """The settings for tierlog's own client (None: PLAINTEXT)."""
    properties = client_properties()
    return ClientSecurity.from_config(properties) if properties else None


def librdkafka() -> dict[str, str]:
    """The settings in librdkafka's keys, for confluent-kafka's clients ({}: PLAINTEXT)."""
    security = client_security()
    return librdkafka_config(security) if security is not None else {}
