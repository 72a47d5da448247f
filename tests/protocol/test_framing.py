"""FrameDecoder: size-prefixed frames out of an arbitrarily chunked byte stream."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    FrameTooLargeError,
    MalformedFrameError,
    frame,
)


def _stream(payloads: list[bytes]) -> bytes:
    return b"".join(frame(p) for p in payloads)


def _feed_all(decoder: FrameDecoder, chunks: list[bytes]) -> list[bytes]:
    return [bytes(f) for chunk in chunks for f in decoder.feed(chunk)]


PAYLOADS = [b"", b"a", b"hello world", bytes(range(256)) * 3, b"\x00\x00\x00\x05"]


def test_default_limit_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 104_857_600


def test_one_chunk_many_frames() -> None:
    decoder = FrameDecoder()
    assert _feed_all(decoder, [_stream(PAYLOADS)]) == PAYLOADS
    assert decoder.buffered == 0


def test_every_split_point_of_a_stream() -> None:
    data = _stream(PAYLOADS)
    for cut in range(len(data) + 1):
        decoder = FrameDecoder()
        assert _feed_all(decoder, [data[:cut], data[cut:]]) == PAYLOADS, cut


def test_byte_at_a_time() -> None:
    data = _stream(PAYLOADS)
    decoder = FrameDecoder()
    out = []
    for i in range(len(data)):
        out.extend(bytes(f) for f in decoder.feed(data[i : i + 1]))
    assert out == PAYLOADS
    assert decoder.buffered == 0


def test_partial_frame_is_held_back() -> None:
    decoder = FrameDecoder()
    data = frame(b"abcdef")
    assert decoder.feed(data[:2]) == []
    assert decoder.feed(data[2:7]) == []
    assert decoder.buffered == 7
    assert [bytes(f) for f in decoder.feed(data[7:] + data[:3])] == [b"abcdef"]
    assert decoder.buffered == 3


def test_empty_feed_returns_nothing() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.feed(b"") == []
    assert decoder.buffered == 2


def test_frames_are_read_only_views_without_the_prefix() -> None:
    decoder = FrameDecoder()
    (view,) = decoder.feed(frame(b"xyz"))
    assert isinstance(view, memoryview)
    assert view.readonly
    assert view.tobytes() == b"xyz"


def test_writable_input_is_copied() -> None:
    decoder = FrameDecoder()
    source = bytearray(frame(b"abc"))
    (view,) = decoder.feed(source)
    source[4:7] = b"XYZ"
    assert view.tobytes() == b"abc"
    (view2,) = decoder.feed(memoryview(bytearray(frame(b"q"))))
    assert view2.readonly and view2.tobytes() == b"q"


def test_oversize_frame_is_refused_from_its_prefix() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    assert [bytes(f) for f in decoder.feed(frame(b"x" * 10))] == [b"x" * 10]
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(struct.pack(">i", 11))  # only the prefix has arrived
    assert info.value.size == 11
    assert info.value.max_bytes == 10


def test_oversize_after_split_prefix() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    prefix = struct.pack(">i", 1001)
    assert decoder.feed(prefix[:3]) == []
    with pytest.raises(FrameTooLargeError):
        decoder.feed(prefix[3:])


def test_negative_size_is_malformed() -> None:
    decoder = FrameDecoder()
    with pytest.raises(MalformedFrameError) as info:
        decoder.feed(frame(b"ok") + struct.pack(">i", -1))
    assert info.value.size == -1


def test_negative_max_is_rejected() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_bytes=-1)


def test_large_frame_in_small_pieces() -> None:
    payload = random.Random(1).randbytes(8 * 1024 * 1024)
    data = frame(payload) + frame(b"tail")
    decoder = FrameDecoder()
    out: list[bytes] = []
    step = 4096
    for i in range(0, len(data), step):
        out.extend(bytes(f) for f in decoder.feed(data[i : i + step]))
        # Only the incomplete frame is held, never re-copied into a growing buffer.
        assert decoder.buffered < len(payload) + 4 + step
    assert out == [payload, b"tail"]


def test_many_small_frames_in_one_chunk() -> None:
    payloads = [struct.pack(">i", i) * (i % 7) for i in range(20_000)]
    decoder = FrameDecoder()
    frames = decoder.feed(_stream(payloads))
    assert [bytes(f) for f in frames] == payloads


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=20),
)
def test_any_chunking_yields_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    data = _stream(payloads)
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert _feed_all(FrameDecoder(), chunks) == payloads
