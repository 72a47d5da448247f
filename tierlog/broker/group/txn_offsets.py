"""One group's offsets committed inside transactions that wait for their marker (KIP-98).

This module owns ``CommitRecord`` (an offset commit with its place in the log, Kafka's
``CommitRecordMetadataAndOffset``) and ``PendingTxnOffsets`` (Kafka's
``pendingTransactionalOffsetCommits``): per producer id, the offsets a TxnOffsetCommit
wrote to ``__consumer_offsets`` as part of an open transaction. They are not visible to
OffsetFetch until the transaction's COMMIT marker reaches the group's partition; an ABORT
marker drops them. ``GroupMetadata`` holds one; the manager fills it (writes, loading),
the coordinator settles it. Not thread-safe: everything runs on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from tierlog.broker.group.offsets_codec import OffsetCommitValue
from tierlog.broker.group.results import TopicPartition


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """An offset commit and its place in the partition's log.

    ``order`` is what Kafka's ``olderThan`` compares: the batch's base offset for records
    loaded from the log, and for commits written since, an append counter taken when the
    append is made (appends keep call order per partition, so the counter follows log
    order; loading moves it past the loaded offsets).
    """

    value: OffsetCommitValue
    order: int


PartitionOffsets = dict[TopicPartition, CommitRecord]


class PendingTxnOffsets:
    """Offsets of open transactions, per producer id (see the module docstring).

    Args:
        loaded: producer id -> offsets, as loading found them (transactions without a
            marker at the end of the log).
    """

    def __init__(self, loaded: Mapping[int, PartitionOffsets] | None = None) -> None:
        self._by_producer: dict[int, PartitionOffsets] = {
            pid: dict(offsets) for pid, offsets in (loaded or {}).items() if offsets
        }

    def __bool__(self) -> bool:
        return bool(self._by_producer)

    def producers(self) -> Iterator[int]:
        return iter(list(self._by_producer))

    def get(self, producer_id: int) -> PartitionOffsets:
        """A copy of the producer's pending offsets (empty if none)."""
        return dict(self._by_producer.get(producer_id, {}))

    def has_partition(self, tp: TopicPartition) -> bool:
        """Some open transaction has an offset for ``tp`` (OffsetFetch require_stable)."""
        return any(tp in offsets for offsets in self._by_producer.values())

    def prepare(self, producer_id: int, offsets: PartitionOffsets) -> PartitionOffsets:
        """Hold ``offsets`` for the producer's transaction; a later commit of the same
        partition in the same transaction replaces the earlier one. Returns the entries
        replaced, for ``fail``."""
        pending = self._by_producer.setdefault(producer_id, {})
        replaced = {tp: pending[tp] for tp in offsets if tp in pending}
        pending.update(offsets)
        return replaced

    def fail(self, producer_id: int, offsets: PartitionOffsets, replaced: PartitionOffsets) -> None:
        """Undo ``prepare`` after its append failed: the entries it replaced come back
        (they are in the log; a zombie fenced under the same producer id must not erase
        them, unlike Kafka's ``failPendingTxnOffsetCommit``), the others go. An entry a
        later commit replaced meanwhile is left alone."""
        pending = self._by_producer.get(producer_id)
        if pending is None:
            return
        for tp, record in offsets.items():
            if pending.get(tp) is not record:
                continue
            if tp in replaced:
                pending[tp] = replaced[tp]
            else:
                del pending[tp]
        if not pending:
            del self._by_producer[producer_id]

    def pop(self, producer_id: int) -> PartitionOffsets:
        """Remove and return the producer's pending offsets (its marker arrived)."""
        return self._by_producer.pop(producer_id, {})
