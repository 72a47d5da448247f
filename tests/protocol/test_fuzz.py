"""Hostile bytes: the request path raises ProtocolError subclasses and nothing else."""

from __future__ import annotations

import contextlib
import random
import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from tierlog.protocol import FrameDecoder, FrameError, RequestError, decode_request
from tierlog.protocol.fuzz import builtin_corpus, fuzz_one_input, main, mutate, run

from .test_codec import ALL_VERSIONS, KP_REQUESTS, kp_encode


def _corpus() -> list[bytes]:
    frames = [kp_encode(KP_REQUESTS[k][v]()) for k, v in ALL_VERSIONS]
    for version in (3, 7, 9, 11):
        part = ProduceRequest.TopicProduceData.PartitionProduceData
        topic = ProduceRequest.TopicProduceData(
            name="orders", partition_data=[part(index=i, records=b"r" * 40) for i in range(3)]
        )
        frames.append(kp_encode(ProduceRequest[version](acks=1, timeout_ms=5, topic_data=[topic])))
    for version in (1, 4, 9, 12, 13):
        topics = [MetadataRequest.MetadataRequestTopic(name=n) for n in ("a", "bb", "ccc")]
        frames.append(kp_encode(MetadataRequest[version](topics=topics)))
    return frames + builtin_corpus()


CORPUS = _corpus()


def test_seeded_mutations_only_raise_protocol_errors() -> None:
    # run() raises whatever escapes; a kio allocation abort would kill the test process.
    decoded = run(CORPUS, iterations=6000, seed=20240601)
    assert 0 < decoded < 6000  # mutations hit both accepted and refused frames


def test_mutations_are_deterministic_per_seed() -> None:
    first = [mutate(random.Random(7), frame) for frame in CORPUS[:20]]
    again = [mutate(random.Random(7), frame) for frame in CORPUS[:20]]
    assert first == again
    assert first != CORPUS[:20]


def test_fuzz_main_runs() -> None:
    assert main(["200", "1"]) == 0


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    with contextlib.suppress(RequestError):  # anything else fails the test
        decode_request(data)
    fuzz_one_input(data)


@settings(max_examples=400, deadline=None)
@given(
    key_version=st.sampled_from(ALL_VERSIONS),
    tail=st.binary(max_size=120),
    client_id=st.one_of(st.none(), st.text(max_size=8)),
)
def test_valid_header_then_garbage(
    key_version: tuple[int, int], tail: bytes, client_id: str | None
) -> None:
    api_key, version = key_version
    encoded = None if client_id is None else client_id.encode()
    head = struct.pack(">hhi", api_key, version, 1)
    head += struct.pack(">h", -1) if encoded is None else struct.pack(">h", len(encoded)) + encoded
    try:
        request = decode_request(head + tail)
    except RequestError as exc:
        assert exc.correlation_id == 1
    else:
        assert (request.api_key, request.correlation_id) == (api_key, 1)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(min_value=0, max_value=64))
def test_frame_decoder_on_garbage(data: bytes, max_bytes: int) -> None:
    decoder = FrameDecoder(max_frame_bytes=max_bytes)
    try:
        for frame in decoder.feed(data):
            assert len(frame) <= max_bytes
    except FrameError:
        pass
