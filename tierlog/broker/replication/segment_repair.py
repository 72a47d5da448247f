"""Repair of damaged segment ranges from an in-sync replica (cluster mode).

When the scrubber, a read or a load marks a byte range of a closed segment damaged, or a
load finds offsets whose segment file is gone (issue 20, items 1-2), reads of them answer
KAFKA_STORAGE_ERROR. In a cluster the same batches exist, byte for byte, on every
other in-sync replica: followers append the leader's batches unchanged. The repairer
fetches the damaged range's offsets from one of them and writes the batches back over
the damaged bytes (``tierlog/local/segment_patch.py`` checks that they line up), so the
partition serves its data again without an operator, on leader and follower alike.
Kafka has no scrubber and no repair; this is the HDFS idea of re-replicating a bad block
from a good copy, applied in place because the copies are identical.

How: an ordinary consumer Fetch (replica id -1, read_uncommitted, no leader-epoch check)
to the replica, from the first offset of the range, a piece of at most
``PIECE_BYTES`` at a time. Any replica answers it up to its own high watermark, so what
comes back is committed data; a replica whose high watermark has not reached the range
yet answers nothing and the repair is tried again later. The leader is asked first (it
has everything), then the other in-sync replicas; a replica whose copy is damaged too
answers KAFKA_STORAGE_ERROR and the next one is asked. A replica whose batches differ
(each replica compacts on its own) is refused by the checks and the range stays marked.

Runs on the event loop: a background task woken by the scrubber's findings and every
``RETRY_INTERVAL_S``; single-node brokers have no replica to ask and build none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.fetch.v12.request import FetchRequest

from tierlog.broker.replication.partition import Partition
from tierlog.broker.replication.replica_fetcher import whole_batches
from tierlog.client.async_connection import AsyncConnection
from tierlog.local.segment_patch import (
    DamagedRange,
    PatchRefused,
    accept_empty,
    apply_patch,
    damaged_ranges,
)
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build
from tierlog.security.client_config import ClientSecurity

log = logging.getLogger(__name__)

# One fetch answer's worth: the piece written (and held in memory) at a time.
PIECE_BYTES = 1 << 20
# Ranges not repaired yet (no replica reached them, all refused) are tried again this often.
RETRY_INTERVAL_S = 10.0

Resolve = Callable[[int], "tuple[str, int] | None"]


class PeerError(Exception):
    """The replica answered with an error (its copy may be damaged too, or it moved)."""


@dataclass
class RepairStats:
    """Read by the metrics endpoint (event loop writes only)."""

    repaired_ranges: int = 0
    repaired_bytes: int = 0
    failed_attempts: int = 0


class SegmentRepairer:
    """Repairs the damaged ranges of the partitions hosted here from their ISR.

    Args:
        broker_id: this broker (never asked for its own data).
        partitions: the hosted partitions, read at each round.
        resolve: a live broker's (host, port), None when it is not registered.
        on_repaired: called after a range is fully repaired (the scrubber forgets it).
        request_timeout_s: bound of connecting and of each fetch.
        security: TLS and SASL of the inter-broker listener (None: PLAINTEXT).
    """

    def __init__(
        self,
        broker_id: int,
        partitions: Callable[[], Iterable[Partition]],
        resolve: Resolve,
        *,
        on_repaired: Callable[[Partition], None] | None = None,
        request_timeout_s: float = 30.0,
        retry_interval_s: float = RETRY_INTERVAL_S,
        security: ClientSecurity | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._security = security
        self._partitions = partitions
        self._resolve = resolve
        self._on_repaired = on_repaired
        self.request_timeout_s = request_timeout_s
        self.retry_interval_s = retry_interval_s
        self.stats = RepairStats()
        self._said: set[tuple[str, int, int, str]] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._wake.set()  # marks applied at load are looked at once, not after a retry
        self._task = asyncio.get_running_loop().create_task(self._run(), name="segment-repair")

    def wake(self) -> None:
        """Something was marked damaged: look now rather than at the next retry."""
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.retry_interval_s)
            self._wake.clear()
            try:
                await self.repair_all()
            except Exception:  # one bad round must not end repairs for good
                log.exception("segment repair round failed; retrying later")

    async def repair_all(self) -> int:
        """One round over every hosted partition; returns the ranges fully repaired."""
        repaired = 0
        for partition in list(self._partitions()):
            if not partition.hosted or partition.local.closed:
                continue
            if not any(segment.damaged for segment in partition.local.segments):
                continue
            repaired += await self.repair_partition(partition)
        return repaired

    async def repair_partition(self, partition: Partition) -> int:
        done = 0
        for damaged in damaged_ranges(partition.local.segments):
            if damaged.end_offset <= partition.local.log_start_offset:
                continue  # given up (DeleteRecords past it); retention removes it
            for peer in self._peers(partition):
                try:
                    if await self._repair_from(peer, partition, damaged):
                        done += 1
                        break
                except (PatchRefused, OSError, TimeoutError, PeerError) as exc:
                    self.stats.failed_attempts += 1
                    # Retried every round: said once per range, replica and reason.
                    said = (str(damaged.segment.path), damaged.position, peer, str(exc))
                    if said in self._said:
                        continue
                    self._said.add(said)
                    log.warning(
                        "%s: cannot repair offsets %d-%d of %s from broker %d: %s",
                        partition,
                        damaged.first_offset,
                        damaged.end_offset - 1,
                        damaged.segment.path,
                        peer,
                        exc,
                    )
        if done and self._on_repaired is not None:
            self._on_repaired(partition)
        return done

    def _peers(self, partition: Partition) -> list[int]:
        """The in-sync replicas other than this broker, the leader first."""
        state = partition.state
        ordered = [state.leader, *state.isr]
        return [b for b in dict.fromkeys(ordered) if b >= 0 and b != self.broker_id]

    async def _repair_from(self, peer: int, partition: Partition, damaged: DamagedRange) -> bool:
        address = self._resolve(peer)
        if address is None:
            return False
        connection = await AsyncConnection.open(
            address[0],
            address[1],
            client_id=f"segment-repair-{self.broker_id}",
            connect_timeout=self.request_timeout_s,
            request_timeout=self.request_timeout_s,
            security=self._security,
        )
        first, size = damaged.first_offset, damaged.end - damaged.position
        segments = partition.local.segments
        try:
            rest: DamagedRange | None = damaged
            while rest is not None:
                data = await self._fetch(connection, partition, rest)
                if not data:
                    return False  # the replica's high watermark is below it: later
                if _base_offset(data) >= rest.end_offset:
                    # The replica's committed batches skip the range (compaction): it
                    # holds no record; only missing offsets may end that way.
                    accept_empty(segments, rest)
                    log.warning(
                        "%s: offsets %d-%d hold no record on broker %d (its log skips "
                        "them); %s now ends at %d",
                        partition,
                        rest.first_offset,
                        rest.end_offset - 1,
                        peer,
                        rest.segment.path,
                        rest.first_offset,
                    )
                    break
                piece = _below(data, rest.end_offset)
                rest = apply_patch(segments, rest, piece)
                self.stats.repaired_bytes += len(piece)
        finally:
            await connection.close()
        self.stats.repaired_ranges += 1
        log.warning(
            "%s: repaired offsets %d-%d in %s (bytes %d-%d) from broker %d's copy",
            partition,
            first,
            damaged.end_offset - 1,
            damaged.segment.path,
            damaged.position,
            damaged.position + size,
            peer,
        )
        return True

    async def _fetch(
        self, connection: AsyncConnection, partition: Partition, damaged: DamagedRange
    ) -> bytes:
        limit = PIECE_BYTES
        if not damaged.open_ended:
            limit = min(limit, damaged.end - damaged.position)
        request = build(
            FetchRequest,
            {
                "replica_id": -1,  # a consumer's read: any replica serves its committed data
                "max_wait": 0,
                "min_bytes": 1,
                "max_bytes": limit,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": partition.topic,
                        "partitions": [
                            {
                                "partition": partition.index,
                                "current_leader_epoch": -1,
                                "fetch_offset": damaged.first_offset,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": limit,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
        answer = await connection.request(request)
        for topic in answer.responses:
            for p in topic.partitions:
                if int(p.partition_index) != partition.index:
                    continue
                if p.error_code:
                    raise PeerError(f"{ErrorCode(p.error_code).name}")
                records = bytes(p.records) if p.records else b""
                # A piece ends at a batch boundary and inside the range.
                return _within(whole_batches(records), limit)
        raise PeerError("the answer does not name the partition")


def _base_offset(records: bytes) -> int:
    return int.from_bytes(records[:8], "big", signed=True)


def _below(records: bytes, end_offset: int) -> bytes:
    """The whole batches of ``records`` whose offsets end below ``end_offset``: a range
    running to the end of its file is fetched a full piece at a time, and the answer may
    go on into the next segment's offsets."""
    position = 0
    view = memoryview(records)
    while position + 61 <= len(records):
        size = 12 + int.from_bytes(view[position + 8 : position + 12], "big")
        base = int.from_bytes(view[position : position + 8], "big", signed=True)
        last = base + int.from_bytes(view[position + 23 : position + 27], "big", signed=True)
        if last >= end_offset:
            break
        position += size
    return records[:position] if position else records


def _within(records: bytes, limit: int) -> bytes:
    """The whole batches of ``records`` that fit in ``limit`` bytes; all of them when even
    the first does not (the checks then refuse it with the reason)."""
    position = 0
    view = memoryview(records)
    while position < len(records):
        size = 12 + int.from_bytes(view[position + 8 : position + 12], "big")
        if position + size > limit:
            break
        position += size
    return records[:position] if position else records
