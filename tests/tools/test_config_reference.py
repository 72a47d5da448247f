"""docs/configuration.md is generated from the config definitions and up to date; every
broker key says how Kafka updates it and whether tierlog changes it at run time; the
example server.properties names only known keys and shows the remote tier's and the
metrics' keys (issue 25 item 8)."""

from __future__ import annotations

from pathlib import Path

from tierlog.broker.config import BROKER_CONFIG, BrokerConfig
from tierlog.local.config import TOPIC_CONFIG
from tierlog.tools import config_reference
from tierlog.util.configdef import UPDATE_MODES, ConfigDef, ConfigKey, KafkaNotes, at_least
from tierlog.util.properties import load_properties

REPO = Path(__file__).resolve().parents[2]


def test_the_reference_is_up_to_date() -> None:
    page = REPO / "docs" / "configuration.md"
    assert page.read_text() == config_reference.render(), (
        "run python -m tierlog.tools.config_reference"
    )
    assert config_reference.main(["--check"]) == 0


def test_every_key_is_in_the_reference_with_its_facts() -> None:
    text = config_reference.render()
    for definition in (BROKER_CONFIG, TOPIC_CONFIG):
        for key in definition.keys.values():
            assert f"| `{key.name}` |" in text, key.name
    row = next(line for line in text.splitlines() if line.startswith("| `log.segment.bytes` |"))
    assert row.split(" | ")[1:6] == ["int", "`1073741824`", ">= 14", "cluster-wide", "yes"]
    row = next(line for line in text.splitlines() if line.startswith("| `log.dirs` |"))
    assert row.split(" | ")[4:6] == ["read-only", ""]  # needs a restart, here as in Kafka
    row = next(line for line in text.splitlines() if line.startswith("| `remote.storage.enable` |"))
    assert "KIP-1272" in row  # how tierlog differs from Kafka, said


def test_every_broker_key_has_kafkas_update_mode() -> None:
    missing = [k.name for k in BROKER_CONFIG.keys.values() if k.update_mode not in UPDATE_MODES]
    assert missing == [], f"add them to tierlog/broker/config_notes.py: {missing}"
    assert BROKER_CONFIG.keys["listeners"].update_mode == "per-broker"
    assert BROKER_CONFIG.keys["message.max.bytes"].update_mode == "cluster-wide"
    assert BROKER_CONFIG.keys["broker.id"].update_mode == "read-only"


def test_a_stale_page_fails_the_check(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    assert config_reference.main(["--page", str(page)]) == 0
    assert config_reference.main(["--check", "--page", str(page)]) == 0
    page.write_text(page.read_text().replace("cluster-wide", "read-only", 1))
    assert config_reference.main(["--check", "--page", str(page)]) == 1


def test_notes_for_a_key_the_table_lacks_are_refused() -> None:
    key = ConfigKey("a.b", "int", 1, "doc", at_least(0))
    try:
        ConfigDef([key], {"a.c": KafkaNotes("read-only")})
    except ValueError as exc:
        assert "a.c" in str(exc)
    else:
        raise AssertionError("notes for an unknown key were accepted")


def test_the_example_server_properties() -> None:
    path = REPO / "configs" / "server.properties"
    BrokerConfig.load(path)  # every key known, every value valid
    text = path.read_text()
    for commented in (
        "#remote.log.storage.url=",
        "#remote.log.storage.options.client_kwargs.region_name=",
        "#remote.log.manager.copy.max.bytes.per.second=",
        "#metrics.http.port=",
    ):
        assert commented in text, commented
    # Uncommented, each of them parses.
    for line in text.splitlines():
        if line.startswith("#") and "=" in line and line[1:2].islower():
            key, _, value = line[1:].partition("=")
            if key.startswith("remote.log.storage.options."):
                continue
            BrokerConfig({**load_properties(path), key: value})
