"""The byte format of the consumer group (KIP-848) records of ``__consumer_offsets``, sans-I/O.

This module owns the byte format of the records a consumer group's coordinator writes, as
Kafka 4 writes them (the JSON schemas ``ConsumerGroup*Key``/``ConsumerGroup*Value`` of
Kafka's ``group-coordinator`` module), so that a coordinator that takes over a partition of
``__consumer_offsets`` rebuilds every group by replaying them, and Kafka's tools can read
them. It imports no asyncio. Offsets and classic groups (key types 0-2) are
``tierlog.broker.group.offsets_codec``'s; a ``Record`` may carry a classic group's key and
value (a protocol conversion writes both kinds in one batch), encoded by that module.

Every key starts with an int16 that is the record *type* (Kafka's ``CoordinatorRecordType``)
followed by non-flexible fields; every value starts with an int16 *version* (0 for all of
these) followed by a flexible body. A null value is a tombstone: it deletes what the key
names, and compaction eventually drops it.

Types (big-endian)::

    int8/int16/int32/int64  two's complement        uuid  16 bytes (most significant first)
    string (in keys)        int16 length N, then N bytes of UTF-8
    compact string          unsigned varint N+1, then N bytes (0 = null, nullable only)
    compact array           unsigned varint N+1, then N elements
    compact bytes           unsigned varint N+1, then N bytes
    tagged fields           unsigned varint count, then per field: tag, size, data.
                            Every struct of a flexible body ends with them; tags this
                            module does not know are skipped on read.

Keys (type | fields)::

    3  ConsumerGroupMetadata             group
    4  ConsumerGroupPartitionMetadata    group
    5  ConsumerGroupMemberMetadata       group | member
    6  ConsumerGroupTargetAssignmentMetadata  group
    7  ConsumerGroupTargetAssignmentMember    group | member
    8  ConsumerGroupCurrentMemberAssignment   group | member
    16 ConsumerGroupRegularExpression    group | regular expression

Values (version 0, flexible)::

    3  epoch int32 | tags (0: metadata hash int64, KIP-1101, written when not 0)
    4  topics []{topic id uuid | name string | partitions int32
                 | partition racks []{partition int32 | racks []string}}
    5  instance id string? | rack id string? | client id string | client host string
       | subscribed topic names []string | subscribed regex string? | rebalance timeout int32
       | server assignor string? | tags (0: classic member metadata, nullable struct:
         {session timeout int32 | supported protocols []{name string | metadata bytes}})
    6  assignment epoch int32 | tags (0: assignment timestamp int64, KIP-1263)
    7  topic partitions []{topic id uuid | partitions []int32}
    8  member epoch int32 | previous member epoch int32 | state int8
       | assigned []{topic id | partitions} | pending revocation []{topic id | partitions}
    16 topics []string | version int64 | timestamp int64

A nullable struct in a tagged field is written as its size + 1, a varint 1 (present), then
the struct, as Kafka's generated code does.

Raises:
    RecordsCodecError: truncated or malformed input, or a value version other than 0.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable

from tierlog.broker.group.consumer.member import (
    Assignment,
    ClassicMemberMetadata,
    ClassicProtocol,
    normalise,
)
from tierlog.broker.group.consumer.records import (
    ConsumerGroupKey,
    ConsumerGroupValue,
    CurrentAssignmentKey,
    CurrentAssignmentValue,
    GroupEpochKey,
    GroupEpochValue,
    MemberSubscriptionKey,
    MemberSubscriptionValue,
    Record,
    RegexKey,
    RegexValue,
    SubscriptionMetadataKey,
    SubscriptionMetadataValue,
    TargetAssignmentEpochKey,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TopicMetadataEntry,
)
from tierlog.broker.group.offsets_codec import (
    GroupMetadataKey,
    GroupMetadataValue,
    encode_group_metadata_value,
)
from tierlog.broker.group.offsets_codec import encode_key as encode_classic_key

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})
VALUE_VERSION = 0

_KEY_TYPES: dict[type, int] = {
    GroupEpochKey: GROUP_METADATA,
    SubscriptionMetadataKey: PARTITION_METADATA,
    MemberSubscriptionKey: MEMBER_METADATA,
    TargetAssignmentEpochKey: TARGET_ASSIGNMENT_METADATA,
    TargetAssignmentMemberKey: TARGET_ASSIGNMENT_MEMBER,
    CurrentAssignmentKey: CURRENT_MEMBER_ASSIGNMENT,
    RegexKey: REGULAR_EXPRESSION,
}

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordsCodecError(ValueError):
    """A consumer group record that cannot be decoded or encoded."""


# --------------------------------------------------------------------------- primitives


class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def fixed(self, s: struct.Struct, v: int, what: str) -> None:
        try:
            self.parts.append(s.pack(v))
        except struct.error:
            raise RecordsCodecError(f"{v} does not fit {what}") from None

    def uvarint(self, v: int) -> None:
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        self.parts.append(bytes(out))

    def key_string(self, s: str) -> None:
        raw = s.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise RecordsCodecError(f"string of {len(raw)} bytes exceeds int16 length")
        self.fixed(_I16, len(raw), "int16")
        self.parts.append(raw)

    def string(self, s: str | None) -> None:
        if s is None:
            self.uvarint(0)
            return
        raw = s.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise RecordsCodecError(f"string of {len(raw)} bytes exceeds int16 length")
        self.uvarint(len(raw) + 1)
        self.parts.append(raw)

    def bytes_(self, b: bytes) -> None:
        self.uvarint(len(b) + 1)
        self.parts.append(bytes(b))

    def uuid(self, u: uuid.UUID) -> None:
        self.parts.append(u.bytes)

    def array(self, n: int) -> None:
        self.uvarint(n + 1)

    def tags(self, fields: list[tuple[int, bytes]] | None = None) -> None:
        fields = fields or []
        self.uvarint(len(fields))
        for tag, data in fields:
            self.uvarint(tag)
            self.uvarint(len(data))
            self.parts.append(data)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise RecordsCodecError(
                f"truncated: need {n} bytes at {self.pos}, have {len(self.data) - self.pos}"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def fixed(self, s: struct.Struct) -> int:
        return int(s.unpack(self.take(s.size))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RecordsCodecError("unsigned varint longer than 5 bytes")

    def _text(self, n: int) -> str:
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise RecordsCodecError("string is not valid UTF-8") from None

    def key_string(self) -> str:
        n = self.fixed(_I16)
        if n < 0:
            raise RecordsCodecError(f"invalid string length {n}")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._text(n)

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise RecordsCodecError("null for a non-nullable string")
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1
        if n < 0:
            raise RecordsCodecError("null for non-nullable bytes")
        return self.take(n)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def array(self) -> int:
        n = self.uvarint() - 1
        # Each element takes at least one byte: bounds the count before any allocation.
        if n < 0 or n > len(self.data) - self.pos:
            raise RecordsCodecError(f"invalid array length {n}")
        return n

    def tags(self, known: dict[int, Callable[[_Reader], None]] | None = None) -> None:
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            end = self.pos + size
            handler = (known or {}).get(tag)
            if handler is None:
                self.take(size)
                continue
            if end > len(self.data):
                raise RecordsCodecError(f"tagged field {tag} runs past the end")
            handler(self)
            if self.pos != end:
                raise RecordsCodecError(f"tagged field {tag} has {end - self.pos} extra bytes")

    def done(self, what: str) -> None:
        if self.pos != len(self.data):
            raise RecordsCodecError(f"{len(self.data) - self.pos} trailing bytes after {what}")


def _write_assignment(w: _Writer, assignment: Assignment) -> None:
    topics = sorted((t, sorted(p)) for t, p in assignment.items() if p)
    w.array(len(topics))
    for topic_id, partitions in topics:
        w.uuid(topic_id)
        w.array(len(partitions))
        for p in partitions:
            w.fixed(_I32, p, "int32")
        w.tags()


def _read_assignment(r: _Reader) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for _ in range(r.array()):
        topic_id = r.uuid()
        partitions = out.setdefault(topic_id, set())
        for _ in range(r.array()):
            partitions.add(r.fixed(_I32))
        r.tags()  # KIP-1251's per-partition assignment epochs (tag 0) are not kept
    return normalise(out)


def _write_strings(w: _Writer, values: tuple[str, ...]) -> None:
    w.array(len(values))
    for v in values:
        w.string(v)


def _read_strings(r: _Reader) -> tuple[str, ...]:
    return tuple(r.string() for _ in range(r.array()))


# --------------------------------------------------------------------------- keys codec


def encode_key(key: ConsumerGroupKey) -> bytes:
    """The key bytes: its type, then its strings."""
    w = _Writer()
    w.fixed(_I16, _KEY_TYPES[type(key)], "int16")
    w.key_string(key.group_id)
    if isinstance(key, (MemberSubscriptionKey, TargetAssignmentMemberKey, CurrentAssignmentKey)):
        w.key_string(key.member_id)
    elif isinstance(key, RegexKey):
        w.key_string(key.regex)
    return w.getvalue()


def decode_key(data: bytes) -> ConsumerGroupKey | None:
    """Decode a key; None for record types that are not a consumer group's (offsets,
    classic groups, share and streams groups).

    Raises:
        RecordsCodecError: truncated or malformed key.
    """
    r = _Reader(data)
    kind = r.fixed(_I16)
    if kind not in RECORD_TYPES:
        return None
    group_id = r.key_string()
    key: ConsumerGroupKey
    if kind == GROUP_METADATA:
        key = GroupEpochKey(group_id)
    elif kind == PARTITION_METADATA:
        key = SubscriptionMetadataKey(group_id)
    elif kind == MEMBER_METADATA:
        key = MemberSubscriptionKey(group_id, r.key_string())
    elif kind == TARGET_ASSIGNMENT_METADATA:
        key = TargetAssignmentEpochKey(group_id)
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        key = TargetAssignmentMemberKey(group_id, r.key_string())
    elif kind == CURRENT_MEMBER_ASSIGNMENT:
        key = CurrentAssignmentKey(group_id, r.key_string())
    else:
        key = RegexKey(group_id, r.key_string())
    r.done("key")
    return key


# --------------------------------------------------------------------------- values codec


def _int64_tag(value: int) -> bytes:
    w = _Writer()
    w.fixed(_I64, value, "int64")
    return w.getvalue()


def _classic_tag(meta: ClassicMemberMetadata) -> bytes:
    body = _Writer()
    body.fixed(_I32, meta.session_timeout_ms, "int32")
    body.array(len(meta.supported_protocols))
    for protocol in meta.supported_protocols:
        body.string(protocol.name)
        body.bytes_(protocol.metadata)
        body.tags()
    body.tags()
    w = _Writer()
    w.uvarint(1)  # present (a nullable struct in a tagged field)
    w.parts.append(body.getvalue())
    return w.getvalue()


def encode_value(value: ConsumerGroupValue) -> bytes:
    """The value bytes, version 0."""
    w = _Writer()
    w.fixed(_I16, VALUE_VERSION, "int16")
    if isinstance(value, GroupEpochValue):
        w.fixed(_I32, value.epoch, "int32")
        w.tags([(0, _int64_tag(value.metadata_hash))] if value.metadata_hash else None)
    elif isinstance(value, SubscriptionMetadataValue):
        w.array(len(value.topics))
        for topic in value.topics:
            w.uuid(topic.topic_id)
            w.string(topic.name)
            w.fixed(_I32, topic.num_partitions, "int32")
            w.array(len(topic.partition_racks))
            for partition, racks in topic.partition_racks:
                w.fixed(_I32, partition, "int32")
                _write_strings(w, racks)
                w.tags()
            w.tags()
        w.tags()
    elif isinstance(value, MemberSubscriptionValue):
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        _write_strings(w, value.subscribed_topic_names)
        w.string(value.subscribed_topic_regex)
        w.fixed(_I32, value.rebalance_timeout_ms, "int32")
        w.string(value.server_assignor)
        classic = value.classic_metadata
        w.tags([(0, _classic_tag(classic))] if classic is not None else None)
    elif isinstance(value, TargetAssignmentEpochValue):
        w.fixed(_I32, value.assignment_epoch, "int32")
        stamp = value.assignment_timestamp
        w.tags([(0, _int64_tag(stamp))] if stamp else None)
    elif isinstance(value, TargetAssignmentMemberValue):
        _write_assignment(w, value.partitions)
        w.tags()
    elif isinstance(value, CurrentAssignmentValue):
        w.fixed(_I32, value.member_epoch, "int32")
        w.fixed(_I32, value.previous_member_epoch, "int32")
        w.fixed(_I8, value.state, "int8")
        _write_assignment(w, value.assigned)
        _write_assignment(w, value.pending_revocation)
        w.tags()
    else:
        _write_strings(w, value.topics)
        w.fixed(_I64, value.version, "int64")
        w.fixed(_I64, value.timestamp, "int64")
        w.tags()
    return w.getvalue()


def _read_classic(r: _Reader) -> ClassicMemberMetadata | None:
    if r.uvarint() <= 0:
        return None
    session_timeout = r.fixed(_I32)
    protocols = []
    for _ in range(r.array()):
        name = r.string()
        metadata = r.bytes_()
        r.tags()
        protocols.append(ClassicProtocol(name, metadata))
    r.tags()
    return ClassicMemberMetadata(session_timeout, tuple(protocols))


def decode_value(kind: int, data: bytes) -> ConsumerGroupValue:
    """Decode the value of a record of type ``kind`` (a key's type, 3-8 or 16).

    Raises:
        RecordsCodecError: unknown type or version, truncated or malformed value.
    """
    if kind not in RECORD_TYPES:
        raise RecordsCodecError(f"record type {kind} is not a consumer group's")
    r = _Reader(data)
    version = r.fixed(_I16)
    if version != VALUE_VERSION:
        raise RecordsCodecError(f"unknown value version {version} for record type {kind}")
    value: ConsumerGroupValue
    if kind == GROUP_METADATA:
        epoch = r.fixed(_I32)
        found: dict[str, int] = {}
        r.tags({0: lambda rr: found.__setitem__("hash", rr.fixed(_I64))})
        value = GroupEpochValue(epoch, found.get("hash", 0))
    elif kind == PARTITION_METADATA:
        topics = []
        for _ in range(r.array()):
            topic_id, name, count = r.uuid(), r.string(), r.fixed(_I32)
            racks = []
            for _ in range(r.array()):
                partition = r.fixed(_I32)
                racks.append((partition, _read_strings(r)))
                r.tags()
            r.tags()
            topics.append(TopicMetadataEntry(topic_id, name, count, tuple(racks)))
        r.tags()
        value = SubscriptionMetadataValue(tuple(topics))
    elif kind == MEMBER_METADATA:
        instance_id, rack_id = r.nullable_string(), r.nullable_string()
        client_id, client_host = r.string(), r.string()
        names, regex = _read_strings(r), r.nullable_string()
        rebalance_timeout, assignor = r.fixed(_I32), r.nullable_string()
        classic: list[ClassicMemberMetadata | None] = [None]
        r.tags({0: lambda rr: classic.__setitem__(0, _read_classic(rr))})
        value = MemberSubscriptionValue(
            instance_id,
            rack_id,
            client_id,
            client_host,
            names,
            regex,
            rebalance_timeout,
            assignor,
            classic[0],
        )
    elif kind == TARGET_ASSIGNMENT_METADATA:
        epoch = r.fixed(_I32)
        stamp: dict[str, int] = {}
        r.tags({0: lambda rr: stamp.__setitem__("ts", rr.fixed(_I64))})
        value = TargetAssignmentEpochValue(epoch, stamp.get("ts", 0))
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        partitions = _read_assignment(r)
        r.tags()
        value = TargetAssignmentMemberValue(partitions)
    elif kind == CURRENT_MEMBER_ASSIGNMENT:
        epoch, previous, state = r.fixed(_I32), r.fixed(_I32), r.fixed(_I8)
        assigned = _read_assignment(r)
        pending = _read_assignment(r)
        r.tags()
        value = CurrentAssignmentValue(epoch, previous, state, assigned, pending)
    else:
        topics_matched = _read_strings(r)
        version_, timestamp = r.fixed(_I64), r.fixed(_I64)
        r.tags()
        value = RegexValue(topics_matched, version_, timestamp)
    r.done("value")
    return value


# --------------------------------------------------------------------------- records


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    """Key and value bytes of a record (value None for a tombstone), classic ones included."""
    key = record.key
    if isinstance(key, GroupMetadataKey):
        classic_value = record.value
        if classic_value is not None and not isinstance(classic_value, GroupMetadataValue):
            raise RecordsCodecError("a classic group key needs a GroupMetadataValue")
        return encode_classic_key(key), (
            None if classic_value is None else encode_group_metadata_value(classic_value)
        )
    value = record.value
    if isinstance(value, GroupMetadataValue):
        raise RecordsCodecError("a GroupMetadataValue needs a classic group key")
    return encode_key(key), None if value is None else encode_value(value)


def decode_record(key: bytes, value: bytes | None) -> Record | None:
    """A consumer group record from its bytes; None for keys that are not a consumer
    group's (read those with offsets_codec).

    Raises:
        RecordsCodecError: truncated or malformed key or value.
    """
    decoded = decode_key(key)
    if decoded is None:
        return None
    if value is None:
        return Record(decoded, None)
    return Record(decoded, decode_value(_KEY_TYPES[type(decoded)], value))
