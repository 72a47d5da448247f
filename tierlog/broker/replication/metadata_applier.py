"""When and how much of a metadata change the replica manager applies: the queues of what
changes named and is not applied yet, drained in slices, one per turn of the event loop.

A failover that moves 2,000 leaderships arrives in a few cache updates, and becoming
leader writes the leader-epoch checkpoint with an fsync (1-2 ms on a loaded box): applied
in one go, it held the loop, and every request with it, for 1-2 s. So a change only queues
the topics and partitions it names, and each turn of the loop applies up to
``APPLY_SLICE`` of them (and at most ``APPLY_SLICE_MS``), oldest first: a failover's new
leaders before its ISR shrinks. A slice applies the cache's latest state of what it takes
(a partition never goes back: ``Partition`` refuses an older leader epoch). A failed slice
makes the next sync whole, so nothing it skipped is left behind.

What applying one topic or partition means (host it, become leader or follower, drop it)
belongs to the replica manager, behind ``HostedReplicas``; this module owns only the
queues and the drain.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Iterator, Mapping
from typing import Protocol

from tierlog.broker.coordination.api import MetadataChange, TopicMetadata
from tierlog.local.config import LogConfig
from tierlog.util.clock import Clock

log = logging.getLogger(__name__)

# Partitions one turn of the event loop applies from a metadata change: with an fsync per
# new leadership (~1-2 ms on a loaded box) a slice holds the loop ~20-30 ms.
APPLY_SLICE = 16
# And at most this long: hosting a partition costs its fsyncs, ~1-2 ms on an idle box but
# ten times more on a busy disk, where 16 held the loop for 1.8 s.
APPLY_SLICE_MS = 30


class HostedReplicas(Protocol):
    """What the applier asks of the replica manager."""

    def current_topics(self, *, reindex: bool) -> Mapping[str, TopicMetadata]:
        """The coordination metadata's topics now (``reindex``: topic ids may have
        changed, look them up again)."""
        ...

    def drop_unassigned(self, name: str, topic: TopicMetadata | None) -> None:
        """Stop hosting what of ``name`` is no longer assigned here (deleted, created
        again, moved away)."""
        ...

    def assigned_here(self, name: str, topic: TopicMetadata) -> Iterator[tuple[int, LogConfig]]:
        """The partitions of ``topic`` assigned here, each with the topic's config."""
        ...

    def apply_partition(
        self, name: str, topic: TopicMetadata | None, p: int, config: LogConfig | None
    ) -> None:
        """Host partition ``p`` and apply its state, or drop it if it is not to be hosted
        here (``config`` None: the partition's own, or the topic's)."""
        ...

    def apply_all(self) -> None:
        """Everything the metadata says, now (deletions first); raises the first failure."""
        ...


class MetadataApplier:
    """The pending topics and partitions of metadata changes, and the drain that applies
    them. Not thread-safe: the broker's event loop (or one thread with no loop running,
    where everything is applied at once)."""

    def __init__(self, replicas: HostedReplicas, clock: Clock) -> None:
        self._replicas = replicas
        self._clock = clock
        self._full_sync_needed = False  # an incremental sync failed half-way
        # What metadata changes named and is not applied yet (insertion-ordered): topics,
        # and partitions with their topic's config when a topic change queued them.
        self._pending_topics: dict[str, None] = {}
        self._pending_partitions: dict[tuple[str, int], LogConfig | None] = {}
        self._draining = False
        self._drained = asyncio.Event()  # set whenever nothing is pending
        self._drained.set()
        self._drain_failure: Exception | None = None  # why the last drain stopped
        self._drain_chain = 0

    def sync(self, change: MetadataChange | None = None) -> None:
        """Without ``change`` (start-up, a full re-read of ZooKeeper, the callers that
        create or delete topics), or after a failed slice: everything, now. With it (what
        one cache update changed) only the topics and partitions it names, in slices."""
        if change is None or self._full_sync_needed:
            self._pending_topics.clear()
            self._pending_partitions.clear()
            self._full_sync_needed = True  # until this pass is through
            self._stop_drain()
            self._replicas.apply_all()
            self._full_sync_needed = False
            return
        self._pending_topics.update(dict.fromkeys(sorted(change.topics)))
        for tp in sorted(change.partitions):
            self._pending_partitions.setdefault(tp, None)
        self._start_drain()

    async def apply_topics(self, names: Collection[str]) -> None:
        """Apply what the metadata now says of ``names`` (created, grown or deleted by
        this broker's own request) and return once it is done: the same slices as
        ``sync``, so a topic of 10,000 partitions is hosted a slice per turn of the event
        loop while other requests are answered between (issue 20, item 8). Only ``names``,
        even when a full sync is due: a deletion must not wait for (or fail with) hosting
        anything else.

        Raises:
            OSError (or what else applying raised): the drain failed meanwhile (a full
                disk); what it did not apply is applied by the next full sync.
        """
        self._pending_topics.update(dict.fromkeys(sorted(names)))
        self._start_drain()
        if self._draining:
            await self._drained.wait()
            if self._drain_failure is not None:
                raise self._drain_failure

    def _stop_drain(self) -> None:
        self._draining = False
        self._drained.set()
        self._drain_chain += 1  # a drain still scheduled stops

    def _start_drain(self) -> None:
        if self._draining:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on a loop (tests, tools): apply it all now
            while self._pending_topics or self._pending_partitions:
                self._apply_slice()
            return
        self._draining = True
        self._drained.clear()
        self._drain_failure = None
        self._drain_chain += 1
        loop.call_soon(self._drain, loop, self._drain_chain)

    def _drain(self, loop: asyncio.AbstractEventLoop, chain: int) -> None:
        if chain != self._drain_chain:
            return  # a full sync took over
        try:
            self._apply_slice()
        except Exception as exc:
            self._drain_failure = exc
            if isinstance(exc, OSError):
                # A full disk while hosting (issue 10, items 8 and 9): expected, retried by
                # whoever needs the partition; no traceback for it.
                log.warning(
                    "applying the cluster state failed: %s; the next change re-applies all", exc
                )
            else:
                log.exception("applying the cluster state failed; the next change re-applies all")
            self._full_sync_needed = True
            self._pending_topics.clear()
            self._pending_partitions.clear()
        if self._pending_topics or self._pending_partitions:
            loop.call_soon(self._drain, loop, chain)
        else:
            self._draining = False
            self._drained.set()

    def _apply_slice(self) -> None:
        """Apply up to APPLY_SLICE pending partitions, oldest first. A pending topic first
        drops at once what is no longer its partitions here (dropping frees space and
        needs none), then queues its partitions here, with its configs, to be applied one
        by one like the others: a topic of 10,000 partitions applied at once held the loop
        for seconds."""
        topics = self._replicas.current_topics(reindex=bool(self._pending_topics))
        budget = APPLY_SLICE
        deadline = self._clock.monotonic_ms() + APPLY_SLICE_MS
        while budget > 0 and self._pending_topics:
            name = next(iter(self._pending_topics))
            del self._pending_topics[name]
            budget -= 1
            topic = topics.get(name)
            self._replicas.drop_unassigned(name, topic)
            if topic is not None:
                for p, topic_config in self._replicas.assigned_here(name, topic):
                    self._pending_partitions[(name, p)] = topic_config
        while budget > 0 and self._pending_partitions:
            if self._clock.monotonic_ms() >= deadline:
                break
            (name, p), config = next(iter(self._pending_partitions.items()))
            del self._pending_partitions[(name, p)]
            budget -= 1
            self._replicas.apply_partition(name, topics.get(name), p, config)
