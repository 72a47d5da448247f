"""The cluster controller: election through ``/controller`` and the reaction to ZooKeeper
changes (Kafka's ZooKeeper-era ``KafkaController``).

Owns the controller's life: electing itself when ``/controller`` is vacant, loading the
cluster into a ``ControllerContext`` on fail-over, watching brokers, topics, deletion
requests and config changes, resigning when deposed or when its session ends, and the
requests brokers send it (AlterPartition, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments), and the periodic leader rebalance. What a partition's state
becomes is ``election``'s, ``alter_partition``'s and ``reassignment``'s business;
``state_machine`` and ``reassigner`` write it.

Threading (Kafka's ControllerEventManager): one thread processes one event at a time from
a queue (``events``). kazoo's watch and session callbacks only enqueue. The public methods
are thread-safe: ``alter_partition``, ``elect_leaders``, ``alter_partition_reassignments``
and ``list_partition_reassignments`` enqueue a request and wait for the answer (bounded);
``is_active``, ``controller_epoch`` and ``active_controller_id`` read one attribute each.
Call none of the requests on the asyncio loop (they block) nor from the controller's own
thread.

Fencing: every write is a ``zk_controller.FencedTransaction`` of its lease, one multi that
checks ``/controller_epoch``'s zkVersion (KAFKA-6082), so a deposed controller changes
nothing; the ``ControllerMovedError`` that such a write raises makes it resign at once,
as does seeing ``/controller`` held by someone else or its session expire.

Past ~600 lines on purpose: this is the one class whose thread touches the controller's
state, so the event dispatch, the election and every reaction to a ZooKeeper change stay
together; the decisions themselves already live in the small modules named above.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tierlog.broker.controller import alter_partition as ap
from tierlog.broker.controller.alter_partition import AlterPartitionResult
from tierlog.broker.controller.context import ControllerContext, TopicPartition
from tierlog.broker.controller.events import (
    AlterPartition,
    AlterReassignments,
    AutoLeaderRebalance,
    BrokerChange,
    ConfigChange,
    ControllerChange,
    ElectLeaders,
    Event,
    EventManager,
    ListReassignments,
    PartitionModification,
    RequestEvent,
    Resync,
    SessionExpired,
    Shutdown,
    TopicChange,
    TopicDeletion,
    UncleanLeaderElectionEnable,
    WatchEvent,
)
from tierlog.broker.controller.reassigner import Outcome, PartitionReassigner
from tierlog.broker.controller.reassignment import PartitionAssignment, rebalance_candidates
from tierlog.broker.controller.state_machine import PartitionStateMachine
from tierlog.broker.controller.stats import ControllerStats
from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.zk_client import ZkClient
from tierlog.broker.coordination.zk_controller import ControllerLease
from tierlog.broker.coordination.zk_errors import ControllerMovedError
from tierlog.broker.coordination.zk_session import SessionEvent
from tierlog.util.clock import Clock, SystemClock

log = logging.getLogger(__name__)

# How long a broker's request waits for the controller thread. Kafka's brokers give
# controller requests request.timeout.ms (30 s) but retry AlterPartition on their own; a
# shorter bound keeps a worker thread from hanging behind a long fail-over.
DEFAULT_REQUEST_TIMEOUT_S = 10.0
# stop() waits this long for the thread (it may be inside a ZooKeeper call, itself bounded
# by the session's connection timeout).
DEFAULT_STOP_TIMEOUT_S = 10.0

# ElectLeaders' election types (KIP-460, Kafka's ElectionType).
PREFERRED = 0
UNCLEAN = 1

# Kafka's defaults: auto.leader.rebalance.enable=true,
# leader.imbalance.per.broker.percentage=10, leader.imbalance.check.interval.seconds=300,
# and the first check 5 s after fail-over (onControllerFailover's
# scheduleAutoLeaderRebalanceTask(delay = 5)).
DEFAULT_LEADER_IMBALANCE_PERCENTAGE = 10
DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_S = 300.0
DEFAULT_FIRST_REBALANCE_DELAY_S = 5.0

WatchFactory = Callable[[int], WatchEvent]
# (delay in seconds, action) -> a handle with cancel(); threading.Timer by default.
Scheduler = Callable[[float, Callable[[], None]], Any]


class NotControllerError(Exception):
    """This broker is not (or no longer) the active controller: NOT_CONTROLLER (41)."""


_NOT_CONTROLLER = object()  # a request's answer when this broker is not the controller


def _timer(delay_s: float, action: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(delay_s, action)
    timer.daemon = True
    timer.start()
    return timer


class Controller:
    """One broker's controller role; see the module docstring.

    Args:
        zk: a started ZkClient; the controller's ``/controller`` znode lives and dies with
            its session.
        broker_id: the broker this controller runs in.
        unclean_leader_election: the broker's ``unclean.leader.election.enable`` (Kafka's
            default false); a topic's override wins.
        clock: for timing fail-overs in the log.
        auto_leader_rebalance: ``auto.leader.rebalance.enable`` (default true).
        leader_imbalance_per_broker_percentage: ``leader.imbalance.per.broker.percentage``
            (10): a broker leading fewer than this share of the partitions it is preferred
            for below 100 % gets them back.
        leader_imbalance_check_interval_s: ``leader.imbalance.check.interval.seconds``
            (300).
        first_rebalance_delay_s: the first check after fail-over (Kafka: 5 s).
        scheduler: runs the periodic check; a daemon ``threading.Timer`` by default.
    """

    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        *,
        unclean_leader_election: bool = False,
        clock: Clock | None = None,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        auto_leader_rebalance: bool = True,
        leader_imbalance_per_broker_percentage: int = DEFAULT_LEADER_IMBALANCE_PERCENTAGE,
        leader_imbalance_check_interval_s: float = DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_S,
        first_rebalance_delay_s: float = DEFAULT_FIRST_REBALANCE_DELAY_S,
        scheduler: Scheduler | None = None,
    ) -> None:
        self._zk = zk
        self._broker_id = broker_id
        self._unclean_default = unclean_leader_election
        self._clock = clock or SystemClock()
        self._request_timeout_s = request_timeout_s
        self._auto_rebalance = auto_leader_rebalance
        self._imbalance_percentage = leader_imbalance_per_broker_percentage
        self._imbalance_interval_s = leader_imbalance_check_interval_s
        self._first_rebalance_delay_s = first_rebalance_delay_s
        self._schedule = scheduler or _timer
        self._rebalance_timer: Any = None
        self._events = EventManager(f"controller-{broker_id}", self._process, self._drop)
        # Counters across terms (the metrics endpoint reads them).
        self.stats = ControllerStats()
        # Controller-thread state.
        self._ctx: ControllerContext | None = None
        self._psm: PartitionStateMachine | None = None
        self._reassigner: PartitionReassigner | None = None
        self._watched_topics: set[str] = set()
        # Read by other threads; each is one attribute, replaced whole.
        self._lease: ControllerLease | None = None  # set once fail-over is complete
        self._generation = 0  # bumped per term; older watches end at their next call
        self._active_id = -1
        self._started = False
        self._stopped = False

    # -- public API -------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """This broker is the controller and has loaded the cluster."""
        return self._lease is not None

    @property
    def controller_epoch(self) -> int:
        """The epoch this controller runs under; -1 when it is not active."""
        lease = self._lease
        return -1 if lease is None else lease.epoch

    @property
    def active_controller_id(self) -> int:
        """The broker holding ``/controller`` as last seen by the watch; -1 if none."""
        return self._active_id

    def start(self) -> None:
        """Start the event thread and the ``/controller`` watch; the first election attempt
        follows at once. Returns without waiting for it."""
        if self._started:
            return
        self._started = True
        self._zk.on_session_event(self._on_session_event)
        self._events.start()
        self._zk.session.watch_data(zk_data.CONTROLLER, self._on_controller_znode)

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """Resign if active (deleting ``/controller`` so another broker takes over at once)
        and end the thread, waiting at most ``timeout_s``. Idempotent."""
        if not self._started or self._stopped:
            return
        self._stopped = True
        self._events.put(Shutdown())
        if not self._events.join(timeout_s):
            log.warning("controller %d: thread still busy after %.1f s", self._broker_id, timeout_s)

    def set_unclean_leader_election(self, enabled: bool) -> None:
        """A new ``unclean.leader.election.enable`` (dynamic broker config): kept for every
        later term, and, when this controller is active and it is turned on, offline
        partitions whose topics do not say otherwise get leaders from outside the ISR."""
        self._events.put(UncleanLeaderElectionEnable(enabled))

    def alter_partition(
        self,
        topic: str,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        new_isr: list[int],
        partition_epoch: int,
        *,
        broker_epoch: int | None = None,
    ) -> AlterPartitionResult:
        """A leader's ISR change (AlterPartition, KIP-497); blocks until the controller
        thread answers, at most the request timeout. Error codes: ``alter_partition``'s
        module docstring, plus NOT_CONTROLLER (41) when this broker is not the active
        controller (or is deposed meanwhile) and REQUEST_TIMED_OUT (7) on timeout."""
        event = AlterPartition(
            topic, partition, leader_id, leader_epoch, list(new_isr), partition_epoch, broker_epoch
        )
        refused = AlterPartitionResult.refused
        result = self._request(event, refused(ap.NOT_CONTROLLER, "not the active controller"))
        if result is None:
            return refused(ap.REQUEST_TIMED_OUT, "the controller did not answer in time")
        assert isinstance(result, AlterPartitionResult)
        return result

    def elect_preferred_leaders(
        self, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], int]:
        """Preferred-replica election (ElectLeaders, PREFERRED) for ``partitions`` or, with
        None, all; an error code per partition (``state_machine.elect_preferred``). Raises
        TimeoutError after the request timeout; {} when not the active controller."""
        try:
            return self.elect_leaders(PREFERRED, partitions)
        except NotControllerError:
            return {}

    def elect_leaders(
        self, election_type: int, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], int]:
        """ElectLeaders (KIP-460) with ``election_type`` PREFERRED (0) or UNCLEAN (1) for
        ``partitions`` or, with None, all; an error code per partition
        (``state_machine.elect_preferred`` / ``elect_unclean``).

        Raises:
            NotControllerError; TimeoutError after the request timeout; ValueError for an
            unknown election type.
        """
        if election_type not in (PREFERRED, UNCLEAN):
            raise ValueError(f"unknown election type {election_type}")
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        result = self._call(ElectLeaders(election_type, wanted))
        assert isinstance(result, dict)
        return result

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> dict[tuple[str, int], Outcome]:
        """AlterPartitionReassignments (KIP-455): a target replica list per partition, or
        None to cancel; (error code, message) per partition once the reassignment is stored
        (``reassigner``). Raises NotControllerError or TimeoutError."""
        event = AlterReassignments(
            {
                TopicPartition(*tp): None if r is None else list(r)
                for tp, r in reassignments.items()
            },
            allow_replication_factor_change,
        )
        result = self._call(event)
        assert isinstance(result, dict)
        return result

    def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], PartitionAssignment]:
        """ListPartitionReassignments: the reassignments in progress (replicas, adding,
        removing) of ``partitions`` or all. Raises NotControllerError or TimeoutError."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        result = self._call(ListReassignments(wanted))
        assert isinstance(result, dict)
        return result

    def _call(self, event: RequestEvent) -> Any:
        result = self._request(event, _NOT_CONTROLLER)
        if result is None:
            raise TimeoutError("the controller did not answer in time")
        if result is _NOT_CONTROLLER:
            raise NotControllerError("not the active controller")
        return result

    def _request(self, event: RequestEvent, inactive: Any) -> Any:
        if self._events.on_thread:
            raise RuntimeError("controller requests cannot be made from the controller thread")
        if self._stopped or self._lease is None:
            return inactive
        self._events.put(event)
        try:
            return event.reply.result(timeout=self._request_timeout_s)
        except TimeoutError:
            return None

    # -- callbacks (kazoo's thread: enqueue only) -------------------------------------------

    def _on_controller_znode(self, data: bytes | None, _version: int | None) -> bool | None:
        if self._stopped:
            return False
        try:
            self._active_id = -1 if data is None else zk_data.decode_controller(data).broker_id
        except zk_data.ZkDataError:
            self._active_id = -1
        self._events.put(ControllerChange())
        return None

    def _on_session_event(self, event: SessionEvent) -> None:
        if self._stopped:
            return
        if event is SessionEvent.EXPIRED:
            self._events.put(SessionExpired())
        elif event is SessionEvent.CONNECTED:
            # A new session after expiry, or the old one back after a disconnection: look
            # at /controller again, and re-check partitions in case a write's answer was
            # lost while disconnected.
            self._events.put(ControllerChange())
            self._events.put(Resync(self._generation))

    def _watch_children(self, path: str, make: WatchFactory) -> None:
        generation = self._generation

        def on_change(_children: list[str]) -> bool | None:
            if self._stopped or generation != self._generation:
                return False  # a watch of an earlier term: end it
            self._events.put(make(generation))
            return None

        self._zk.session.watch_children(path, on_change)

    def _watch_topic(self, topic: str) -> None:
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)
        generation = self._generation

        def on_change(_data: bytes | None, _version: int | None) -> bool | None:
            if self._stopped or generation != self._generation:
                return False
            self._events.put(PartitionModification(generation, topic))
            return None

        self._zk.session.watch_data(zk_data.topic_path(topic), on_change)

    # -- the event thread -------------------------------------------------------------------

    def _process(self, event: Event) -> None:
        if isinstance(event, Shutdown):
            self._shutdown()
            return
        if isinstance(event, RequestEvent):
            self._answer(event)
            return
        try:
            if isinstance(event, ControllerChange):
                self._elect_or_check()
            elif isinstance(event, SessionExpired):
                self._resign("its ZooKeeper session expired")
            elif isinstance(event, UncleanLeaderElectionEnable):
                self._on_unclean_leader_election_enable(event.enabled)
            elif (
                isinstance(event, WatchEvent)
                and self._ctx is not None
                and event.generation == self._generation
            ):
                self._handle_watch(event)
        except ControllerMovedError as e:
            self._resign(f"deposed ({e})")

    def _answer(self, event: RequestEvent) -> None:
        psm, reassigner = self._psm, self._reassigner
        try:
            if self._lease is None or psm is None or reassigner is None:
                self._drop(event)
            elif isinstance(event, AlterPartition):
                tp = TopicPartition(event.topic, event.partition)
                result = psm.alter_partition(
                    tp,
                    event.leader_id,
                    event.leader_epoch,
                    event.new_isr,
                    event.partition_epoch,
                    event.broker_epoch,
                )
                event.reply.set_result(result)
                if result.ok:
                    # The leader's answer first; then a target replica may have caught up.
                    reassigner.on_isr_change(tp)
            elif isinstance(event, ElectLeaders):
                if event.election_type == PREFERRED:
                    event.reply.set_result(psm.elect_preferred(event.partitions))
                else:
                    event.reply.set_result(psm.elect_unclean(event.partitions))
            elif isinstance(event, AlterReassignments):
                event.reply.set_result(
                    reassigner.alter(
                        event.reassignments,
                        allow_replication_factor_change=event.allow_replication_factor_change,
                    )
                )
            else:
                event.reply.set_result(reassigner.list(event.partitions))
        except ControllerMovedError as e:
            self._resign(f"deposed ({e})")
            self._drop(event)
        except Exception as e:
            log.exception("controller request %s failed", type(event).__name__)
            if event.reply.done():
                return
            if isinstance(event, AlterPartition):
                event.reply.set_result(
                    AlterPartitionResult.refused(ap.UNKNOWN_SERVER_ERROR, repr(e))
                )
            else:
                event.reply.set_exception(e)

    def _drop(self, event: Event) -> None:
        """Answer a request that will not be processed: not the controller."""
        if not isinstance(event, RequestEvent) or event.reply.done():
            return
        if isinstance(event, AlterPartition):
            event.reply.set_result(
                AlterPartitionResult.refused(ap.NOT_CONTROLLER, "not the active controller")
            )
        else:
            event.reply.set_result(_NOT_CONTROLLER)

    def _handle_watch(self, event: WatchEvent) -> None:
        if isinstance(event, BrokerChange):
            self._on_broker_change()
        elif isinstance(event, TopicChange):
            self._on_topic_change()
        elif isinstance(event, PartitionModification):
            self._on_partition_modification(event.topic)
        elif isinstance(event, TopicDeletion):
            self._delete_requested_topics()
        elif isinstance(event, ConfigChange):
            self._on_config_change()
        elif isinstance(event, Resync):
            self._resync()
        elif isinstance(event, AutoLeaderRebalance):
            try:
                if self._auto_rebalance:
                    self._check_leader_imbalance()
            finally:
                self._schedule_rebalance(self._imbalance_interval_s)

    # -- election and resignation -----------------------------------------------------------

    def _elect_or_check(self) -> None:
        """Kafka's ControllerChange/Reelect: resign if ``/controller`` or the epoch moved
        away from this term; elect if ``/controller`` is vacant."""
        if self._stopped:
            return
        ctx = self._ctx
        if ctx is not None:
            epoch = self._zk.controller.epoch()
            holder = self._zk.controller.holder()
            if (
                holder == self._broker_id
                and epoch is not None
                and epoch[1] == ctx.lease.epoch_zk_version
            ):
                return  # still ours
            self._resign(f"/controller is now held by {holder}, epoch {epoch}")
        lease = self._zk.controller.try_elect(self._broker_id)
        if lease is not None:
            self._failover(lease)

    def _failover(self, lease: ControllerLease) -> None:
        """Kafka's onControllerFailover: watch, load, then act on what was missed."""
        started_ms = self._clock.monotonic_ms()
        self._generation += 1
        self._watched_topics = set()
        ctx = ControllerContext(lease)
        psm = PartitionStateMachine(
            self._zk.partition_states, ctx, self._unclean_default, self.stats
        )
        self._ctx, self._psm = ctx, psm
        self._reassigner = reassigner = PartitionReassigner(self._zk.topics, ctx, psm)
        try:
            # Watches first, then reads (as Kafka registers its listeners before
            # initializeControllerContext): a change between the two is not lost, it only
            # arrives as an event that finds nothing left to do.
            self._watch_children(zk_data.BROKER_IDS, BrokerChange)
            self._watch_children(zk_data.TOPICS, TopicChange)
            self._watch_children(zk_data.DELETE_TOPICS, TopicDeletion)
            self._watch_children(zk_data.CONFIG_CHANGES, ConfigChange)
            ctx.set_live_brokers({b: epoch for b, (_, epoch) in self._zk.brokers.live().items()})
            for topic in self._zk.topics.names():
                self._load_topic(topic)
            self._delete_requested_topics()
            psm.initialize(ctx.partitions_without_state())
            psm.reconcile(list(ctx.partitions()), "controller fail-over")
            reassigner.resume()
        except ControllerMovedError as e:
            self._resign(f"deposed during fail-over ({e})")
            return
        except Exception:
            # Kafka resigns on any fail-over error so that another broker can try.
            log.exception("controller %d: fail-over failed, resigning", self._broker_id)
            self._resign("fail-over failed")
            try:
                self._zk.controller.resign(lease)
            except Exception as e:
                log.warning("controller %d: could not delete /controller: %r", self._broker_id, e)
            return
        self._lease = lease
        self._schedule_rebalance(self._first_rebalance_delay_s)
        log.info(
            "broker %d is the controller, epoch %d: %d live brokers %s, %d topics,"
            " %d partitions (%d offline), loaded in %d ms",
            self._broker_id,
            lease.epoch,
            len(ctx.live_brokers),
            sorted(ctx.live_brokers),
            len(ctx.assignments),
            len(ctx.lifecycle),
            len(ctx.offline_partitions()),
            self._clock.monotonic_ms() - started_ms,
        )

    def _resign(self, why: str) -> None:
        """Drop the term's state (Kafka's onControllerResignation); writes nothing, since a
        deposed controller's writes would fail anyway. Watches of the term end."""
        if self._ctx is None:
            return
        epoch = self._ctx.epoch
        self._lease = None
        self._ctx = None
        self._psm = None
        self._reassigner = None
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        self._generation += 1
        self._watched_topics = set()
        log.info("broker %d resigned as controller (epoch %d): %s", self._broker_id, epoch, why)

    def _shutdown(self) -> None:
        ctx = self._ctx
        self._resign("shutting down")
        if ctx is not None:
            try:
                self._zk.controller.resign(ctx.lease)
            except ControllerMovedError:
                pass  # someone else is controller already: nothing of ours to delete
            except Exception as e:
                log.warning("controller %d: could not delete /controller: %r", self._broker_id, e)

    # -- handlers (active controller only) --------------------------------------------------

    def _active(self) -> tuple[ControllerContext, PartitionStateMachine]:
        assert self._ctx is not None and self._psm is not None
        return self._ctx, self._psm

    def _load_topic(self, topic: str) -> list[TopicPartition]:
        """Read a topic into the context and watch its assignment; returns its partitions
        that were new to the context."""
        ctx, _ = self._active()
        assignment = self._zk.topics.get(topic)
        if assignment is None:
            return []
        ctx.topic_configs[topic] = self._zk.configs.topic(topic)
        added = ctx.add_topic(topic, assignment)
        for partition, (state, version) in self._zk.partition_states.of_topic(topic).items():
            tp = TopicPartition(topic, partition)
            if tp in ctx.lifecycle:
                ctx.set_state(tp, state, version)
        self._watch_topic(topic)
        return added

    def _on_broker_change(self) -> None:
        """Kafka's BrokerChange: onBrokerFailure for the dead, onBrokerStartup for the new;
        a broker whose epoch changed (it restarted between two looks) counts as both."""
        ctx, psm = self._active()
        now = {b: epoch for b, (_, epoch) in self._zk.brokers.live().items()}
        before = ctx.live_brokers
        dead = before.keys() - now.keys()
        joined = now.keys() - before.keys()
        bounced = {b for b in before.keys() & now.keys() if before[b] != now[b]}
        if not (dead or joined or bounced):
            return
        log.info(
            "brokers changed: dead %s, new %s, bounced %s; live now %s",
            sorted(dead),
            sorted(joined),
            sorted(bounced),
            sorted(now),
        )
        if dead or bounced:
            gone = dead | bounced
            ctx.set_live_brokers({b: e for b, e in now.items() if b not in bounced})
            touched = [tp for tp in ctx.partitions() if gone & {*ctx.replicas(tp)}]
            psm.reconcile(touched, f"brokers {sorted(gone)} failed")
        ctx.set_live_brokers(now)
        if joined or bounced:
            psm.initialize(ctx.partitions_without_state())
            psm.reconcile(ctx.offline_partitions(), f"brokers {sorted(joined | bounced)} started")
        self._active_reassigner().check_all()

    def _on_topic_change(self) -> None:
        ctx, psm = self._active()
        topics = set(self._zk.topics.names())
        for topic in sorted(ctx.assignments.keys() - topics):
            ctx.remove_topic(topic)  # deleted (by us, or an earlier controller)
        added: list[TopicPartition] = []
        for topic in sorted(topics - ctx.assignments.keys()):
            added += self._load_topic(topic)
        if added:
            psm.initialize(added)
            psm.reconcile(added, "new topic")

    def _on_partition_modification(self, topic: str) -> None:
        """Kafka's PartitionModifications: partitions added to an existing topic."""
        ctx, psm = self._active()
        if topic not in ctx.assignments:
            return  # a new topic is TopicChange's; a deleted one needs nothing
        assignment = self._zk.topics.get(topic)
        if assignment is None:
            return
        added = ctx.add_topic(topic, assignment)
        if added:
            log.info("%s: partitions %s added", topic, [tp.partition for tp in added])
            psm.initialize(added)

    def _delete_requested_topics(self) -> None:
        """Kafka's TopicDeletionManager, without StopReplica (brokers see the topic's
        znodes vanish): delete the topic's znodes and the request, one multi each."""
        ctx, _ = self._active()
        for topic in self._zk.topics.pending_deletions():
            self._zk.topics.delete(ctx.lease, topic)
            ctx.remove_topic(topic)
            log.info("%s: deleted on request", topic)

    def _on_config_change(self) -> None:
        """A topic's overrides may have changed; an offline partition whose topic now
        allows unclean election gets a leader (Kafka's TopicUncleanLeaderElectionEnable)."""
        ctx, psm = self._active()
        for topic in list(ctx.assignments):
            ctx.topic_configs[topic] = self._zk.configs.topic(topic)
        psm.reconcile(ctx.offline_partitions(), "topic config changed")

    def _on_unclean_leader_election_enable(self, enabled: bool) -> None:
        changed = enabled != self._unclean_default
        self._unclean_default = enabled
        if self._ctx is None or self._psm is None:
            return  # not active: the next term starts with it
        self._psm.set_unclean_default(enabled)
        if enabled and changed:
            self._psm.reconcile(
                self._ctx.offline_partitions(), "unclean.leader.election.enable turned on"
            )

    def _resync(self) -> None:
        ctx, psm = self._active()
        ctx.set_live_brokers({b: epoch for b, (_, epoch) in self._zk.brokers.live().items()})
        psm.refresh_many(ctx.partitions())
        psm.initialize(ctx.partitions_without_state())
        psm.reconcile(list(ctx.partitions()), "resync after reconnection")
        self._active_reassigner().check_all()

    def _active_reassigner(self) -> PartitionReassigner:
        assert self._reassigner is not None
        return self._reassigner

    # -- automatic leader rebalance ---------------------------------------------------------

    def _schedule_rebalance(self, delay_s: float) -> None:
        """Enqueue the next ``AutoLeaderRebalance`` of this term after ``delay_s``."""
        if self._stopped or self._lease is None:
            return
        generation = self._generation

        def fire() -> None:
            if not self._stopped and generation == self._generation:
                self._events.put(AutoLeaderRebalance(generation))

        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
        self._rebalance_timer = self._schedule(delay_s, fire)

    def _check_leader_imbalance(self) -> None:
        """Kafka's ``checkAndTriggerAutoLeaderRebalance``: for each broker leading fewer of
        its preferred partitions than the threshold allows, elect the preferred replica of
        those that can take it (live and in the ISR); partitions being reassigned are left
        alone (their preferred replica is about to change)."""
        ctx, psm = self._active()
        moving = set(ctx.reassigning())
        assignments = {tp: ctx.replicas(tp) for tp in ctx.partitions() if tp not in moving}
        leaders = {tp: state.leader for tp, (state, _) in ctx.states.items()}
        candidates = []
        for tp in rebalance_candidates(assignments, leaders, self._imbalance_percentage):
            preferred = ctx.replicas(tp)[0]
            state = ctx.states[tp][0]
            if preferred in ctx.live_brokers and preferred in state.isr:
                candidates.append(tp)
        if candidates:
            log.info(
                "leader imbalance above %d%%: preferred leader election for %s",
                self._imbalance_percentage,
                [str(tp) for tp in candidates],
            )
            psm.elect_preferred(candidates)
