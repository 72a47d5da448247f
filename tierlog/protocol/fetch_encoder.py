"""FetchResponse encoder for zero-copy fetches: record data stays in the segment file.

kio can only write a FetchResponse whose ``records`` are bytes in memory. The broker instead
sends records with ``sendfile`` from segment files, so this module lays out the response by
hand, for every Fetch version in ``SUPPORTED`` (v4-v16), and returns it as *parts*: ``bytes``
for everything the encoder wrote, and the caller's own slice objects (``FileSlice``, anything
with a ``size``) where a partition's records go. The connection layer writes the bytes parts
and ``sendfile``s the slices, in order.

Layout (Kafka's FetchResponse.json; ``[]`` = array, int32 count below v12, unsigned varint
count + 1 from v12 ("compact"); strings and records likewise int16/int32 length or compact
length + 1; ``tags`` = tagged-field section, v12+ only)::

    size int32 | correlation_id int32 | tags (response header v1, v12+)
    throttle_time_ms int32 | error_code int16 (v7+) | session_id int32 (v7+)
    responses[
        topic string (v4-v12) | topic_id uuid (v13+)
        partitions[
            partition_index int32 | error_code int16 | high_watermark int64
            last_stable_offset int64 | log_start_offset int64 (v5+)
            aborted_transactions nullable [producer_id int64 | first_offset int64 | tags]
            preferred_read_replica int32 (v11+)
            records nullable bytes                               <- the slice goes here
            tags: 0 diverging_epoch, 1 current_leader, 2 snapshot_id (v12+)
        ] | tags
    ] | tags: 0 node_endpoints (v16+)

Tagged fields are written only when they differ from their defaults, as Kafka does, so the
output is byte-for-byte what kio's writer produces for the same content (tested).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple, Protocol, TypeAlias

from tierlog.protocol.versions import SUPPORTED, ApiKey

__all__ = [
    "AbortedTransaction",
    "EncodedFetchResponse",
    "EpochEndOffset",
    "FetchPart",
    "FetchPartitionData",
    "FetchRecords",
    "FetchTopicData",
    "LeaderIdAndEpoch",
    "NodeEndpoint",
    "RecordsSlice",
    "SnapshotId",
    "encode_fetch_response",
]

# Records given as bytes up to this size are copied into the surrounding bytes part;
# larger ones become a part of their own, so that they are not copied at all.
INLINE_RECORDS_MAX: Final = 16 * 1024


class RecordsSlice(Protocol):
    """A byte range the connection layer can send itself (``tierlog.local.FileSlice``).

    A slice may also have a ``release()`` method (a lease on the file it names), which
    ``EncodedFetchResponse.release`` calls once the answer is sent or abandoned.
    """

    @property
    def size(self) -> int: ...


FetchRecords: TypeAlias = bytes | memoryview | RecordsSlice | None
FetchPart: TypeAlias = bytes | memoryview | RecordsSlice


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int


class EpochEndOffset(NamedTuple):
    """``diverging_epoch`` (KIP-320): where a follower's log diverges from the leader's."""

    epoch: int = -1
    end_offset: int = -1


class LeaderIdAndEpoch(NamedTuple):
    """``current_leader`` (KIP-951), sent with NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH."""

    leader_id: int = -1
    leader_epoch: int = -1


class SnapshotId(NamedTuple):
    end_offset: int = -1
    epoch: int = -1


class NodeEndpoint(NamedTuple):
    """A broker address for the v16+ ``node_endpoints`` (KIP-951)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class FetchPartitionData:
    """One partition of a fetch answer; defaults are Kafka's field defaults.

    ``records`` is ``b""`` (nothing to return, what Kafka sends), ``None`` (null), bytes,
    or a slice of a segment file. ``aborted_transactions`` is ``None`` for
    read_uncommitted fetches and a (possibly empty) list for read_committed ones.
    """

    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[AbortedTransaction] | None = None
    preferred_read_replica: int = -1
    records: FetchRecords = b""
    diverging_epoch: EpochEndOffset | None = None
    current_leader: LeaderIdAndEpoch | None = None
    snapshot_id: SnapshotId | None = None


@dataclass(slots=True)
class FetchTopicData:
    """One topic of a fetch answer: by name below v13, by ``topic_id`` from v13."""

    partitions: Sequence[FetchPartitionData] = field(default_factory=list)
    topic: str = ""
    topic_id: uuid.UUID | None = None


class EncodedFetchResponse(NamedTuple):
    """The response as parts to send in order; ``size`` counts all of them, prefix included.

    Whoever sends it calls ``release()`` once the parts are sent, or when sending fails or
    is abandoned, to give back the slices' leases.
    """

    parts: list[FetchPart]
    size: int

    def release(self) -> None:
        """Call ``release()`` on every part that has one; safe to repeat (releasing a
        ``FileSlice`` twice does nothing)."""
        for part in self.parts:
            if not isinstance(part, bytes | memoryview):
                release = getattr(part, "release", None)
                if release is not None:
                    release()


_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_QQ: Final = struct.Struct(">qq")
_PART_V4: Final = struct.Struct(">ihqq")
_PART_V5: Final = struct.Struct(">ihqqq")
# Tagged partition fields, each with its own (empty) tagged-field section:
# tag, size, then the struct.
_DIVERGING: Final = struct.Struct(">BBiqB")  # tag 0, 13, epoch, end_offset, 0
_LEADER: Final = struct.Struct(">BBiiB")  # tag 1, 9, leader_id, leader_epoch, 0
_SNAPSHOT: Final = struct.Struct(">BBqiB")  # tag 2, 13, end_offset, epoch, 0

