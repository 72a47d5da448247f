"""How many partitions one request may create, and how many a broker and the cluster may
hold (issue 20, item 8; docs/limits.md).

Every partition costs its broker file descriptors (``local.open_files``), memory and work
on every metadata change. Unbounded, a 10,000-partition CreateTopics ran a broker out of
its 20,000 descriptors at partition 3,998: it could then neither take produces nor delete
the topic, and did not start again. A 1,000,000-partition one was accepted and held the
broker for a minute. So creations are refused before anything is written, with Kafka's
POLICY_VIOLATION:

* one request (CreateTopics, CreatePartitions) creates at most
  ``MAX_PARTITIONS_PER_REQUEST`` partitions, all its topics together: Kafka 4's
  ``ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`` (KAFKA-17870), with Kafka's
  message; the whole request is refused, at once;
* a broker holds at most ``max.broker.partitions`` replicas and the cluster
  ``max.partitions`` partitions: the names KIP-578 proposed, which Kafka has not shipped;
* and at most what its file descriptor limit allows: ``(ulimit -n - RESERVED_FDS) /
  FDS_PER_PARTITION``, so a creation that would leave the broker unable to open a
  connection or a checkpoint is refused instead. In a cluster every broker is assumed
  to run with the same limit as the one that checks.

Counts come from the coordination metadata (replicas per broker), plus what creations
still in flight on this broker have been granted, so two requests at once cannot both
take the last room.
"""

from __future__ import annotations

import resource
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager

from tierlog.broker.coordination.api import TopicMetadata
from tierlog.local.open_files import FDS_PER_PARTITION
from tierlog.protocol.errors import ErrorCode

# Kafka 4: "We fail the entire CreateTopicsRequest action if there are more than 10k
# total partitions being created in this topic for this specific request."
MAX_PARTITIONS_PER_REQUEST = 10_000
# Descriptors kept for everything but partitions: client and replica connections,
# ZooKeeper, checkpoints being written, the remote tier's cache and uploads.
RESERVED_FDS = 1024
POLICY_VIOLATION = ErrorCode.policy_violation


class PartitionLimitError(Exception):
    """A creation past a limit (Kafka POLICY_VIOLATION; ``code`` is read by the broker's
    error mapping)."""

    code = POLICY_VIOLATION


def fd_limit() -> int:
    """This process's soft limit on open files (``ulimit -n``)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 31


def check_request(partitions: int) -> None:
    """One request's partitions, all topics together.

    Raises:
        PartitionLimitError: more than ``MAX_PARTITIONS_PER_REQUEST``, with Kafka's text.
    """
    if partitions > MAX_PARTITIONS_PER_REQUEST:
        raise PartitionLimitError("Excessively large number of partitions per request.")


class PartitionLimits:
    """Args:
    max_broker_partitions: ``max.broker.partitions`` (KIP-578).
    max_partitions: ``max.partitions`` (KIP-578), the whole cluster.
    open_files: the file descriptor limit the budget is taken from (``fd_limit()``).
    fds_per_partition: what one partition holds open (``local.open_files``).
    """

    def __init__(
        self,
        max_broker_partitions: int,
        max_partitions: int,
        open_files: int,
        fds_per_partition: int = FDS_PER_PARTITION,
    ) -> None:
        self.by_fds = max(0, (open_files - RESERVED_FDS) // fds_per_partition)
        self.per_broker = min(max_broker_partitions, self.by_fds)
        if max_broker_partitions <= self.by_fds:
            self.why = "max.broker.partitions"
        else:
            self.why = (
                f"the file descriptor limit: ulimit -n {open_files} leaves room for "
                f"{self.by_fds} partitions at {fds_per_partition} "
                f"descriptor{'s' if fds_per_partition != 1 else ''} each, "
                f"{RESERVED_FDS} kept for connections"
            )
        self.max_partitions = max_partitions
        self._in_flight: Counter[int] = Counter()  # broker -> replicas being created
        self._in_flight_total = 0

    @contextmanager
    def hold(self, per_broker: Counter[int], total: int) -> Iterator[None]:
        """Count ``per_broker`` replicas and ``total`` partitions as in flight meanwhile."""
        held = Counter(per_broker)
        self._in_flight.update(held)
        self._in_flight_total += total
        try:
            yield
        finally:
            self._in_flight.subtract(held)
            self._in_flight_total -= total

    def count(self, topics: Mapping[str, TopicMetadata]) -> PartitionCount:
        """What the metadata and creations in flight hold now: one request's view."""
        per_broker: Counter[int] = Counter(self._in_flight)
        total = self._in_flight_total
        for topic in topics.values():
            total += len(topic.replicas)
            for replicas in topic.replicas.values():
                per_broker.update(replicas)
        return PartitionCount(self, per_broker, total)


class PartitionCount:
    """One request's running count: ``add`` each topic (or new partitions) it creates, then
    hold what it added (``held``) while the creation is under way."""

    def __init__(self, limits: PartitionLimits, per_broker: Counter[int], total: int) -> None:
        self.limits = limits
        self.per_broker = per_broker
        self.total = total
        self._added: Counter[int] = Counter()
        self._added_total = 0

    def add(self, topic: str, replicas: Mapping[int, list[int]]) -> None:
        """Count ``replicas`` (partition -> brokers) of ``topic`` in.

        Raises:
            PartitionLimitError: a broker past its limit, or the cluster past
                ``max.partitions``; nothing is counted then.
        """
        limits = self.limits
        new: Counter[int] = Counter()
        for brokers in replicas.values():
            new.update(brokers)
        for broker, n in sorted(new.items()):
            if self.per_broker[broker] + n > limits.per_broker:
                raise PartitionLimitError(
                    f"creating {len(replicas)} partitions of {topic!r} would put "
                    f"{self.per_broker[broker] + n} partitions on broker {broker}, more than "
                    f"the {limits.per_broker} it may hold ({limits.why})"
                )
        if self.total + len(replicas) > limits.max_partitions:
            raise PartitionLimitError(
                f"creating {len(replicas)} partitions of {topic!r} would make "
                f"{self.total + len(replicas)} in the cluster, more than max.partitions "
                f"{limits.max_partitions}"
            )
        self.per_broker.update(new)
        self.total += len(replicas)
        self._added.update(new)
        self._added_total += len(replicas)

    def held(self) -> AbstractContextManager[None]:
        """What was added counts for other requests until the creation is over (it is in
        the metadata then, or it failed)."""
        return self.limits.hold(self._added, self._added_total)
