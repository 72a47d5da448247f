"""fsspec storage options from flat ``key=value`` settings, as the broker's server.properties,
the tools' ``--remote-option`` and the Spark source's options all spell them:
``remote.log.storage.options.client_kwargs.endpoint_url=http://...`` ->
``{"client_kwargs": {"endpoint_url": "http://..."}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tierlog.util.configdef import ConfigError

REMOTE_OPTIONS_PREFIX = "remote.log.storage.options."


def remote_options(raw: Mapping[str, Any], prefix: str = REMOTE_OPTIONS_PREFIX) -> dict[str, Any]:
    """``<prefix>a.b=v`` -> ``{"a": {"b": v}}`` for fsspec; "true"/"false" become booleans
    and integers ints (s3fs wants ``anon=False``, not "false"). Other keys are ignored.

    Raises:
        ConfigError: a key has an empty part, or is both a value and a group.
    """
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if not key.startswith(prefix):
            continue
        path = key[len(prefix) :].split(".")
        if not all(path):
            raise ConfigError(key, f"expected {prefix}<name>[.<name>...]")
        target = out
        for part in path[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ConfigError(key, f"{part} is both a value and a group of options")
        if isinstance(target.get(path[-1]), dict):
            raise ConfigError(key, f"{path[-1]} is both a value and a group of options")
        text = str(value).strip()
        if text.lower() in ("true", "false"):
            target[path[-1]] = text.lower() == "true"
        elif text.lstrip("-").isdigit():
            target[path[-1]] = int(text)
        else:
            target[path[-1]] = text
    return out
