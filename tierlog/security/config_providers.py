"""Config providers (KIP-297): ``${file:path:key}`` and ``${env:VAR}`` in config values.

So that ``server.properties`` carries no secrets::

    config.providers=file,env
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
    config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
    ssl.key.password=${file:/etc/tierlog/secrets.properties:ssl.key.password}
    sasl.jaas.config=...PlainLoginModule required username="admin" password="${env:ADMIN_PW}";

``resolve(props)`` returns the properties with every reference replaced, by the
providers ``config.providers`` names (each given its class by
``config.providers.<name>.class``, Kafka's class names or tierlog's). A reference to a
provider that is not configured is left as it is, as Kafka leaves it. A reference that
cannot be resolved (missing file, key or variable) is an error naming the config key.
The resolved values are secrets: callers keep them as ``Password`` where Kafka's key
is of type PASSWORD and never log them (``masked`` gives a loggable copy).

Providers: ``FileConfigProvider`` reads a Java properties file (``path:key``);
``EnvVarConfigProvider`` the process environment (its ``allowlist.pattern`` option,
``config.providers.env.param.allowlist.pattern``, limits which variables may be read);
``DirectoryConfigProvider`` one file per key (``${directory:/run/secrets:db_pw}``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from tierlog.security.errors import SecurityConfigError
from tierlog.security.password import HIDDEN, is_secret_key
from tierlog.util.properties import PropertiesError, parse_properties

__all__ = ["PROVIDER_CLASSES", "is_provider_key", "is_reference", "masked", "resolve"]

_PREFIX: Final = "config.providers"
# ${provider:[path:]key}; Kafka's ConfigTransformer pattern.
_REFERENCE: Final = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")

_FILE: Final = "file"
_ENV: Final = "env"
_DIRECTORY: Final = "directory"
PROVIDER_CLASSES: Final = {
    "org.apache.kafka.common.config.provider.FileConfigProvider": _FILE,
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": _ENV,
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": _DIRECTORY,
    "tierlog.security.config_providers.FileConfigProvider": _FILE,
    "tierlog.security.config_providers.EnvVarConfigProvider": _ENV,
    "tierlog.security.config_providers.DirectoryConfigProvider": _DIRECTORY,
}

_Lookup = Callable[[str, str], str]


def _file_provider(params: Mapping[str, str], key: str) -> _Lookup:
    cache: dict[str, dict[str, str]] = {}

    def lookup(path: str, name: str) -> str:
        if not path:
            raise SecurityConfigError(key, "${file:...} needs a path: ${file:<path>:<key>}")
        if path not in cache:
            try:
                cache[path] = parse_properties(Path(path).read_text(encoding="utf-8"), path)
            except (OSError, PropertiesError) as exc:
                raise SecurityConfigError(key, f"cannot read {path}: {exc}") from None
        if name not in cache[path]:
            raise SecurityConfigError(key, f"{path} has no key {name!r}")
        return cache[path][name]

    return lookup


def _env_provider(params: Mapping[str, str], key: str, environ: Mapping[str, str]) -> _Lookup:
    allowlist = re.compile(params.get("allowlist.pattern", ".*"))

    def lookup(path: str, name: str) -> str:
        if not allowlist.fullmatch(name):
            raise SecurityConfigError(key, f"environment variable {name} is not in the allowlist")
        if name not in environ:
            raise SecurityConfigError(key, f"environment variable {name} is not set")
        return environ[name]

    return lookup


def _directory_provider(params: Mapping[str, str], key: str) -> _Lookup:
    def lookup(path: str, name: str) -> str:
        try:
            return (Path(path) / name).read_text(encoding="utf-8")
        except OSError as exc:
            raise SecurityConfigError(
                key, f"cannot read {Path(path) / name}: {exc.strerror}"
            ) from None

    return lookup


def is_reference(value: str) -> bool:
    """Whether ``value`` is one reference and nothing else (``${file:/p:k}``): a value that
    names a secret without holding it."""
    return _REFERENCE.fullmatch(value.strip()) is not None


def is_provider_key(key: str) -> bool:
    """``config.providers`` and its ``config.providers.<name>.*`` settings: consumed by
    ``resolve``, not configuration of the broker itself."""
    return key == _PREFIX or key.startswith(_PREFIX + ".")


def _providers(props: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, _Lookup]:
    names = [n.strip() for n in str(props.get(_PREFIX, "")).split(",") if n.strip()]
    providers: dict[str, _Lookup] = {}
    for name in names:
        class_key = f"{_PREFIX}.{name}.class"
        class_name = str(props.get(class_key, "")).strip()
        kind = PROVIDER_CLASSES.get(class_name)
        if kind is None:
            known = ", ".join(sorted(PROVIDER_CLASSES))
            raise SecurityConfigError(
                class_key, f"unknown config provider class {class_name!r} (known: {known})"
            )
        param_prefix = f"{_PREFIX}.{name}.param."
        params = {
            k[len(param_prefix) :]: str(v) for k, v in props.items() if k.startswith(param_prefix)
        }
        if kind == _FILE:
            providers[name] = _file_provider(params, class_key)
        elif kind == _ENV:
            providers[name] = _env_provider(params, class_key, environ)
        else:
            providers[name] = _directory_provider(params, class_key)
    return providers


def resolve(props: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``props`` with every ``${provider:[path:]key}`` of a configured provider replaced.

    Raises:
        SecurityConfigError: naming the key whose reference cannot be resolved, or a
            ``config.providers.<name>.class`` that names no known provider.
    """
    providers = _providers(props, os.environ if environ is None else environ)
    if not providers:
        return dict(props)
    resolved: dict[str, Any] = {}
    for key, value in props.items():
        if is_provider_key(key) or not isinstance(value, str) or "${" not in value:
            resolved[key] = value
            continue

        def replace(match: re.Match[str], key: str = key) -> str:
            provider = providers.get(match.group(1))
            if provider is None:
                return match.group(0)  # not ours: left as written, as Kafka does
            try:
                return provider(match.group(3) or "", match.group(4))
            except SecurityConfigError as exc:
                raise SecurityConfigError(key, exc.reason) from None

        resolved[key] = _REFERENCE.sub(replace, value)
    return resolved


def masked(props: Mapping[str, Any]) -> dict[str, Any]:
    """A copy safe to log: secret-looking keys (``is_secret_key``) show ``[hidden]``."""
    return {key: (HIDDEN if is_secret_key(key) else value) for key, value in props.items()}
