"""The pre-pass that keeps kio from aborting on huge compact arrays and drops unknown tags."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

from tierlog.protocol import MalformedRequestError, decode_request
from tierlog.protocol._skim import SkimError, skimmer_for
from tierlog.protocol.codec import _codec

from .test_codec import ALL_VERSIONS, KP_REQUESTS, kp_encode

FLEXIBLE = [(k, v) for k, v in ALL_VERSIONS if _codec(k, v).skim is not None]

HEADER_V12 = struct.pack(">hhih", 3, 12, 1, -1) + b"\x00"  # Metadata v12, header v2
HUGE_VARINT = b"\xff\xff\xff\xff\x0f"  # 2**32 - 1


def test_flexible_versions_are_guarded() -> None:
    assert (0, 9) in FLEXIBLE and (1, 12) in FLEXIBLE and (3, 9) in FLEXIBLE
    assert (0, 8) not in FLEXIBLE and (3, 8) not in FLEXIBLE
    assert len(FLEXIBLE) > 60


@pytest.mark.parametrize(("api_key", "version"), FLEXIBLE)
def test_valid_requests_pass_unchanged(api_key: int, version: int) -> None:
    raw = kp_encode(KP_REQUESTS[api_key][version]())
    assert _codec(api_key, version).skim(raw) is raw  # type: ignore[misc]


@pytest.mark.parametrize(
    "raw",
    [
        HEADER_V12 + HUGE_VARINT + b"\x00" * 10,  # topics array
        HEADER_V12 + b"\x80\x80\x40" + b"\x00" * 30,  # 2**20 elements, 30 bytes left
        # OffsetFetch v6: topics[1] -> name "t" -> partition_indexes int32[huge]
        struct.pack(">hhih", 9, 6, 1, -1) + b"\x00\x02g\x02\x02t" + HUGE_VARINT + b"\x00" * 8,
        HEADER_V12 + b"\x02" + b"\x00" * 16 + HUGE_VARINT + b"a" * 20,  # huge string
        HEADER_V12 + b"\xff\xff\xff\xff\xff\x01",  # varint longer than 5 bytes
    ],
)
def test_huge_lengths_are_refused_before_kio(raw: bytes) -> None:
    with pytest.raises(MalformedRequestError) as info:
        decode_request(raw)
    assert isinstance(info.value.__cause__, SkimError)


def test_kio_alone_would_abort_the_process() -> None:
    """Documents the kio 0.6.5 bug the pre-pass exists for (in a child process)."""
    code = (
        "from kio.serial import entity_reader\n"
        "from kio.schema.metadata.v12.request import MetadataRequest\n"
        f"entity_reader(MetadataRequest)({HUGE_VARINT + b'x' * 10!r}, 0)\n"
    )
    env = dict(os.environ, RUST_BACKTRACE="0")
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, env=env, check=False
    )
    if result.returncode == 1:  # a Python exception: kio got fixed, the guard is now moot
        pytest.skip("kio no longer preallocates compact arrays")
    assert result.returncode < 0 or b"memory allocation" in result.stderr


def _with_unknown_tags(raw: bytes, header_tag_at: int) -> bytes:
    """Adds tag 99 (unknown) to the header and to the body's last tag section."""
    assert raw[header_tag_at] == 0 and raw[-1] == 0
    tag = b"\x63\x03xyz"
    return raw[:header_tag_at] + b"\x01" + tag + raw[header_tag_at + 1 : -1] + b"\x01" + tag


def test_unknown_tagged_fields_are_dropped() -> None:
    plain = kp_encode(MetadataRequest[12](topics=None), correlation_id=5, client_id="c")
    tagged = _with_unknown_tags(plain, header_tag_at=11)
    assert _codec(3, 12).skim(tagged) == plain  # type: ignore[misc]
    request = decode_request(tagged)
    assert request.correlation_id == 5
    assert request.body == decode_request(plain).body
    assert request.size == len(tagged)


def test_unknown_tags_in_nested_structs_are_dropped() -> None:
    topic = MetadataRequest.MetadataRequestTopic(name="orders")
    plain = kp_encode(MetadataRequest[12](topics=[topic]), correlation_id=6, client_id="c")
    # The topic struct ends with its own (empty) tag section before the request's fields.
    topic_tags_at = plain.index(b"orders") + len(b"orders")
    assert plain[topic_tags_at] == 0
    tagged = plain[:topic_tags_at] + b"\x02\x07\x01a\x08\x00" + plain[topic_tags_at + 1 :]
    assert decode_request(tagged).body == decode_request(plain).body


def test_known_tagged_fields_are_checked() -> None:
    # Fetch v12 request: tag 0 is cluster_id (compact nullable string).
    plain = kp_encode(FetchRequest[12](topics=[], max_wait_ms=1, min_bytes=1), client_id="c")
    assert plain[-1] == 0
    good = plain[:-1] + b"\x01\x00\x04\x04abc"
    assert decode_request(good).body.cluster_id == "abc"  # type: ignore[union-attr]
    bad = plain[:-1] + b"\x01\x00\x04\x09abc"  # string longer than the tag's 4 bytes
    with pytest.raises(MalformedRequestError):
        decode_request(bad)


def test_skimmer_refuses_non_flexible_schemas() -> None:
    from kio.schema.metadata.v8.request import MetadataRequest as MetadataRequestV8

    with pytest.raises(TypeError):
        skimmer_for(MetadataRequestV8)
