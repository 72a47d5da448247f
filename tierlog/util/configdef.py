"""Typed configuration keys in Kafka's style: a table of definitions that parses
``key=value`` strings, applies defaults and names the key and the reason on bad input.

Used for topic configs (``tierlog.local.config``) and, later, broker configs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid; the message names the key."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"config {key!r}: {reason}")
        self.key = key
        self.reason = reason


def _parse_int(text: str) -> int:
    return int(text.strip().replace("_", ""))


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(f"expected true or false, got {text!r}")


def _parse_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


PARSERS: dict[str, Callable[[str], Any]] = {
    "int": _parse_int,
    "long": _parse_int,
    "bool": _parse_bool,
    "double": lambda text: float(text.strip()),
    "string": lambda text: text.strip(),
    "list": _parse_list,
}


def _typed(type_name: str, value: Any) -> Any:
    """Check a value given already typed (not as a string); returns it normalised.

    Without this, ``None`` or ``1.5`` for an int key reached the checks and failed there
    with a bare TypeError, or were stored as is, instead of a ConfigError naming the key.
    """
    if type_name in ("int", "long"):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif type_name == "bool":
        ok = isinstance(value, bool)
    elif type_name == "double":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif type_name == "list":
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        value = list(value) if ok else value
    else:
        ok = isinstance(value, str)
    if not ok:
        raise ValueError(f"expected {type_name}, got {value!r} ({type(value).__name__})")
    return value


@dataclass(frozen=True)
class ConfigKey:
    """One key: its Kafka name, type, default, an optional check and a line of doc."""

    name: str
    type: str
    default: Any
    doc: str
    check: Callable[[Any], str | None] | None = None

    def parse(self, raw: Any) -> Any:
        if isinstance(raw, str):
            try:
                value = PARSERS[self.type](raw)
            except ValueError as exc:
                raise ConfigError(self.name, f"expected {self.type}, got {raw!r} ({exc})") from None
        else:
            try:
                value = _typed(self.type, raw)
            except ValueError as exc:
                raise ConfigError(self.name, str(exc)) from None
        if self.check is not None:
            problem = self.check(value)
            if problem:
                raise ConfigError(self.name, problem)
        return value


def at_least(minimum: int) -> Callable[[Any], str | None]:
    return lambda value: None if value >= minimum else f"must be >= {minimum}, got {value}"


def one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        values = value if isinstance(value, (list, tuple)) else [value]
        bad = [v for v in values if v not in choices]
        return f"must be one of {', '.join(choices)}; got {', '.join(bad)}" if bad else None

    return check


class ConfigDef:
    """A table of keys; ``parse`` turns raw strings into a complete dict of typed values."""

    def __init__(self, keys: Iterable[ConfigKey]) -> None:
        self.keys = {key.name: key for key in keys}

    def parse(self, raw: Mapping[str, Any], *, allow_unknown: bool = False) -> dict[str, Any]:
        """Defaults overlaid with ``raw``, every value parsed and checked.

        Raises:
            ConfigError: an unknown key (unless ``allow_unknown``) or an invalid value.
        """
        values = {name: key.default for name, key in self.keys.items()}
        for name, value in raw.items():
            key = self.keys.get(name)
            if key is None:
                if allow_unknown:
                    continue
                raise ConfigError(name, f"unknown configuration key{self.suggestion(name)}")
            values[name] = key.parse(value)
        return values

    def suggestion(self, name: str) -> str:
        """`` (did you mean 'x'?)`` naming the known key closest to ``name``, or ``""``."""
        import difflib

        close = difflib.get_close_matches(name, self.keys, n=1, cutoff=0.75)
        return f" (did you mean {close[0]!r}?)" if close else ""
