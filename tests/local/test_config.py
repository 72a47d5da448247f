from __future__ import annotations

import dataclasses

import pytest

from tierlog.local.config import NEVER, TOPIC_CONFIG, LogConfig
from tierlog.util.configdef import ConfigError


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1 << 30
    assert config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.segment_index_bytes == 10 * 1024 * 1024
    assert config.index_interval_bytes == 4096
    assert config.flush_messages == NEVER == 2**63 - 1
    assert config.flush_ms == NEVER
    assert config.retention_ms == 604_800_000
    assert config.retention_bytes == -1
    assert config.max_message_bytes == 1_048_588
    assert config.message_timestamp_type == "CreateTime"
    assert config.file_delete_delay_ms == 60_000
    assert config.cleanup_policy == ("delete",)
    assert config.delete and not config.compact
    assert LogConfig.from_props({}) == config


def test_every_key_is_a_field() -> None:
    names = {f.name.replace("_", ".") for f in dataclasses.fields(LogConfig)}
    assert names == set(TOPIC_CONFIG.keys)


def test_kafka_key_names_parse() -> None:
    config = LogConfig.from_props(
        {
            "segment.bytes": "1048576",
            "segment.ms": "3600000",
            "segment.index.bytes": "4096",
            "index.interval.bytes": "128",
            "flush.messages": "10",
            "flush.ms": "1000",
            "retention.ms": "-1",
            "retention.bytes": "1073741824",
            "max.message.bytes": "2000",
            "message.timestamp.type": "LogAppendTime",
            "file.delete.delay.ms": "0",
            "cleanup.policy": "compact,delete",
        }
    )
    assert config == LogConfig(
        segment_bytes=1 << 20,
        segment_ms=3_600_000,
        segment_index_bytes=4096,
        index_interval_bytes=128,
        flush_messages=10,
        flush_ms=1000,
        retention_ms=-1,
        retention_bytes=1 << 30,
        max_message_bytes=2000,
        message_timestamp_type="LogAppendTime",
        file_delete_delay_ms=0,
        cleanup_policy=("compact", "delete"),
    )
    assert config.compact and config.delete


def test_typed_values_are_accepted() -> None:
    config = LogConfig.from_props({"segment.bytes": 4096, "cleanup.policy": ("compact",)})
    assert config.segment_bytes == 4096
    assert config.cleanup_policy == ("compact",)
    assert config.compact and not config.delete


def test_unknown_key_names_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        LogConfig.from_props({"segment.byte": "1"})
    assert info.value.key == "segment.byte"
    assert "'segment.byte'" in str(info.value)


def test_unknown_key_allowed_on_request() -> None:
    config = LogConfig.from_props({"some.plugin.key": "*"}, allow_unknown=True)
    assert config == LogConfig()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "13"),
        ("segment.bytes", "big"),
        ("segment.ms", "0"),
        ("segment.index.bytes", "7"),
        ("index.interval.bytes", "-1"),
        ("flush.messages", "0"),
        ("flush.ms", "-1"),
        ("retention.ms", "-2"),
        ("retention.bytes", "-2"),
        ("max.message.bytes", "-1"),
        ("message.timestamp.type", "createtime"),
        ("file.delete.delay.ms", "-1"),
        ("cleanup.policy", "delete,archive"),
        ("segment.bytes", None),
        ("segment.bytes", 1.5),
    ],
)
def test_bad_value_names_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        LogConfig.from_props({key: value})
    assert info.value.key == key
    assert repr(key) in str(info.value)


def test_to_props_uses_kafka_names_and_strings() -> None:
    props = LogConfig(cleanup_policy=("compact", "delete"), retention_ms=-1).to_props()
    assert props["cleanup.policy"] == "compact,delete"
    assert props["retention.ms"] == "-1"
    assert props["segment.bytes"] == str(1 << 30)
    assert props["message.timestamp.type"] == "CreateTime"
    assert set(props) == set(TOPIC_CONFIG.keys)
    assert all(isinstance(v, str) for v in props.values())


@pytest.mark.parametrize(
    "config",
    [
        LogConfig(),
        LogConfig(
            segment_bytes=100,
            flush_messages=1,
            cleanup_policy=("compact",),
            message_timestamp_type="LogAppendTime",
        ),
        LogConfig(cleanup_policy=()),
    ],
)
def test_props_round_trip(config: LogConfig) -> None:
    assert LogConfig.from_props(config.to_props()) == config


def test_with_overrides_keeps_other_values() -> None:
    base = LogConfig(segment_bytes=1000, retention_ms=5)
    changed = base.with_overrides({"retention.ms": "10", "cleanup.policy": "compact"})
    assert changed.segment_bytes == 1000
    assert changed.retention_ms == 10
    assert changed.cleanup_policy == ("compact",)
    assert base.retention_ms == 5
    with pytest.raises(ConfigError) as info:
        base.with_overrides({"retention.ms": "soon"})
    assert info.value.key == "retention.ms"


def test_config_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        LogConfig().segment_bytes = 1  # type: ignore[misc]
