"""ReplicaFetcherManager against a real leader: two Partitions (replicas [1, 2]) on their
own logs in one process, the leader served by a real ``KafkaServer`` on 127.0.0.1 running
the real Fetch, OffsetForLeaderEpoch and Produce handlers, the follower replicating
through a ``ReplicaFetcherManager``."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kio.schema.fetch.v15.request import FetchRequest as FetchRequestV15
from kio.schema.produce.v9.request import ProduceRequest

from tests.local.conftest import make_batch
from tierlog.broker.authorization import RequestAuthorizer
from tierlog.broker.coordination.api import PartitionState
from tierlog.broker.handlers.fetch import handle_fetch
from tierlog.broker.handlers.offsets import handle_offset_for_leader_epoch
from tierlog.broker.handlers.produce import handle_produce
from tierlog.broker.network.server import KafkaServer
from tierlog.broker.replication.partition import Partition
from tierlog.broker.replication.replica_fetcher import ReplicaFetcherManager, whole_batches
from tierlog.broker.replication.replication_quota import UNLIMITED, ReplicationQuota
from tierlog.broker.services import Lifecycle
from tierlog.client.async_connection import AsyncConnection
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.protocol import ApiKey, Request
from tierlog.protocol.kio_build import build
from tierlog.remote.unified_log import UnifiedLog
from tierlog.util.clock import ManualClock

LEADER, FOLLOWER = 1, 2
TOPIC = "t"
TOPIC_ID = uuid.uuid4()
LAG_MS = 300


class Replicas:
    """What the handlers ask of ``services.replicas``, over one partition."""

    def __init__(self, partition: Partition) -> None:
        self.partitions = {(partition.topic, partition.index): partition}

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return TOPIC if topic_id == TOPIC_ID else None

    def append_records(
        self, topic: str, index: int, records: Any, acks: int
    ) -> tuple[Partition, Any]:
        partition = self.partitions[(topic, index)]
        return partition, partition.append(
            records, acks, partition.local.config.min_insync_replicas
        )


def make_partition(log: Log, broker_id: int, state: PartitionState) -> Partition:
    return Partition(
        TOPIC,
        TOPIC_ID,
        0,
        UnifiedLog(log, None, TOPIC, 0),
        replace(state, isr=list(state.isr)),
        broker_id,
        replicas=[LEADER, FOLLOWER],
    )


async def accept_isr(partition: Partition, isr: list[int]) -> PartitionState:
    """A controller that accepts every ISR change."""
    return replace(
        partition.state, isr=list(isr), partition_epoch=partition.state.partition_epoch + 1
    )


@dataclass
class Cluster:
    leader: Partition
    follower: Partition
    fetchers: ReplicaFetcherManager
    port: int

    async def connect(self) -> AsyncConnection:
        return await AsyncConnection.open("127.0.0.1", self.port, request_timeout=10)


@asynccontextmanager
async def cluster(
    tmp_path: Path,
    state: PartitionState,
    *,
    prepare: Callable[[Log, Log], None] | None = None,
    config: LogConfig | None = None,
    leader_quota: ReplicationQuota | None = None,
    follower_quota: ReplicationQuota | None = None,
) -> AsyncIterator[Cluster]:
    leader_log = Log(tmp_path / "leader" / f"{TOPIC}-0", config or LogConfig())
    follower_log = Log(tmp_path / "follower" / f"{TOPIC}-0", config or LogConfig())
    if prepare is not None:
        prepare(leader_log, follower_log)
    leader = make_partition(leader_log, LEADER, state)
    follower = make_partition(follower_log, FOLLOWER, state)
    leader.alter_isr = accept_isr
    services = SimpleNamespace(
        config={"fetch.max.bytes": 50 << 20, "replica.selector.class": ""},
        replicas=Replicas(leader),
        lifecycle=Lifecycle(),
        fetch_sessions=None,
        quotas=None,
        authz=RequestAuthorizer(),
        replication_quotas=SimpleNamespace(leader=leader_quota) if leader_quota else None,
    )
    handlers: dict[int, Callable[[Any, Request], Awaitable[Any]]] = {
        ApiKey.FETCH: handle_fetch,
        ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
        ApiKey.PRODUCE: handle_produce,
    }

    async def dispatch(request: Request) -> Any:
        return await handlers[request.api_key](services, request)

    server = KafkaServer(dispatch, "127.0.0.1", 0, 100 << 20)
    port = await server.start()
    await server.serve()
    fetchers = ReplicaFetcherManager(
        FOLLOWER,
        {LEADER: ("127.0.0.1", port)}.get,
        max_wait_ms=100,
        backoff_ms=50,
        request_timeout_s=5,
        quota=follower_quota,
    )
    try:
        yield Cluster(leader, follower, fetchers, port)
    finally:
        services.lifecycle.begin_stop()
        await fetchers.close()
        await server.stop()
        await leader.settle_isr()


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def segment_bytes(partition: Partition) -> bytes:
    return (partition.local.directory / f"{0:020d}.log").read_bytes()


def in_step(c: Cluster) -> bool:
    return (
        c.follower.local.log_end_offset == c.leader.local.log_end_offset
        and c.follower.high_watermark == c.leader.high_watermark
    )


def produce_request(batch: bytes, acks: int) -> Any:
    return build(
        ProduceRequest,
        {
            "transactional_id": None,
            "acks": acks,
            "timeout": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
        },
    )


def test_the_follower_becomes_a_byte_identical_copy(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with cluster(tmp_path, PartitionState(LEADER, 0, [LEADER, FOLLOWER])) as c:
            c.fetchers.add(c.follower, LEADER)
            for n in range(20):
                c.leader.append(make_batch(1 + n % 4, value_size=50 + n), 1, 1)
            await eventually(lambda: in_step(c) and c.leader.high_watermark == 50)
            assert segment_bytes(c.follower) == segment_bytes(c.leader)
            assert c.follower.local.leader_epoch_cache.entries == (
                c.leader.local.leader_epoch_cache.entries
            )
            progress = c.leader.follower(FOLLOWER)
            assert progress is not None and progress.log_end_offset == 50

    asyncio.run(scenario())


def test_acks_all_waits_for_the_follower_and_completes(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with cluster(tmp_path, PartitionState(LEADER, 0, [LEADER, FOLLOWER])) as c:
            connection = await c.connect()
            try:
                # Nobody fetches yet: acks=all cannot complete, acks=1 answers at once.
                answer = await connection.request(produce_request(make_batch(2), 1))
                assert answer.responses[0].partition_responses[0].error_code == 0
                pending = asyncio.create_task(
                    connection.request(produce_request(make_batch(3), -1))
                )
                await asyncio.sleep(0.2)
                assert not pending.done() and c.leader.high_watermark == 0
                c.fetchers.add(c.follower, LEADER)
                answer = await asyncio.wait_for(pending, 5)
                result = answer.responses[0].partition_responses[0]
                assert (result.error_code, result.base_offset) == (0, 2)
                # Answered only once the follower had the batch.
                assert c.follower.local.log_end_offset >= 5
                assert c.leader.high_watermark == 5
                await eventually(lambda: in_step(c))
            finally:
                await connection.close()

    asyncio.run(scenario())


def test_a_diverged_follower_truncates_to_the_leaders_epoch_end(tmp_path: Path) -> None:
    common = [make_batch(1, value_size=20 + n) for n in range(3)]

    def prepare(leader: Log, follower: Log) -> None:
        # Both have offsets 0-2 from epoch 0; the follower also has 3-5 from an epoch 1
        # leader that lost them, the leader (epoch 2) will have its own 3-4.
        for batch in common:
            leader.append(batch, leader_epoch=0)
            follower.append(batch, leader_epoch=0)
        for _ in range(3):
            follower.append(make_batch(1, key_prefix=b"lost"), leader_epoch=1)

    async def scenario() -> None:
        state = PartitionState(LEADER, 2, [LEADER, FOLLOWER])
        async with cluster(tmp_path, state, prepare=prepare) as c:
            for _ in range(2):
                c.leader.append(make_batch(1, key_prefix=b"kept"), 1, 1)
            assert [tuple(e) for e in c.leader.local.leader_epoch_cache.entries] == [
                (0, 0),
                (2, 3),
            ]
            assert c.follower.local.log_end_offset == 6
            truncations: list[int] = []
            truncate_to = c.follower.truncate_to

            def spy(offset: int) -> None:
                truncations.append(offset)
                truncate_to(offset)

            c.follower.truncate_to = spy  # type: ignore[method-assign]
            c.fetchers.add(c.follower, LEADER)
            await eventually(lambda: in_step(c) and c.leader.high_watermark == 5)
            # Cut where epoch 0 ends on the leader (3), not below: 0-2 stay.
            assert truncations == [3]
            assert segment_bytes(c.follower) == segment_bytes(c.leader)
            assert [tuple(e) for e in c.follower.local.leader_epoch_cache.entries] == [
                (0, 0),
                (2, 3),
            ]

    asyncio.run(scenario())


def test_truncation_takes_another_round_for_an_epoch_the_leader_never_had(
    tmp_path: Path,
) -> None:
    def prepare(leader: Log, follower: Log) -> None:
        # Leader: epoch 0 at 0-1, epoch 2 at 2-3 (epoch 4 starts at 4). Follower: epoch 0
        # at 0-1, then epochs 1 (at 2) and 3 (at 3-4) that the leader never had.
        for n in range(2):
            batch = make_batch(1, value_size=10 + n)
            leader.append(batch, leader_epoch=0)
            follower.append(batch, leader_epoch=0)
        for _ in range(2):
            leader.append(make_batch(1, key_prefix=b"two"), leader_epoch=2)
        follower.append(make_batch(1, key_prefix=b"one"), leader_epoch=1)
        for _ in range(2):
            follower.append(make_batch(1, key_prefix=b"three"), leader_epoch=3)

    async def scenario() -> None:
        state = PartitionState(LEADER, 4, [LEADER, FOLLOWER])
        async with cluster(tmp_path, state, prepare=prepare) as c:
            c.leader.append(make_batch(1, key_prefix=b"four"), 1, 1)
            truncations: list[int] = []
            truncate_to = c.follower.truncate_to

            def spy(offset: int) -> None:
                truncations.append(offset)
                truncate_to(offset)

            c.follower.truncate_to = spy  # type: ignore[method-assign]
            c.fetchers.add(c.follower, LEADER)
            await eventually(lambda: in_step(c) and c.leader.high_watermark == 5)
            # KIP-279: epoch 3 -> the leader's epoch 2 ends at 4, which the follower does
            # not have: cut where its epoch 1 ends (3), ask about 1 -> epoch 0 ends at 2.
            assert truncations == [3, 2]
            assert segment_bytes(c.follower) == segment_bytes(c.leader)

    asyncio.run(scenario())


def test_a_stopped_follower_leaves_the_isr_and_rejoins(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with cluster(tmp_path, PartitionState(LEADER, 0, [LEADER, FOLLOWER])) as c:
            leader = c.leader

            async def isr_expiration() -> None:  # the broker's periodic task
                while True:
                    await asyncio.sleep(LAG_MS / 2000)
                    leader.maybe_shrink_isr(leader.now_ms(), LAG_MS)

            expiration = asyncio.create_task(isr_expiration())
            try:
                c.fetchers.add(c.follower, LEADER)
                leader.append(make_batch(1), 1, 1)
                await eventually(lambda: in_step(c) and leader.high_watermark == 1)
                c.fetchers.remove(c.follower)
                info = leader.append(make_batch(2), -1, 1)
                waited = asyncio.create_task(leader.wait_for_replication(info.last_offset + 1, 5))
                started = time.monotonic()
                await eventually(lambda: leader.state.isr == [LEADER])
                assert time.monotonic() - started >= LAG_MS / 1000 * 0.8
                # Without the follower the high watermark is the leader's log end.
                assert await asyncio.wait_for(waited, 1) == 0
                assert leader.high_watermark == 3 and leader.state.partition_epoch == 1
                c.fetchers.add(c.follower, LEADER)
                await eventually(lambda: leader.state.isr == [LEADER, FOLLOWER])
                assert leader.state.partition_epoch == 2
                await eventually(lambda: in_step(c))
                assert segment_bytes(c.follower) == segment_bytes(leader)
            finally:
                expiration.cancel()

    asyncio.run(scenario())


def test_a_follower_behind_the_leaders_log_start_restarts_there(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with cluster(tmp_path, PartitionState(LEADER, 0, [LEADER])) as c:
            for _ in range(4):
                c.leader.append(make_batch(1), 1, 1)
            assert await c.leader.delete_records(3) == 3
            c.fetchers.add(c.follower, LEADER)
            await eventually(lambda: c.follower.local.log_end_offset == 4)
            assert c.follower.local.log_start_offset == 3

    asyncio.run(scenario())


def test_delete_records_on_the_leader_reaches_the_follower(tmp_path: Path) -> None:
    """Else a later leader would serve records a client deleted."""

    async def scenario() -> None:
        async with cluster(tmp_path, PartitionState(LEADER, 0, [LEADER, FOLLOWER])) as c:
            c.fetchers.add(c.follower, LEADER)
            for _ in range(10):
                c.leader.append(make_batch(5), 1, 1)
            await eventually(lambda: in_step(c) and c.leader.high_watermark == 50)
            assert c.follower.local.log_start_offset == 0
            assert await c.leader.delete_records(30) == 30
            await eventually(lambda: c.follower.local.log_start_offset == 30)
            assert c.follower.log.earliest_offset() == 30

    asyncio.run(scenario())


def test_a_v15_fetch_names_the_follower_in_replica_state(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with cluster(tmp_path, PartitionState(LEADER, 0, [LEADER, FOLLOWER])) as c:
            c.leader.append(make_batch(3), 1, 1)
            request = build(
                FetchRequestV15,
                {
                    "replica_state": {"replica_id": FOLLOWER, "replica_epoch": -1},
                    "max_wait": 0,
                    "min_bytes": 0,
                    "max_bytes": 1 << 20,
                    "topics": [
                        {
                            "topic_id": TOPIC_ID,
                            "partitions": [
                                {
                                    "partition": 0,
                                    "current_leader_epoch": 0,
                                    "fetch_offset": 3,
                                    "partition_max_bytes": 1 << 20,
                                }
                            ],
                        }
                    ],
                    "forgotten_topics_data": [],
                },
            )
            connection = await c.connect()
            try:
                answer = await connection.request(request)
            finally:
                await connection.close()
            data = answer.responses[0].partitions[0]
            assert data.error_code == 0 and data.high_watermark == 3
            progress = c.leader.follower(FOLLOWER)
            assert progress is not None and progress.log_end_offset == 3

    asyncio.run(scenario())


def test_whole_batches_drops_a_partial_batch_at_the_end() -> None:
    a, b = make_batch(2), make_batch(3)
    assert whole_batches(a + b) == a + b
    assert whole_batches(a + b[:-1]) == a
    assert whole_batches(a[:10]) == b""


def test_a_closed_manager_starts_no_fetcher(tmp_path: Path) -> None:
    """A cluster change that arrives while the broker stops must not start a fetcher on
    logs being closed (it kept a stopping broker alive, retrying on a closed log)."""

    async def scenario() -> None:
        async with cluster(tmp_path, PartitionState(LEADER, 0, [LEADER, FOLLOWER])) as c:
            await c.fetchers.close()
            c.fetchers.add(c.follower, LEADER)
            assert c.fetchers.leader_of(c.follower) is None
            c.leader.append(make_batch(3), 1, 1)
            await asyncio.sleep(0.3)
            assert c.follower.local.log_end_offset == 0

    asyncio.run(scenario())


# -- replication throttles (KIP-73) ------------------------------------------------------------

RATE = 4000  # bytes per second of the manual clocks below
BATCH = 500  # about the size of one batch appended below


def fill(partition: Partition, batches: int) -> None:
    for n in range(batches):
        partition.append(make_batch(1, value_size=BATCH - 80 + n % 3), 1, 1)


def local_bytes(partition: Partition) -> int:
    return partition.local.size


def test_a_follower_quota_holds_a_lagging_follower_to_its_credit(tmp_path: Path) -> None:
    clock = ManualClock()
    quota = ReplicationQuota(RATE, clock)
    config = LogConfig.from_props({"follower.replication.throttled.replicas": f"0:{FOLLOWER}"})

    async def scenario() -> None:
        # The follower is outside the ISR: it is throttled until it catches up.
        async with cluster(
            tmp_path, PartitionState(LEADER, 0, [LEADER]), config=config, follower_quota=quota
        ) as c:
            fill(c.leader, 40)  # ~20 kB: five seconds of the rate
            c.fetchers.add(c.follower, LEADER)
            for second in (1, 2, 3):
                clock.advance(1000)  # one second's credit
                await eventually(lambda s=second: quota.bytes_total >= (s - 1) * RATE + 1)
                await eventually(lambda s=second: local_bytes(c.follower) > (s - 1) * RATE)
                # Never more than the credit so far, plus one batch past it.
                assert quota.bytes_total <= second * RATE + BATCH
                assert local_bytes(c.follower) <= second * RATE + BATCH
            assert c.follower.local.log_end_offset < c.leader.local.log_end_offset
            # Unthrottled now (the rate removed, as --verify does): it catches up at once.
            quota.set_rate(UNLIMITED)
            await eventually(lambda: in_step(c))
            assert segment_bytes(c.follower) == segment_bytes(c.leader)

    asyncio.run(scenario())


def test_a_leader_quota_holds_an_out_of_sync_follower_not_an_isr_member(tmp_path: Path) -> None:
    clock = ManualClock()
    quota = ReplicationQuota(RATE, clock)
    config = LogConfig.from_props({"leader.replication.throttled.replicas": f"0:{LEADER}"})

    async def scenario() -> None:
        async with cluster(
            tmp_path, PartitionState(LEADER, 0, [LEADER]), config=config, leader_quota=quota
        ) as c:
            fill(c.leader, 40)
            c.fetchers.add(c.follower, LEADER)
            progress = c.leader.follower(FOLLOWER)
            assert progress is not None
            # No credit yet: the leader answers empty, and records the follower's fetches.
            await eventually(lambda: progress.log_end_offset == 0)
            assert local_bytes(c.follower) == 0
            clock.advance(1000)
            await eventually(lambda: local_bytes(c.follower) > 0)
            got = local_bytes(c.follower)
            assert got <= RATE + BATCH
            # Later fetches come and go without more bytes (the credit is spent).
            seen = progress.last_fetch_time_ms
            await eventually(lambda: progress.last_fetch_time_ms > seen + 150)
            assert local_bytes(c.follower) == got
            # An ISR member is never throttled (Kafka's shouldLeaderThrottle): it catches up.
            c.leader.state = replace(c.leader.state, isr=[LEADER, FOLLOWER])
            await eventually(lambda: c.follower.local.log_end_offset == 40)
            assert segment_bytes(c.follower) == segment_bytes(c.leader)

    asyncio.run(scenario())
