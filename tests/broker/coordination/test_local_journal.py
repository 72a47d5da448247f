"""The single-node metadata store (``coordination/local.py``): a change appends one journal
line instead of rewriting every topic (issue 10, item 14), group-committed off the event
loop, replayed on start, folded into the snapshot when long and on a clean stop."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from tierlog.broker.coordination import local
from tierlog.broker.coordination.api import (
    BROKERS_ENTITY,
    DEFAULT_BROKER_ENTITY,
    BrokerRegistration,
    MetadataChange,
    TopicExistsError,
)
from tierlog.broker.coordination.local import JOURNAL_NAME, LocalCoordinator, MetadataFileError

ME = BrokerRegistration(0, "127.0.0.1", 9092, None)


async def started(path: Path) -> LocalCoordinator:
    coordinator = LocalCoordinator(path)
    await coordinator.start(ME)
    return coordinator


async def create(coordinator: LocalCoordinator, names: list[str]) -> None:
    await asyncio.gather(*(coordinator.create_topic(n, {0: [0]}, {}) for n in names))


def test_creating_a_topic_does_not_rewrite_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshots: list[int] = []
    write = LocalCoordinator._write_snapshot

    def counting(self: LocalCoordinator, data: bytes) -> None:
        snapshots.append(len(data))
        write(self, data)

    monkeypatch.setattr(LocalCoordinator, "_write_snapshot", counting)

    async def scenario() -> None:
        coordinator = await started(tmp_path)
        for first in range(0, 2500, 250):
            await create(coordinator, [f"t{i}" for i in range(first, first + 250)])
        # Before: one whole snapshot per topic, 2,500 of them. Now: the first one and a
        # fold each time the journal reaches the topic count (at least 1,000 lines).
        assert len(snapshots) <= 3, snapshots
        assert len(coordinator.topics()) == 2500

    asyncio.run(scenario())


def test_a_burst_of_creations_is_a_few_group_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    appends: list[int] = []
    append = LocalCoordinator._append

    def counting(self: LocalCoordinator, data: bytes) -> None:
        appends.append(data.count(b"\n"))
        append(self, data)

    monkeypatch.setattr(LocalCoordinator, "_append", counting)

    async def scenario() -> None:
        coordinator = await started(tmp_path)
        await create(coordinator, [f"t{i}" for i in range(500)])
        assert sum(appends) == 500
        assert len(appends) <= 3  # the first line alone, then the rest together

    asyncio.run(scenario())


def test_the_journal_is_replayed_without_a_clean_stop(tmp_path: Path) -> None:
    async def scenario() -> None:
        coordinator = await started(tmp_path)
        await create(coordinator, ["a", "b", "c"])
        await coordinator.set_topic_configs("b", {"retention.ms": "1000"})
        await coordinator.add_partitions("c", {1: [0]})
        await coordinator.delete_topic("a")
        assert await coordinator.allocate_producer_ids(1000) == 0
        # No stop(): as after kill -9.

    asyncio.run(scenario())
    again = LocalCoordinator(tmp_path)
    assert sorted(again.topics()) == ["b", "c"]
    assert again.topics()["b"].configs == {"retention.ms": "1000"}
    assert again.topics()["c"].partitions == 2

    async def next_ids() -> int:
        return await again.allocate_producer_ids(1000)

    assert asyncio.run(next_ids()) == 1000


def test_a_torn_last_line_is_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        coordinator = await started(tmp_path)
        await create(coordinator, ["kept"])

    asyncio.run(scenario())
    journal = tmp_path / JOURNAL_NAME
    with open(journal, "ab") as f:
        f.write(b'{"topic": "torn", "rec')
    with caplog.at_level(logging.WARNING):
        again = LocalCoordinator(tmp_path)
    assert sorted(again.topics()) == ["kept"]
    assert "torn last line" in caplog.text
    assert journal.read_bytes().endswith(b"\n")

    async def more() -> None:
        await again.start(ME)
        await create(again, ["after"])

    asyncio.run(more())
    assert sorted(LocalCoordinator(tmp_path).topics()) == ["after", "kept"]


def test_an_unreadable_line_names_the_journal(tmp_path: Path) -> None:
    async def scenario() -> None:
        coordinator = await started(tmp_path)
        await create(coordinator, ["one"])

    asyncio.run(scenario())
    journal = tmp_path / JOURNAL_NAME
    journal.write_bytes(b"garbage\n" + journal.read_bytes())
    with pytest.raises(MetadataFileError) as raised:
        LocalCoordinator(tmp_path)
    assert f"{journal}: line 1" in str(raised.value)


def test_a_clean_stop_folds_the_journal_into_the_snapshot(tmp_path: Path) -> None:
    async def scenario() -> None:
        coordinator = await started(tmp_path)
        await create(coordinator, ["x", "y"])
        await coordinator.stop()

    asyncio.run(scenario())
    assert not (tmp_path / JOURNAL_NAME).exists()
    doc = json.loads((tmp_path / local.FILE_NAME).read_text())
    assert sorted(doc["topics"]) == ["x", "y"]


def test_concurrent_changes_to_one_topic_both_stay(tmp_path: Path) -> None:
    async def scenario() -> None:
        coordinator = await started(tmp_path)
        await create(coordinator, ["t"])
        await asyncio.gather(
            coordinator.set_topic_configs("t", {"retention.ms": "5"}),
            coordinator.add_partitions("t", {1: [0], 2: [0]}),
        )
        topic = coordinator.topic("t")
        assert topic is not None
        assert topic.configs == {"retention.ms": "5"} and topic.partitions == 3
        with pytest.raises(TopicExistsError):
            await asyncio.gather(
                coordinator.create_topic("dup", {0: [0]}, {}),
                coordinator.create_topic("dup", {0: [0]}, {}),
            )

    asyncio.run(scenario())
    topic = LocalCoordinator(tmp_path).topic("t")
    assert topic is not None and topic.partitions == 3 and topic.configs == {"retention.ms": "5"}


def test_client_quotas_survive_a_restart_from_the_journal_and_the_snapshot(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        coordinator = await started(tmp_path)
        await coordinator.set_client_quotas("clients/app", {"producer_byte_rate": 1024.0})
        await coordinator.set_client_quotas("users/<default>", {"consumer_byte_rate": 10.0})
        await coordinator.set_client_quotas("users/<default>", {})  # removed
        before = coordinator.client_quotas()
        assert before == {"clients/app": {"producer_byte_rate": 1024.0}}
        # Unclean: only the journal has them.
        assert LocalCoordinator(tmp_path).client_quotas() == before
        await coordinator.stop()  # folds the journal into the snapshot
        assert not (tmp_path / JOURNAL_NAME).exists() or not (tmp_path / JOURNAL_NAME).read_bytes()
        assert LocalCoordinator(tmp_path).client_quotas() == before

    asyncio.run(scenario())


def test_entity_configs_survive_a_restart_from_the_journal_and_the_snapshot(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        coordinator = await started(tmp_path)
        kind = "client-metrics"
        await coordinator.set_entity_configs(kind, "all", {"metrics": "*"})
        await coordinator.set_entity_configs(kind, "gone", {"metrics": "a."})
        await coordinator.set_entity_configs(kind, "gone", {})  # removed
        assert coordinator.entity_configs(kind) == {"all": {"metrics": "*"}}
        assert coordinator.entity_configs("other") == {}
        # Unclean: only the journal has them.
        assert LocalCoordinator(tmp_path).entity_configs(kind) == {"all": {"metrics": "*"}}
        await coordinator.stop()
        assert LocalCoordinator(tmp_path).entity_configs(kind) == {"all": {"metrics": "*"}}

    asyncio.run(scenario())


def test_dynamic_broker_configs_are_kept_as_entities_and_announced(tmp_path: Path) -> None:
    async def scenario() -> None:
        coordinator = await started(tmp_path)
        changes: list[MetadataChange | None] = []
        coordinator.on_change(changes.append)
        await coordinator.set_entity_configs(
            BROKERS_ENTITY, DEFAULT_BROKER_ENTITY, {"log.retention.ms": "60000"}
        )
        assert changes, "listeners hear of a broker config change (no topic named)"
        assert LocalCoordinator(tmp_path).entity_configs(BROKERS_ENTITY) == {
            "<default>": {"log.retention.ms": "60000"}
        }
        await coordinator.stop()

    asyncio.run(scenario())
