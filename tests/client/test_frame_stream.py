"""FrameStream over a real socket pair: frames before EOF, the admission gate stops reading,
receive timeouts count from a frame's first byte, bad prefixes reach the reader."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from tierlog.client.frame_stream import FrameStream
from tierlog.protocol.errors import FrameTooLargeError
from tierlog.protocol.framing import FrameReceiver, frame


async def connect(receiver: FrameReceiver) -> tuple[FrameStream, socket.socket]:
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    _, stream = await loop.create_connection(lambda: FrameStream(receiver), sock=ours)
    theirs.setblocking(False)
    return stream, theirs


def test_frames_then_eof() -> None:
    async def scenario() -> list[bytes | None]:
        stream, peer = await connect(FrameReceiver())
        peer.sendall(frame(b"a") + frame(b"x" * 200_000) + frame(b"c"))
        peer.shutdown(socket.SHUT_WR)
        got: list[bytes | None] = []
        while True:
            item = await asyncio.wait_for(stream.receive(), 5)
            assert not isinstance(item, int)
            got.append(None if item is None else bytes(item))
            if item is None:
                break
        stream.write(b"still writable after EOF")
        await stream.drain()
        stream.close()
        await stream.wait_closed()
        peer.close()
        return got

    assert asyncio.run(scenario()) == [b"a", b"x" * 200_000, b"c", None]


def test_admission_gate_holds_the_rest_in_the_kernel() -> None:
    async def scenario() -> None:
        stream, peer = await connect(FrameReceiver(gate_partial_frames=True))
        body = b"y" * 300_000
        # In the background: the socket buffers cannot hold it all while reading waits.
        sending = asyncio.ensure_future(asyncio.get_running_loop().sock_sendall(peer, frame(body)))
        size = await asyncio.wait_for(stream.receive(), 5)
        assert size == 4 + len(body)
        await asyncio.sleep(0.05)
        assert stream.receiver.buffered < 100_000  # not read on: waiting for admit()
        stream.admit()
        got = await asyncio.wait_for(stream.receive(), 5)
        assert isinstance(got, memoryview) and bytes(got) == body
        await sending
        stream.close()
        peer.close()

    asyncio.run(scenario())


def test_frame_timeout_counts_from_the_first_byte() -> None:
    async def scenario() -> None:
        stream, peer = await connect(FrameReceiver())
        waiting = asyncio.ensure_future(stream.receive(idle_timeout=60, frame_timeout=0.2))
        await asyncio.sleep(0.05)
        peer.send(struct.pack(">i", 10) + b"ab")  # a frame begins, never ends
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(waiting, 5)
        assert stream.partial_since is not None
        stream.close()
        peer.close()

    asyncio.run(scenario())


def test_idle_timeout_fires_and_a_frame_in_time_cancels_it() -> None:
    async def scenario() -> None:
        stream, peer = await connect(FrameReceiver())
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError):
            await stream.receive(idle_timeout=0.1)
        assert 0.09 <= loop.time() - started < 2
        # A frame before the deadline: its timer is cancelled, so nothing fails the next
        # wait once the first deadline has passed.
        waiting = asyncio.ensure_future(stream.receive(idle_timeout=0.2))
        await asyncio.sleep(0.02)
        peer.send(frame(b"in time"))
        assert bytes(await asyncio.wait_for(waiting, 5) or b"") == b"in time"
        later = asyncio.ensure_future(stream.receive(idle_timeout=5))
        await asyncio.sleep(0.4)
        assert not later.done()
        peer.send(frame(b"later"))
        assert bytes(await asyncio.wait_for(later, 5) or b"") == b"later"
        stream.close()
        peer.close()

    asyncio.run(scenario())


def test_bad_prefix_after_good_frames() -> None:
    async def scenario() -> None:
        stream, peer = await connect(FrameReceiver(100))
        peer.send(frame(b"ok") + struct.pack(">i", 101))
        assert bytes(await asyncio.wait_for(stream.receive(), 5) or b"") == b"ok"
        with pytest.raises(FrameTooLargeError):
            await asyncio.wait_for(stream.receive(), 5)
        stream.close()
        peer.close()

    asyncio.run(scenario())
