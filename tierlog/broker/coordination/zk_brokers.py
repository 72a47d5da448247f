"""Cluster membership: the cluster id (``/cluster/id``) and the brokers' ephemeral
registrations (``/brokers/ids/<id>``), whose czxid is the broker epoch (KIP-380).

A broker killed (SIGKILL, power loss) leaves its registration behind until ZooKeeper expires
its session, ``zookeeper.session.timeout.ms`` later. Kafka refuses to start again in that
window (NodeExistsException), so every supervisor has to retry for up to 18 s. ``register``
waits instead: for at most the session timeout plus a margin (``stale_registration_bound_s``)
it watches the old registration vanish, then registers. Only a registration still held after
that bound belongs to a live broker, and only then is the id refused (``BrokerIdInUseError``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import CoordinationError
from tierlog.broker.coordination.zk_data import BrokerInfo
from tierlog.broker.coordination.zk_errors import BrokerIdInUseError
from tierlog.broker.coordination.zk_session import MAX_ATTEMPTS, ZkSession
from tierlog.util.clock import Clock, SystemClock

try:
    from kazoo.exceptions import NodeExistsError
except ImportError as e:  # pragma: no cover - zk_session says how to install it
    raise ImportError(f"cluster mode needs kazoo ({e}): pip install 'tierlog[cluster]'") from e

log = logging.getLogger(__name__)

# ZooKeeper expires sessions on its tick (an expiry is rounded up to the next tick: up to one
# tickTime late, 2 s in ZooKeeper's sample zoo.cfg) and may have negotiated a longer timeout
# than was asked for (at least two ticks). A third of the timeout, and never less than this,
# covers both.
MIN_STALE_REGISTRATION_MARGIN_S = 3.0


def stale_registration_bound_s(session_timeout_s: float) -> float:
    """How long a registration held by another session may still be a dead broker's: the
    session timeout plus a margin (a third of it, at least 3 s)."""
    return session_timeout_s + max(MIN_STALE_REGISTRATION_MARGIN_S, session_timeout_s / 3)


class BrokerRegistry:
    """Args:
    session: a started session; registrations are its ephemeral znodes.
    clock: stamps registrations (Kafka's timestamp field) and bounds the wait for a stale
        one.
    """

    def __init__(self, session: ZkSession, clock: Clock | None = None) -> None:
        self._session = session
        self._clock = clock or SystemClock()

    def get_or_create_cluster_id(self, candidate: str) -> str:
        """The cluster's id; ``candidate`` becomes it if there is none yet (Kafka's
        ``KafkaZkClient.createOrGetClusterId``): all brokers agree whoever came first."""
        existing = self._session.get(zk_data.CLUSTER_ID)
        if existing is not None:
            return zk_data.decode_cluster_id(existing.data)
        kazoo = self._session.kazoo
        try:
            kazoo.create(zk_data.CLUSTER_ID, zk_data.encode_cluster_id(candidate), makepath=True)
            return candidate
        except NodeExistsError:
            data, _ = kazoo.get(zk_data.CLUSTER_ID)
            return zk_data.decode_cluster_id(data)

    def register(self, info: BrokerInfo, *, stale_timeout_s: float | None = None) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; returns the broker epoch, its czxid
        (KIP-380). Call again after ``SessionEvent.EXPIRED`` + ``CONNECTED``: the new
        registration has a larger epoch.

        Args:
            stale_timeout_s: how long another session's registration of this id may take to
                expire; None: ``stale_registration_bound_s`` of this session's timeout. 0
                refuses at once (a re-registration after this session expired: its own old
                registration is gone already).

        Raises:
            BrokerIdInUseError: another session still held this id after the wait.
        """
        if stale_timeout_s is None:
            stale_timeout_s = stale_registration_bound_s(self._session.session_timeout_s)
        info = replace(info, timestamp_ms=self._clock.milliseconds())
        path = zk_data.broker_path(info.broker_id)
        data = zk_data.encode_broker(info)
        started_ms = self._clock.monotonic_ms()
        deadline_ms = started_ms + int(stale_timeout_s * 1000)
        waited_for: int | None = None  # the session whose registration we wait out
        for _ in range(MAX_ATTEMPTS):
            epoch = self._create(path, data)
            if epoch is not None:
                if waited_for is not None:
                    log.info(
                        "the stale registration of broker %d expired after %.1f s",
                        info.broker_id,
                        (self._clock.monotonic_ms() - started_ms) / 1000,
                    )
                log.info("registered broker %d, epoch %d", info.broker_id, epoch)
                return epoch
            gone = threading.Event()
            stat = self._session.retrying(self._session.kazoo.exists, path, watch=_setter(gone))
            if stat is None:
                continue  # the other registration's session just ended: try again
            # KafkaZkClient.checkedEphemeralCreate: a create retried after a connection loss
            # finds the node its own session made; that is a success, not a conflict.
            if stat.ephemeralOwner == self._session.session_id:
                return int(stat.czxid)
            left_ms = deadline_ms - self._clock.monotonic_ms()
            if left_ms <= 0:
                raise BrokerIdInUseError(_in_use(info.broker_id, path, stat, stale_timeout_s))
            if waited_for != stat.ephemeralOwner:
                waited_for = stat.ephemeralOwner
                log.warning(
                    "broker id %d is still registered by ZooKeeper session 0x%x, not this"
                    " one (a previous run that did not stop cleanly?): waiting up to %.0f s"
                    " for the session to expire (zookeeper.session.timeout.ms plus a margin)",
                    info.broker_id,
                    stat.ephemeralOwner,
                    left_ms / 1000,
                )
            gone.wait(left_ms / 1000)  # set when the registration is deleted (or changes)
        raise CoordinationError(f"could not register broker {info.broker_id}")

    def _create(self, path: str, data: bytes) -> int | None:
        """The new registration's czxid, or None when the znode exists."""
        try:
            _, stat = self._session.kazoo.create(path, data, ephemeral=True, include_data=True)
        except NodeExistsError:
            return None
        return int(stat.czxid)

    def deregister(self, broker_id: int) -> None:
        """Delete this session's registration while keeping the session (controlled
        shutdown: the controller moves the broker's leaderships away).

        Raises:
            kazoo's NoNodeError: there is no registration (the session expired).
        """
        self._session.kazoo.delete(zk_data.broker_path(broker_id))

    def live(self) -> dict[int, tuple[BrokerInfo, int]]:
        """Live brokers: id -> (registration, broker epoch)."""
        brokers: dict[int, tuple[BrokerInfo, int]] = {}
        for child in self._session.children(zk_data.BROKER_IDS):
            if not (child.isascii() and child.isdigit()):
                continue
            broker_id = int(child)
            found = self._session.get(zk_data.broker_path(broker_id))
            if found is not None:  # else it expired between the listing and the read
                brokers[broker_id] = (zk_data.decode_broker(broker_id, found.data), found.czxid)
        return brokers


def _in_use(broker_id: int, path: str, stat: Any, waited_s: float) -> str:
    waited = f" after waiting {waited_s:.0f} s for it to expire" if waited_s > 0 else ""
    return (
        f"broker id {broker_id} is registered by another live session"
        f" (0x{stat.ephemeralOwner:x}) at {path}{waited}: another broker runs with"
        f" broker.id={broker_id}; stop it, or give this one another broker.id"
    )


def _setter(event: threading.Event) -> Callable[[Any], None]:
    """A watch callback that sets ``event`` (on kazoo's thread: it only sets a flag)."""
    return lambda _watched: event.set()
