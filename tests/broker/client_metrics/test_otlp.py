"""The OTLP MetricsData reader: what a client pushes (KIP-714), and bytes that are not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.broker.client_metrics.otlp_encoder import counter, gauge, metrics_data, point
from tierlog.broker.client_metrics.otlp import OtlpError, fuzz_one_input, parse_metrics_data


def test_gauges_and_sums_with_their_attributes() -> None:
    payload = metrics_data(
        gauge("org.apache.kafka.producer.record.queue.time.max", point(12.5, {"node.id": "3"})),
        counter("org.apache.kafka.producer.record.send.total", point(2000)),
        counter("org.apache.kafka.producer.request.total", point(7), cumulative=False),
        resource={"client.software": "java"},
    )
    points = parse_metrics_data(payload)
    assert [(p.name, p.kind, p.value) for p in points] == [
        ("org.apache.kafka.producer.record.queue.time.max", "gauge", 12.5),
        ("org.apache.kafka.producer.record.send.total", "sum", 2000.0),
        ("org.apache.kafka.producer.request.total", "sum", 7.0),
    ]
    assert points[0].attributes == (("node.id", "3"), ("client.software", "java"))
    assert points[1].monotonic and points[1].cumulative
    assert not points[2].cumulative


def test_other_fields_are_skipped() -> None:
    # An unknown field of every wire type before the metrics: skipped, not refused.
    noise = bytes([0x08 | (9 << 3), 0x01]) + bytes([(10 << 3) | 5]) + b"\x00" * 4
    payload = noise + metrics_data(gauge("g", point(1.0)))
    assert [p.name for p in parse_metrics_data(payload)] == ["g"]


@pytest.mark.parametrize(
    "payload",
    [
        b"\x0a\x05abc",  # declares 5 bytes, has 3
        b"\x0a",  # a length that never comes
        b"\x0b",  # wire type 3 (a group: obsolete)
        b"\x00\x01",  # field number 0
        b"\x08" + b"\xff" * 11,  # a varint longer than 10 bytes
        b"\x0a\x02\x0a\xff",  # a resource whose inner message is cut
    ],
)
def test_malformed_payloads_are_refused(payload: bytes) -> None:
    with pytest.raises(OtlpError):
        parse_metrics_data(payload)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_parse_or_raise_otlp_error(payload: bytes) -> None:
    fuzz_one_input(payload)
    fuzz_one_input(metrics_data(gauge("g", point(1.0))) + payload)
