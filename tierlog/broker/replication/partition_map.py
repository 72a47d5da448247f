"""The partitions this broker hosts, by (topic, partition): the replica manager's map,
built before it so the log manager can be given ``committed_offset`` at construction
(retention deletes nothing at or above a partition's high watermark)."""

from __future__ import annotations

from tierlog.broker.replication.partition import Partition

TopicPartition = tuple[str, int]


class PartitionMap(dict[TopicPartition, Partition]):
    """A dict of hosted partitions that also answers the log manager's question."""

    def committed_offset(self, tp: TopicPartition) -> int | None:
        """The high watermark of ``tp``; None when it is not hosted (a log with no
        partition, being deleted, keeps nothing anyone may read)."""
        partition = self.get(tp)
        return partition.high_watermark if partition is not None else None
