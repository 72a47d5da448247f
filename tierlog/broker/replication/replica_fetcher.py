"""Following: the replica fetchers of the partitions this broker follows (Kafka's
``ReplicaFetcherManager``, ``AbstractFetcherThread`` and ``ReplicaFetcherThread``).

One asyncio task per leader broker serves every partition followed from that leader, over
one connection. A partition added to it goes through two phases::

    add ──> truncating ──(OffsetForLeaderEpoch answered, KIP-101/279)──> fetching
                ^                                                           |
                └──────── OFFSET_OUT_OF_RANGE above the leader's log end ───┘

A fetch below the leader's local log start that the remote tier holds is answered
OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405): the follower reads the leader-epoch history and
producer snapshot uploaded beside the remote segment ending there, restarts its log empty
at that offset with them, and goes on fetching; it never downloads the remote log.

Truncating asks the leader where the follower's latest leader epoch ends and cuts the
local log there, so a follower never keeps records an old leader wrote and the new one
does not have (never by the high watermark alone, which loses acknowledged records, KIP-101).
Fetching asks for records from the follower's log end with ``replica_id`` set, appends
them as they are (offsets, leader epochs, CRCs) and takes the high watermark from the
answer. Errors about leadership (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH) back
the partition off and retry: the owner moves it when the metadata changes. A lost
connection is made again after a back-off.

A partition listed for this broker in ``follower.replication.throttled.replicas`` and not in
sync is held to the follower replication quota (``replication_quota``, KIP-73): its share of
a fetch is at most the quota's credit, and it is left out while there is none.

Everything runs on the event loop; the only I/O is the connection's socket. The
``ReplicaManager`` owns the manager and calls ``add`` / ``remove`` as leadership changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest

from tierlog.broker.replication.partition import Partition
from tierlog.broker.replication.replication_quota import ReplicationQuota, follower_throttles
from tierlog.client.async_connection import AsyncConnection
from tierlog.local.errors import LogClosedError
from tierlog.local.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from tierlog.protocol.errors import ErrorCode, ProtocolError
from tierlog.protocol.kio_build import build
from tierlog.records.producer_snapshot import CorruptSnapshotError
from tierlog.remote.api import RemoteStorageError
from tierlog.security.client_config import ClientSecurity
from tierlog.security.errors import SaslAuthenticationFailedError

log = logging.getLogger(__name__)

Resolve = Callable[[int], tuple[str, int] | None]
_Key = tuple[str, int]

# Kafka's defaults: replica.fetch.wait.max.ms 500, replica.fetch.min.bytes 1,
# replica.fetch.response.max.bytes 10 MiB, replica.fetch.backoff.ms 1000.
DEFAULT_MAX_WAIT_MS = 500
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BACKOFF_MS = 1000
# A batch's length field (int32 at byte 8) counts the bytes after it (byte 12 on).
_BATCH_LENGTH = struct.Struct(">i")
_LOG_OVERHEAD = 12

# Errors after which only new metadata helps: back off and retry, the owner moves the
# partition when leadership changes.
_LEADERSHIP_ERRORS = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
    }
)


def whole_batches(records: bytes) -> bytes:
    """``records`` without a partial batch at the end (a leader may cut its answer inside
    one, as Kafka's may; the rest comes with the next fetch)."""
    end = len(records)
    position = 0
    while end - position >= _LOG_OVERHEAD:
        (length,) = _BATCH_LENGTH.unpack_from(records, position + 8)
        size = _LOG_OVERHEAD + length
        if length < 0 or position + size > end:
            break
        position += size
    return records if position == end else records[:position]


@dataclass(eq=False, slots=True)
class _Followed:
    """One partition in a fetcher: which phase it is in, and its back-off."""

    partition: Partition
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0
    # The leader's local log start, after OFFSET_MOVED_TO_TIERED_STORAGE: restart there
    # with the state the remote tier holds below it, then fetch.
    restart_at: int | None = None
    # How far behind the leader's high watermark the last fetch left it (Kafka's
    # PartitionFetchState.lag); None before the first answer.
    lag: int | None = None


class _LeaderFetcher:
    """The task fetching every partition followed from one leader (Kafka's
    ``AbstractFetcherThread``)."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[_Key, _Followed] = {}
        self._changed = asyncio.Event()
        self._connection: AsyncConnection | None = None
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{manager.broker_id}-from-{leader_id}"
        )

    def add(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        current = self.partitions.get(key)
        if (
            current is not None
            and current.partition is partition
            and current.leader_epoch == partition.leader_epoch
        ):
            return  # same leader, same epoch (an ISR change): nothing to redo
        self.partitions[key] = _Followed(partition, partition.leader_epoch)
        self._changed.set()

    def remove(self, key: _Key) -> None:
        self.partitions.pop(key, None)

    def _current(self, followed: _Followed) -> bool:
        partition = followed.partition
        key = (partition.topic, partition.index)
        return self.partitions.get(key) is followed and not partition.is_leader

    async def _run(self) -> None:
        backoff_s = self.manager.backoff_ms / 1000
        try:
            while self.partitions:
                try:
                    await self._round()
                except LogClosedError:
                    # A log closed under us (the partition was dropped or the broker is
                    # stopping): stop following it rather than retry forever.
                    for key, f in list(self.partitions.items()):
                        if f.partition.local.closed:
                            del self.partitions[key]
                    await asyncio.sleep(backoff_s)
                except SaslAuthenticationFailedError as exc:
                    # Once per replica.fetch.backoff.ms: the operator must fix credentials.
                    log.error(
                        "fetcher from broker %d cannot log in on the inter-broker listener: "
                        "%s; retrying in %.1f s",
                        self.leader_id,
                        exc,
                        backoff_s,
                    )
                    await self._disconnect()
                    await asyncio.sleep(backoff_s)
                except (OSError, TimeoutError, ProtocolError) as exc:
                    log.info("fetcher from broker %d: %s; reconnecting", self.leader_id, exc)
                    await self._disconnect()
                    await asyncio.sleep(backoff_s)
                except Exception:
                    log.exception("fetcher from broker %d failed; retrying", self.leader_id)
                    await self._disconnect()
                    await asyncio.sleep(backoff_s)
        finally:
            await self._disconnect()

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def _connect(self) -> AsyncConnection | None:
        if self._connection is not None and not self._connection.closed:
            return self._connection
        address = self.manager.resolve(self.leader_id)
        if address is None:
            return None
        self._connection = await AsyncConnection.open(
            address[0],
            address[1],
            client_id=f"replica-fetcher-{self.manager.broker_id}",
            connect_timeout=self.manager.request_timeout_s,
            request_timeout=self.manager.request_timeout_s + self.manager.max_wait_ms / 1000,
            security=self.manager.security,
        )
        return self._connection

    async def _round(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        # A partition this broker leads now stays here until the owner removes it.
        candidates = [f for f in self.partitions.values() if not f.partition.is_leader]
        ready = [f for f in candidates if f.delayed_until <= now]
        if not ready:
            # Everything backs off: sleep until the first back-off ends or the
            # partitions change.
            self._changed.clear()
            delays = [f.delayed_until - now for f in candidates]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._changed.wait(), max(0.0, min(delays, default=0.0)) if delays else None
                )
            return
        connection = await self._connect()
        if connection is None:
            log.info("broker %d (leader) has no known address; backing off", self.leader_id)
            self._back_off(ready)
            return
        for f in [f for f in ready if f.restart_at is not None]:
            await self._restart_from_remote_tier(f)
        truncating = [f for f in ready if f.truncating and f.restart_at is None]
        if truncating:
            await self._truncate(connection, truncating)
        fetching = [
            f for f in ready if not f.truncating and f.restart_at is None and self._current(f)
        ]
        if not fetching:
            return
        shares = self._shares(fetching)
        if shares:
            await self._fetch(connection, shares)
            return
        # Every partition waits on the follower quota: until there is credit again, or
        # the partitions change.
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), self.manager.quota_delay_s())

    def _shares(self, fetching: list[_Followed]) -> dict[_Followed, int]:
        """Each partition's ``partition_max_bytes`` in the next fetch. A partition listed
        in ``follower.replication.throttled.replicas`` for this broker and not in sync
        (lagging by the last answer, and outside the ISR) gets at most the follower
        quota's credit, and is left out while there is none (Kafka's
        ``shouldFollowerThrottle``); the others get the full size."""
        manager = self.manager
        quota = manager.quota
        shares: dict[_Followed, int] = {}
        for f in fetching:
            share = manager.max_bytes
            if quota is not None and quota.limited and self._throttled(f) and not self._in_sync(f):
                share = quota.allowance(share)
                if share == 0:
                    continue
            shares[f] = share
        return shares

    def _throttled(self, f: _Followed) -> bool:
        partition = f.partition
        return follower_throttles(partition.local.config, partition.index, self.manager.broker_id)

    def _in_sync(self, f: _Followed) -> bool:
        return f.lag == 0 or self.manager.broker_id in f.partition.state.isr

    def _back_off(self, followed: list[_Followed]) -> None:
        until = asyncio.get_running_loop().time() + self.manager.backoff_ms / 1000
        for f in followed:
            f.delayed_until = until

    # -- truncation (KIP-101, KIP-279) ---------------------------------------------------

    async def _truncate(self, connection: AsyncConnection, followed: list[_Followed]) -> None:
        asked: list[_Followed] = []
        for f in followed:
            partition = f.partition
            if partition.local.leader_epoch_cache.latest_epoch == UNDEFINED_EPOCH:
                # No epochs to ask about (an empty log): Kafka's fallback, the high
                # watermark (AbstractFetcherThread.truncateToHighWatermark).
                partition.truncate_to(partition.high_watermark)
                f.truncating = False
            else:
                asked.append(f)
        if not asked:
            return
        by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
        for f in asked:
            partition = f.partition
            by_topic[partition.topic].append(
                {
                    "partition": partition.index,
                    "current_leader_epoch": partition.leader_epoch,
                    "leader_epoch": partition.local.leader_epoch_cache.latest_epoch,
                }
            )
        request = build(
            OffsetForLeaderEpochRequest,
            {
                "replica_id": self.manager.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            },
        )
        answer: Any = await connection.request(request)
        index = {(f.partition.topic, f.partition.index): f for f in asked}
        for topic in answer.topics:
            for p in topic.partitions:
                asking = index.get((str(topic.topic), int(p.partition)))
                if asking is None or not self._current(asking):
                    continue
                error = ErrorCode(p.error_code)
                if error != ErrorCode.none:
                    self._on_error(asking, error, "OffsetForLeaderEpoch")
                    continue
                self._apply_epoch_end(asking, int(p.leader_epoch), int(p.end_offset))

    def _apply_epoch_end(self, f: _Followed, leader_epoch: int, leader_end: int) -> None:
        """Kafka's ``AbstractFetcherThread.getOffsetTruncationState``."""
        partition = f.partition
        own_end = partition.local.log_end_offset
        complete = True
        if leader_end == UNDEFINED_OFFSET:
            # The leader knows no epoch <= ours: only the high watermark is safe.
            target = partition.high_watermark
        elif leader_epoch == UNDEFINED_EPOCH:
            target = min(leader_end, own_end)
        else:
            epoch, end = partition.local.leader_epoch_cache.end_offset_for(leader_epoch, own_end)
            if end == UNDEFINED_OFFSET:
                target = min(leader_end, own_end)
            elif epoch != leader_epoch:
                # We do not have the leader's epoch: cut to where our largest epoch below
                # it ends, then ask again about that one (KIP-279's extra round).
                target = min(end, own_end)
                complete = False
            else:
                target = min(end, leader_end, own_end)
        if target < own_end:
            log.info(
                "%s: truncating from %d to %d (leader %d's epoch %d ends at %d)",
                partition,
                own_end,
                target,
                self.leader_id,
                leader_epoch,
                leader_end,
            )
            partition.truncate_to(target)
        f.truncating = not complete

    # -- fetching ------------------------------------------------------------------------

    async def _fetch(self, connection: AsyncConnection, followed: dict[_Followed, int]) -> None:
        manager = self.manager
        offsets: dict[_Key, tuple[_Followed, int]] = {}
        by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
        for f, share in followed.items():
            partition = f.partition
            offset = partition.local.log_end_offset
            offsets[(partition.topic, partition.index)] = (f, offset)
            by_topic[partition.topic].append(
                {
                    "partition": partition.index,
                    "current_leader_epoch": partition.leader_epoch,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": partition.local.log_start_offset,
                    "partition_max_bytes": share,
                }
            )
        request = build(
            FetchRequest,
            {
                "replica_id": manager.broker_id,
                "max_wait": manager.max_wait_ms,
                "min_bytes": manager.min_bytes,
                "max_bytes": manager.max_bytes,
                "isolation_level": 0,  # read_uncommitted: followers copy everything
                "session_id": 0,
                "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
        answer: Any = await connection.request(request)
        for topic in answer.responses:
            for p in topic.partitions:
                found = offsets.get((str(topic.topic), int(p.partition_index)))
                if found is None:
                    continue
                f, offset = found
                # Skip an answer that no longer fits: the partition was removed, re-added
                # or truncated while the fetch was out.
                if not self._current(f) or f.partition.local.log_end_offset != offset:
                    continue
                self._apply_fetched(f, offset, p)

    def _apply_fetched(self, f: _Followed, offset: int, p: Any) -> None:
        partition = f.partition
        error = ErrorCode(p.error_code)
        if error == ErrorCode.offset_moved_to_tiered_storage:
            f.restart_at = int(p.log_start_offset)
            return
        if error == ErrorCode.offset_out_of_range:
            leader_start = int(p.log_start_offset)
            if offset < leader_start:
                # Behind the leader's log start: what we have is gone there; restart
                # empty at its start (Kafka's fetchOffsetAndTruncate).
                log.info("%s: %d is below the leader's start %d", partition, offset, leader_start)
                partition.truncate_fully_and_start_at(leader_start)
            else:
                # Past the leader's log end: find where our epoch ends there again, which
                # is at most its log end (KIP-101), and truncate to it.
                f.truncating = True
            return
        if error != ErrorCode.none:
            self._on_error(f, error, "Fetch")
            return
        records = p.records
        quota = self.manager.quota
        if records and quota is not None and self._throttled(f):
            quota.record(len(records))
        if records:
            batches = whole_batches(bytes(records))
            if batches:
                try:
                    partition.append_as_follower(batches)
                except Exception as exc:
                    log.warning("%s: cannot append what the leader sent: %s", partition, exc)
                    f.truncating = True
                    self._back_off([f])
                    return
        partition.update_follower_high_watermark(int(p.high_watermark))
        partition.update_follower_log_start_offset(int(p.log_start_offset))
        f.lag = max(0, int(p.high_watermark) - partition.local.log_end_offset)

    # -- restarting from the remote tier (KIP-405) ----------------------------------------

    async def _restart_from_remote_tier(self, f: _Followed) -> None:
        """What is below the leader's local log start is only in the remote tier: rather
        than copy it, restart the local log empty at the end of the remote segment holding
        the offset below that start, with the leader-epoch history and producer state
        uploaded beside that segment."""
        partition, offset = f.partition, f.restart_at
        assert offset is not None
        try:
            aux = await partition.remote_aux_state(offset)
        except (RemoteStorageError, OSError, TimeoutError) as exc:
            if isinstance(exc, RemoteStorageError) and not exc.retriable:
                log.warning("%s: %s; restarting at %d without that state", partition, exc, offset)
                if self._current(f):
                    partition.truncate_fully_and_start_at(offset)
                    f.restart_at = None
                return
            log.warning("%s: cannot read the remote tier's state at %d: %s", partition, offset, exc)
            self._back_off([f])
            return
        if not self._current(f) or f.restart_at != offset:
            return
        restart = aux.segment.next_offset  # >= offset: see RemoteLogManager.aux_state_before
        log.info(
            "%s: restarting at %d (the leader's local log starts at %d) with the state of "
            "remote segment %d-%d (%d leader epochs, %s)",
            partition,
            restart,
            offset,
            aux.segment.base_offset,
            aux.segment.end_offset,
            len(aux.leader_epochs),
            "a producer snapshot" if aux.producer_snapshot is not None else "no producer snapshot",
        )
        try:
            partition.restart_with_aux_state(restart, aux)
        except CorruptSnapshotError as exc:
            # The log restarted with the epochs; only the producers' state is lost (their
            # next batches are accepted as from new producers): better than never resuming.
            log.warning("%s: the uploaded producer snapshot is unusable: %s", partition, exc)
        f.restart_at = None

    def _on_error(self, f: _Followed, error: ErrorCode, what: str) -> None:
        if error not in _LEADERSHIP_ERRORS:
            log.warning("%s: %s from broker %d: %s", f.partition, what, self.leader_id, error.name)
        self._back_off([f])


class ReplicaFetcherManager:
    """The fetchers of this broker: one per leader it follows partitions from.

    Args:
        broker_id: this broker (the ``replica_id`` of its fetches).
        resolve: a broker id -> ``(host, port)`` of its listener, None when unknown.
        max_wait_ms, min_bytes, max_bytes: each Fetch's long poll and size
            (replica.fetch.wait.max.ms, replica.fetch.min.bytes,
            replica.fetch.response.max.bytes; also the per-partition limit).
        backoff_ms: pause after an error (replica.fetch.backoff.ms).
        request_timeout_s: bound of connecting and of each request beyond its max wait.
        security: TLS and SASL of the inter-broker listener (None: PLAINTEXT).
        quota: the follower replication throttle (KIP-73); None: unthrottled.
    """

    def __init__(
        self,
        broker_id: int,
        resolve: Resolve,
        *,
        max_wait_ms: int = DEFAULT_MAX_WAIT_MS,
        min_bytes: int = 1,
        max_bytes: int = DEFAULT_MAX_BYTES,
        backoff_ms: int = DEFAULT_BACKOFF_MS,
        request_timeout_s: float = 30.0,
        security: ClientSecurity | None = None,
        quota: ReplicationQuota | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.quota = quota
        self.security = security
        self.resolve = resolve
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.backoff_ms = backoff_ms
        self.request_timeout_s = request_timeout_s
        self._fetchers: dict[int, _LeaderFetcher] = {}
        self._leader_of: dict[_Key, int] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False

    def add(self, partition: Partition, leader_id: int) -> None:
        """Follow ``partition`` from ``leader_id`` (first truncating, then fetching);
        moves it from another leader's fetcher. Call on the event loop. Ignored once
        closed: a cluster change arriving while the broker stops must not start a fetcher
        on logs that are being closed."""
        if self._closed:
            return
        key = (partition.topic, partition.index)
        previous = self._leader_of.get(key)
        if previous is not None and previous != leader_id:
            self._remove_from(previous, key)
        fetcher = self._fetchers.get(leader_id)
        if fetcher is None or fetcher.task.done():
            fetcher = self._fetchers[leader_id] = _LeaderFetcher(self, leader_id)
        fetcher.add(partition)
        self._leader_of[key] = leader_id

    def remove(self, partition: Partition) -> None:
        """Stop following ``partition`` (this broker leads it now, or no longer hosts it);
        an answer already on its way is dropped."""
        key = (partition.topic, partition.index)
        leader_id = self._leader_of.pop(key, None)
        if leader_id is not None:
            self._remove_from(leader_id, key)

    def _remove_from(self, leader_id: int, key: _Key) -> None:
        fetcher = self._fetchers.get(leader_id)
        if fetcher is None:
            return
        fetcher.remove(key)
        if not fetcher.partitions:
            # Nothing left to fetch from that leader: its task ends, and its connection.
            del self._fetchers[leader_id]
            fetcher.task.cancel()
            self._stopping.add(fetcher.task)
            fetcher.task.add_done_callback(self._stopping.discard)

    def quota_delay_s(self) -> float:
        """How long a fetcher whose every partition is throttled waits before asking the
        quota again (bounded: a new rate is seen within a fetch's wait)."""
        delay = self.quota.delay_s() if self.quota is not None else 0.0
        return min(max(delay, 0.001), self.max_wait_ms / 1000)

    def leader_of(self, partition: Partition) -> int | None:
        """The leader ``partition`` is followed from, if it is."""
        return self._leader_of.get((partition.topic, partition.index))

    async def close(self) -> None:
        """Stop every fetcher and close its connection."""
        self._closed = True
        tasks = [f.task for f in self._fetchers.values()] + list(self._stopping)
        self._fetchers.clear()
        self._leader_of.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
