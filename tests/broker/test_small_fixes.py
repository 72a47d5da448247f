"""Edge cases found in review: duplicate CreateTopics entries, stop() without a data dir."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey, ErrorCode


def test_a_topic_named_twice_in_one_request_is_refused(broker: BrokerProcess) -> None:
    # A raw request: confluent-kafka refuses duplicates before they reach the broker.
    client = RawClient(broker.port)
    try:
        topic = {"num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        answer = client.call(
            request(
                ApiKey.CREATE_TOPICS,
                7,
                {
                    "topics": [
                        {"name": "twice", **topic},
                        {"name": "twice", **topic},
                        {"name": "once", **topic},
                    ],
                    "timeout": 10_000,
                },
            )
        )
    finally:
        client.close()
    codes = {(t.name, int(t.error_code)) for t in answer.topics}
    assert codes == {("twice", int(ErrorCode.invalid_request)), ("once", 0)}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert "twice" not in admin.list_topics(timeout=10).topics


def test_sigterm_ends_the_broker_even_when_its_data_dir_is_gone(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "data").start()
    assert process.proc is not None
    proc = process.proc
    shutil.rmtree(process.data_dir)
    started = time.monotonic()
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("the broker did not stop on SIGTERM") from None
    finally:
        process.kill()
    assert time.monotonic() - started < 30
    assert "stopping the logs failed" in process.log_text()
