"""A tiny protobuf writer of OTLP ``MetricsData`` for tests: what a Kafka client pushes."""

from __future__ import annotations

import struct


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fixed64(number: int, raw: bytes) -> bytes:
    return varint(number << 3 | 1) + raw


def key_value(key: str, value: str | int | bool | float) -> bytes:
    if isinstance(value, bool):
        any_value = varint(2 << 3) + varint(int(value))
    elif isinstance(value, int):
        any_value = varint(3 << 3) + varint(value)
    elif isinstance(value, float):
        any_value = fixed64(4, struct.pack("<d", value))
    else:
        any_value = field(1, value.encode())
    return field(1, key.encode()) + field(2, any_value)


def point(value: float | int, attributes: dict[str, str] | None = None) -> bytes:
    body = fixed64(3, struct.pack("<Q", 1_700_000_000_000_000_000))
    if isinstance(value, int):
        body += fixed64(6, struct.pack("<q", value))
    else:
        body += fixed64(4, struct.pack("<d", value))
    for key, text in (attributes or {}).items():
        body += field(7, key_value(key, text))
    return body


def gauge(name: str, *points: bytes) -> bytes:
    return field(1, name.encode()) + field(5, b"".join(field(1, p) for p in points))


def counter(name: str, *points: bytes, cumulative: bool = True) -> bytes:
    body = b"".join(field(1, p) for p in points)
    body += varint(2 << 3) + varint(2 if cumulative else 1) + varint(3 << 3) + varint(1)
    return field(1, name.encode()) + field(7, body)


def metrics_data(*metrics: bytes, resource: dict[str, str] | None = None) -> bytes:
    scope = field(1, field(1, b"org.apache.kafka")) + b"".join(field(2, m) for m in metrics)
    resource_body = b"".join(field(1, key_value(k, v)) for k, v in (resource or {}).items())
    return field(1, field(1, resource_body) + field(2, scope))
