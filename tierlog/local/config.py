"""Per-log configuration with Kafka's topic-level key names and defaults.

Defaults follow Kafka 4.x (``LogConfig`` / ``TopicConfig``): 1 GiB segments, a 7-day roll and
retention, 4 KiB index interval, 10 MiB preallocated indexes, no forced flush (Kafka relies
on replication and the OS; ``flush.*`` exist for single-node durability), 1 MiB + 12 bytes
max batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from tierlog.local.compression_config import COMPRESSION_TYPES, level_keys, target_compression
from tierlog.local.config_notes import TOPIC_NOTES
from tierlog.local.config_refused import refusal
from tierlog.local.throttled_replicas import ThrottledReplicasCheck
from tierlog.records.recompress import TargetCompression
from tierlog.util.configdef import ConfigDef, ConfigError, ConfigKey, at_least, between, one_of

NEVER = 2**63 - 1  # Kafka's Long.MAX_VALUE: "no limit" for flush.* and segment.ms
DAY_MS = 24 * 60 * 60 * 1000

TOPIC_CONFIG = ConfigDef(
    [
        ConfigKey("segment.bytes", "int", 1 << 30, "roll a segment at this size", at_least(14)),
        ConfigKey("segment.ms", "long", 7 * DAY_MS, "roll a segment after this age", at_least(1)),
        ConfigKey(
            "segment.index.bytes",
            "int",
            10 << 20,
            "preallocated size of each offset/time index",
            at_least(8),
        ),
        ConfigKey(
            "index.interval.bytes",
            "int",
            4096,
            "bytes of log between two offset-index entries",
            at_least(0),
        ),
        ConfigKey(
            "flush.messages",
            "long",
            NEVER,
            "fsync after this many messages since the last flush",
            at_least(1),
        ),
        ConfigKey("flush.ms", "long", NEVER, "fsync when the last flush is this old", at_least(0)),
        ConfigKey(
            "retention.ms",
            "long",
            7 * DAY_MS,
            "delete segments older than this; -1 keeps forever",
            at_least(-1),
        ),
        ConfigKey(
            "retention.bytes",
            "long",
            -1,
            "delete oldest segments while the log is larger; -1 no limit",
            at_least(-1),
        ),
        ConfigKey("max.message.bytes", "int", 1048588, "largest accepted batch", at_least(0)),
        ConfigKey(
            "message.timestamp.type",
            "string",
            "CreateTime",
            "CreateTime keeps producer timestamps, LogAppendTime stamps on append",
            one_of("CreateTime", "LogAppendTime"),
        ),
        ConfigKey(
            "file.delete.delay.ms",
            "long",
            60_000,
            "keep a deleted segment's files this long for in-flight reads",
            at_least(0),
        ),
        ConfigKey(
            "min.insync.replicas",
            "int",
            1,
            "replicas that must acknowledge an acks=all produce",
            at_least(1),
        ),
        ConfigKey(
            "compression.type",
            "string",
            "producer",
            "codec batches are stored in: producer keeps the producer's; any other is "
            "recompressed to on the leader's append",
            one_of(*COMPRESSION_TYPES),
        ),
        *level_keys(),
        ConfigKey(
            "unclean.leader.election.enable",
            "bool",
            False,
            "allow an out-of-sync replica to become leader (cluster mode)",
        ),
        ConfigKey(
            "delete.retention.ms",
            "long",
            86_400_000,
            "how long compaction keeps tombstones",
            at_least(0),
        ),
        ConfigKey(
            "min.compaction.lag.ms",
            "long",
            0,
            "a record stays uncompacted at least this long",
            at_least(0),
        ),
        ConfigKey(
            "max.compaction.lag.ms",
            "long",
            NEVER,
            "a record is compacted at most this long after it was written",
            at_least(1),
        ),
        ConfigKey(
            "min.cleanable.dirty.ratio",
            "double",
            0.5,
            "dirty share of the log that triggers compaction",
            between(0, 1),
        ),
        ConfigKey(
            "remote.storage.enable",
            "bool",
            False,
            "offload closed segments to the remote tier (KIP-405)",
        ),
        ConfigKey(
            "local.retention.ms",
            "long",
            -2,
            "how long segments stay on local disk once offloaded; -2 = retention.ms",
            at_least(-2),
        ),
        ConfigKey(
            "local.retention.bytes",
            "long",
            -2,
            "local bytes kept per partition once offloaded; -2 = retention.bytes",
            at_least(-2),
        ),
        ConfigKey(
            "cleanup.policy",
            "list",
            ["delete"],
            "delete, compact, or both",
            one_of("delete", "compact"),
        ),
        ConfigKey(
            "leader.replication.throttled.replicas",
            "list",
            [],
            "replicas whose leader side is held to leader.replication.throttled.rate while "
            "a follower catches up (KIP-73)",
            ThrottledReplicasCheck(),
        ),
        ConfigKey(
            "follower.replication.throttled.replicas",
            "list",
            [],
            "replicas whose fetches are held to follower.replication.throttled.rate while "
            "they catch up (KIP-73)",
            ThrottledReplicasCheck(),
        ),
    ],
    TOPIC_NOTES,
    # Kafka's other topic keys, refused with a reason (config_refused.py).
    refused=refusal,
)


# Kafka's ConfigDef types: INT is a Java int, LONG a Java long. A value past them is refused
# by Kafka when it parses the key; accepting it here stored e.g. message.max.bytes=99999999999
# and sent it to clients in DescribeConfigs, where a Java client cannot read it back.
KAFKA_INT_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def check_kafka_ranges(definition: ConfigDef, values: Mapping[str, Any]) -> None:
    """Refuses an ``int`` or ``long`` value outside its Java type's range.

    Raises:
        ConfigError: naming the first key out of range, its value and the bounds.
    """
    for name, value in values.items():
        key = definition.keys.get(name)
        if key is None or key.type not in KAFKA_INT_RANGES or not isinstance(value, int):
            continue
        low, high = KAFKA_INT_RANGES[key.type]
        if not low <= value <= high:
            raise ConfigError(
                name, f"{value} does not fit Kafka's {key.type} type ({low} to {high})"
            )


# The list-typed keys, kept as tuples in the (frozen, hashable) LogConfig.
LIST_KEYS = (
    "cleanup.policy",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


def _default(name: str) -> Any:
    return TOPIC_CONFIG.keys[name].default


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Typed view of one log's configuration; attribute names are the Kafka keys with
    ``.`` replaced by ``_``."""

    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    retention_ms: int = _default("retention.ms")
    retention_bytes: int = _default("retention.bytes")
    max_message_bytes: int = _default("max.message.bytes")
    message_timestamp_type: str = _default("message.timestamp.type")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    cleanup_policy: tuple[str, ...] = tuple(_default("cleanup.policy"))
    min_insync_replicas: int = _default("min.insync.replicas")
    compression_type: str = _default("compression.type")
    compression_gzip_level: int = _default("compression.gzip.level")
    compression_lz4_level: int = _default("compression.lz4.level")
    compression_zstd_level: int = _default("compression.zstd.level")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    remote_storage_enable: bool = _default("remote.storage.enable")
    local_retention_ms: int = _default("local.retention.ms")
    local_retention_bytes: int = _default("local.retention.bytes")
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()

    @classmethod
    def from_props(cls, props: Mapping[str, Any], *, allow_unknown: bool = False) -> LogConfig:
        """Build from Kafka-named keys (strings or typed values); unset keys take defaults.

        Raises:
            ConfigError: unknown key or invalid value, naming the key.
        """
        values = TOPIC_CONFIG.parse(props, allow_unknown=allow_unknown)
        check_kafka_ranges(TOPIC_CONFIG, values)
        for name in LIST_KEYS:
            values[name] = tuple(values[name])
        _check_local_retention(values, "ms")
        _check_local_retention(values, "bytes")
        return cls(**{name.replace(".", "_"): value for name, value in values.items()})

    def to_props(self) -> dict[str, str]:
        """Kafka-named string values, as DescribeConfigs reports and files store them."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                text = ",".join(value)
            elif isinstance(value, bool):
                text = "true" if value else "false"
            else:
                text = str(value)
            out[f.name.replace("_", ".")] = text
        return out

    def with_overrides(self, props: Mapping[str, Any]) -> LogConfig:
        merged: dict[str, Any] = dict(self.to_props())
        merged.update(props)
        return LogConfig.from_props(merged)

    @property
    def effective_local_retention_ms(self) -> int:
        """local.retention.ms with -2 resolved to retention.ms (KIP-405)."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        if self.local_retention_bytes == -2:
            return self.retention_bytes
        return self.local_retention_bytes

    @property
    def roll_ms(self) -> int:
        """segment.ms, or max.compaction.lag.ms when shorter on a compacted topic: the
        active segment is never cleaned, so it must roll for the lag to hold (KIP-354)."""
        if self.compact:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def target_compression(self) -> TargetCompression | None:
        """The codec and level appended batches are stored in; None for ``producer``."""
        return target_compression(
            self.compression_type,
            {
                "gzip": self.compression_gzip_level,
                "lz4": self.compression_lz4_level,
                "zstd": self.compression_zstd_level,
            },
        )

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy


def _check_local_retention(values: dict[str, Any], unit: str) -> None:
    """KIP-405: the local tier keeps at most what the whole log keeps (-1 = unlimited)."""
    local, total = values[f"local.retention.{unit}"], values[f"retention.{unit}"]
    if local == -2 or total == -1:
        return
    if local == -1 or local > total:
        raise ConfigError(
            f"local.retention.{unit}",
            f"{local} must not exceed retention.{unit} ({total}); use -2 to follow it",
        )


__all__ = ["NEVER", "TOPIC_CONFIG", "ConfigError", "LogConfig", "check_kafka_ranges"]
