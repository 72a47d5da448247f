"""Sans-I/O reader of the metrics a client pushes (KIP-714): an OpenTelemetry
``MetricsData`` message in protobuf, the bytes of PushTelemetry's ``metrics`` field once
decompressed.

Only what a Kafka client sends is read; every other field is skipped by its wire type, as
protobuf readers do. The messages and field numbers (opentelemetry-proto,
``metrics/v1/metrics.proto`` and ``common/v1/common.proto``)::

    MetricsData      1: ResourceMetrics (repeated)
    ResourceMetrics  1: Resource          2: ScopeMetrics (repeated)
    Resource         1: KeyValue (repeated)
    ScopeMetrics     2: Metric (repeated)
    Metric           1: name (string)     5: Gauge    7: Sum    (9-11: histograms, skipped)
    Gauge            1: NumberDataPoint (repeated)
    Sum              1: NumberDataPoint (repeated)   2: aggregation temporality (enum)
                     3: is_monotonic (bool)
    NumberDataPoint  7: KeyValue (repeated)  3: time_unix_nano (fixed64)
                     4: as_double (double)   6: as_int (sfixed64)
    KeyValue         1: key (string)      2: AnyValue
    AnyValue         1: string  2: bool  3: int64  4: double  (5-7: arrays, maps, bytes)

Protobuf wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 (3 and 4, groups,
are obsolete and refused). A payload that does not parse raises ``OtlpError``; the broker
answers it INVALID_RECORD, as Kafka does when its receiver fails. ``fuzz_one_input`` is
the fuzz entry point (atheris-compatible); tests/broker/client_metrics/test_otlp.py drives
it with hypothesis.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

__all__ = ["DataPoint", "OtlpError", "fuzz_one_input", "parse_metrics_data"]

_DOUBLE: Final = struct.Struct("<d")
_INT64: Final = struct.Struct("<q")
_UINT64: Final = struct.Struct("<Q")


class OtlpError(ValueError):
    """The payload is not a protobuf ``MetricsData``."""


@dataclass(frozen=True)
class DataPoint:
    """One number of one metric.

    Attributes:
        name: the metric's name (``org.apache.kafka.producer.record.send.rate``).
        kind: ``gauge``, or ``sum`` (``monotonic``: a counter).
        value: the number (an ``as_int`` point is converted to float).
        attributes: the point's attributes, then the resource's (``client_id`` etc.).
        monotonic: for sums, whether it only grows.
        cumulative: for sums, whether the value is since the start (else a delta).
    """

    name: str
    kind: str
    value: float
    attributes: tuple[tuple[str, str], ...]
    monotonic: bool = False
    cumulative: bool = True


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise OtlpError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise OtlpError("varint longer than 10 bytes")


def _fields(data: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of each field; length-delimited values as views."""
    pos = 0
    end = len(data)
    while pos < end:
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise OtlpError("field number 0")
        value: int | memoryview
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            if pos + 8 > end:
                raise OtlpError("truncated fixed64")
            value = _UINT64.unpack_from(data, pos)[0]
            pos += 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > end:
                raise OtlpError(f"field {number}: {length} bytes declared, {end - pos} left")
            value = data[pos : pos + length]
            pos += length
        elif wire == 5:
            if pos + 4 > end:
                raise OtlpError("truncated fixed32")
            value = int.from_bytes(data[pos : pos + 4], "little")
            pos += 4
        else:
            raise OtlpError(f"field {number}: unsupported wire type {wire}")
        yield number, wire, value


def _text(value: int | memoryview) -> str:
    if not isinstance(value, memoryview):
        raise OtlpError("expected a string")
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OtlpError(f"string is not UTF-8: {exc}") from None


def _message(value: int | memoryview) -> memoryview:
    if not isinstance(value, memoryview):
        raise OtlpError("expected an embedded message")
    return value


def _any_value(data: memoryview) -> str:
    """An attribute value as text (what a Prometheus label holds)."""
    for number, wire, value in _fields(data):
        if number == 1 and wire == 2:
            return _text(value)
        if number == 2 and wire == 0:
            return "true" if value else "false"
        if number == 3 and wire == 0:
            assert isinstance(value, int)
            return str(value - (1 << 64) if value >= 1 << 63 else value)
        if number == 4 and wire == 1:
            assert isinstance(value, int)
            return repr(_DOUBLE.unpack(_UINT64.pack(value))[0])
    return ""  # arrays, maps and bytes: not label material


def _key_value(data: memoryview) -> tuple[str, str]:
    key, text = "", ""
    for number, _wire, value in _fields(data):
        if number == 1:
            key = _text(value)
        elif number == 2:
            text = _any_value(_message(value))
    return key, text


def _attributes(data: memoryview, field: int) -> list[tuple[str, str]]:
    return [_key_value(_message(v)) for n, _w, v in _fields(data) if n == field]


def _number(data: memoryview) -> tuple[float | None, list[tuple[str, str]]]:
    value: float | None = None
    attributes: list[tuple[str, str]] = []
    for number, wire, raw in _fields(data):
        if number == 4 and wire == 1:
            assert isinstance(raw, int)
            value = _DOUBLE.unpack(_UINT64.pack(raw))[0]
        elif number == 6 and wire == 1:
            assert isinstance(raw, int)
            value = float(_INT64.unpack(_UINT64.pack(raw))[0])
        elif number == 7 and wire == 2:
            attributes.append(_key_value(_message(raw)))
    return value, attributes


def _metric(data: memoryview, resource: list[tuple[str, str]]) -> Iterator[DataPoint]:
    name = ""
    series: list[tuple[str, memoryview]] = []
    for number, _wire, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 5:
            series.append(("gauge", _message(value)))
        elif number == 7:
            series.append(("sum", _message(value)))
    for kind, body in series:
        monotonic = False
        cumulative = True
        points: list[memoryview] = []
        for number, _wire, value in _fields(body):
            if number == 1:
                points.append(_message(value))
            elif number == 2 and kind == "sum":
                # AggregationTemporality: 1 delta, 2 cumulative.
                cumulative = value == 2
            elif number == 3 and kind == "sum":
                monotonic = bool(value)
        for point in points:
            number_value, attributes = _number(point)
            if number_value is None:
                continue
            yield DataPoint(
                name,
                kind,
                number_value,
                tuple(attributes + resource),
                monotonic=monotonic,
                cumulative=cumulative,
            )


def parse_metrics_data(payload: bytes) -> list[DataPoint]:
    """Every gauge and sum data point of a ``MetricsData`` message.

    Raises:
        OtlpError: the bytes are not a well-formed message.
    """
    data = memoryview(payload)
    points: list[DataPoint] = []
    for number, _wire, value in _fields(data):
        if number != 1:
            continue
        resource_metrics = _message(value)
        resource: list[tuple[str, str]] = []
        scopes: list[memoryview] = []
        for inner, _w, inner_value in _fields(resource_metrics):
            if inner == 1:
                resource = _attributes(_message(inner_value), 1)
            elif inner == 2:
                scopes.append(_message(inner_value))
        for scope in scopes:
            for n, _w, metric in _fields(scope):
                if n == 2:
                    points.extend(_metric(_message(metric), resource))
    return points


def fuzz_one_input(data: bytes) -> None:
    """Anything but ``OtlpError`` escaping is a bug."""
    with contextlib.suppress(OtlpError):
        parse_metrics_data(data)
