"""Quotas per user on a real broker process: the principal of the request (``User:ANONYMOUS``
on PLAINTEXT) picks the user quota, ``controller_mutation_rate`` refuses topics past it with
THROTTLING_QUOTA_EXCEEDED (KIP-599) and ``request_percentage`` throttles answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey

pytestmark = pytest.mark.timeout(120)
THROTTLING_QUOTA_EXCEEDED = 89


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data").start()
    try:
        yield process
    finally:
        process.stop()


def call(port: int, api: ApiKey, version: int, data: dict[str, Any]) -> Any:
    client = RawClient(port)
    try:
        return client.call(request(api, version, data))
    finally:
        client.close()


def set_quota(port: int, user: str, key: str, value: float) -> None:
    answer = call(
        port,
        ApiKey.ALTER_CLIENT_QUOTAS,
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "user", "entity_name": user}],
                    "ops": [{"key": key, "value": value, "remove": False}],
                }
            ],
            "validate_only": False,
        },
    )
    assert [e.error_code for e in answer.entries] == [0], answer


def throttled_ms(answer: Any) -> int:
    """The answer's throttle time (kio decodes it as a timedelta)."""
    return int(answer.throttle_time.total_seconds() * 1000)


def create_topics(port: int, version: int, *topics: tuple[str, int]) -> Any:
    return call(
        port,
        ApiKey.CREATE_TOPICS,
        version,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
                for name, partitions in topics
            ],
            "timeout_ms": 10_000,
            "validate_only": False,
        },
    )


def test_controller_mutation_rate_of_the_principal(broker: BrokerProcess) -> None:
    port = broker.port
    set_quota(port, "someone-else", "controller_mutation_rate", 0.001)
    answer = create_topics(port, 6, ("free-a", 3), ("free-b", 3))
    assert [t.error_code for t in answer.topics] == [0, 0], answer  # not ANONYMOUS's quota

    set_quota(port, "ANONYMOUS", "controller_mutation_rate", 1.0)
    # 15 partitions over the 10 s span take the rate past 1/s: accepted (a burst), the
    # next topic of the same request is refused, and the answer says how long to wait.
    answer = create_topics(port, 6, ("burst", 15), ("refused", 1))
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("burst", 0),
        ("refused", THROTTLING_QUOTA_EXCEEDED),
    ], answer
    assert throttled_ms(answer) > 0
    # v5 does not know the code: accepted and only throttled.
    answer = create_topics(port, 5, ("lenient", 1))
    assert [t.error_code for t in answer.topics] == [0], answer
    assert throttled_ms(answer) > 0


def test_request_percentage_of_the_principal(broker: BrokerProcess) -> None:
    port = broker.port
    metadata = {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    set_quota(port, "ANONYMOUS", "request_percentage", 0.0001)
    answer = call(port, ApiKey.METADATA, 8, metadata)
    # A millionth of a thread: the first request is already past it (the connection is
    # then muted for the throttle time, KIP-219, so one request is all it sends).
    assert throttled_ms(answer) > 0, answer
    set_quota(port, "ANONYMOUS", "request_percentage", 1000.0)  # ten threads' worth
    assert throttled_ms(call(port, ApiKey.METADATA, 8, metadata)) == 0
