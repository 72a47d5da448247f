"""Fuzz entry point for the request path: bytes from the network must only ever raise
``ProtocolError``.

``fuzz_one_input(data)`` is the target (atheris-compatible: ``atheris.Setup(sys.argv,
fuzz_one_input)``). ``run`` drives it with seeded mutations of valid request frames, which
reach much deeper than random bytes; ``python -m tierlog.protocol.fuzz [iterations] [seed]``
runs it over a small built-in corpus.
"""

from __future__ import annotations

import contextlib
import datetime
import random
import sys
from collections.abc import Sequence

import kio.schema.api_versions.v3.request as av3
import kio.schema.fetch.v12.request as f12
import kio.schema.metadata.v12.request as m12
import kio.schema.produce.v9.request as p9
from kio.schema.types import TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from tierlog.protocol.codec import decode_request, encode_request
from tierlog.protocol.errors import ProtocolError
from tierlog.protocol.framing import FrameDecoder

__all__ = ["builtin_corpus", "fuzz_one_input", "main", "mutate", "run"]


def fuzz_one_input(data: bytes) -> None:
    """Decodes ``data`` as one request frame and as a framed stream.

    Raises:
        AssertionError-free by contract: anything but ``ProtocolError`` escaping is a bug.
    """
    with contextlib.suppress(ProtocolError):
        decode_request(data)
    decoder = FrameDecoder(max_frame_bytes=1 << 16)
    with contextlib.suppress(ProtocolError):
        for frame in decoder.feed(data):
            with contextlib.suppress(ProtocolError):
                decode_request(frame)


def mutate(rng: random.Random, frame: bytes) -> bytes:
    """One random edit of ``frame``: flip, overwrite, insert, delete, truncate or splice."""
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(7)
        pos = rng.randrange(len(data) + 1)
        if choice == 0 and data:
            data[pos % len(data)] ^= 1 << rng.randrange(8)
        elif choice == 1 and data:
            data[pos % len(data)] = rng.choice((0x00, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif choice == 2:
            data[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif choice == 3:
            del data[pos : pos + rng.randint(1, 8)]
        elif choice == 4:
            del data[pos:]
        elif choice == 5 and len(data) >= 4:
            # Lengths and counts are where parsers break: make one huge or negative.
            at = rng.randrange(len(data) - 3)
            data[at : at + 4] = rng.choice((b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x80\x80"))
        else:
            data += data[pos:]
    return bytes(data)


def run(corpus: Sequence[bytes], iterations: int, seed: int = 0) -> int:
    """Feeds ``iterations`` mutated corpus frames to ``fuzz_one_input``; returns how many
    of them still decoded to a request."""
    rng = random.Random(seed)
    decoded = 0
    for _ in range(iterations):
        data = mutate(rng, rng.choice(corpus))
        fuzz_one_input(data)
        try:
            decode_request(data)
            decoded += 1
        except ProtocolError:
            pass
    return decoded


def builtin_corpus() -> list[bytes]:
    """A few valid request frames (without size prefix), built with kio."""
    no_wait = i32Timedelta.parse(datetime.timedelta(milliseconds=500))
    produce = p9.ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=no_wait,
        topic_data=(
            p9.TopicProduceData(
                name=TopicName("orders"),
                partition_data=(
                    p9.PartitionProduceData(index=i32(0), records=Records(bytes(range(120)))),
                ),
            ),
        ),
    )
    fetch = f12.FetchRequest(
        max_wait=no_wait,
        min_bytes=i32(1),
        max_bytes=i32(1 << 20),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            f12.FetchTopic(
                topic=TopicName("orders"),
                partitions=(
                    f12.FetchPartition(
                        partition=i32(0),
                        fetch_offset=i64(42),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(1 << 20),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    metadata = m12.MetadataRequest(
        topics=(m12.MetadataRequestTopic(topic_id=None, name=TopicName("orders")),),
        include_topic_authorized_operations=False,
    )
    versions = av3.ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
    return [encode_request(body, 7)[4:] for body in (produce, fetch, metadata, versions)]


def main(argv: Sequence[str] = ()) -> int:
    iterations = int(argv[0]) if argv else 10_000
    seed = int(argv[1]) if len(argv) > 1 else 0
    decoded = run(builtin_corpus(), iterations, seed)
    print(f"{iterations} mutated frames, {decoded} still decoded, no unexpected exception")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
