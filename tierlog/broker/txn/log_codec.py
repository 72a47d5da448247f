"""Keys and values of the internal topic ``__transaction_state``, sans-I/O: bytes in, bytes out.

Kafka's ``TransactionLogKey``/``TransactionLogValue`` schemas (transaction-coordinator
module), so a log written here reads in Kafka's tools and the other way round. Every key
and value starts with an int16 version; a null value is a tombstone (the transactional id
expired). Big-endian; strings are int16 length + UTF-8, arrays int32 count (-1 = null)::

    key v0:    version int16 | transactional_id string

    value v0:  version int16 | producer_id int64 | producer_epoch int16
               | transaction_timeout_ms int32 | transaction_status int8
               | transaction_partitions nullable array of
                     topic string | partition_ids array of int32
               | transaction_last_update_timestamp_ms int64
               | transaction_start_timestamp_ms int64

Value v1 is v0 in flexible encoding with KIP-890 part 2's tagged fields (previous and next
producer id, client transaction version); this coordinator implements transactions v1
(KIP-890 part 1), writes v0 as Kafka does for them, and reports v1 values as unknown.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from enum import IntEnum
from typing import NamedTuple

KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")  # last update, start


class TxnLogCodecError(ValueError):
    """Bytes that are not a ``__transaction_state`` key or value this coordinator reads."""


class TxnState(IntEnum):
    """A transaction's status as stored (Kafka's ``TransactionState.id``)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use (``Ongoing``, ...)."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}


class TxnLogValue(NamedTuple):
    """One transactional id's stored state."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: tuple[tuple[str, int], ...]  # sorted (topic, partition)
    last_update_ms: int
    start_ms: int


def _string(text: str) -> bytes:
    data = text.encode()
    if len(data) > 0x7FFF:
        raise TxnLogCodecError(f"string of {len(data)} bytes is too long")
    return _I16.pack(len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(value: TxnLogValue) -> bytes:
    out = bytearray(
        _VALUE_HEAD.pack(
            VALUE_VERSION, value.producer_id, value.producer_epoch, value.timeout_ms, value.state
        )
    )
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(value.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out += _I32.pack(len(by_topic))
    for topic, partitions in by_topic.items():
        out += _string(topic) + _I32.pack(len(partitions))
        out += struct.pack(f">{len(partitions)}i", *partitions)
    out += _TIMES.pack(value.last_update_ms, value.start_ms)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes | memoryview, what: str) -> None:
        self.data = memoryview(data)
        self.position = 0
        self.what = what

    def take(self, layout: struct.Struct) -> tuple[int, ...]:
        if self.position + layout.size > len(self.data):
            raise TxnLogCodecError(f"{self.what}: truncated at byte {self.position}")
        fields = layout.unpack_from(self.data, self.position)
        self.position += layout.size
        return fields

    def string(self) -> str:
        (length,) = self.take(_I16)
        if length < 0 or self.position + length > len(self.data):
            raise TxnLogCodecError(f"{self.what}: bad string length {length}")
        text = bytes(self.data[self.position : self.position + length]).decode()
        self.position += length
        return text

    def count(self) -> int:
        (n,) = self.take(_I32)
        if n > len(self.data) - self.position:
            raise TxnLogCodecError(f"{self.what}: array of {n} cannot fit")
        return n

    def end(self) -> None:
        if self.position != len(self.data):
            raise TxnLogCodecError(f"{self.what}: {len(self.data) - self.position} bytes left")


def decode_key(data: bytes | memoryview) -> str:
    reader = _Reader(data, "transaction log key")
    (version,) = reader.take(_I16)
    if version != KEY_VERSION:
        raise TxnLogCodecError(f"transaction log key version {version} is unknown")
    transactional_id = reader.string()
    reader.end()
    return transactional_id


def decode_value(data: bytes | memoryview) -> TxnLogValue:
    reader = _Reader(data, "transaction log value")
    version, producer_id, epoch, timeout_ms, status = reader.take(_VALUE_HEAD)
    if version != VALUE_VERSION:
        raise TxnLogCodecError(f"transaction log value version {version} is not read here")
    try:
        state = TxnState(status)
    except ValueError:
        raise TxnLogCodecError(f"transaction status {status} is unknown") from None
    partitions: list[tuple[str, int]] = []
    topics = reader.count()
    for _ in range(max(0, topics)):  # -1 = null: no partitions
        topic = reader.string()
        for _ in range(reader.count()):
            partitions.append((topic, reader.take(_I32)[0]))
    last_update_ms, start_ms = reader.take(_TIMES)
    reader.end()
    return TxnLogValue(
        producer_id, epoch, timeout_ms, state, tuple(sorted(partitions)), last_update_ms, start_ms
    )


def topic_partitions(pairs: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """(topic, partition) pairs grouped by topic, both sorted (answers list them so)."""
    grouped: dict[str, list[int]] = {}
    for topic, partition in sorted(pairs):
        grouped.setdefault(topic, []).append(partition)
    return grouped
