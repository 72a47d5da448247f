"""``FrameDecoder.incomplete_frame_bytes``: the declared size of the frame being assembled is
known from its prefix, before (and without allocating for) its bytes (issue 10, item 13)."""

from __future__ import annotations

import struct

from tierlog.protocol.framing import FrameDecoder, frame


def test_incomplete_frame_bytes_follows_the_prefix() -> None:
    decoder = FrameDecoder(200 << 20)
    assert decoder.incomplete_frame_bytes == 0
    decoder.feed(struct.pack(">i", 100 << 20)[:3])
    assert decoder.incomplete_frame_bytes == 0  # prefix not complete yet
    decoder.feed(struct.pack(">i", 100 << 20)[3:] + b"abc")
    assert decoder.incomplete_frame_bytes == 4 + (100 << 20)
    assert decoder.buffered == 7  # only what arrived is held


def test_incomplete_frame_bytes_after_whole_frames() -> None:
    decoder = FrameDecoder()
    frames = decoder.feed(frame(b"one") + frame(b"two") + struct.pack(">i", 10) + b"x")
    assert [bytes(f) for f in frames] == [b"one", b"two"]
    assert decoder.incomplete_frame_bytes == 14
    assert [bytes(f) for f in decoder.feed(b"y" * 9)] == [b"x" + b"y" * 9]
    assert decoder.incomplete_frame_bytes == 0
