"""The controller's events and the one thread that processes them (Kafka's
``ControllerEventManager``).

Owns the queue between the threads that notice something (kazoo's watch and session
callbacks, the broker's worker threads calling the controller) and the single thread that
acts on it. Every change to the controller's state happens on that thread, one event at a
time, so the controller needs no locks; a producer only ever enqueues (kazoo's rule: a
watch callback must not block).

Events that carry a ``reply`` future are requests: the caller waits on it (bounded). Watch
events carry the controller ``generation`` they were registered in, so that a watch left
over from an earlier term (kazoo watches cannot be removed, only ended at their next call)
is ignored.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from tierlog.broker.controller.context import TopicPartition

log = logging.getLogger(__name__)


class Event:
    """Base class of everything the controller thread processes."""


@dataclass
class ControllerChange(Event):
    """``/controller`` changed (or may have): elect if it is vacant, resign if it is not
    ours any more (Kafka's ControllerChange / Reelect)."""


@dataclass
class SessionExpired(Event):
    """The ZooKeeper session ended: its ``/controller`` znode is gone with it."""


@dataclass
class WatchEvent(Event):
    generation: int


@dataclass
class BrokerChange(WatchEvent):
    """``/brokers/ids`` children changed: brokers registered, died or bounced."""


@dataclass
class TopicChange(WatchEvent):
    """``/brokers/topics`` children changed: topics created (or deleted)."""


@dataclass
class PartitionModification(WatchEvent):
    """A topic's assignment znode changed: partitions added."""

    topic: str = ""


@dataclass
class TopicDeletion(WatchEvent):
    """``/admin/delete_topics`` children changed: deletion requests."""


@dataclass
class ConfigChange(WatchEvent):
    """``/config/changes`` got a notification: a topic's overrides (and so its
    ``unclean.leader.election.enable``) may have changed."""


@dataclass
class UncleanLeaderElectionEnable(Event):
    """The broker's ``unclean.leader.election.enable`` changed (a dynamic broker config,
    KIP-226): Kafka's event of the same name, which elects leaders for offline partitions
    once it is turned on."""

    enabled: bool = False


@dataclass
class Resync(WatchEvent):
    """Re-check every partition against ZooKeeper (after a reconnect, a write whose answer
    was lost may have left the context behind)."""


@dataclass
class AlterPartition(Event):
    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    new_isr: list[int]
    partition_epoch: int
    broker_epoch: int | None
    reply: Future[Any] = field(default_factory=Future)


@dataclass
class AutoLeaderRebalance(WatchEvent):
    """The periodic ``auto.leader.rebalance.enable`` check (Kafka's
    AutoPreferredReplicaLeaderElection); carries the term so a timer of an earlier term
    does nothing."""


@dataclass
class ElectLeaders(Event):
    """ElectLeaders (KIP-460): ``election_type`` 0 = PREFERRED, 1 = UNCLEAN."""

    election_type: int
    partitions: list[TopicPartition] | None
    reply: Future[Any] = field(default_factory=Future)


@dataclass
class AlterReassignments(Event):
    """AlterPartitionReassignments (KIP-455): a target per partition, None to cancel."""

    reassignments: dict[TopicPartition, list[int] | None]
    allow_replication_factor_change: bool = True
    reply: Future[Any] = field(default_factory=Future)


@dataclass
class ListReassignments(Event):
    partitions: list[TopicPartition] | None
    reply: Future[Any] = field(default_factory=Future)


# Events a caller waits on (``reply``).
RequestEvent = AlterPartition | ElectLeaders | AlterReassignments | ListReassignments


@dataclass
class Shutdown(Event):
    pass


class EventManager:
    """A FIFO queue drained by one daemon thread calling ``process(event)``.

    ``process`` must not raise for ordinary failures (the controller catches and logs);
    anything that escapes is logged and the thread goes on with the next event, as Kafka's
    ``ControllerEventThread`` does. A ``Shutdown`` event is processed and ends the thread;
    requests still queued behind it get ``on_dropped(event)``.
    """

    def __init__(
        self,
        name: str,
        process: Callable[[Event], None],
        on_dropped: Callable[[Event], None],
    ) -> None:
        self._queue: queue.Queue[Event] = queue.Queue()
        self._process = process
        self._on_dropped = on_dropped
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, event: Event) -> None:
        """Thread-safe and non-blocking."""
        self._queue.put(event)

    @property
    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def join(self, timeout: float) -> bool:
        """Wait for the thread to end; False if it is still running after ``timeout``."""
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            try:
                self._process(event)
            except Exception:
                log.exception("controller event %s failed", type(event).__name__)
            if isinstance(event, Shutdown):
                break
        while True:
            try:
                self._on_dropped(self._queue.get_nowait())
            except queue.Empty:
                return
