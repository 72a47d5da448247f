"""dynamic_config on its own: the table, the checks of an alteration, the precedence of the
layers and their synonyms, and which parts are told of a change. (A stub coordinator
holds the stored layers: the real ones are in tests/broker/test_dynamic_broker_config.py
and tests/integration/test_dynamic_config_cluster.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tierlog.broker import dynamic_config
from tierlog.broker.config import BROKER_CONFIG, BrokerConfig, broker_keys_of
from tierlog.broker.config_notes import BROKER_NOTES
from tierlog.broker.coordination.api import BROKERS_ENTITY, MetadataChange
from tierlog.broker.dynamic_config import (
    DYNAMIC_KEYS,
    LOG_DEFAULT_KEYS,
    STATIC_HERE,
    AlterRefused,
    DynamicBrokerConfig,
    Layers,
    Reconfigurable,
    check_alteration,
    check_keys,
    entity_of,
    merged,
    synonyms,
)
from tierlog.local.config import TOPIC_CONFIG
from tierlog.util.configdef import CLUSTER_WIDE, PER_BROKER, READ_ONLY, ConfigError

STATIC = BrokerConfig({"log.retention.hours": "24", "broker.id": "3"})


def test_every_dynamic_key_is_a_broker_key_and_every_log_key_sets_a_topic_default() -> None:
    assert set(DYNAMIC_KEYS) <= set(BROKER_CONFIG.keys)
    topic_defaults = {b for t in TOPIC_CONFIG.keys for b in broker_keys_of(t)}
    assert set(LOG_DEFAULT_KEYS) <= topic_defaults
    # Kafka updates each at run time too (none read-only there), cluster-wide.
    assert set(DYNAMIC_KEYS.values()) == {CLUSTER_WIDE}
    # Only the first synonym is dynamic, as in Kafka.
    assert "log.retention.hours" not in DYNAMIC_KEYS and "log.roll.hours" not in DYNAMIC_KEYS


def test_every_key_kafka_updates_at_run_time_is_dynamic_here_or_says_why_not() -> None:
    kafka_dynamic = {k for k, notes in BROKER_NOTES.items() if notes.update_mode != READ_ONLY}
    assert kafka_dynamic == set(DYNAMIC_KEYS) | set(STATIC_HERE)
    assert not set(DYNAMIC_KEYS) & set(STATIC_HERE)


def test_keys_not_dynamic_are_refused_together_with_kafkas_message() -> None:
    with pytest.raises(AlterRefused) as info:
        check_keys(["log.dirs", "log.retention.ms", "broker.id"], per_broker=True)
    assert info.value.invalid_request
    assert str(info.value) == "Cannot update these configs dynamically: Set(broker.id, log.dirs)"
    with pytest.raises(AlterRefused) as info:
        check_keys(["no.such.key"], per_broker=True)
    assert not info.value.invalid_request and "'no.such.key'" in str(info.value)
    check_keys(["log.retention.ms", "max.connections"], per_broker=False)


def test_a_per_broker_key_needs_a_broker_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(dynamic_config.DYNAMIC_KEYS, "max.connections", PER_BROKER)  # type: ignore[index]
    check_keys(["max.connections"], per_broker=True)
    with pytest.raises(AlterRefused) as info:
        check_keys(["max.connections"], per_broker=False)
    assert info.value.invalid_request and "broker id must be specified" in str(info.value)


def test_values_are_checked_in_the_config_they_make() -> None:
    layers = Layers({}, {})
    after = check_alteration(STATIC, layers, "<default>", {"log.segment.bytes": "1048576"})
    assert after == Layers({}, {"log.segment.bytes": "1048576"})
    with pytest.raises(AlterRefused) as info:
        check_alteration(STATIC, layers, "3", {"log.segment.bytes": "10"})
    assert not info.value.invalid_request and "log.segment.bytes" in str(info.value)
    with pytest.raises(AlterRefused) as info:
        check_alteration(STATIC, layers, "3", {"log.retention.ms": "soon"})
    assert "log.retention.ms" in str(info.value)


def test_resource_names() -> None:
    assert entity_of("", 3) == "<default>"
    assert entity_of("3", 3) == "3"
    for name, message in (
        ("x", "Broker id must be an integer, but it is: x"),
        ("4", "Unexpected broker id, expected 3, but received 4"),
    ):
        with pytest.raises(AlterRefused) as info:
            entity_of(name, 3)
        assert info.value.invalid_request and str(info.value) == message


def test_precedence_and_synonyms_in_kafkas_order() -> None:
    layers = Layers({"log.retention.ms": "5"}, {"log.retention.ms": "1000"})
    assert merged(STATIC, layers).log_config.retention_ms == 5
    assert merged(STATIC, Layers({}, layers.default)).log_config.retention_ms == 1000
    assert merged(STATIC, Layers({}, {})).log_config.retention_ms == 24 * 3600 * 1000
    found = [(s.name, s.value, s.source) for s in synonyms("log.retention.ms", STATIC, layers)]
    assert found == [
        ("log.retention.ms", "5", dynamic_config.SOURCE_DYNAMIC_BROKER),
        ("log.retention.ms", "1000", dynamic_config.SOURCE_DYNAMIC_DEFAULT_BROKER),
        ("log.retention.hours", "24", dynamic_config.SOURCE_STATIC_BROKER),
        ("log.retention.hours", "168", dynamic_config.SOURCE_DEFAULT),
    ]
    cluster = synonyms("log.retention.ms", STATIC, layers, per_broker=False)
    assert [s.source for s in cluster] == [3, 4, 5]
    assert synonyms("log.dirs", STATIC, layers) == [
        dynamic_config.Synonym("log.dirs", "", dynamic_config.SOURCE_DEFAULT)
    ]


class _Stored:
    """The coordinator's two calls DynamicBrokerConfig makes."""

    def __init__(self) -> None:
        self.entities: dict[str, dict[str, str]] = {}
        self.listeners: list[Callable[[MetadataChange | None], None]] = []

    def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        assert entity_type == BROKERS_ENTITY
        return self.entities

    def on_change(self, callback: Callable[[MetadataChange | None], None]) -> None:
        self.listeners.append(callback)

    def store(self, name: str, configs: dict[str, str]) -> None:
        self.entities[name] = configs
        for listener in self.listeners:
            listener(None)


