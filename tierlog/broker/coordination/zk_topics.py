"""Topic administration: ``/brokers/topics/<t>`` (replica assignment and topic id) and the
requests under ``/admin`` (deletions, reassignments, preferred elections) with the
notifications the controller completes (Kafka's ``AdminZkClient`` and the topic part of
``KafkaZkClient``).

Any broker creates topics, adds partitions and requests deletions, each conditional on
what it read (a multi, or the assignment's zkVersion), retried when it lost a race. The
controller alone rewrites assignments (reassignment, KIP-455) and deletes topics, in
multis fenced by its lease (``FencedTransaction``). A topic's config overrides are
``zk_configs``'; creation writes the first ones in the same multi as the assignment.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import replace

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import (
    CoordinationError,
    TopicCollisionError,
    TopicExistsError,
    UnknownTopicError,
)
from tierlog.broker.coordination.zk_controller import ControllerLease, FencedTransaction
from tierlog.broker.coordination.zk_data import TopicAssignment
from tierlog.broker.coordination.zk_errors import StaleTopicAssignmentError
from tierlog.broker.coordination.zk_session import MAX_ATTEMPTS, MultiFailed, ZkSession
from tierlog.local.log_manager import colliding_topics

try:
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
except ImportError as e:  # pragma: no cover - zk_session says how to install it
    raise ImportError(f"cluster mode needs kazoo ({e}): pip install 'tierlog[cluster]'") from e

log = logging.getLogger(__name__)


class TopicAdmin:
    """Args:
    session: a started session.
    """

    def __init__(self, session: ZkSession) -> None:
        self._session = session

    # -- reads --------------------------------------------------------------------------------

    def names(self) -> list[str]:
        return self._session.children(zk_data.TOPICS)

    def get(self, topic: str) -> TopicAssignment | None:
        """The replica assignment and topic id, or None if there is no such topic."""
        found = self.get_with_version(topic)
        return None if found is None else found[0]

    def get_with_version(self, topic: str) -> tuple[TopicAssignment, int] | None:
        """As ``get``, with the zkVersion ``set_assignment`` may check."""
        found = self._session.get(zk_data.topic_path(topic))
        if found is None:
            return None
        return zk_data.decode_topic(topic, found.data), found.version

    def pending_deletions(self) -> list[str]:
        """Topics whose deletion was requested and is not complete."""
        return self._session.children(zk_data.DELETE_TOPICS)

    # -- admin writes (any broker) ------------------------------------------------------------

    def create(
        self,
        topic: str,
        assignment: Mapping[int, list[int]],
        topic_id: uuid.UUID,
        configs: Mapping[str, str],
    ) -> None:
        """Write the topic's config and then its assignment, in one multi so that a topic is
        never visible without its config and a lost race clobbers nothing (Kafka writes the
        config znode first for the same reason, ``createTopicWithAssignment``). The
        controller then creates the partition states.

        Raises:
            TopicExistsError: the topic exists or its deletion is still pending.
            TopicCollisionError: a topic's name equals this one once '.' is read as '_'.
        """
        session, kazoo = self._session, self._session.kazoo
        topic_data = zk_data.encode_topic(TopicAssignment(dict(assignment), topic_id))
        config_path = zk_data.topic_config_path(topic)
        for _ in range(MAX_ATTEMPTS):
            if session.exists(zk_data.delete_topic_path(topic)):
                raise TopicExistsError(f"topic {topic!r} is marked for deletion")
            if session.exists(zk_data.topic_path(topic)):
                raise TopicExistsError(f"topic {topic!r} already exists")
            # Against the topics in ZooKeeper now, not a broker's cache, as Kafka's
            # AdminZkClient does (another broker may have just created the other name);
            # a listing only for names with '.' or '_'.
            if "." in topic or "_" in topic:
                colliding = colliding_topics(topic, self.names())
                if colliding:
                    raise TopicCollisionError(topic, colliding)
            txn = kazoo.transaction()
            # A config znode may outlive a topic whose creation failed half-way in old
            # Kafka versions; overwrite it rather than refuse.
            config_stat = kazoo.exists(config_path)
            if config_stat is None:
                txn.create(
                    config_path, zk_data.encode_config(configs), session.acls.for_path(config_path)
                )
            else:
                txn.set_data(
                    config_path, zk_data.encode_config(configs), version=config_stat.version
                )
            txn.create(
                zk_data.topic_path(topic),
                topic_data,
                session.acls.for_path(zk_data.topic_path(topic)),
            )
            try:
                session.commit(txn)
                return
            except MultiFailed as e:
                if e.index == 1 and isinstance(e.error, NodeExistsError):
                    raise TopicExistsError(f"topic {topic!r} already exists") from None
                if not isinstance(e.error, NodeExistsError | BadVersionError | NoNodeError):
                    raise e.error from None
                # the config znode changed under us: look again
        raise CoordinationError(f"could not create topic {topic}: kept conflicting")

    def add_partitions(self, topic: str, assignment: Mapping[int, list[int]]) -> TopicAssignment:
        """Grow a topic to ``assignment`` (all partitions, the existing ones unchanged),
        keeping its topic id; conditional on the znode's zkVersion, re-read on conflict.
        The controller then creates the new partitions' states.

        Raises:
            UnknownTopicError; ValueError: existing partitions differ, or none is added.
        """
        for _ in range(MAX_ATTEMPTS):
            found = self.get_with_version(topic)
            if found is None:
                raise UnknownTopicError(topic)
            current, zk_version = found
            _check_growth(topic, current, assignment)
            grown = replace(current, partitions={p: list(r) for p, r in assignment.items()})
            try:
                self._session.kazoo.set(
                    zk_data.topic_path(topic), zk_data.encode_topic(grown), version=zk_version
                )
                return grown
            except BadVersionError:
                continue
        raise CoordinationError(f"could not add partitions to {topic}: kept conflicting")

    def request_deletion(self, topic: str) -> None:
        """Create ``/admin/delete_topics/<t>`` for the controller to act on; asking twice is
        harmless (Kafka would say TopicAlreadyMarkedForDeletion).

        Raises:
            UnknownTopicError.
        """
        if not self._session.exists(zk_data.topic_path(topic)):
            raise UnknownTopicError(topic)
        with contextlib.suppress(NodeExistsError):
            self._session.kazoo.create(zk_data.delete_topic_path(topic), makepath=True)

    # -- controller writes (each one fenced multi) --------------------------------------------

    def set_assignment(
        self,
        lease: ControllerLease,
        topic: str,
        assignment: TopicAssignment,
        zk_version: int = -1,
    ) -> int:
        """Rewrite a topic's replica assignment (reassignment, KIP-455), conditional on the
        znode's zkVersion unless it is -1; returns the new zkVersion.

        Raises:
            ControllerMovedError; StaleTopicAssignmentError; UnknownTopicError.
        """
        path = zk_data.topic_path(topic)
        txn = FencedTransaction(self._session, lease)
        txn.set_data(path, zk_data.encode_topic(assignment), version=zk_version)
        try:
            (stat,) = txn.commit()
        except MultiFailed as e:
            if isinstance(e.error, BadVersionError):
                raise StaleTopicAssignmentError(f"{path} is not at {zk_version}") from None
            if isinstance(e.error, NoNodeError):
                raise UnknownTopicError(topic) from None
            raise e.error from None
        return int(stat.version)

    def delete(self, lease: ControllerLease, topic: str) -> None:
        """Delete everything of a topic in one multi: ``/brokers/topics/<t>`` with its
        partitions and states, ``/config/topics/<t>`` and the request
        ``/admin/delete_topics/<t>`` (Kafka's TopicDeletionManager.completeDeleteTopic).
        Deleting a topic that is already gone does nothing.

        Raises:
            ControllerMovedError.
        """
        session = self._session
        for _ in range(MAX_ATTEMPTS):
            paths = session.subtree(zk_data.topic_path(topic))
            paths += [
                p
                for p in (zk_data.topic_config_path(topic), zk_data.delete_topic_path(topic))
                if session.exists(p)
            ]
            if not paths:
                return
            txn = FencedTransaction(session, lease)
            for path in paths:
                txn.delete(path)
            try:
                txn.commit()
                log.info("deleted topic %s (controller epoch %d)", topic, lease.epoch)
                return
            except MultiFailed as e:
                if not isinstance(e.error, NoNodeError | NotEmptyError):
                    raise e.error from None
                # the tree changed between the listing and the multi: list it again
        raise CoordinationError(f"could not delete topic {topic}: its znodes kept changing")

    def delete_reassign_partitions(self, lease: ControllerLease) -> None:
        """Remove the (pre-KIP-455) reassignment request once it is done."""
        self._delete_requests(lease, [zk_data.REASSIGN_PARTITIONS])

    def delete_preferred_replica_election(self, lease: ControllerLease) -> None:
        self._delete_requests(lease, [zk_data.PREFERRED_REPLICA_ELECTION])

    def delete_isr_change_notifications(self, lease: ControllerLease, names: list[str]) -> None:
        """Remove processed ``isr_change_<seq>`` children (names as listed)."""
        self._delete_requests(
            lease, [zk_data.child_path(zk_data.ISR_CHANGE_NOTIFICATION, n) for n in names]
        )

    def _delete_requests(self, lease: ControllerLease, paths: list[str]) -> None:
        present = [p for p in paths if self._session.exists(p)]
        if not present:
            return
        txn = FencedTransaction(self._session, lease)
        for path in present:
            txn.delete(path)
        try:
            txn.commit()
        except MultiFailed as e:
            if not isinstance(e.error, NoNodeError):  # deleted meanwhile: fine
                raise e.error from None


def _check_growth(
    topic: str, current: TopicAssignment, assignment: Mapping[int, list[int]]
) -> None:
    changed = [p for p, r in current.partitions.items() if list(assignment.get(p, [])) != r]
    if changed:
        raise ValueError(f"{topic}: add_partitions cannot change partitions {sorted(changed)}")
    if len(assignment) <= len(current.partitions):
        raise ValueError(f"{topic}: has {len(current.partitions)} partitions, none added")
    if sorted(assignment) != list(range(len(assignment))):
        raise ValueError(f"{topic}: partitions must be numbered 0..{len(assignment) - 1}")
