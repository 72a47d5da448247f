"""Topic ids are printed as Kafka's tools print them: URL-safe base64, no padding."""

from __future__ import annotations

import base64
import re
import uuid

from tests.tools.cli import Cli
from tierlog.client import LogClient
from tierlog.tools.ids import kafka_id

KAFKA_ID = re.compile(r"[A-Za-z0-9_-]{22}")


def test_kafka_id_of_a_uuid_and_of_confluent_kafkas_uuid() -> None:
    from confluent_kafka import Uuid

    # Bytes that base64 turns into '+' and '/' in the standard alphabet.
    value = uuid.UUID(bytes=bytes([0xFB, 0xFF] * 8))
    expected = base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
    assert "-" in expected and "_" in expected
    assert kafka_id(value) == expected
    # confluent-kafka's Uuid takes (and gives back) the halves as signed Java longs.
    high, low = (int.from_bytes(value.bytes[i : i + 8], "big", signed=True) for i in (0, 8))
    assert str(Uuid(high, low)) != expected  # its own str() is standard base64
    assert kafka_id(Uuid(high, low)) == expected


def test_topics_describe_prints_the_id_in_kafkas_form(cli: Cli) -> None:
    cli.ok("topics", "create", "orders", "--partitions", "2")
    described = cli.ok("topics", "describe", "orders")
    printed = re.search(r"\tTopicId: (\S+)\t", described)
    assert printed, described
    assert KAFKA_ID.fullmatch(printed[1]), printed[1]
    with LogClient(cli.bootstrap) as client:
        client.refresh(["orders"])
        assert printed[1] == kafka_id(client.topic_id("orders"))
