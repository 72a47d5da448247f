"""The controller lease: election through ``/controller``, and the fence on every write a
controller makes (``/controller_epoch``'s zkVersion, KAFKA-6082).

``ControllerElection`` creates the ephemeral ``/controller`` and bumps ``/controller_epoch``
in one multi, so election and epoch bump happen together or not at all (Kafka's
``registerControllerAndIncrementControllerEpoch``); the ``ControllerLease`` it returns is
the proof. ``FencedTransaction`` is the only way a controller writes: a multi whose first
operation checks ``/controller_epoch`` at the lease's zkVersion. Once another controller was
elected, a deposed one's multi changes nothing and raises ``ControllerMovedError``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import CoordinationError
from tierlog.broker.coordination.zk_data import ControllerInfo
from tierlog.broker.coordination.zk_errors import ControllerMovedError
from tierlog.broker.coordination.zk_session import (
    MAX_ATTEMPTS,
    MultiFailed,
    ZkSession,
    check_multi,
)
from tierlog.util.clock import Clock, SystemClock

try:
    from kazoo.exceptions import NodeExistsError, NoNodeError
except ImportError as e:  # pragma: no cover - zk_session says how to install it
    raise ImportError(f"cluster mode needs kazoo ({e}): pip install 'tierlog[cluster]'") from e

log = logging.getLogger(__name__)

# Kafka's KafkaController.InitialControllerEpoch: the first controller bumps it to 1.
INITIAL_CONTROLLER_EPOCH = 0


@dataclass(frozen=True)
class ControllerLease:
    """Proof of election: the epoch this controller runs under and the zkVersion of
    ``/controller_epoch`` that every one of its writes checks."""

    broker_id: int
    epoch: int
    epoch_zk_version: int


class FencedTransaction:
    """A multi fenced to ``lease``: ``create``, ``set_data`` and ``delete`` add operations
    after the epoch check; ``commit`` (or ``send`` then the returned wait) gives the results
    of those operations only.

    Raises (from commit):
        ControllerMovedError: the check failed, nothing was written.
        MultiFailed: an operation of the caller's failed (``index`` counts from 0 over the
            caller's operations); nothing was written either.
    """

    def __init__(self, session: ZkSession, lease: ControllerLease) -> None:
        self.lease = lease
        self._acls = session.acls
        self._txn = session.kazoo.transaction()
        self._txn.check(zk_data.CONTROLLER_EPOCH, lease.epoch_zk_version)

    def create(self, path: str, value: bytes = b"") -> None:
        self._txn.create(path, value, acl=self._acls.for_path(path))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self._txn.set_data(path, value, version=version)

    def delete(self, path: str) -> None:
        self._txn.delete(path)

    def commit(self) -> list[Any]:
        return fenced_results(self.lease, list(self._txn.commit()))

    def send(self) -> Callable[[], list[Any]]:
        """Send the multi without waiting for it (several are pipelined); call the returned
        function for its results, which raises as ``commit`` does."""
        call = self._txn.commit_async()
        return lambda: fenced_results(self.lease, list(call.get()))


def fenced_results(lease: ControllerLease, results: list[Any]) -> list[Any]:
    """Results of a fenced multi without its epoch check: ControllerMovedError when the
    check failed; MultiFailed indexes the caller's operations from 0."""
    try:
        return check_multi(results)[1:]
    except MultiFailed as e:
        if e.index == 0:
            raise ControllerMovedError(
                f"controller {lease.broker_id} (epoch {lease.epoch}) was deposed:"
                f" {zk_data.CONTROLLER_EPOCH} is no longer at zkVersion"
                f" {lease.epoch_zk_version}"
            ) from None
        raise MultiFailed(e.index - 1, e.error) from None


class ControllerElection:
    """``/controller`` and ``/controller_epoch``: who controls, under which epoch.

    Args:
        session: a started session; the ``/controller`` it creates lives and dies with it.
        clock: stamps the ``/controller`` znode (Kafka's timestamp field).
    """

    def __init__(self, session: ZkSession, clock: Clock | None = None) -> None:
        self._session = session
        self._clock = clock or SystemClock()

    def try_elect(self, broker_id: int) -> ControllerLease | None:
        """Become controller if there is none. ``/controller_epoch`` is created at 0 when
        missing, so the first controller's epoch is 1.

        Returns:
            the lease, or None when a controller exists (this session's included).
        """
        controller = zk_data.encode_controller(
            ControllerInfo(broker_id, self._clock.milliseconds())
        )
        for _ in range(MAX_ATTEMPTS):
            epoch, zk_version = self._read_or_create_epoch()
            txn = self._session.kazoo.transaction()
            txn.create(
                zk_data.CONTROLLER,
                controller,
                acl=self._session.acls.for_path(zk_data.CONTROLLER),
                ephemeral=True,
            )
            txn.set_data(
                zk_data.CONTROLLER_EPOCH,
                zk_data.encode_controller_epoch(epoch + 1),
                version=zk_version,
            )
            try:
                results = self._session.commit(txn)
            except MultiFailed as e:
                if e.index == 0 and isinstance(e.error, NodeExistsError):
                    return None
                continue  # the epoch moved under us (another election): read it again
            lease = ControllerLease(broker_id, epoch + 1, int(results[1].version))
            log.info("broker %d elected controller, epoch %d", broker_id, lease.epoch)
            return lease
        raise CoordinationError(f"broker {broker_id}: controller election kept conflicting")

    def _read_or_create_epoch(self) -> tuple[int, int]:
        found = self._session.get(zk_data.CONTROLLER_EPOCH)
        if found is None:
            kazoo = self._session.kazoo
            with contextlib.suppress(NodeExistsError):
                kazoo.create(
                    zk_data.CONTROLLER_EPOCH,
                    zk_data.encode_controller_epoch(INITIAL_CONTROLLER_EPOCH),
                )
            data, stat = kazoo.get(zk_data.CONTROLLER_EPOCH)
            return zk_data.decode_controller_epoch(data), int(stat.version)
        return zk_data.decode_controller_epoch(found.data), found.version

    def resign(self, lease: ControllerLease) -> None:
        """Delete ``/controller`` if this lease still holds it (controlled shutdown).

        Raises:
            ControllerMovedError: another controller was elected meanwhile.
        """
        txn = FencedTransaction(self._session, lease)
        txn.delete(zk_data.CONTROLLER)
        try:
            txn.commit()
        except MultiFailed as e:
            if not isinstance(e.error, NoNodeError):
                raise e.error from None

    def holder(self) -> int | None:
        """The broker holding ``/controller``, or None when there is no controller."""
        found = self._session.get(zk_data.CONTROLLER)
        return None if found is None else zk_data.decode_controller(found.data).broker_id

    def epoch(self) -> tuple[int, int] | None:
        """(epoch, zkVersion of /controller_epoch), or None before any election."""
        found = self._session.get(zk_data.CONTROLLER_EPOCH)
        if found is None:
            return None
        return zk_data.decode_controller_epoch(found.data), found.version
