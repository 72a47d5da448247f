"""tierlog's tools against a real Apache Kafka 4.x broker (KRaft, started as
``bench/kafka_ref.py`` starts it, from the jars it caches): ``tierlog topics describe`` of a
compacted topic asks for ``tierlog.log.cleaner.state``, which Kafka does not know, and
prints Kafka's lines with nothing more and no error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration import kafka_tools
from tests.tools.cli import Cli
from tierlog.tools.cleaner_report import broker_states

kafka_ref = kafka_tools.kafka_ref
# A cached broker starts in ~10-20 s; a cold fetch (mvn) comes first.
pytestmark = pytest.mark.timeout(
    120 if kafka_ref._cached_versions(kafka_tools.WORK.resolve()) else kafka_ref.MVN_TIMEOUT + 120
)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running Kafka broker's bootstrap (missing java, mvn or Central is a failure)."""
    from procs import wait_ready

    try:
        dist = kafka_ref.fetch_kafka(kafka_tools.WORK.resolve())
        proc, bootstrap = kafka_ref.start_kafka(dist, tmp_path_factory.mktemp("kafka"))
    except kafka_ref.KafkaUnavailable as exc:
        pytest.fail(f"Kafka is unavailable ({exc}): run `make kafka-tools`", False)
    try:
        wait_ready(proc, bootstrap, 90)
        yield bootstrap
    finally:
        proc.stop()


def test_describe_of_a_compacted_topic_adds_nothing_on_kafka(kafka: str) -> None:
    cli = Cli(kafka)
    cli.ok("topics", "create", "users", "--partitions", "2", "--config", "cleanup.policy=compact")
    result = cli.run("topics", "describe", "users")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("\tTopic: users\t")]
    assert len(rows) == 2, result.stdout
    assert "Cleaner:" not in result.stdout
    assert "cleanup.policy=compact" in result.stdout
    host, port = kafka.rsplit(":", 1)
    assert broker_states({1: (host, int(port))}, timeout=10) == {}  # node.id=1: no such key
