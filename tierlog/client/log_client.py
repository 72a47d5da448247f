"""``LogClient``: a cluster view (brokers, partition leaders) plus the three calls a reader
needs — list topics and partitions, list offsets, fetch raw record batches from a leader.

Requests go to the partition's leader from the last Metadata answer; an answer that says
the leader moved (or the topic is not known yet) refreshes metadata and retries, a few
times with a short backoff, as Kafka's clients do. Not thread-safe: one per thread.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.list_offsets.v7.request import ListOffsetsRequest
from kio.schema.metadata.v12.request import MetadataRequest

from tierlog.client.connection import BrokerConnection
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build
from tierlog.security.client_config import ClientSecurity
from tierlog.security.errors import SaslAuthenticationFailedError

# ListOffsets' special timestamps (KIP-79): the log start and the log end (high watermark).
ZERO_UUID = uuid.UUID(int=0)
EARLIEST = -2
LATEST = -1
# Fetch and ListOffsets isolation levels (KIP-98): read_uncommitted reads up to the high
# watermark; read_committed up to the last stable offset, and a Fetch answer lists the
# aborted transactions in what it returns (the reader drops their records).
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# Errors after which fresh metadata may help: the leader moved or is being elected, the
# topic was just created, the leader's storage hiccuped. Kafka's clients retry these too.
_RETRIABLE = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.not_controller,
    }
)


class ClientError(Exception):
    """The broker answered with an error code (after retries, when it is retriable)."""

    def __init__(self, error: ErrorCode, what: str) -> None:
        super().__init__(f"{what}: {error.name.upper()} ({int(error)})")
        self.error = error


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: BrokerAddress | None  # None while no leader is known
    leader_epoch: int


class AbortedTransaction(NamedTuple):
    """An entry of a read_committed Fetch answer's ``aborted_transactions``: a producer's
    transaction that began at ``first_offset`` and was aborted (Kafka's
    ``FetchResponseData.AbortedTransaction``)."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class FetchResult:
    """One partition of a Fetch answer: raw batches (possibly ending in a partial one).

    ``last_stable_offset`` is -1 when the broker does not say; ``aborted_transactions``
    is empty for read_uncommitted fetches.
    """

    records: bytes
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int = -1
    aborted_transactions: tuple[AbortedTransaction, ...] = ()


