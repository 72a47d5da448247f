"""FrameReceiver: frames out of a stream received into the buffers it lends (issue 9)."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.protocol.errors import FrameTooLargeError, MalformedFrameError
from tierlog.protocol.framing import CHUNK_BYTES, FrameReceiver, frame


def receive(receiver: FrameReceiver, data: bytes, most: int | None = None) -> list[bytes]:
    """Pushes ``data`` through the receiver as ``recv_into`` would, at most ``most`` bytes a
    call; returns the frames it completed."""
    frames: list[memoryview] = []
    pos = 0
    while pos < len(data):
        buf = receiver.get_buffer()
        assert len(buf) > 0 and not buf.readonly
        n = min(len(buf), len(data) - pos, most or len(data))
        buf[:n] = data[pos : pos + n]
        pos += n
        frames.extend(receiver.buffer_updated(n))
    assert all(f.readonly for f in frames)
    return [bytes(f) for f in frames]


def test_small_frames_in_one_receive() -> None:
    receiver = FrameReceiver(small_buffer=64)
    assert receive(receiver, frame(b"one") + frame(b"") + frame(b"three")) == [
        b"one",
        b"",
        b"three",
    ]
    assert receiver.buffered == 0


def test_small_frames_split_anywhere_and_the_buffer_wraps() -> None:
    receiver = FrameReceiver(small_buffer=16)
    payloads = [bytes([i]) * (i % 12) for i in range(50)]
    stream = b"".join(frame(p) for p in payloads)
    assert receive(receiver, stream, most=5) == payloads


def test_large_frame_gets_one_buffer_of_its_size() -> None:
    receiver = FrameReceiver(small_buffer=16)
    body = bytes(range(256)) * 4
    data = frame(body) + frame(b"next")
    buf = receiver.get_buffer()
    buf[:16] = data[:16]
    assert receiver.buffer_updated(16) == []
    assert receiver.buffered == 16
    rest = receiver.get_buffer()
    # Exactly the rest of the frame: the next frame starts in the shared buffer again.
    assert len(rest) == len(body) - 12
    rest[:] = data[16 : 4 + len(body)]
    [got] = receiver.buffer_updated(len(rest))
    assert got.readonly and bytes(got) == body
    assert receive(receiver, data[4 + len(body) :]) == [b"next"]
    assert bytes(got) == body  # a fresh buffer per frame: the view is still intact


def test_large_frame_buffer_waits_for_its_bytes() -> None:
    receiver = FrameReceiver(small_buffer=16)
    buf = receiver.get_buffer()
    head = struct.pack(">i", 100 << 20) + b"abcd"
    buf[: len(head)] = head
    receiver.buffer_updated(len(head))
    # The prefix is known but nothing is allocated for 100 MiB: that happens on the next
    # get_buffer (more bytes ready), and then only a chunk of it.
    assert receiver.buffered == 8
    chunk = receiver.get_buffer()
    assert len(chunk) == CHUNK_BYTES - 4


def test_chunked_frame_past_eager_size() -> None:
    receiver = FrameReceiver(small_buffer=16, eager_frame_bytes=100)
    body = random.Random(1).randbytes(3 * CHUNK_BYTES + 123)
    assert receive(receiver, frame(body) + frame(b"x"), most=300_000) == [body, b"x"]


def test_gate_holds_a_large_frame_until_admitted() -> None:
    receiver = FrameReceiver(small_buffer=16, gate_partial_frames=True)
    body = b"z" * 100
    data = frame(frame(b"tiny")[4:]) + frame(body)
    buf = receiver.get_buffer()
    buf[:16] = data[:16]
    assert [bytes(f) for f in receiver.buffer_updated(16)] == [b"tiny"]
    assert receiver.awaiting_admission == 104
    with pytest.raises(RuntimeError):
        receiver.get_buffer()
    receiver.admit()
    assert receiver.awaiting_admission == 0
    assert receive(receiver, data[16:]) == [body]
    # Small frames are never gated.
    assert receive(receiver, frame(b"s")) == [b"s"]
    assert receiver.awaiting_admission == 0


def test_gate_holds_a_small_frame_not_received_whole() -> None:
    receiver = FrameReceiver(small_buffer=64, gate_partial_frames=True)
    data = frame(b"a" * 20) + frame(b"b" * 20)
    buf = receiver.get_buffer()
    buf[:30] = data[:30]
    assert [bytes(f) for f in receiver.buffer_updated(30)] == [b"a" * 20]
    assert receiver.awaiting_admission == 24  # the second frame's prefix is in
    receiver.admit()
    assert receive(receiver, data[30:], most=3) == [b"b" * 20]
    # The admission was for that frame only.
    buf = receiver.get_buffer()
    buf[:6] = frame(b"c" * 9)[:6]
    assert receiver.buffer_updated(6) == []
    assert receiver.awaiting_admission == 13


def test_bad_prefixes() -> None:
    with pytest.raises(FrameTooLargeError):
        receive(FrameReceiver(10), struct.pack(">i", 11))
    with pytest.raises(MalformedFrameError):
        receive(FrameReceiver(), struct.pack(">i", -1))


def test_frames_before_a_bad_prefix_come_first() -> None:
    receiver = FrameReceiver(100)
    buf = receiver.get_buffer()
    data = frame(b"ok") + struct.pack(">i", 101)
    buf[: len(data)] = data
    assert [bytes(f) for f in receiver.buffer_updated(len(data))] == [b"ok"]
    assert isinstance(receiver.failed, FrameTooLargeError)
    with pytest.raises(FrameTooLargeError):
        receiver.get_buffer()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        FrameReceiver(-1)
    with pytest.raises(ValueError):
        FrameReceiver(small_buffer=4)


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=200), max_size=20),
    most=st.integers(min_value=1, max_value=97),
    small=st.integers(min_value=8, max_value=128),
    eager=st.integers(min_value=0, max_value=150),
)
def test_any_split_any_sizes(payloads: list[bytes], most: int, small: int, eager: int) -> None:
    receiver = FrameReceiver(small_buffer=small, eager_frame_bytes=eager)
    stream = b"".join(frame(p) for p in payloads)
    assert receive(receiver, stream, most=most) == payloads
    assert receiver.buffered == 0
