"""Settings of the consumer group protocol (KIP-848), by their Kafka broker config names.

Defaults and bounds are Kafka 4's (``GroupCoordinatorConfig``): a member's session times out
after ``group.consumer.session.timeout.ms`` (45 s) without a heartbeat, members are told to
heartbeat every ``group.consumer.heartbeat.interval.ms`` (5 s), and both may be overridden
per group (``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``, Kafka's
group configs) only within ``group.consumer.min/max.*``. Kafka checks the same relations
at start-up, and so does ``ConsumerGroupConfig``: the heartbeat interval lies within its
bounds and below the session timeout, which lies within its own.

``group.consumer.assignors`` lists the server-side assignors; the first is the default for
members that name none. Kafka takes built-in names (``uniform``, ``range``) or class names;
the class names of Kafka's two built-ins are accepted here too and mean the same
assignors. A custom class is refused with the key and the reason (there is no JVM).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tierlog.util.configdef import ConfigDef, ConfigError, ConfigKey, at_least

# Kafka's two built-in server assignors, by name and by the class names Kafka also accepts.
BUILTIN_ASSIGNORS = ("uniform", "range")
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}

INT32_MAX = 2**31 - 1


class MigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy``: which online conversions between the classic and
    the consumer protocol are allowed (KIP-848). Empty groups convert under every policy."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        """A non-empty classic group may become a consumer group."""
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        """A consumer group whose members all use the classic protocol may become classic."""
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


def _assignor_names(value: Any) -> str | None:
    if not value:
        return "must name at least one assignor"
    names = [_ASSIGNOR_CLASSES.get(v, v) for v in value]
    unknown = [v for v, n in zip(value, names, strict=True) if n not in BUILTIN_ASSIGNORS]
    if unknown:
        return (
            f"unknown assignor {', '.join(unknown)}; the built-in assignors are "
            f"{', '.join(BUILTIN_ASSIGNORS)} (custom assignor classes need a JVM)"
        )
    if len(set(names)) != len(names):
        return f"an assignor is listed twice: {', '.join(value)}"
    return None


# group.coordinator.rebalance.protocols: what tierlog serves. Kafka also knows share
# (KIP-932) and streams (KIP-1071) groups; a broker configured with them is refused.
REBALANCE_PROTOCOLS = ("classic", "consumer")


def rebalance_protocols_problem(value: Any) -> str | None:
    """Why a ``group.coordinator.rebalance.protocols`` value is refused, or None."""
    names = [str(v).lower() for v in value]
    unknown = [v for v in names if v not in REBALANCE_PROTOCOLS]
    if unknown:
        return (
            f"unsupported group protocol {', '.join(unknown)}; tierlog serves "
            f"{' and '.join(REBALANCE_PROTOCOLS)} groups (no share or streams groups)"
        )
    if "classic" not in names:
        return "must contain classic"  # Kafka's rule too
    return None


def _policy(value: Any) -> str | None:
    choices = [p.value for p in MigrationPolicy]
    return None if value.lower() in choices else f"must be one of {', '.join(choices)}"


CONFIG_DEF = ConfigDef(
    [
        ConfigKey(
            "group.consumer.session.timeout.ms",
            "int",
            45_000,
            "Session timeout of consumer-protocol members.",
            at_least(1),
        ),
        ConfigKey(
            "group.consumer.min.session.timeout.ms",
            "int",
            45_000,
            "Lowest session timeout a group may set.",
            at_least(1),
        ),
        ConfigKey(
            "group.consumer.max.session.timeout.ms",
            "int",
            60_000,
            "Highest session timeout a group may set.",
            at_least(1),
        ),
        ConfigKey(
            "group.consumer.heartbeat.interval.ms",
            "int",
            5_000,
            "Heartbeat interval given to members.",
            at_least(1),
        ),
        ConfigKey(
            "group.consumer.min.heartbeat.interval.ms",
            "int",
            5_000,
            "Lowest heartbeat interval a group may set.",
            at_least(1),
        ),
        ConfigKey(
            "group.consumer.max.heartbeat.interval.ms",
            "int",
            15_000,
            "Highest heartbeat interval a group may set.",
            at_least(1),
        ),
        ConfigKey(
            "group.consumer.max.size",
            "int",
            INT32_MAX,
            "Most members a consumer group may have.",
            at_least(1),
        ),
        ConfigKey(
            "group.consumer.assignors",
            "list",
            list(BUILTIN_ASSIGNORS),
            "Server-side assignors; the first is the default.",
            _assignor_names,
        ),
        ConfigKey(
            "group.consumer.migration.policy",
            "string",
            MigrationPolicy.BIDIRECTIONAL.value,
            "Online conversions between the classic and consumer protocols.",
            _policy,
        ),
        ConfigKey(
            "group.consumer.regex.refresh.interval.ms",
            "int",
            600_000,
            "How often resolved regular expressions are refreshed even if no topic changed.",
            at_least(1),
        ),
        # The classic protocol's bound, needed to decide a downgrade (the classic group
        # that would result must fit it).
        ConfigKey(
            "group.max.size",
            "int",
            INT32_MAX,
            "Most members a classic group may have.",
            at_least(1),
        ),
    ]
)

# Kafka's per-group overrides (IncrementalAlterConfigs on a GROUP resource).
SESSION_OVERRIDE = "consumer.session.timeout.ms"
HEARTBEAT_OVERRIDE = "consumer.heartbeat.interval.ms"


@dataclass(frozen=True, slots=True)
class GroupTimeouts:
    """The session timeout and heartbeat interval in force for one group."""

    session_timeout_ms: int
    heartbeat_interval_ms: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """Consumer group protocol settings; defaults are Kafka 4's. Build with
    ``from_properties`` to get Kafka's checks; the constructor checks the same relations.

    Attributes:
        session_timeout_ms: ``group.consumer.session.timeout.ms``.
        min_session_timeout_ms / max_session_timeout_ms: its bounds for group overrides.
        heartbeat_interval_ms: ``group.consumer.heartbeat.interval.ms``.
        min_heartbeat_interval_ms / max_heartbeat_interval_ms: its bounds.
        max_size: ``group.consumer.max.size``.
        assignors: ``group.consumer.assignors`` as built-in names, default first.
        migration_policy: ``group.consumer.migration.policy``.
        regex_refresh_interval_ms: ``group.consumer.regex.refresh.interval.ms``.
        classic_max_size: ``group.max.size`` (the classic protocol's bound).
    """

    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    max_size: int = INT32_MAX
    assignors: tuple[str, ...] = BUILTIN_ASSIGNORS
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL
    regex_refresh_interval_ms: int = 600_000
    classic_max_size: int = INT32_MAX

    def __post_init__(self) -> None:
        problem = _assignor_names(list(self.assignors))
        if problem:
            raise ConfigError("group.consumer.assignors", problem)
        object.__setattr__(
            self, "assignors", tuple(_ASSIGNOR_CLASSES.get(a, a) for a in self.assignors)
        )
        # Kafka's GroupCoordinatorConfig checks, in its order and with its wording.
        hb = "group.consumer.heartbeat.interval.ms"
        checks = [
            (
                self.max_heartbeat_interval_ms >= self.min_heartbeat_interval_ms,
                "group.consumer.max.heartbeat.interval.ms",
                "must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
            ),
            (
                self.heartbeat_interval_ms >= self.min_heartbeat_interval_ms,
                hb,
                "must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
            ),
            (
                self.heartbeat_interval_ms <= self.max_heartbeat_interval_ms,
                hb,
                "must be less than or equal to group.consumer.max.heartbeat.interval.ms",
            ),
            (
                self.max_session_timeout_ms >= self.min_session_timeout_ms,
                "group.consumer.max.session.timeout.ms",
                "must be greater than or equal to group.consumer.min.session.timeout.ms",
            ),
            (
                self.session_timeout_ms >= self.min_session_timeout_ms,
                "group.consumer.session.timeout.ms",
                "must be greater than or equal to group.consumer.min.session.timeout.ms",
            ),
            (
                self.session_timeout_ms <= self.max_session_timeout_ms,
                "group.consumer.session.timeout.ms",
                "must be less than or equal to group.consumer.max.session.timeout.ms",
            ),
            (
                self.heartbeat_interval_ms < self.session_timeout_ms,
                hb,
                "must be less than group.consumer.session.timeout.ms",
            ),
        ]
        for ok, key, reason in checks:
            if not ok:
                raise ConfigError(key, reason)

    @property
    def default_assignor(self) -> str:
        return self.assignors[0]

    @classmethod
    def from_properties(cls, values: Mapping[str, Any]) -> ConsumerGroupConfig:
        """Build from broker settings keyed by Kafka name; other keys are ignored.

        Raises:
            ConfigError: a value of the wrong type, out of its bounds, or inconsistent with
                another (the message names the key and the reason).
        """
        parsed = CONFIG_DEF.parse(
            {k: v for k, v in values.items() if k in CONFIG_DEF.keys}, allow_unknown=False
        )
        return cls(
            session_timeout_ms=parsed["group.consumer.session.timeout.ms"],
            min_session_timeout_ms=parsed["group.consumer.min.session.timeout.ms"],
            max_session_timeout_ms=parsed["group.consumer.max.session.timeout.ms"],
            heartbeat_interval_ms=parsed["group.consumer.heartbeat.interval.ms"],
            min_heartbeat_interval_ms=parsed["group.consumer.min.heartbeat.interval.ms"],
            max_heartbeat_interval_ms=parsed["group.consumer.max.heartbeat.interval.ms"],
            max_size=parsed["group.consumer.max.size"],
            assignors=tuple(parsed["group.consumer.assignors"]),
            migration_policy=MigrationPolicy(parsed["group.consumer.migration.policy"].lower()),
            regex_refresh_interval_ms=parsed["group.consumer.regex.refresh.interval.ms"],
            classic_max_size=parsed["group.max.size"],
        )

    def timeouts(self, overrides: Mapping[str, Any] | None = None) -> GroupTimeouts:
        """The session timeout and heartbeat interval of a group with these per-group
        overrides (Kafka's group configs ``consumer.session.timeout.ms`` and
        ``consumer.heartbeat.interval.ms``); without overrides, the broker's.

        Raises:
            ConfigError: an override outside the broker's min/max bounds, or a heartbeat
                interval not below the session timeout (Kafka's ``GroupConfig`` checks).
        """
        overrides = overrides or {}
        session = self._override(
            overrides,
            SESSION_OVERRIDE,
            self.session_timeout_ms,
            self.min_session_timeout_ms,
            self.max_session_timeout_ms,
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        )
        heartbeat = self._override(
            overrides,
            HEARTBEAT_OVERRIDE,
            self.heartbeat_interval_ms,
            self.min_heartbeat_interval_ms,
            self.max_heartbeat_interval_ms,
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        )
        if heartbeat >= session:
            raise ConfigError(HEARTBEAT_OVERRIDE, f"must be less than {SESSION_OVERRIDE}")
        return GroupTimeouts(session, heartbeat)

    @staticmethod
    def _override(
        overrides: Mapping[str, Any],
        key: str,
        default: int,
        low: int,
        high: int,
        low_key: str,
        high_key: str,
    ) -> int:
        raw = overrides.get(key)
        if raw is None:
            return default
        value = ConfigKey(key, "int", default, "").parse(raw)
        if value < low:
            raise ConfigError(key, f"must be greater than or equal to {low_key} ({low})")
        if value > high:
            raise ConfigError(key, f"must be less than or equal to {high_key} ({high})")
        return int(value)