def parse_bootstrap(servers: str | Iterable[str]) -> list[BrokerAddress]:
    """``"h1:9092,h2:9092"`` (Kafka's bootstrap.servers) as addresses.

    Raises:
        ValueError: empty, or an entry is not host:port.
    """
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append(BrokerAddress(host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap server given")
    return out


class LogClient:
    """Metadata, offsets and raw fetches against a Kafka-protocol cluster.

    Args:
        bootstrap: ``bootstrap.servers`` string or addresses.
        timeout: seconds per socket operation.
        retries: attempts after a retriable error, each after a metadata refresh.
        backoff_s: pause before a retry (Kafka's retry.backoff.ms is 100 ms).
        client_id: shows in broker logs.
        security: TLS and SASL for every connection it opens (None: PLAINTEXT); build it
            from Kafka's client keys with ``ClientSecurity.from_config``.
    """

    def __init__(
        self,
        bootstrap: str | Iterable[str],
        *,
        timeout: float = 30.0,
        retries: int = 5,
        backoff_s: float = 0.1,
        client_id: str = "tierlog",
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.security = security
        self.timeout = timeout
        self.retries = retries
        self.backoff_s = backoff_s
        self.client_id = client_id
        self._connections: dict[BrokerAddress, BrokerConnection] = {}
        self._brokers: dict[int, BrokerAddress] = {}
        self._partitions: dict[tuple[str, int], PartitionInfo] = {}
        self._topics: dict[str, list[int]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}

    def __enter__(self) -> LogClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    # -- connections and metadata --------------------------------------------------------

    def _connection(self, address: BrokerAddress) -> BrokerConnection:
        connection = self._connections.get(address)
        if connection is None:
            connection = BrokerConnection(
                address.host,
                address.port,
                timeout=self.timeout,
                client_id=self.client_id,
                security=self.security,
            )
            self._connections[address] = connection
        return connection

    def _any_broker_call(self, body: Any) -> Any:
        """``body`` sent to the first known broker that answers (bootstrap list last)."""
        last: Exception | None = None
        for address in [*self._brokers.values(), *self.bootstrap]:
            try:
                return self._connection(address).call(body)
            except SaslAuthenticationFailedError:
                raise  # the same credentials fail on every broker: say so at once
            except OSError as exc:
                last = exc
        raise ConnectionError(
            f"no broker of {', '.join(map(str, self.bootstrap))} answered: {last}"
        ) from last

    def refresh(self, topics: Iterable[str] | None = None) -> None:
        """Metadata for ``topics`` (None: every topic), merged into the cached view."""
        wanted = None if topics is None else sorted(set(topics))
        request = build(
            MetadataRequest,
            {
                "topics": None
                if wanted is None
                else [{"name": t, "topic_id": ZERO_UUID} for t in wanted],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        answer = self._any_broker_call(request)
        self._brokers = {int(b.node_id): BrokerAddress(b.host, int(b.port)) for b in answer.brokers}
        if wanted is None:
            self._topics.clear()
        for topic in answer.topics:
            name = str(topic.name)
            for key in [k for k in self._partitions if k[0] == name]:
                del self._partitions[key]
            if topic.error_code != ErrorCode.none:
                self._topics.pop(name, None)
                continue
            self._topics[name] = sorted(int(p.partition_index) for p in topic.partitions)
            self._topic_ids[name] = topic.topic_id
            for p in topic.partitions:
                leader = self._brokers.get(int(p.leader_id))
                self._partitions[name, int(p.partition_index)] = PartitionInfo(
                    name, int(p.partition_index), leader, int(p.leader_epoch)
                )

    def topics(self) -> list[str]:
        """Every topic's name, internal ones (``__consumer_offsets``) excluded."""
        self.refresh(None)
        return sorted(t for t in self._topics if not t.startswith("__"))

    def partitions(self, topic: str) -> list[int]:
        """Partition numbers of ``topic``.

        Raises:
            ClientError: UNKNOWN_TOPIC_OR_PARTITION.
        """
        self.refresh([topic])
        if topic not in self._topics:
            raise ClientError(ErrorCode.unknown_topic_or_partition, f"topic {topic!r}")
        return list(self._topics[topic])

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id from the last metadata answer (all zeros when unknown), which
        tells a topic from a deleted one of the same name (KIP-516)."""
        return self._topic_ids.get(topic, ZERO_UUID)

    def leader(self, topic: str, partition: int) -> PartitionInfo:
        info = self._partitions.get((topic, partition))
        if info is None or info.leader is None:
            self.refresh([topic])
            info = self._partitions.get((topic, partition))
        if info is None or info.leader is None:
            code = (
                ErrorCode.unknown_topic_or_partition
                if info is None
                else ErrorCode.leader_not_available
            )
            raise ClientError(code, f"{topic}-{partition}")
        return info

    # -- offsets -------------------------------------------------------------------------

    def list_offsets(
        self, wanted: Mapping[tuple[str, int], int], *, isolation_level: int = READ_UNCOMMITTED
    ) -> dict[tuple[str, int], int]:
        """ListOffsets for each ``(topic, partition) -> timestamp`` (EARLIEST, LATEST or
        milliseconds). A timestamp later than every record answers -1, as in Kafka. LATEST
        is the high watermark, or with ``READ_COMMITTED`` the last stable offset.

        Raises:
            ClientError: a partition's error persists through the retries.
        """
        result: dict[tuple[str, int], int] = {}
        pending = dict(wanted)
        for attempt in range(self.retries + 1):
            by_leader: dict[BrokerAddress, list[tuple[str, int]]] = defaultdict(list)
            failures: dict[tuple[str, int], ErrorCode] = {}
            for key in pending:
                try:
                    info = self.leader(*key)
                except ClientError as exc:
                    failures[key] = exc.error
                    continue
                assert info.leader is not None
                by_leader[info.leader].append(key)
            for address, keys in by_leader.items():
                failures.update(
                    self._list_offsets_on(address, keys, pending, result, isolation_level)
                )
            retriable = {k: e for k, e in failures.items() if e in _RETRIABLE}
            fatal = {k: e for k, e in failures.items() if e not in _RETRIABLE}
            if fatal or (retriable and attempt == self.retries):
                (topic, partition), error = next(iter((fatal or retriable).items()))
                raise ClientError(error, f"ListOffsets {topic}-{partition}")
            if not retriable:
                return result
            pending = {k: pending[k] for k in retriable}
            time.sleep(self.backoff_s)
            self.refresh({t for t, _ in pending})
        return result

    def _list_offsets_on(
        self,
        address: BrokerAddress,
        keys: list[tuple[str, int]],
        timestamps: Mapping[tuple[str, int], int],
        result: dict[tuple[str, int], int],
        isolation_level: int = READ_UNCOMMITTED,
    ) -> dict[tuple[str, int], ErrorCode]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in keys:
            by_topic[topic].append(partition)
        request = build(
            ListOffsetsRequest,
            {
                "replica_id": -1,
                "isolation_level": isolation_level,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": p,
                                "current_leader_epoch": -1,
                                "timestamp": timestamps[topic, p],
                            }
                            for p in parts
                        ],
                    }
                    for topic, parts in by_topic.items()
                ],
            },
        )
        try:
            answer = self._connection(address).call(request)
        except SaslAuthenticationFailedError:
            raise  # not a timeout: retrying with the same login cannot help
        except OSError:
            return {key: ErrorCode.request_timed_out for key in keys}
        failures = {}
        for topic in answer.topics:
            for p in topic.partitions:
                key = (str(topic.name), int(p.partition_index))
                if p.error_code != ErrorCode.none:
                    failures[key] = ErrorCode(p.error_code)
                else:
                    result[key] = int(p.offset)
        return failures

    # -- fetch ---------------------------------------------------------------------------

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 32 << 20,
        max_wait_ms: int = 0,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> FetchResult:
        """Raw batches of ``topic-partition`` from ``offset`` (at least one whole batch when
        one exists there, KIP-74); read_uncommitted like Spark's Kafka source by default.
        With ``READ_COMMITTED`` the broker answers only below the last stable offset, with
        the aborted transactions the reader must drop (``tierlog.records.aborted_filter``).

        Raises:
            ClientError: e.g. OFFSET_OUT_OF_RANGE (not retried), or a retriable error that
                persists.
        """
        last = ErrorCode.none
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s)
                self.refresh([topic])
            try:
                info = self.leader(topic, partition)
            except ClientError as exc:
                if exc.error not in _RETRIABLE:
                    raise
                last = exc.error
                continue
            assert info.leader is not None
            request = _fetch_request(
                topic, partition, offset, max_bytes, max_wait_ms, isolation_level
            )
            try:
                answer = self._connection(info.leader).call(request)
            except SaslAuthenticationFailedError:
                raise  # not a timeout: retrying with the same login cannot help
            except OSError:
                last = ErrorCode.request_timed_out
                continue
            data = answer.responses[0].partitions[0]
            error = ErrorCode(data.error_code)
            if error == ErrorCode.none:
                return FetchResult(
                    bytes(data.records or b""),
                    int(data.high_watermark),
                    int(data.log_start_offset),
                    int(data.last_stable_offset),
                    tuple(
                        AbortedTransaction(int(t.producer_id), int(t.first_offset))
                        for t in data.aborted_transactions or ()
                    ),
                )
            if error not in _RETRIABLE:
                raise ClientError(error, f"Fetch {topic}-{partition} at offset {offset}")
            last = error
        raise ClientError(last, f"Fetch {topic}-{partition} at offset {offset}")


def _fetch_request(
    topic: str,
    partition: int,
    offset: int,
    max_bytes: int,
    max_wait_ms: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> Any:
    return build(
        FetchRequest,
        {
            "replica_id": -1,
            "max_wait": max_wait_ms,
            "min_bytes": 1 if max_wait_ms else 0,
            "max_bytes": max_bytes,
            "isolation_level": isolation_level,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": max_bytes,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
