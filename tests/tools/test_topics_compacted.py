"""``tierlog topics describe`` on compacted topics of a real broker: each partition's dirty
ratio and last clean (``Cleaner:``), read from the read-only broker config
``tierlog.log.cleaner.state``, which the broker returns only when it is asked for by name."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from tests.broker.harness import BrokerProcess
from tests.tools.cli import Cli
from tierlog.broker.cleaner_state import KEY
from tierlog.broker.embedded import EmbeddedBroker
from tierlog.tools.cleaner_report import broker_states, summary

COMPACTED = [
    "--config", "cleanup.policy=compact", "--config", "segment.bytes=16384",
    "--config", "min.cleanable.dirty.ratio=0.01",
]  # fmt: skip
CLEANED = re.compile(
    r"dirty ratio (\d\.\d\d), last clean (\d+) s ago "
    r"\(([\d,]+) of ([\d,]+) records kept\)"
)


@pytest.fixture
def cleaning_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", {"log.cleaner.backoff.ms": "100"}).start()
    try:
        yield broker
    finally:
        broker.stop()


def _produce(bootstrap: str, topic: str, count: int, keys: int) -> None:
    producer = Producer(
        # Batches below segment.bytes (16 KiB), which the broker enforces as Kafka does.
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096}
    )
    errors: list[object] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for i in range(count):
        key = b"user-%d" % (i % keys)
        producer.produce(topic, key=key, value=b"x" * 40, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0 and not errors, errors[:3]


def _cleaner_column(described: str, topic: str) -> dict[int, str]:
    rows = re.findall(rf"^\tTopic: {topic}\tPartition: (\d+)\t(.*)$", described, re.M)
    return {
        int(p): rest.split("\tCleaner: ")[1] if "\tCleaner: " in rest else "" for p, rest in rows
    }


def test_describe_shows_dirty_ratio_and_last_clean(cleaning_broker: BrokerProcess) -> None:
    cli = Cli(cleaning_broker.bootstrap)
    cli.ok("topics", "create", "users", "--partitions", "2", *COMPACTED)
    cli.ok("topics", "create", "plain", "--partitions", "1")
    before = _cleaner_column(cli.ok("topics", "describe", "users"), "users")
    assert before == {0: "dirty ratio 0.00, never cleaned", 1: "dirty ratio 0.00, never cleaned"}

    _produce(cleaning_broker.bootstrap, "users", 3000, keys=50)
    deadline = time.monotonic() + 60
    while True:
        described = cli.ok("topics", "describe", "users", "plain")
        match = CLEANED.fullmatch(_cleaner_column(described, "users")[0])
        if match or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert match, described
    ratio, age, kept, read = match.groups()
    assert 0 <= float(ratio) < 1 and int(age) < 60
    assert int(kept.replace(",", "")) < int(read.replace(",", "")) <= 3000
    assert _cleaner_column(described, "users")[1] == "dirty ratio 0.00, never cleaned"
    assert _cleaner_column(described, "plain") == {0: ""}  # not compacted: nothing more


def test_the_state_is_returned_only_when_asked_for_by_name(
    cleaning_broker: BrokerProcess,
) -> None:
    cli = Cli(cleaning_broker.bootstrap)
    cli.ok("topics", "create", "users", *COMPACTED)
    admin = AdminClient({"bootstrap.servers": cleaning_broker.bootstrap})
    broker_id = next(iter(admin.list_topics(timeout=10).brokers))
    every = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(broker_id))])
    entries = next(iter(every.values())).result(timeout=10)
    assert KEY not in entries and "log.cleaner.enable" in entries  # Kafka's view unchanged
    host, port = cleaning_broker.bootstrap.rsplit(":", 1)
    states = broker_states({broker_id: (host, int(port))}, timeout=10)
    assert set(states) == {broker_id}
    state = states[broker_id]
    assert state is not None and ("users", 0) in state
    assert json.loads(json.dumps(state[("users", 0)]))["last_clean"] is None
    # Another broker id's resource is not this broker's: no state.
    assert broker_states({broker_id + 1: (host, int(port))}, timeout=10) == {}


def test_a_broker_whose_cleaner_is_off_says_so(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"log.cleaner.enable": "false"}).start()
    try:
        cli = Cli(broker.bootstrap)
        cli.ok("topics", "create", "users", *COMPACTED)
        column = _cleaner_column(cli.ok("topics", "describe", "users"), "users")
        assert re.fullmatch(r"not cleaned: log.cleaner.enable=false on broker \d+", column[0])
    finally:
        broker.stop()


def test_describe_shows_the_state_over_sasl_ssl(tmp_path: Path) -> None:
    """A secured broker (SASL_SSL only): the state is asked with ``--command-config``'s
    TLS and SASL settings, as the tool's other clients are."""
    data = tmp_path / "data"
    with EmbeddedBroker({"log.dirs": str(data), "log.cleaner.backoff.ms": "100"}, secure=True) as b:
        assert b.security is not None
        cli = Cli(b.bootstrap)
        secured = ("--command-config", str(b.security.client_properties_path))
        cli.ok("topics", "create", "users", *COMPACTED, *secured)
        column = _cleaner_column(cli.ok("topics", "describe", "users", *secured), "users")
        assert column == {0: "dirty ratio 0.00, never cleaned"}


def test_summary_words() -> None:
    now = 1_700_000_000_000
    last = {"time_ms": now - 12_000, "records_read": 20_000, "records_kept": 5_000}
    state = {"dirty_ratio": 0.4213, "cleaning": False, "uncleanable": None,
             "remote_storage": False, "last_clean": last}  # fmt: skip
    assert summary(state, now, 0) == (
        "dirty ratio 0.42, last clean 12 s ago (5,000 of 20,000 records kept)"
    )
    assert summary({**state, "last_clean": {**last, "time_ms": now - 3 * 3_600_000}}, now, 0) == (
        "dirty ratio 0.42, last clean 3 h ago (5,000 of 20,000 records kept)"
    )
    assert summary({**state, "cleaning": True}, now, 0) == "dirty ratio 0.42, cleaning"
    assert summary({**state, "uncleanable": "map too small"}, now, 0) == (
        "dirty ratio 0.42, not cleaned: map too small"
    )
    never = {**state, "last_clean": None}
    assert summary(never, now, 0) == "dirty ratio 0.42, never cleaned"
    assert summary({**never, "remote_storage": True}, now, 0) == (
        "dirty ratio 0.42, remote storage: not cleaned locally yet"
    )
    assert summary(None, now, 3) == "not cleaned: log.cleaner.enable=false on broker 3"
