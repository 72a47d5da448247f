"""Keys and values of the internal topic ``__consumer_offsets``, sans-I/O: bytes in, bytes out.

This module owns the byte format of the records the group coordinator writes, exactly as
Kafka writes them (``GroupCoordinatorRecordHelpers`` and the JSON schemas
``OffsetCommitKey``/``OffsetCommitValue``/``GroupMetadataKey``/``GroupMetadataValue`` of
Kafka's ``group-coordinator`` module), so that a log written by tierlog can be read by
Kafka's tools and the other way round. It imports no asyncio.

Every key and every value starts with an int16 *version*. For keys the version doubles as
the record type: 0 and 1 are offset commits (Kafka writes 1), 2 is group metadata; higher
numbers belong to the KIP-848 consumer-group and share-group records, which
``decode_key`` reports as ``None`` (not ours). A record with a null value is a tombstone:
it deletes the offset or the group, and compaction eventually drops it.

Types (big-endian; non-flexible versions)::

    int16/int32/int64   two's complement
    string              int16 length N, then N bytes of UTF-8
    nullable string     as string, length -1 for null
    bytes               int32 length N, then N bytes
    array               int32 count, then the elements

Flexible versions (the "4+" of both values) use compact forms instead: unsigned-varint
length+1 for strings, bytes and arrays (0 = null), and every struct ends with a tagged
field section (unsigned-varint count, then tag, size and data per field; unknown tags
are skipped on read; we write none).

OffsetCommitKey (key version 0 or 1)::

    version int16 | group string | topic string | partition int32

OffsetCommitValue (versions 0-4; we write 3, or 1 when an explicit expire timestamp is
set, as Kafka does for OffsetCommit v2-v4 requests carrying retention_time_ms)::

    v0: version | offset int64 | metadata string | commit_timestamp int64
    v1: version | offset int64 | metadata string | commit_timestamp int64
        | expire_timestamp int64
    v2: same as v0
    v3: version | offset int64 | leader_epoch int32 | metadata string
        | commit_timestamp int64
    v4: v3 in flexible encoding (compact metadata, trailing tagged fields)

GroupMetadataKey (key version 2)::

    version int16 | group string

GroupMetadataValue (versions 0-4; we write 3, like Kafka's GROUP_METADATA_VALUE_VERSION)::

    version | protocol_type string | generation int32 | protocol nullable string
    | leader nullable string | current_state_timestamp int64 (v2+)
    | members array of:
        member_id string | group_instance_id nullable string (v3+) | client_id string
        | client_host string | rebalance_timeout int32 (v1+) | session_timeout int32
        | subscription bytes | assignment bytes

``subscription`` is the member's metadata for the group's selected protocol. For
``protocol_type == "consumer"`` it is a ConsumerProtocolSubscription (version int16,
topics array of strings, user data, ...); ``subscription_topics`` reads its topics, which
offset expiration needs (KIP-496).

Raises:
    OffsetsCodecError: on truncated or malformed input (a ValueError).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "OffsetsCodecError",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_group_metadata_value",
    "encode_key",
    "encode_offset_commit_value",
    "subscription_topics",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
# Version 1 is the only one with expire_timestamp (OffsetCommit requests v2-v4 may set a
# per-request retention time; Kafka then writes v1).
OFFSET_COMMIT_VALUE_EXPIRE_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3
_MAX_VALUE_VERSION = 4
_FLEXIBLE_FROM = 4

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class OffsetsCodecError(ValueError):
    """A ``__consumer_offsets`` key or value that cannot be decoded or encoded."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset; also the coordinator's in-memory form of one.

    ``leader_epoch`` -1 means unknown; ``expire_timestamp`` -1 means none (the normal
    case since KIP-211: retention is counted from when the group became Empty).
    """

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadataValue, ...] = field(default=())


# --------------------------------------------------------------------------- primitives


class _Writer:
    __slots__ = ("flexible", "parts")

    def __init__(self, version: int, flexible: bool = False) -> None:
        self.parts: list[bytes] = [_I16.pack(version)]
        self.flexible = flexible

    def int16(self, v: int) -> None:
        self._pack(_I16, v, "int16")

    def int32(self, v: int) -> None:
        self._pack(_I32, v, "int32")

    def int64(self, v: int) -> None:
        self._pack(_I64, v, "int64")

    def _pack(self, s: struct.Struct, v: int, what: str) -> None:
        try:
            self.parts.append(s.pack(v))
        except struct.error:
            raise OffsetsCodecError(f"{v} does not fit {what}") from None

    def uvarint(self, v: int) -> None:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def string(self, s: str | None, nullable: bool = False) -> None:
        if s is None:
            if not nullable:
                raise OffsetsCodecError("null for a non-nullable string")
            if self.flexible:
                self.uvarint(0)
            else:
                self.int16(-1)
            return
        raw = s.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise OffsetsCodecError(f"string of {len(raw)} bytes exceeds int16 length")
        if self.flexible:
            self.uvarint(len(raw) + 1)
        else:
            self.int16(len(raw))
        self.parts.append(raw)

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.int32(len(b))
        self.parts.append(bytes(b))

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.int32(n)

    def tags(self) -> None:
        if self.flexible:
            self.uvarint(0)  # no tagged fields

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    __slots__ = ("data", "flexible", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.flexible = False

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise OffsetsCodecError(
                f"truncated: need {n} bytes at {self.pos}, have {len(self.data) - self.pos}"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise OffsetsCodecError("unsigned varint longer than 5 bytes")

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise OffsetsCodecError(f"invalid string length {n}")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise OffsetsCodecError("string is not valid UTF-8") from None

    def req_string(self) -> str:
        s = self.string()
        assert s is not None  # string() without nullable never returns None
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise OffsetsCodecError(f"invalid bytes length {n}")
        return self._take(n)

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        # Each element takes at least one byte: bounds the count before any allocation.
        if n < 0 or n > len(self.data) - self.pos:
            raise OffsetsCodecError(f"invalid array length {n}")
        return n

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def done(self, what: str) -> None:
        if self.pos != len(self.data):
            raise OffsetsCodecError(f"{len(self.data) - self.pos} trailing bytes after {what}")


def _value_version(r: _Reader, what: str) -> int:
    version = r.int16()
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise OffsetsCodecError(f"unknown {what} version {version}")
    r.flexible = version >= _FLEXIBLE_FROM
    return version


# --------------------------------------------------------------------------- keys


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    """The record key bytes, with Kafka's current key versions (1 and 2)."""
    if isinstance(key, OffsetCommitKey):
        w = _Writer(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    else:
        w = _Writer(GROUP_METADATA_KEY_VERSION)
        w.string(key.group)
    return w.getvalue()


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """Decode a record key; ``None`` for record types a classic coordinator does not own.

    Raises:
        OffsetsCodecError: truncated or malformed key.
    """
    r = _Reader(data)
    version = r.int16()
    key: OffsetCommitKey | GroupMetadataKey
    if version in (0, 1):
        key = OffsetCommitKey(r.req_string(), r.req_string(), r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(r.req_string())
    elif version > GROUP_METADATA_KEY_VERSION:
        return None  # KIP-848 consumer groups, share groups, ...: not ours
    else:
        raise OffsetsCodecError(f"invalid key version {version}")
    r.done("key")
    return key


# --------------------------------------------------------------------------- offsets


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    """Encode a committed offset; ``version`` None picks Kafka's choice (3, or 1 with expiry)."""
    if version is None:
        version = (
            OFFSET_COMMIT_VALUE_EXPIRE_VERSION
            if value.expire_timestamp >= 0
            else OFFSET_COMMIT_VALUE_VERSION
        )
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise OffsetsCodecError(f"unknown OffsetCommitValue version {version}")
    w = _Writer(version, flexible=version >= _FLEXIBLE_FROM)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    w.tags()
    return w.getvalue()


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    """Decode any OffsetCommitValue version 0-4.

    Raises:
        OffsetsCodecError: unknown version, truncated or malformed value.
    """
    r = _Reader(data)
    version = _value_version(r, "OffsetCommitValue")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.req_string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.skip_tags()
    r.done("OffsetCommitValue")
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


# --------------------------------------------------------------------------- groups


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    """Encode group metadata (version 3 by default, as Kafka writes it)."""
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise OffsetsCodecError(f"unknown GroupMetadataValue version {version}")
    w = _Writer(version, flexible=version >= _FLEXIBLE_FROM)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol, nullable=True)
    w.string(value.leader, nullable=True)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id, nullable=True)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return w.getvalue()


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    """Decode any GroupMetadataValue version 0-4.

    Fields a version lacks get Kafka's defaults: ``current_state_timestamp`` -1,
    ``group_instance_id`` None; a missing ``rebalance_timeout`` (v0) equals the session
    timeout, as Kafka's loader sets it.

    Raises:
        OffsetsCodecError: unknown version, truncated or malformed value.
    """
    r = _Reader(data)
    version = _value_version(r, "GroupMetadataValue")
    protocol_type = r.req_string()
    generation = r.int32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    current_state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.req_string()
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.req_string()
        client_host = r.req_string()
        rebalance_timeout = r.int32() if version >= 1 else None
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        members.append(
            MemberMetadataValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                session_timeout if rebalance_timeout is None else rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.skip_tags()
    r.done("GroupMetadataValue")
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members)
    )


# --------------------------------------------------------------------------- consumer protocol


def subscription_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version), or None if unparseable.

    Every version (0-3) starts ``version int16 | topics array of string``; the fields after
    the topics (user data, owned partitions, generation, rack) are not read.
    """
    r = _Reader(subscription)
    try:
        if r.int16() < 0:
            return None
        return {r.req_string() for _ in range(r.array_len())}
    except OffsetsCodecError:
        return None
