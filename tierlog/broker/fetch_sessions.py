"""Incremental fetch sessions (KIP-227): the broker remembers what a client fetches.

A client that fetches many partitions sends them all in every Fetch and gets them all
back, data or not. With a session, the broker keeps the partition list (and each one's
fetch offset and byte limit) under a session id; the client's later requests name only
the partitions whose offset changed, added or forgotten, and the answers carry only the
partitions with something new: records, an error, or a changed high watermark, last
stable offset or log start. Java clients and kafka-python use them; librdkafka does not.

The protocol (Fetch v7+ ``session_id`` and ``session_epoch``):

- epoch -1 (FINAL): no session; a named one is closed. A full fetch, answered in full.
- epoch 0 (INITIAL): a full fetch that opens a session (a named one is closed first); the
  answer carries the new id, or 0 when the cache has no room (the client then keeps
  sending full fetches).
- epoch n > 0: an incremental fetch in session ``session_id``; n must be the session's
  next epoch (INVALID_FETCH_SESSION_EPOCH otherwise, FETCH_SESSION_ID_NOT_FOUND for an
  unknown id). Epochs go 1, 2, ... and wrap from 2^31-1 to 1.

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions (Kafka's 1,000).
When full, the session used least recently is evicted if it has been idle for at least
``MIN_EVICTION_MS`` (Kafka's two minutes); otherwise no session is opened. Sessions are
the broker's memory only: a restart forgets them and clients open new ones.

Pure state, used from the event loop only.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NO_SESSION = 0
MIN_EVICTION_MS = 120_000
DEFAULT_SLOTS = 1000

# A partition of a session: (topic name, or the topic id's string from Fetch v13, index).
PartitionKey = tuple[str, int]


@dataclass(slots=True)
class SessionPartition:
    """What the client asked for, and what it was last told."""

    topic: str  # the name, or "" for an unknown topic id
    topic_id: uuid.UUID | None
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    # Last answered: -2 means never, so the first answer always includes the partition.
    high_watermark: int = -2
    last_stable_offset: int = -2
    log_start_offset: int = -2

    def must_answer(
        self,
        has_records: bool,
        error: int,
        high_watermark: int,
        stable: int,
        start: int,
        other: bool,
    ) -> bool:
        """Record what an answer says; whether the client needs it (Kafka's
        ``maybeUpdateResponseData``). ``other``: a preferred read replica or the like."""
        changed = (high_watermark, stable, start) != (
            self.high_watermark,
            self.last_stable_offset,
            self.log_start_offset,
        )
        self.high_watermark, self.last_stable_offset, self.log_start_offset = (
            high_watermark,
            stable,
            start,
        )
        return has_records or error != 0 or changed or other


@dataclass(slots=True)
class FetchSession:
    session_id: int
    privileged: bool  # a follower's: evicted last
    partitions: OrderedDict[PartitionKey, SessionPartition] = field(default_factory=OrderedDict)
    epoch: int = 1  # the epoch the next request must carry
    last_used_ms: float = 0.0

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1


class FetchSessionCache:
    """Args:
    max_slots: sessions kept at most (``max.incremental.fetch.session.cache.slots``).
    clock: milliseconds.
    """

    def __init__(
        self,
        max_slots: int = DEFAULT_SLOTS,
        *,
        min_eviction_ms: int = MIN_EVICTION_MS,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.max_slots = max_slots
        self.min_eviction_ms = min_eviction_ms
        self._clock = clock or (lambda: time.monotonic() * 1000)
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recent first
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.last_used_ms = self._clock()
            self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def open(
        self, partitions: list[SessionPartition], *, privileged: bool = False
    ) -> FetchSession | None:
        """A new session over ``partitions``; None when the cache is full of sessions
        in use (the client goes on with full fetches)."""
        if self.max_slots <= 0:
            return None
        now = self._clock()
        if len(self._sessions) >= self.max_slots and not self._evict_one(now, privileged):
            return None
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, last_used_ms=now)
        for p in partitions:
            session.partitions[partition_key(p.topic, p.topic_id, p.partition)] = p
        self._sessions[session_id] = session
        return session

    def _evict_one(self, now: float, privileged: bool) -> bool:
        # Least recently used first; a follower's session goes only for another follower.
        for session_id, session in self._sessions.items():
            if session.privileged and not privileged:
                continue
            if now - session.last_used_ms >= self.min_eviction_ms:
                del self._sessions[session_id]
                self.evictions += 1
                return True
        return False

    def _new_id(self) -> int:
        for _ in itertools.count():
            candidate = random.randint(1, 2**31 - 1)
            if candidate not in self._sessions:
                return candidate
        raise AssertionError("unreachable")


def partition_key(topic: str, topic_id: uuid.UUID | None, partition: int) -> PartitionKey:
    """How a session names a partition: by topic id from Fetch v13, else by name."""
    return (topic if topic_id is None else str(topic_id), partition)