def test_only_the_parts_whose_keys_changed_are_told_and_a_bad_layer_is_kept_out() -> None:
    stored = _Stored()
    told: dict[str, list[Any]] = {"logs": [], "connections": []}
    parts = [
        Reconfigurable(
            "logs", frozenset(LOG_DEFAULT_KEYS), lambda c: told["logs"].append(c.log_config)
        ),
        Reconfigurable(
            "connections",
            frozenset({"max.connections"}),
            lambda c: told["connections"].append(c["max.connections"]),
        ),
    ]
    dynamic = DynamicBrokerConfig(STATIC, stored, parts)  # type: ignore[arg-type]
    dynamic.start()
    assert told == {"logs": [], "connections": []}
    stored.store("<default>", {"max.connections": "50"})
    assert told == {"logs": [], "connections": [50]}
    stored.store("3", {"max.connections": "20", "log.retention.ms": "5"})
    assert told["connections"] == [50, 20] and told["logs"][-1].retention_ms == 5
    stored.store("4", {"max.connections": "1"})  # another broker's: not ours
    assert told["connections"] == [50, 20]
    # Written by another tool, invalid: the last good config stays in force.
    stored.store("3", {"max.connections": "many"})
    assert told["connections"] == [50, 20] and dynamic.current["max.connections"] == 20


def test_a_part_must_name_dynamic_keys_only() -> None:
    part = Reconfigurable("dirs", frozenset({"log.dirs"}), lambda _c: None)
    with pytest.raises(ValueError, match=r"log\.dirs"):
        DynamicBrokerConfig(STATIC, _Stored(), [part])  # type: ignore[arg-type]


def test_a_listeners_keystore_keys_are_dynamic_per_broker_and_only_with_the_prefix() -> None:
    check_keys(
        ["listener.name.ssl.ssl.keystore.location", "listener.name.ext.ssl.truststore.location"],
        per_broker=True,
    )
    with pytest.raises(AlterRefused) as info:
        check_keys(["ssl.keystore.location"], per_broker=True)
    assert info.value.invalid_request
    assert str(info.value) == (
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: Set(ssl.keystore.location)"
    )
    with pytest.raises(AlterRefused, match="broker id must be specified"):
        check_keys(["listener.name.ssl.ssl.keystore.location"], per_broker=False)
    # Fixed for a listener while it runs, as Kafka fixes them.
    with pytest.raises(AlterRefused, match=r"dynamically: Set\(listener\.name\.ssl\.ssl\.client"):
        check_keys(["listener.name.ssl.ssl.client.auth"], per_broker=True)


def test_a_part_checks_a_new_config_before_it_is_stored_and_touched_keys_are_applied() -> None:
    key = "listener.name.ssl.ssl.keystore.location"
    checked: list[str | None] = []
    applied: list[str | None] = []

    def validate(config: BrokerConfig) -> None:
        checked.append(config.security.get(key))
        if config.security.get(key) == "/bad.pem":
            raise ConfigError(key, "cannot read /bad.pem")

    part = Reconfigurable(
        "TLS", frozenset({key}), lambda c: applied.append(c.security.get(key)), validate
    )
    stored = _Stored()
    dynamic = DynamicBrokerConfig(STATIC, stored, [part])  # type: ignore[arg-type]
    dynamic.start()
    with pytest.raises(AlterRefused) as info:
        dynamic.check_reconfiguration(Layers({key: "/bad.pem"}, {}))
    assert info.value.invalid_request
    assert str(info.value) == (
        f"Validation of dynamic config update of TLS failed: config '{key}': cannot read /bad.pem"
    )
    dynamic.check_reconfiguration(Layers({"log.retention.ms": "5"}, {}))
    assert checked == ["/bad.pem"]  # the part's keys did not change: not asked
    stored.store("3", {key: "/new.pem"})
    assert applied == ["/new.pem"]
    dynamic.refresh()  # nothing changed: not told again
    assert applied == ["/new.pem"]
    # The same value set again (its file rewritten): checked and told anyway.
    dynamic.check_reconfiguration(Layers({key: "/new.pem"}, {}), touched=[key])
    dynamic.refresh(touched=[key])
    assert checked[-1] == "/new.pem" and applied == ["/new.pem", "/new.pem"]


def test_a_listeners_secrets_are_stored_only_as_config_provider_references() -> None:
    key = "listener.name.ssl.ssl.key.password"
    with pytest.raises(AlterRefused) as info:
        check_alteration(STATIC, Layers({}, {}), "3", {key: "s3cret"})
    assert info.value.invalid_request and key in str(info.value)
    assert "s3cret" not in str(info.value)
    check_alteration(STATIC, Layers({}, {}), "3", {key: "${file:/etc/secrets:key.password}"})
    # Not secrets: paths and certificates go in as they are.
    check_alteration(
        STATIC, Layers({}, {}), "3", {"listener.name.ssl.ssl.keystore.location": "/k.pem"}
    )