_DEFAULT_EPOCH_END: Final = EpochEndOffset()
_DEFAULT_LEADER: Final = LeaderIdAndEpoch()
_DEFAULT_SNAPSHOT: Final = SnapshotId()
_SMALL_VARINTS: Final = tuple(bytes((n,)) for n in range(128))


def uvarint(value: int) -> bytes:
    """Unsigned varint (compact lengths and counts of flexible versions)."""
    if value < 128:
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _records_size(records: FetchRecords) -> int:
    if records is None:
        return -1
    if isinstance(records, bytes):
        return len(records)
    if isinstance(records, memoryview):
        return records.nbytes
    return records.size


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[FetchTopicData],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> EncodedFetchResponse:
    """Lays out a complete framed FetchResponse of ``version``.

    Args:
        version: the Fetch request's version (one of ``SUPPORTED[FETCH]``).
        correlation_id: the request's correlation id.
        topics: the answer, in the order to send.
        throttle_time_ms, error_code, session_id: top-level fields (the last two v7+;
            session 0 means "no fetch session", KIP-227).
        node_endpoints: v16+ addresses of the leaders named in ``current_leader``.

    Returns:
        The parts (``bytes``, and the caller's slices and large records objects as given)
        and their total size including the 4-byte size prefix.

    Raises:
        ValueError: unsupported version, or a v13+ topic without ``topic_id``.
    """
    low, high = SUPPORTED[ApiKey.FETCH]
    if not low <= version <= high:
        raise ValueError(f"Fetch v{version} is not supported (v{low}-v{high})")
    flexible = version >= 12
    parts: list[FetchPart] = []
    total = 0
    # The first buffer starts with room for the size prefix, patched at the end.
    head = buf = bytearray(4)
    buf += _I32.pack(correlation_id)
    if flexible:
        buf.append(0)  # response header v1: no tagged fields
    buf += _I32.pack(throttle_time_ms)
    if version >= 7:
        buf += _I16.pack(error_code) + _I32.pack(session_id)
    buf += uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics))
    part_head = _PART_V5 if version >= 5 else _PART_V4
    for topic in topics:
        if version >= 13:
            if topic.topic_id is None:
                raise ValueError(f"Fetch v{version} needs topic_id for topic {topic.topic!r}")
            buf += topic.topic_id.bytes
        else:
            name = topic.topic.encode()
            buf += uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
            buf += name
        partitions = topic.partitions
        buf += uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            if version >= 5:
                buf += part_head.pack(
                    p.partition_index,
                    p.error_code,
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                )
            else:
                buf += part_head.pack(
                    p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
                )
            aborted = p.aborted_transactions
            if aborted is None:
                buf += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                buf += uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    buf += _QQ.pack(producer_id, first_offset)
                    if flexible:
                        buf.append(0)
            if version >= 11:
                buf += _I32.pack(p.preferred_read_replica)
            records = p.records
            size = _records_size(records)
            if flexible:
                buf += uvarint(size + 1)
            else:
                buf += _I32.pack(size)
            if records is not None and size > 0:
                if size <= INLINE_RECORDS_MAX and isinstance(records, bytes | memoryview):
                    buf += records
                else:
                    total += len(buf) + size
                    # The head is frozen at the end, once its size prefix is known.
                    parts.append(b"" if buf is head else bytes(buf))
                    parts.append(records)
                    buf = bytearray()
            if flexible:
                _partition_tags(buf, p)
        if flexible:
            buf.append(0)  # topic tagged fields
    if flexible:
        if version >= 16 and node_endpoints:
            _node_endpoints_tag(buf, node_endpoints)
        else:
            buf.append(0)
    total += len(buf)
    if buf is not head:
        parts.append(bytes(buf))
    _I32.pack_into(head, 0, total - 4)
    if parts:
        parts[0] = bytes(head)
    else:
        parts.append(bytes(head))
    return EncodedFetchResponse(parts, total)


def _partition_tags(buf: bytearray, p: FetchPartitionData) -> None:
    diverging = p.diverging_epoch
    leader = p.current_leader
    snapshot = p.snapshot_id
    write_diverging = diverging is not None and diverging != _DEFAULT_EPOCH_END
    write_leader = leader is not None and leader != _DEFAULT_LEADER
    write_snapshot = snapshot is not None and snapshot != _DEFAULT_SNAPSHOT
    buf.append(write_diverging + write_leader + write_snapshot)
    if write_diverging:
        assert diverging is not None
        buf += _DIVERGING.pack(0, 13, diverging.epoch, diverging.end_offset, 0)
    if write_leader:
        assert leader is not None
        buf += _LEADER.pack(1, 9, leader.leader_id, leader.leader_epoch, 0)
    if write_snapshot:
        assert snapshot is not None
        buf += _SNAPSHOT.pack(2, 13, snapshot.end_offset, snapshot.epoch, 0)


def _node_endpoints_tag(buf: bytearray, endpoints: Sequence[NodeEndpoint]) -> None:
    body = bytearray(uvarint(len(endpoints) + 1))
    for node in endpoints:
        host = node.host.encode()
        body += _I32.pack(node.node_id) + uvarint(len(host) + 1) + host + _I32.pack(node.port)
        if node.rack is None:
            body.append(0)
        else:
            rack = node.rack.encode()
            body += uvarint(len(rack) + 1) + rack
        body.append(0)  # NodeEndpoint tagged fields
    buf.append(1)  # one tagged field
    buf += uvarint(0) + uvarint(len(body)) + body
