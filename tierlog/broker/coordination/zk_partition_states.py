"""Partition states: ``/brokers/topics/<t>/partitions/<p>/state`` (leader, leader epoch,
ISR, controller epoch), read by anyone and written by the controller alone.

Every write is doubly fenced: it is a ``FencedTransaction`` of the controller's lease
(``/controller_epoch``'s zkVersion, KAFKA-6082) and each state it replaces is conditional on
that state znode's zkVersion (``StalePartitionStateError``). Since Kafka 2.7 a leader asks
the controller with AlterPartition (KIP-497) instead of writing here itself.

Scale: many states are read in one pipelined round (``read_many``) and written in pipelined
multis of a few hundred (``update_many``), so a fail-over of thousands of partitions costs a
few round trips, not one per partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import UnknownTopicError
from tierlog.broker.coordination.zk_controller import ControllerLease, FencedTransaction
from tierlog.broker.coordination.zk_data import LeaderAndIsr
from tierlog.broker.coordination.zk_errors import StalePartitionStateError, StaleZnodeError
from tierlog.broker.coordination.zk_session import MultiFailed, ZkSession

try:
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
except ImportError as e:  # pragma: no cover - zk_session says how to install it
    raise ImportError(f"cluster mode needs kazoo ({e}): pip install 'tierlog[cluster]'") from e

# Partition-state writes per multi in ``update_many``. One set_data of a state is ~150-250
# bytes on the wire (path + JSON), so 500 make ~100 KB, a tenth of ZooKeeper's default
# jute.maxbuffer (1 MB, which bounds a request); several such multis are pipelined. Kafka's
# controller sends its updateLeaderAndIsr writes pipelined too (one multi each).
STATE_WRITES_PER_MULTI = 500

StateUpdate = tuple[LeaderAndIsr, int]  # the new state, the zkVersion it replaces


class PartitionStates:
    """Args:
    session: a started session.
    """

    def __init__(self, session: ZkSession) -> None:
        self._session = session

    # -- reads --------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> tuple[LeaderAndIsr, int] | None:
        """(state, zkVersion), or None when the partition has no state yet."""
        found = self._session.get(zk_data.partition_state_path(topic, partition))
        if found is None:
            return None
        return zk_data.decode_partition_state(topic, partition, found.data), found.version

    def of_topic(self, topic: str) -> dict[int, tuple[LeaderAndIsr, int]]:
        """Every state of ``topic``: partition -> (state, zkVersion); reads pipelined."""
        partitions = [
            int(child)
            for child in self._session.children(zk_data.topic_partitions_path(topic))
            if child.isascii() and child.isdigit()
        ]
        found = self.get_many([(topic, p) for p in partitions])
        return {p: state for (_, p), state in found.items()}

    def get_many(
        self, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[LeaderAndIsr, int]]:
        """(state, zkVersion) of each partition that has a state, in one pipelined round;
        partitions without one are left out."""
        paths = {zk_data.partition_state_path(t, p): (t, p) for t, p in partitions}
        data, _ = self._session.read_many(paths)
        states: dict[tuple[str, int], tuple[LeaderAndIsr, int]] = {}
        for path, node in data.items():
            if node is not None:
                topic, partition = paths[path]
                state = zk_data.decode_partition_state(topic, partition, node.data)
                states[(topic, partition)] = (state, node.version)
        return states

    # -- controller writes (each one fenced multi) --------------------------------------------

    def create(
        self, lease: ControllerLease, topic: str, states: Mapping[int, LeaderAndIsr]
    ) -> dict[int, int]:
        """Create the state znodes of new partitions (and their parents) in one multi;
        returns partition -> zkVersion (0).

        Raises:
            ControllerMovedError; UnknownTopicError: the topic's znode is gone;
            StalePartitionStateError: a state already exists.
        """
        session = self._session
        if not session.exists(zk_data.topic_path(topic)):
            raise UnknownTopicError(topic)
        txn = FencedTransaction(session, lease)
        if not session.exists(zk_data.topic_partitions_path(topic)):
            txn.create(zk_data.topic_partitions_path(topic))
        for partition, state in sorted(states.items()):
            if not session.exists(zk_data.topic_partition_path(topic, partition)):
                txn.create(zk_data.topic_partition_path(topic, partition))
            txn.create(
                zk_data.partition_state_path(topic, partition),
                zk_data.encode_partition_state(state),
            )
        try:
            txn.commit()
        except MultiFailed as e:
            if isinstance(e.error, NodeExistsError):
                raise StalePartitionStateError(f"{topic}: a partition state exists") from None
            if isinstance(e.error, NoNodeError):
                raise UnknownTopicError(topic) from None
            raise e.error from None
        return dict.fromkeys(states, 0)

    def update(
        self,
        lease: ControllerLease,
        topic: str,
        partition: int,
        state: LeaderAndIsr,
        zk_version: int,
    ) -> int:
        """Replace a partition's leader/ISR if its znode is still at ``zk_version``
        (Kafka's ``updateLeaderAndIsr``); returns the new zkVersion.

        Raises:
            ControllerMovedError; StalePartitionStateError: the state changed since read;
            UnknownTopicError: the state znode does not exist.
        """
        path = zk_data.partition_state_path(topic, partition)
        txn = FencedTransaction(self._session, lease)
        txn.set_data(path, zk_data.encode_partition_state(state), version=zk_version)
        try:
            (stat,) = txn.commit()
        except MultiFailed as e:
            raise _update_error(topic, partition, zk_version, e) from None
        return int(stat.version)

    def update_many(
        self,
        lease: ControllerLease,
        updates: Mapping[tuple[str, int], StateUpdate],
        per_multi: int = STATE_WRITES_PER_MULTI,
    ) -> dict[tuple[str, int], int | StaleZnodeError | UnknownTopicError]:
        """``update`` for many partitions at once: (topic, partition) -> (new state, the
        zkVersion it replaces). The writes go in multis of up to ``per_multi``, each fenced
        by the controller epoch check and each write conditional on its znode's zkVersion,
        all multis sent before the first answer is awaited (Kafka's
        ``KafkaZkClient.updateLeaderAndIsr`` pipelines its conditional writes the same way).

        A multi is all or nothing: when one write in it fails, ZooKeeper names it and rolls
        the others back; that partition gets its error and the others are sent again in a
        multi of their own, so one stale partition never costs the rest their election.

        Returns:
            per partition, the new zkVersion, or ``StalePartitionStateError`` (the state
            changed since it was read) or ``UnknownTopicError`` (the znode is gone).

        Raises:
            ControllerMovedError: nothing more is written (a multi that was already
            committed stays so; the caller resigns and the next controller re-reads).
        """
        if per_multi < 1:
            raise ValueError(f"per_multi must be positive: {per_multi}")
        results: dict[tuple[str, int], int | StaleZnodeError | UnknownTopicError] = {}
        items = list(updates.items())
        chunks = [items[i : i + per_multi] for i in range(0, len(items), per_multi)]
        while chunks:
            sent = []
            for chunk in chunks:
                txn = FencedTransaction(self._session, lease)
                for (topic, partition), (state, version) in chunk:
                    txn.set_data(
                        zk_data.partition_state_path(topic, partition),
                        zk_data.encode_partition_state(state),
                        version=version,
                    )
                sent.append((chunk, txn.send()))
            chunks = []
            for chunk, wait in sent:
                try:
                    stats = wait()
                except MultiFailed as e:
                    (topic, partition), (_, version) = chunk[e.index]
                    results[(topic, partition)] = _update_error(topic, partition, version, e)
                    rest = chunk[: e.index] + chunk[e.index + 1 :]
                    if rest:
                        chunks.append(rest)  # rolled back, still valid: send them again
                    continue
                for (key, _), stat in zip(chunk, stats, strict=True):
                    results[key] = int(stat.version)
        return results


def _update_error(
    topic: str, partition: int, zk_version: int, failed: MultiFailed
) -> StalePartitionStateError | UnknownTopicError:
    """What a failed conditional state write means; anything else is raised as it is."""
    if isinstance(failed.error, BadVersionError):
        path = zk_data.partition_state_path(topic, partition)
        return StalePartitionStateError(f"{path} is no longer at zkVersion {zk_version}")
    if isinstance(failed.error, NoNodeError):
        return UnknownTopicError(f"{topic}-{partition}")
    raise failed.error from None
