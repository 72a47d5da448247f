"""Kafka's own decoder reads the consumer group records tierlog writes.

A ``__consumer_offsets`` segment holding one record of every consumer group type (tagged
fields included: a group epoch's metadata hash, a member's classic-protocol metadata, a
target epoch's timestamp) and their tombstones, written by ``record_codec``, is dumped by
Apache Kafka's ``kafka-dump-log --offsets-decoder`` (DumpLogSegments with Kafka's
``GroupCoordinatorRecordSerde``), and every field it prints is compared with what was
written. The tools come from Maven (``make kafka-tools``); without them the test fails.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.integration import kafka_tools
from tests.integration.kafka_tools import DUMP_LOG, KafkaDist
from tierlog.broker.group.consumer.member import ClassicMemberMetadata, ClassicProtocol
from tierlog.broker.group.consumer.record_codec import encode_record
from tierlog.broker.group.consumer.records import (
    CurrentAssignmentKey,
    CurrentAssignmentValue,
    GroupEpochKey,
    GroupEpochValue,
    MemberSubscriptionKey,
    MemberSubscriptionValue,
    Record,
    RegexKey,
    RegexValue,
    SubscriptionMetadataKey,
    SubscriptionMetadataValue,
    TargetAssignmentEpochKey,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TopicMetadataEntry,
)
from tierlog.records.builder import Record as LogRecord
from tierlog.records.builder import build_batch

pytestmark = pytest.mark.timeout(
    90 if kafka_tools.cached_tools() else kafka_tools.kafka_ref.MVN_TIMEOUT + 90
)

FOO = uuid.UUID("3d818455-4b6c-5e0e-b5ef-0a1da377fea0")
BAR = uuid.UUID("257b97cc-9603-510b-bc16-156cfb935e98")


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def partitions(assignment: dict[uuid.UUID, frozenset[int]]) -> list[dict[str, Any]]:
    return [
        {"topicId": kafka_uuid(t), "partitions": sorted(p)} for t, p in sorted(assignment.items())
    ]


CLASSIC = ClassicMemberMetadata(45_000, (ClassicProtocol("range", b"\x00\x01"),))
RECORDS: list[tuple[Record, dict[str, Any], dict[str, Any] | None]] = [
    (
        Record(GroupEpochKey("g"), GroupEpochValue(7, metadata_hash=12345)),
        {"type": "3", "data": {"groupId": "g"}},
        {"epoch": 7, "metadataHash": 12345},
    ),
    (
        Record(
            SubscriptionMetadataKey("g"),
            SubscriptionMetadataValue(
                (
                    TopicMetadataEntry(FOO, "foo", 4),
                    TopicMetadataEntry(BAR, "bar", 2, ((0, ("r1",)),)),
                )
            ),
        ),
        {"type": "4", "data": {"groupId": "g"}},
        {
            "topics": [
                {
                    "topicId": kafka_uuid(FOO),
                    "topicName": "foo",
                    "numPartitions": 4,
                    "partitionMetadata": [],
                },
                {
                    "topicId": kafka_uuid(BAR),
                    "topicName": "bar",
                    "numPartitions": 2,
                    "partitionMetadata": [{"partition": 0, "racks": ["r1"]}],
                },
            ]
        },
    ),
    (
        Record(
            MemberSubscriptionKey("g", "m1"),
            MemberSubscriptionValue(
                "i1", "r1", "client", "/10.0.0.1", ("bar", "foo"), None, 30_000, "range", CLASSIC
            ),
        ),
        {"type": "5", "data": {"groupId": "g", "memberId": "m1"}},
        {
            "instanceId": "i1",
            "rackId": "r1",
            "clientId": "client",
            "clientHost": "/10.0.0.1",
            "subscribedTopicNames": ["bar", "foo"],
            "subscribedTopicRegex": None,
            "rebalanceTimeoutMs": 30_000,
            "serverAssignor": "range",
            "classicMemberMetadata": {
                "sessionTimeoutMs": 45_000,
                "supportedProtocols": [{"name": "range", "metadata": "AAE="}],
            },
        },
    ),
    (
        Record(
            MemberSubscriptionKey("g", "m2"),
            MemberSubscriptionValue(None, None, "c", "h", (), "fo.*", -1, None),
        ),
        {"type": "5", "data": {"groupId": "g", "memberId": "m2"}},
        {
            "instanceId": None,
            "rackId": None,
            "clientId": "c",
            "clientHost": "h",
            "subscribedTopicNames": [],
            "subscribedTopicRegex": "fo.*",
            "rebalanceTimeoutMs": -1,
            "serverAssignor": None,
        },
    ),
    (
        Record(
            TargetAssignmentMemberKey("g", "m1"),
            TargetAssignmentMemberValue({FOO: frozenset({0, 1}), BAR: frozenset({1})}),
        ),
        {"type": "7", "data": {"groupId": "g", "memberId": "m1"}},
        {"topicPartitions": partitions({FOO: frozenset({0, 1}), BAR: frozenset({1})})},
    ),
    (
        Record(TargetAssignmentEpochKey("g"), TargetAssignmentEpochValue(7, 1_700_000_000_000)),
        {"type": "6", "data": {"groupId": "g"}},
        {"assignmentEpoch": 7, "assignmentTimestamp": 1_700_000_000_000},
    ),
    (
        Record(
            CurrentAssignmentKey("g", "m1"),
            CurrentAssignmentValue(7, 6, 1, {FOO: frozenset({0})}, {BAR: frozenset({1})}),
        ),
        {"type": "8", "data": {"groupId": "g", "memberId": "m1"}},
        {
            "memberEpoch": 7,
            "previousMemberEpoch": 6,
            "state": 1,
            "assignedPartitions": partitions({FOO: frozenset({0})}),
            "partitionsPendingRevocation": partitions({BAR: frozenset({1})}),
        },
    ),
    (
        Record(RegexKey("g", "fo.*"), RegexValue(("foo",), 42, 1_700_000_000_001)),
        {"type": "16", "data": {"groupId": "g", "regularExpression": "fo.*"}},
        {"topics": ["foo"], "version": 42, "timestamp": 1_700_000_000_001},
    ),
    (
        Record(CurrentAssignmentKey("g", "m2"), None),
        {"type": "8", "data": {"groupId": "g", "memberId": "m2"}},
        None,
    ),
    (Record(GroupEpochKey("gone"), None), {"type": "3", "data": {"groupId": "gone"}}, None),
]

LINE = re.compile(r"^\| offset: (\d+) .* key: (\{.*\}) payload: (.*)$")


@pytest.fixture(scope="module")
def tools() -> KafkaDist:
    return kafka_tools.tools_or_fail()


def test_kafka_decodes_every_consumer_group_record(tools: KafkaDist, tmp_path: Path) -> None:
    directory = tmp_path / "__consumer_offsets-0"
    directory.mkdir()
    segment = directory / "00000000000000000000.log"
    batch = [LogRecord(*encode_record(record)) for record, _, _ in RECORDS]
    segment.write_bytes(build_batch(batch, base_timestamp=1_000))
    run = kafka_tools.run_tool(tools, DUMP_LOG, ["--files", str(segment), "--offsets-decoder"])
    assert run.returncode == 0, run.output
    assert "Exception" not in run.output and "isvalid: true" in run.stdout, run.output
    printed = [m.groups() for m in map(LINE.match, run.stdout.splitlines()) if m]
    assert [int(offset) for offset, _, _ in printed] == list(range(len(RECORDS)))
    for (_, key, payload), (_, want_key, want_value) in zip(printed, RECORDS, strict=True):
        assert json.loads(key) == want_key
        if want_value is None:
            assert payload == "<DELETE>"
        else:
            assert json.loads(payload) == {"version": "0", "data": want_value}
