"""The consumer group protocol's timers, as data.

The protocol's logic never arms a timer itself: each result carries ``TimerOp`` values
(schedule or cancel, keyed by kind, group and member) and the coordinator applies them to
its event loop's timers (``tierlog.broker.group.timers.TimerTable``, which re-arms a name
that is armed already, as Kafka's timer does with the same key). When one fires, the
coordinator calls the protocol back (``session_expired`` / ``rebalance_expired``), which
decides with the state of that moment and returns records like any request.

Two timers per consumer-protocol member (KIP-848):

* session: re-armed by every accepted heartbeat with the group's session timeout
  (``group.consumer.session.timeout.ms`` or the group's override); when it fires, the
  member is fenced (removed) and its partitions go back to the group.
* rebalance: armed with the member's own ``RebalanceTimeoutMs`` when it is asked to revoke
  partitions (UNREVOKED_PARTITIONS at epoch E), cancelled when it gets past that. If it
  fires while the member is still at epoch E, the member is fenced: a member that does not
  give partitions back cannot hold the group's rebalance forever.

A member that speaks the classic protocol inside a consumer group (KIP-848's online
migration) has the session timer too, armed with its classic session timeout by every
Heartbeat, JoinGroup and SyncGroup, and two of its own (Kafka's join and sync keys):

* join: armed (only if not armed yet) when the member is told REBALANCE_IN_PROGRESS and
  must send JoinGroup; cancelled by that JoinGroup. If it fires, the member is fenced.
* sync: armed by its JoinGroup answer with its rebalance timeout; cancelled by SyncGroup.

``Deadlines`` is a pure timer table over a clock's milliseconds, for tests and simulations.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class TimerKind(enum.Enum):
    SESSION = "session-timeout"
    REBALANCE = "rebalance-timeout"
    JOIN = "join-timeout"
    SYNC = "sync-timeout"


@dataclass(frozen=True, slots=True)
class TimerKey:
    kind: TimerKind
    group_id: str
    member_id: str

    @property
    def name(self) -> str:
        """The timer's name within its group (``TimerTable``'s key)."""
        return f"{self.kind.value}-{self.member_id}"


@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    """Arm (or re-arm) ``key`` to fire after ``delay_ms``. ``member_epoch`` is the epoch the
    member must still be at for a rebalance timeout to fence it; ``if_absent`` leaves a
    timer already armed under ``key`` as it is (Kafka's ``scheduleIfAbsent``)."""

    key: TimerKey
    delay_ms: int
    member_epoch: int | None = None
    if_absent: bool = False


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: TimerKey


TimerOp = ScheduleTimer | CancelTimer


def session_timer(group_id: str, member_id: str, timeout_ms: int) -> ScheduleTimer:
    return ScheduleTimer(TimerKey(TimerKind.SESSION, group_id, member_id), timeout_ms)


def rebalance_timer(group_id: str, member_id: str, epoch: int, timeout_ms: int) -> ScheduleTimer:
    return ScheduleTimer(TimerKey(TimerKind.REBALANCE, group_id, member_id), timeout_ms, epoch)


def join_timer(group_id: str, member_id: str, timeout_ms: int) -> ScheduleTimer:
    return ScheduleTimer(TimerKey(TimerKind.JOIN, group_id, member_id), timeout_ms, if_absent=True)


def sync_timer(group_id: str, member_id: str, timeout_ms: int) -> ScheduleTimer:
    return ScheduleTimer(TimerKey(TimerKind.SYNC, group_id, member_id), timeout_ms)


def cancel(kind: TimerKind, group_id: str, member_id: str) -> CancelTimer:
    return CancelTimer(TimerKey(kind, group_id, member_id))


def cancel_all(group_id: str, member_id: str) -> list[CancelTimer]:
    return [CancelTimer(TimerKey(kind, group_id, member_id)) for kind in TimerKind]


class Deadlines:
    """Armed timers as (deadline, schedule) by key; nothing runs by itself: ``due`` pops the
    expired ones, earliest first."""

    def __init__(self) -> None:
        self._armed: dict[TimerKey, tuple[int, ScheduleTimer]] = {}

    def apply(self, ops: Iterable[TimerOp], now_ms: int) -> None:
        for op in ops:
            if isinstance(op, ScheduleTimer):
                if not (op.if_absent and op.key in self._armed):
                    self._armed[op.key] = (now_ms + op.delay_ms, op)
            else:
                self._armed.pop(op.key, None)

    def due(self, now_ms: int) -> list[ScheduleTimer]:
        expired = sorted(
            (deadline, key.kind.value, key.group_id, key.member_id)
            for key, (deadline, _) in self._armed.items()
            if deadline <= now_ms
        )
        out = []
        for _, kind, group_id, member_id in expired:
            key = TimerKey(TimerKind(kind), group_id, member_id)
            out.append(self._armed.pop(key)[1])
        return out

    def deadline(self, key: TimerKey) -> int | None:
        armed = self._armed.get(key)
        return None if armed is None else armed[0]

    def next_deadline(self) -> int | None:
        return min((d for d, _ in self._armed.values()), default=None)

    def __contains__(self, key: TimerKey) -> bool:
        return key in self._armed

    def __len__(self) -> int:
        return len(self._armed)
