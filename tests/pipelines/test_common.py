"""pipelines.common without Spark: configs, ``--set`` overrides, the CLI's exit status 2
naming a bad key, and the source options a topic is read with."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipelines import aggregate, exactly_once, ingest, ingest_stream, replay
from pipelines.common import (
    EXIT_CONFIG,
    TopicSource,
    apply_override,
    load_config,
    storage_url,
    table_location,
    timestamp_ms,
)
from tierlog.util.configdef import ConfigError

REPO = Path(__file__).resolve().parents[2]
PIPELINES = {
    "ingest": ingest,
    "ingest_stream": ingest_stream,
    "replay": replay,
    "aggregate": aggregate,
    "exactly_once": exactly_once,
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_the_shipped_configs_load(name: str) -> None:
    config = load_config(PIPELINES[name].KEYS, REPO / "configs" / f"{name}.toml")
    assert config["spark"]["master"] is None  # SPARK_MASTER, else local[*] (nothing pinned)
    assert {k.name for k in PIPELINES[name].KEYS} <= set(config)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(text)
    return path


INGEST = 'bootstrap_servers = "b:9092"\ntopic = "t"\ntable_path = "x"\n'


@pytest.mark.parametrize(
    ("text", "overrides", "key", "reason"),
    [
        (INGEST + "topics = 'x'\n", [], "topics", "unknown key"),
        ('topic = "t"\ntable_path = "x"\n', [], "bootstrap_servers", "required"),
        (INGEST, ["max_offsets=0"], "max_offsets", "below 1"),
        (INGEST, ["max_offsets=true"], "max_offsets", "not an integer"),
        (INGEST, ["max_offsets=lots"], "max_offsets", "not an integer"),
        (INGEST, ["starting_offsets=soonest"], "starting_offsets", "'soonest' is not"),
        (INGEST, ["starting_offsets={t = {0 = -5}}"], "starting_offsets", "t-0: -5 is not"),
        (INGEST, ["topic=  "], "topic", "must not be empty"),
        (INGEST, ["spark.cores=2"], "spark.cores", "unknown key"),
        (INGEST + "[spark.conf]\nx = {a = 1}\n", [], "spark.conf", "table of Spark"),
        (INGEST, ["nonsense"], "nonsense", "key=value"),
        (INGEST, ["topic.name=x"], "topic.name", "topic is a value, not a table"),
    ],
)
def test_a_bad_key_or_value_is_named(
    tmp_path: Path, text: str, overrides: list[str], key: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(ingest.KEYS, write(tmp_path, text), overrides)
    assert caught.value.key == key
    assert reason in caught.value.reason


def test_the_cli_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, 'bronze_path = "b"\nsilver_path = "s"\nwindow = 5\n')
    assert aggregate.cli(["--config", str(path)]) == EXIT_CONFIG
    assert "config 'window': unknown key" in capsys.readouterr().err
    assert replay.cli(["--config", str(tmp_path / "missing.toml")]) == EXIT_CONFIG
    assert "no such file" in capsys.readouterr().err
    text = 'topic = "t"\nremote_url = "r"\ntable_path = "x"\n'
    text += "starting_timestamp = 2024-05-01T12:00:00\n"  # no UTC offset
    assert replay.cli(["--config", str(write(tmp_path, text))]) == EXIT_CONFIG
    assert "'starting_timestamp'" in capsys.readouterr().err


def test_overrides_are_toml_values_or_strings() -> None:
    raw: dict[str, Any] = {"spark": {"master": "local[*]"}, "starting_offsets": "latest"}
    for item in (
        "max_offsets=500",
        "topic=clicks",
        "remote_url=s3://bucket/prefix",
        "storage_options.anon=true",
        'spark.conf."spark.driver.memory"=4g',
        'starting_offsets={clicks = {"0" = 5}}',
        "starting_timestamp=2024-05-01T12:00:00Z",
    ):
        apply_override(raw, item)
    assert raw["max_offsets"] == 500 and raw["topic"] == "clicks"
    assert raw["remote_url"] == "s3://bucket/prefix"
    assert raw["storage_options"] == {"anon": True}
    assert raw["spark"] == {"master": "local[*]", "conf": {"spark.driver.memory": "4g"}}
    assert raw["starting_offsets"] == {"clicks": {"0": 5}}
    assert raw["starting_timestamp"] == datetime(2024, 5, 1, 12, tzinfo=UTC)


def test_config_values_are_normalised(tmp_path: Path) -> None:
    text = (
        'topic = "t"\nremote_url = "r"\ntable_path = "x"\n'
        'starting_offsets = {t = {"0" = 5}}\nstarting_timestamp = 2024-05-01T12:00:00Z\n'
        '[spark]\nconf = {"spark.ui.enabled" = false}\n'
    )
    config = load_config(replay.KEYS, write(tmp_path, text))
    assert config["starting_offsets"] == '{"t": {"0": 5}}'
    assert config["starting_timestamp"] == 1_714_564_800_000
    assert config["ending_offsets"] == "latest" and config["storage_options"] is None
    assert config["spark"]["conf"] == {"spark.ui.enabled": "false"}


def test_replay_refuses_a_bound_given_twice() -> None:
    with pytest.raises(ConfigError) as caught:
        replay.replay(
            None,
            topic="t",
            remote_url="r",
            table_path="x",
            starting_offsets="latest",
            starting_timestamp=5,
        )
    assert caught.value.key == "starting_timestamp"


def test_paths_and_times() -> None:
    assert storage_url("s3://b/p") == "s3://b/p"
    assert storage_url("data/remote") == (Path.cwd() / "data" / "remote").as_uri()
    assert table_location("data/t") == str(Path.cwd() / "data" / "t")
    assert table_location("s3a://b/t") == "s3a://b/t"
    assert timestamp_ms(datetime(1970, 1, 1, 0, 0, 1, 500_000, tzinfo=UTC)) == 1500
    with pytest.raises(ValueError, match="no UTC offset"):
        timestamp_ms(datetime(2024, 1, 1))


def test_topic_source_options() -> None:
    source = TopicSource(
        "t",
        remote_url="data/remote",
        storage_options={"anon": False, "client_kwargs": {"endpoint_url": "http://x"}},
        remote_only=True,
    )
    assert source.options() == {
        "subscribe": "t",
        "tierlog.includeTier": "true",
        "includeHeaders": "true",
        "tierlog.tiers": "remote",
        "remote.log.storage.url": (Path.cwd() / "data" / "remote").as_uri(),
        "remote.log.storage.options.anon": "false",
        "remote.log.storage.options.client_kwargs.endpoint_url": "http://x",
    }
