"""pipelines.changelog_merge against a real broker whose compacted topic is partly
offloaded, Spark local mode and real Delta: the table holds each live key's latest value
across the tier boundary, tombstones delete, re-runs change nothing, a duplicate commit is
skipped by Delta, and the streaming way gives the same table."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipelines import changelog_merge as pipeline
from pipelines.changelog_merge import (
    APP_ID_PREFIX,
    changelog_merge,
    latest_changes,
    merge_changes,
)
from pipelines.common import TopicSource, latest_version, load_config
from tests.broker.harness import BrokerProcess
from tests.compaction.test_changelog import (
    PARTITIONS,
    Produced,
    create_compacted_topic,
    model,
    produce_changes,
)
from tests.tiered_data import TieredTopic, start_broker, wait_offloaded

FIRST = 3000
MORE = 600
REPO = Path(__file__).resolve().parents[2]
# Each MERGE is a few Spark jobs and a Delta commit: seconds on an idle 2-core machine,
# tens of seconds on a busy one; a hang guard, not a speed check.
pytestmark = pytest.mark.timeout(600)


@dataclass
class Users:
    broker: BrokerProcess
    produced: list[Produced]

    @property
    def remote_url(self) -> str:
        return f"file://{self.broker.data_dir / 'remote'}"


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Users]:
    broker = start_broker(tmp_path_factory.mktemp("merge") / "data")
    try:
        create_compacted_topic(broker.bootstrap, "users")
        produced = produce_changes(broker.bootstrap, "users", FIRST, seed=7)
        wait_offloaded(TieredTopic(broker, "users", PARTITIONS, FIRST))
        yield Users(broker, produced)
    finally:
        broker.stop()


def table(spark: Any, path: Path) -> dict[bytes, bytes]:
    rows = spark.read.format("delta").load(str(path)).select("key", "value").collect()
    assert len(rows) == len({bytes(r["key"]) for r in rows}), "one row per key"
    return {bytes(r["key"]): bytes(r["value"]) for r in rows}


def run(spark: Any, users: Users, path: Path, **kwargs: Any) -> Any:
    return changelog_merge(
        spark,
        bootstrap_servers=users.broker.bootstrap,
        topic="users",
        table_path=str(path),
        remote_url=users.remote_url,
        **kwargs,
    )


def test_incremental_runs_keep_the_latest_value_per_key(
    spark: Any, users: Users, tmp_path: Path
) -> None:
    path = tmp_path / "users"
    first = run(spark, users, path)
    assert table(spark, path) == model(users.produced)
    assert first.offsets_read == FIRST and not first.skipped
    assert first.inserted == len(model(users.produced))
    assert first.keys_merged >= first.inserted

    again = run(spark, users, path)
    assert (again.offsets_read, again.table_version) == (0, first.table_version)
    assert again.start_offsets == first.end_offsets

    more = produce_changes(users.broker.bootstrap, "users", MORE, seed=8, first=FIRST)
    users.produced += more
    second = run(spark, users, path)
    assert second.offsets_read == MORE
    assert second.start_offsets == first.end_offsets
    assert table(spark, path) == model(users.produced)
    assert second.updated > 0 and second.deleted > 0


def test_a_duplicate_commit_is_skipped_by_delta(spark: Any, users: Users, tmp_path: Path) -> None:
    path = str(tmp_path / "users")
    source = TopicSource("users", bootstrap_servers=users.broker.bootstrap)
    changes = latest_changes(source.read(spark))
    merge_changes(spark, path, changes, APP_ID_PREFIX + "users", 0, "{}")
    version = latest_version(spark, path)
    before = table(spark, tmp_path / "users")
    # The same transaction again (a second run planned from the same snapshot): no commit.
    merge_changes(spark, path, changes, APP_ID_PREFIX + "users", 0, "{}")
    assert latest_version(spark, path) == version
    assert table(spark, tmp_path / "users") == before == model(users.produced)
    # The session settings were reset: a plain write afterwards still commits.
    spark.range(1).write.format("delta").mode("append").save(str(tmp_path / "other"))
    assert latest_version(spark, str(tmp_path / "other")) == 0


def test_the_stream_gives_the_same_table(spark: Any, users: Users, tmp_path: Path) -> None:
    path = tmp_path / "users"
    checkpoint = str(tmp_path / "checkpoint")
    first = run(spark, users, path, checkpoint_path=checkpoint, max_offsets=2000)
    assert first.batches >= 2
    assert table(spark, path) == model(users.produced)

    more = produce_changes(users.broker.bootstrap, "users", MORE, seed=9, first=10_000)
    users.produced += more
    second = run(spark, users, path, checkpoint_path=checkpoint)
    # Records read: the new ones, fewer if the broker's cleaner got to some first.
    assert 0 < second.offsets_read <= MORE
    assert table(spark, path) == model(users.produced)

    idle = run(spark, users, path, checkpoint_path=checkpoint)
    assert (idle.offsets_read, idle.table_version) == (0, second.table_version)


def test_the_shipped_config_loads() -> None:
    config = load_config(pipeline.KEYS, REPO / "configs" / "changelog_merge.toml")
    assert config["spark"]["master"] is None  # SPARK_MASTER, else local[*] (nothing pinned)
    assert config["topic"] == "users" and config["checkpoint_path"] is None
