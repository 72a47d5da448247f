"""fsspec storage options from flat ``key=value`` settings, as the broker's server.properties,
the tools' ``--remote-option`` and the Spark source's options all spell them:
``remote.log.storage.options.client_kwargs.endpoint_url=http://...`` ->
``{"client_kwargs": {"endpoint_url": "http://..."}}``.

Or all of them as one JSON object in ``remote.log.storage.options`` (no suffix), taken as
written: PySpark hands a data source its option names lower-cased, so a flat
``...options.s3_additional_kwargs.ServerSideEncryption`` reaches the executors as
``serversideencryption``, which S3 does not know; inside a JSON value names keep their case
and strings stay strings. Flat keys are merged over the JSON object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tierlog.util.configdef import ConfigError

REMOTE_OPTIONS_PREFIX = "remote.log.storage.options."
REMOTE_OPTIONS_JSON = REMOTE_OPTIONS_PREFIX[:-1]
# Only an integer written as Python would print it becomes an int: "0123" (a PIN, a
# secret) stays the string it is.
_CANONICAL_INT = re.compile(r"-?(0|[1-9][0-9]*)")


def remote_options(raw: Mapping[str, Any], prefix: str = REMOTE_OPTIONS_PREFIX) -> dict[str, Any]:
    """``<prefix>a.b=v`` -> ``{"a": {"b": v}}`` for fsspec; "true"/"false" become booleans
    and integers ints (s3fs wants ``anon=False``, not "false"), merged over the JSON object
    of ``<prefix without its dot>`` if set (module docstring). Other keys are ignored.

    Raises:
        ConfigError: a key has an empty part, or is both a value and a group; the JSON
            form is not a JSON object.
    """
    out = _json_options(raw, prefix[:-1])
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
        elif _CANONICAL_INT.fullmatch(text):
            target[path[-1]] = int(text)
        else:
            target[path[-1]] = text
    return out


def _json_options(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key)
    if value is None or not str(value).strip():
        return {}
    try:
        parsed = json.loads(str(value))
    except ValueError as exc:
        raise ConfigError(key, f"not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ConfigError(key, "expected a JSON object of storage options")
    return parsed
