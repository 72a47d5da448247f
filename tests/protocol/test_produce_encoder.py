"""The hand-laid ProduceResponse is byte-identical to kio's writer for every version."""

from __future__ import annotations

import pytest
from kio.index import load_response_schema

from tierlog.protocol import Request
from tierlog.protocol.codec import encode_response
from tierlog.protocol.kio_build import build
from tierlog.protocol.produce_encoder import encode_produce_response
from tierlog.protocol.versions import SUPPORTED, ApiKey

LOW, HIGH = SUPPORTED[ApiKey.PRODUCE]
TOPICS = [
    ("orders", [(0, 0, 1234, -1, 0), (3, 6, -1, -1, -1)]),
    ("é-topic" * 20, [(1, 0, 2**40, 1_700_000_000_123, 77)]),
    ("empty", []),
]


def kio_bytes(version: int, correlation_id: int) -> bytes:
    response_type = load_response_schema(ApiKey.PRODUCE, version)
    body = build(
        response_type,
        {
            "responses": [
                {
                    "name": name,
                    "partition_responses": [
                        {
                            "index": i,
                            "error_code": e,
                            "base_offset": b,
                            "log_append_time": t,
                            "log_start_offset": s,
                            "record_errors": [],
                        }
                        for i, e, b, t, s in parts
                    ],
                }
                for name, parts in TOPICS
            ],
            "throttle_time": 5,
        },
    )
    request = Request(
        ApiKey.PRODUCE,
        version,
        correlation_id,
        "c",
        None,
        None,  # type: ignore[arg-type]
        version,
        0,
    )
    return encode_response(request, body)


@pytest.mark.parametrize("version", range(max(LOW, 3), HIGH + 1))
def test_matches_kio_writer(version: int) -> None:
    ours = encode_produce_response(version, 42, TOPICS, throttle_time_ms=5)
    assert ours == kio_bytes(version, 42)


def test_unsupported_version_is_refused() -> None:
    from tierlog.protocol.errors import ProtocolError

    with pytest.raises(ProtocolError):
        encode_produce_response(HIGH + 1, 1, TOPICS)
