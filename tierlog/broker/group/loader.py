"""Rebuilding the groups of a ``__consumer_offsets`` partition from its records.

This module owns the fold a coordinator runs when it becomes the leader of an offsets
partition (Kafka's ``loadGroupsAndOffsets`` and the consumer groups' replay): every batch
in log order, control batches included, into

- each group's committed offsets (last value per key, tombstones delete; offsets of a
  transactional batch held per producer until its COMMIT or ABORT marker, KIP-98);
- each classic group's last GroupMetadataValue, rebuilt by ``group_from_value``;
- each consumer group (KIP-848), replayed record by record into a ``ConsumerGroupStore``
  (``tierlog.broker.group.consumer.store``), the same ``apply`` a live coordinator runs
  after every write, so that a coordinator that takes over knows what the old one knew.

A group id names one group of one type: a conversion writes the old type's tombstones
before the new type's records, so the last records decide. A record that contradicts
what was replayed before it (a damaged log) is logged and skipped; loading never stops on
it. Nothing here does I/O: ``tierlog.broker.offsets_topic`` reads the batches.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tierlog.broker.group.consumer.errors import ReplayError
from tierlog.broker.group.consumer.group import ConsumerGroup
from tierlog.broker.group.consumer.record_codec import RecordsCodecError, decode_record
from tierlog.broker.group.consumer.records import Record as GroupRecord
from tierlog.broker.group.consumer.store import ConsumerGroupStore
from tierlog.broker.group.group import GroupMetadata, GroupState, MemberMetadata
from tierlog.broker.group.offsets_codec import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetsCodecError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from tierlog.broker.group.results import TopicPartition
from tierlog.broker.group.txn_offsets import CommitRecord
from tierlog.records.builder import ControlType
from tierlog.records.header import BatchHeader
from tierlog.records.reader import DecodedRecord

log = logging.getLogger("tierlog.broker.group.manager")

# One batch of a ``__consumer_offsets`` partition as the loader reads it: its header
# (transactional? control? which producer?) and its records with their log offsets.
LogBatch = tuple[BatchHeader, Sequence[DecodedRecord]]
_CONTROL_KEY = struct.Struct(">hh")  # version, type (tierlog.records.builder)


@dataclass(slots=True)
class Replayed:
    """One partition's records folded in log order: the last classic group value per
    group, the offsets (tombstones delete), the offsets of transactions still open at the
    end per producer id, the consumer groups, and the offset after the last batch."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, CommitRecord]] = field(default_factory=dict)
    pending: dict[int, dict[str, dict[TopicPartition, CommitRecord]]] = field(default_factory=dict)
    consumer: ConsumerGroupStore = field(default_factory=ConsumerGroupStore)
    end_offset: int = 0

    def consumer_groups(self) -> list[ConsumerGroup]:
        return self.consumer.groups()


def replay(batches: Iterable[LogBatch]) -> Replayed:
    """Fold batches in log order (module docstring).

    Offset commits in a transactional batch are held per producer id until that
    producer's control batch: COMMIT applies each one unless the partition's current
    offset was written later, ABORT drops them. Undecodable or foreign records are
    skipped (logged).
    """
    out = Replayed()
    for header, records in batches:
        out.end_offset = max(out.end_offset, header.next_offset)
        if header.is_control:
            if header.is_transactional:
                _replay_marker(out, header, records)
            continue  # other control records (e.g. KRaft's) carry no group state
        for rec in records:
            _replay_record(out, header, rec)
    for group_id in [g for g in out.groups if out.consumer.consumer_group(g) is not None]:
        # Both kinds for one id: the consumer group's records came last (a classic record
        # after them was refused by the store and logged).
        del out.groups[group_id]
    return out


def _replay_marker(out: Replayed, header: BatchHeader, records: Sequence[DecodedRecord]) -> None:
    if not records or records[0].key is None or len(records[0].key) < _CONTROL_KEY.size:
        log.warning("__consumer_offsets control batch at %d has no marker", header.base_offset)
        return
    _, kind = _CONTROL_KEY.unpack_from(records[0].key)
    pending = out.pending.pop(header.producer_id, {})
    if kind != ControlType.COMMIT:
        return
    for group_id, offsets in pending.items():
        loaded = out.offsets.setdefault(group_id, {})
        for tp, record in offsets.items():
            current = loaded.get(tp)
            if current is None or current.order < record.order:
                loaded[tp] = record


def _replay_record(out: Replayed, header: BatchHeader, rec: DecodedRecord) -> None:
    if rec.key is None:
        log.warning("__consumer_offsets record at offset %d has no key", rec.offset)
        return
    try:
        key = decode_key(rec.key)
        if key is None:
            _replay_consumer_group(out, rec)
        elif isinstance(key, OffsetCommitKey):
            tp = (key.topic, key.partition)
            if header.is_transactional:
                target = out.pending.setdefault(header.producer_id, {})
            else:
                target = out.offsets
            if rec.value is None:
                group_offsets = target.get(key.group)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
            else:
                value = decode_offset_commit_value(rec.value)
                # Kafka orders commits by their batch's base offset.
                record = CommitRecord(value, header.base_offset)
                target.setdefault(key.group, {})[tp] = record
        elif isinstance(key, GroupMetadataKey):
            value_or_none = None if rec.value is None else decode_group_metadata_value(rec.value)
            if value_or_none is None:
                out.groups.pop(key.group, None)
            else:
                out.groups[key.group] = value_or_none
            _replay_into_store(out, GroupRecord(key, value_or_none), rec.offset)
    except (OffsetsCodecError, RecordsCodecError) as exc:
        log.warning("skipping __consumer_offsets record at offset %d: %s", rec.offset, exc)


def _replay_consumer_group(out: Replayed, rec: DecodedRecord) -> None:
    assert rec.key is not None
    record = decode_record(rec.key, rec.value)
    if record is None:
        return  # share or streams groups (KIP-932, KIP-1071): not ours
    _replay_into_store(out, record, rec.offset)


def _replay_into_store(out: Replayed, record: GroupRecord, offset: int) -> None:
    try:
        out.consumer.replay(record)
    except ReplayError as exc:
        log.error("__consumer_offsets record at offset %d contradicts the log: %s", offset, exc)


def group_from_value(group_id: str, value: GroupMetadataValue, now_ms: int) -> GroupMetadata:
    """Rebuild a group from its last record, as Kafka's ``GroupMetadata.loadGroup`` does:
    Empty with its generation when it had no members, else Stable with them."""
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    group = GroupMetadata(group_id, now_ms, state)
    restore_membership(group, value)
    return group


def restore_membership(group: GroupMetadata, value: GroupMetadataValue) -> None:
    """Give ``group`` (fresh, or an Empty group holding offsets) the generation, protocol,
    leader and members ``value`` records; a group with members is Stable from now on (its
    load, or a consumer group downgraded to it, KIP-848)."""
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.current_state_timestamp = (
        value.current_state_timestamp if value.current_state_timestamp >= 0 else None
    )
    for m in value.members:
        group.add(
            MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout,
                m.session_timeout,
                value.protocol_type,
                [(value.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
        )
    group.enter_loaded_state()
    group.protocol_type = value.protocol_type or None
    group.leader_id = value.leader if value.leader in group.members else group.leader_id
    group.subscribed_topics = group.compute_subscribed_topics()
