"""Typed configuration keys in Kafka's style: a table of definitions that parses
``key=value`` strings, applies defaults and names the key and the reason on bad input.

Used for topic configs (``tierlog.local.config``) and broker configs
(``tierlog.broker.config``). Each key also says how Kafka updates it at run time
(``update_mode``: Kafka's "Dynamic Update Mode" column, for broker keys) and how it relates
to Kafka (``kafka``: empty when it is Kafka's key with Kafka's meaning), and each check can
describe the values it accepts: ``tierlog.tools.config_reference`` writes the reference
(docs/configuration.md) from these tables, so the reference cannot drift from the code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

# Kafka's dynamic update modes of a broker key (its docs' "Dynamic Update Mode").
READ_ONLY, PER_BROKER, CLUSTER_WIDE = "read-only", "per-broker", "cluster-wide"
UPDATE_MODES = (READ_ONLY, PER_BROKER, CLUSTER_WIDE)


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
    """One key: its Kafka name, type, default, an optional check and a line of doc; how
    Kafka updates it at run time (``update_mode``, one of ``UPDATE_MODES``; None for topic
    keys, which AlterConfigs always changes) and how it relates to Kafka (``kafka``: empty
    for Kafka's own key with Kafka's meaning, else the equivalent or the difference)."""

    name: str
    type: str
    default: Any
    doc: str
    check: Callable[[Any], str | None] | None = None
    update_mode: str | None = None
    kafka: str = ""

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


@dataclass(frozen=True)
class AtLeast:
    """A number no smaller than ``minimum``."""

    minimum: int

    def __call__(self, value: Any) -> str | None:
        return None if value >= self.minimum else f"must be >= {self.minimum}, got {value}"

    def describe(self) -> str:
        return f">= {self.minimum}"


@dataclass(frozen=True)
class Between:
    """A number in ``[low, high]`` (``(low, high]`` when ``low_open``)."""

    low: float
    high: float
    low_open: bool = False

    def __call__(self, value: Any) -> str | None:
        above = value > self.low if self.low_open else value >= self.low
        return (
            None if above and value <= self.high else f"must be in {self.describe()}, got {value}"
        )

    def describe(self) -> str:
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"


@dataclass(frozen=True)
class OneOf:
    """One of ``choices`` (each item of a list value)."""

    choices: tuple[str, ...]

    def __call__(self, value: Any) -> str | None:
        values = value if isinstance(value, (list, tuple)) else [value]
        bad = [v for v in values if v not in self.choices]
        return f"must be one of {', '.join(self.choices)}; got {', '.join(bad)}" if bad else None

    def describe(self) -> str:
        return ", ".join(c if c else '""' for c in self.choices)


def at_least(minimum: int) -> AtLeast:
    return AtLeast(minimum)


def between(low: float, high: float, *, low_open: bool = False) -> Between:
    return Between(low, high, low_open)


def one_of(*choices: str) -> OneOf:
    return OneOf(tuple(choices))


def describe_check(check: Callable[[Any], str | None] | None) -> str:
    """The values a check accepts, for the reference ("" when it cannot say)."""
    describe = getattr(check, "describe", None)
    return str(describe()) if callable(describe) else ""


@dataclass(frozen=True)
class KafkaNotes:
    """What the reference says of a key beside its own definition: Kafka's update mode
    (broker keys) and its relation to Kafka (``ConfigKey.kafka``)."""

    update_mode: str | None = None
    kafka: str = ""


class ConfigDef:
    """A table of keys; ``parse`` turns raw strings into a complete dict of typed values.

    Args:
        notes: per key name, its ``update_mode`` and ``kafka`` note, kept beside the table
            (one table of Kafka's facts, not a field repeated in every entry).
        refused: why a key Kafka has and the table does not is refused (None: it is not
            Kafka's either); the refusal names the reason instead of "unknown".
    """

    def __init__(
        self,
        keys: Iterable[ConfigKey],
        notes: Mapping[str, KafkaNotes] | None = None,
        refused: Callable[[str], str | None] | None = None,
    ) -> None:
        notes = notes or {}
        keys = list(keys)
        unknown = set(notes) - {key.name for key in keys}
        if unknown:
            raise ValueError(f"notes for keys the table does not have: {sorted(unknown)}")
        self.keys = {
            key.name: replace(key, update_mode=n.update_mode, kafka=n.kafka)
            if (n := notes.get(key.name)) is not None
            else key
            for key in keys
        }
        self._refused = refused

    def refusal(self, name: str) -> str:
        """Why a key outside the table is refused, for its ConfigError: Kafka's reason
        for a Kafka key tierlog does not support, else "unknown" and the closest key."""
        reason = self._refused(name) if self._refused is not None else None
        if reason is None:
            return f"unknown configuration key{self.suggestion(name)}"
        return f"Kafka's key, not supported by tierlog: {reason}"

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
                raise ConfigError(name, self.refusal(name))
            values[name] = key.parse(value)
        return values

    def suggestion(self, name: str) -> str:
        """`` (did you mean 'x'?)`` naming the known key closest to ``name``, or ``""``."""
        import difflib

        close = difflib.get_close_matches(name, self.keys, n=1, cutoff=0.75)
        return f" (did you mean {close[0]!r}?)" if close else ""
