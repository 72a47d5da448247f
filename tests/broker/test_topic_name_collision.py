"""Kafka's topic name collision rule against a real broker and real clients: a name equal
to an existing topic's once '.' is read as '_' is refused with INVALID_TOPIC_EXCEPTION
(``Topic.hasCollision``), by CreateTopics and by Metadata auto-creation alike (issue 10,
item 14: "keep Kafka's limits: topic name rules")."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tests.broker.test_auto_create import metadata

pytestmark = pytest.mark.timeout(60)

INVALID_TOPIC_EXCEPTION = 17


def create(admin: AdminClient, *names: str, validate_only: bool = False) -> dict[str, object]:
    """Each name's outcome: None when created, else the KafkaError."""
    futures = admin.create_topics(
        [NewTopic(name, 1, 1) for name in names], validate_only=validate_only
    )
    outcome: dict[str, object] = {}
    for name, future in futures.items():
        try:
            future.result(15)
            outcome[name] = None
        except KafkaException as exc:
            outcome[name] = exc.args[0]
    return outcome


def test_create_topics_refuses_a_name_colliding_with_an_existing_one(
    broker: BrokerProcess,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert create(admin, "orders.eu") == {"orders.eu": None}
    for name in ("orders_eu", "orders_eu"):  # refused, and so not created either time
        (error,) = create(admin, name).values()
        assert isinstance(error, KafkaError)
        assert error.code() == KafkaError.TOPIC_EXCEPTION == INVALID_TOPIC_EXCEPTION
        assert "Topic 'orders_eu' collides with existing topics: orders.eu" in error.str()
    (error,) = create(admin, "orders_eu", validate_only=True).values()
    assert isinstance(error, KafkaError) and error.code() == INVALID_TOPIC_EXCEPTION
    # The same name still answers TOPIC_ALREADY_EXISTS; other names are free.
    (error,) = create(admin, "orders.eu").values()
    assert isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert create(admin, "orders-eu", "orders.us") == {"orders-eu": None, "orders.us": None}
    topics = admin.list_topics(timeout=10).topics
    assert "orders_eu" not in topics and {"orders.eu", "orders-eu", "orders.us"} <= set(topics)


def test_two_colliding_names_in_one_request_make_one_topic(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    outcome = create(admin, "a.b", "a_b")
    created = [name for name, error in outcome.items() if error is None]
    (refused,) = [error for error in outcome.values() if error is not None]
    assert len(created) == 1
    assert isinstance(refused, KafkaError) and refused.code() == INVALID_TOPIC_EXCEPTION
    assert f"collides with existing topics: {created[0]}" in refused.str()


def test_auto_creation_answers_invalid_topic_for_a_colliding_name(broker: BrokerProcess) -> None:
    answer = metadata(broker.port, ["metrics.raw"])
    assert [int(t.error_code) for t in answer.topics] == [0]
    answer = metadata(broker.port, ["metrics_raw", "metrics-raw"])
    assert {t.name: int(t.error_code) for t in answer.topics} == {
        "metrics_raw": INVALID_TOPIC_EXCEPTION,
        "metrics-raw": 0,
    }
    # Not created: without auto-creation it is unknown.
    answer = metadata(broker.port, ["metrics_raw"], version=4, create=False)
    assert [int(t.error_code) for t in answer.topics] == [3]
    # Two colliding names in one request: one is created, the other refused.
    answer = metadata(broker.port, ["x.y", "x_y"])
    assert sorted(int(t.error_code) for t in answer.topics) == [0, INVALID_TOPIC_EXCEPTION]
