"""The consumer's embedded protocol, sans-I/O: what classic consumers put in JoinGroup's
protocol metadata and receive in SyncGroup's assignment.

Converting a group between the classic and the consumer protocol (KIP-848) needs both:
an upgrade reads each classic member's subscription and assignment, a downgrade writes
assignments the classic members can read. Kafka's ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment`` (``clients/.../common/message``), non-flexible::

    Subscription  version int16 | topics []string | user data bytes? (int32 length, -1 null)
                  | v1+: owned partitions []{topic string | partitions []int32}
                  | v2+: generation id int32 | v3+: rack id string?
    Assignment    version int16 | assigned partitions []{topic string | partitions []int32}
                  | user data bytes?

Strings carry an int16 length (-1 null), arrays an int32 count. A version newer than 3 is
read as version 3 and what follows is ignored, as Kafka's ``ConsumerProtocol`` does.

Raises:
    EmbeddedProtocolError: truncated or malformed bytes, or a negative version.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

HIGHEST_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class EmbeddedProtocolError(ValueError):
    """Embedded consumer protocol bytes that cannot be read or written."""


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = HIGHEST_VERSION


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    user_data: bytes | None = None


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise EmbeddedProtocolError(f"truncated at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n < 0:
            if nullable:
                return None
            raise EmbeddedProtocolError("null for a non-nullable string")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise EmbeddedProtocolError("string is not valid UTF-8") from None

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > len(self.data) - self.pos:
            raise EmbeddedProtocolError(f"invalid array length {n}")
        return n

    def topic_partitions(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        out = []
        for _ in range(self.count()):
            topic = self.string()
            assert topic is not None
            out.append((topic, tuple(self.i32() for _ in range(self.count()))))
        return tuple(out)


def _version(r: _Reader) -> int:
    version = r.i16()
    if version < 0:
        raise EmbeddedProtocolError(f"negative version {version}")
    return min(version, HIGHEST_VERSION)


def decode_subscription(data: bytes) -> ConsumerSubscription:
    r = _Reader(data)
    version = _version(r)
    topics = tuple(r.string() or "" for _ in range(r.count()))
    user_data = r.bytes_()
    owned = r.topic_partitions() if version >= 1 else ()
    generation = r.i32() if version >= 2 else -1
    rack = r.string(nullable=True) if version >= 3 else None
    return ConsumerSubscription(topics, user_data, owned, generation, rack, version)


def decode_assignment(data: bytes) -> ConsumerAssignment:
    r = _Reader(data)
    _version(r)
    partitions = r.topic_partitions()
    return ConsumerAssignment(partitions, r.bytes_())


def _string(parts: list[bytes], s: str | None) -> None:
    if s is None:
        parts.append(_I16.pack(-1))
        return
    raw = s.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise EmbeddedProtocolError(f"string of {len(raw)} bytes exceeds int16 length")
    parts += [_I16.pack(len(raw)), raw]


def _bytes(parts: list[bytes], b: bytes | None) -> None:
    parts.append(_I32.pack(-1) if b is None else _I32.pack(len(b)) + bytes(b))


def _topic_partitions(parts: list[bytes], tps: tuple[tuple[str, tuple[int, ...]], ...]) -> None:
    parts.append(_I32.pack(len(tps)))
    for topic, partitions in tps:
        _string(parts, topic)
        parts.append(_I32.pack(len(partitions)))
        parts += [_I32.pack(p) for p in partitions]


def encode_subscription(sub: ConsumerSubscription) -> bytes:
    version = min(sub.version, HIGHEST_VERSION)
    parts = [_I16.pack(version), _I32.pack(len(sub.topics))]
    for topic in sub.topics:
        _string(parts, topic)
    _bytes(parts, sub.user_data)
    if version >= 1:
        _topic_partitions(parts, sub.owned_partitions)
    if version >= 2:
        parts.append(_I32.pack(sub.generation_id))
    if version >= 3:
        _string(parts, sub.rack_id)
    return b"".join(parts)


def encode_assignment(assignment: ConsumerAssignment, version: int = HIGHEST_VERSION) -> bytes:
    """Every assignment version has the same fields; ``version`` is the one the member's
    subscription used, so an older client can read it (Kafka does the same)."""
    parts = [_I16.pack(min(max(version, 0), HIGHEST_VERSION))]
    _topic_partitions(parts, assignment.partitions)
    _bytes(parts, assignment.user_data)
    return b"".join(parts)
