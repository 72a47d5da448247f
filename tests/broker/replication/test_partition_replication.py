"""Partition's replication rules (Kafka's Partition/Replica): the high watermark over the
ISR, follower progress, ISR changes through ``alter_isr``, acks=all waits, leadership."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from tests.local.conftest import make_batch
from tierlog.broker.coordination.api import PartitionState
from tierlog.broker.replication.partition import (
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    REQUEST_TIMED_OUT,
    Partition,
    PartitionError,
)
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.remote.unified_log import UnifiedLog
from tierlog.util.clock import ManualClock

ME, F2, F3 = 1, 2, 3
LAG_MS = 300


class FakeController:
    """``alter_isr``: records each proposal and answers it when the test says so."""

    def __init__(self) -> None:
        self.proposals: list[list[int]] = []
        self.answers: list[asyncio.Future[PartitionState | None]] = []

    async def __call__(self, partition: Partition, isr: list[int]) -> PartitionState | None:
        self.proposals.append(isr)
        answer: asyncio.Future[PartitionState | None] = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        return await answer

    def accept(self, partition: Partition) -> None:
        state = partition.state
        accepted = replace(
            state, isr=list(self.proposals[-1]), partition_epoch=state.partition_epoch + 1
        )
        self.answers[-1].set_result(accepted)

    def refuse(self) -> None:
        self.answers[-1].set_result(None)


def make(
    tmp_path: Path,
    state: PartitionState,
    replicas: list[int],
    *,
    records: int = 0,
    min_isr: int = 1,
    clock: ManualClock | None = None,
) -> tuple[Partition, ManualClock, FakeController]:
    clock = clock or ManualClock()
    log = Log(tmp_path / "t-0", LogConfig(min_insync_replicas=min_isr), clock=clock)
    partition = Partition(
        "t",
        uuid.uuid4(),
        0,
        UnifiedLog(log, None, "t", 0),
        state,
        ME,
        replicas=replicas,
    )
    controller = FakeController()
    partition.alter_isr = controller
    for _ in range(records):
        partition.append(make_batch(1), acks=1, min_insync_replicas=1)
    return partition, clock, controller


def fetch(p: Partition, replica: int, offset: int) -> int:
    """A follower's fetch at ``offset``; returns the high watermark answered."""
    return p.fetch_for_follower(replica, offset, 1 << 20, p.leader_epoch).high_watermark


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def test_the_high_watermark_is_the_smallest_isr_log_end_and_only_rises(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(ME, 0, [ME, F2, F3]), [ME, F2, F3], records=5)
        assert p.high_watermark == 0  # followers' log ends unknown
        fetch(p, F2, 5)
        assert p.high_watermark == 0  # F3 still unknown
        assert fetch(p, F3, 3) == 3
        fetch(p, F3, 5)
        assert p.high_watermark == 5
        # A follower fetching from further back (it truncated) does not lower it.
        fetch(p, F3, 2)
        assert p.high_watermark == 5
        records = p.fetch_for_follower(F3, 2, 1 << 20, 0).records
        assert records is not None and records.size > 0  # followers read past the HW

    asyncio.run(scenario())


def test_follower_reads_go_to_the_log_end_consumer_reads_to_the_high_watermark(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2], records=3)
        follower = p.fetch_for_follower(F2, 0, 1 << 20, 0).records
        consumer = (await p.read(0, 1 << 20, read_committed=False, min_one_batch=True)).records
        assert follower is not None and follower.size == 3 * len(make_batch(1))
        assert consumer is None  # nothing committed yet

    asyncio.run(scenario())


def test_caught_up_is_kafkas_rule(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, clock, _ = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2], records=2)
        start = clock.milliseconds()
        progress = p.follower(F2)
        assert progress is not None and progress.last_caught_up_time_ms == start  # ISR: now
        clock.advance(100)
        fetch(p, F2, 1)  # behind the leader's end (2): not caught up by this fetch
        assert progress.last_caught_up_time_ms == start
        t_fetch = clock.milliseconds()
        p.append(make_batch(1), acks=1, min_insync_replicas=1)
        clock.advance(100)
        # Behind again (3), but at the leader's end as of the previous fetch (2): caught
        # up as of that fetch's time.
        fetch(p, F2, 2)
        assert progress.last_caught_up_time_ms == t_fetch
        clock.advance(100)
        fetch(p, F2, 3)  # at the end: caught up now
        assert progress.last_caught_up_time_ms == clock.milliseconds()

    asyncio.run(scenario())


def test_an_unknown_replica_or_a_follower_partition_refuses_follower_fetches(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2])
        with pytest.raises(PartitionError) as caught:
            fetch(p, 7, 0)
        assert caught.value.code == NOT_LEADER_OR_FOLLOWER
        p.make_follower(PartitionState(F2, 1, [F2, ME]), [ME, F2])
        with pytest.raises(PartitionError) as caught:
            p.fetch_for_follower(F2, 0, 1 << 20, 1)
        assert caught.value.code == NOT_LEADER_OR_FOLLOWER

    asyncio.run(scenario())


def test_a_caught_up_follower_is_proposed_for_the_isr_and_holds_the_hw_meanwhile(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        p, _, controller = make(tmp_path, PartitionState(ME, 0, [ME]), [ME, F2], records=4)
        assert p.high_watermark == 4  # alone in the ISR
        fetch(p, F2, 2)  # below the high watermark: not in sync yet
        assert controller.proposals == []
        fetch(p, F2, 4)
        await settle()
        assert controller.proposals == [[ME, F2]]
        assert p.pending_isr == [ME, F2] and p.maximal_isr() == [ME, F2]
        # While the expansion is in flight F2 already holds the high watermark back.
        p.append(make_batch(1), acks=1, min_insync_replicas=1)
        assert p.high_watermark == 4
        controller.accept(p)
        await p.settle_isr()
        assert p.state.isr == [ME, F2] and p.state.partition_epoch == 1
        assert p.pending_isr is None
        fetch(p, F2, 5)
        assert p.high_watermark == 5

    asyncio.run(scenario())


def test_a_follower_must_reach_the_start_of_the_leaders_epoch_to_join(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, controller = make(tmp_path, PartitionState(ME, 0, [ME]), [ME, F2], records=3)
        # New epoch at log end 3, then the high watermark is 3 too: a follower at 2 is
        # behind both, one at 3 is not.
        assert p.make_leader(PartitionState(ME, 1, [ME]), [ME, F2])
        fetch(p, F2, 2)
        await settle()
        assert controller.proposals == []
        fetch(p, F2, 3)
        await settle()
        assert controller.proposals == [[ME, F2]]
        controller.refuse()
        await p.settle_isr()

    asyncio.run(scenario())


def test_the_state_in_force_delivered_again_keeps_the_change_in_flight(tmp_path: Path) -> None:
    async def scenario() -> None:
        state = PartitionState(ME, 0, [ME])
        p, _, controller = make(tmp_path, state, [ME, F2], records=1)
        fetch(p, F2, 1)
        await settle()
        assert p.make_leader(replace(state, isr=[ME]), [ME, F2])  # same version again
        assert p.pending_isr == [ME, F2]
        controller.accept(p)
        await p.settle_isr()
        assert p.state.isr == [ME, F2]

    asyncio.run(scenario())


def test_one_isr_change_in_flight_and_a_refusal_clears_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, controller = make(tmp_path, PartitionState(ME, 0, [ME]), [ME, F2, F3], records=1)
        fetch(p, F2, 1)
        fetch(p, F3, 1)
        await settle()
        assert controller.proposals == [[ME, F2]]  # F3 waits for the answer
        assert p.maybe_shrink_isr(p.now_ms() + 10 * LAG_MS, LAG_MS) is None
        controller.refuse()
        await p.settle_isr()
        assert p.pending_isr is None and p.state.isr == [ME]
        fetch(p, F3, 1)
        await settle()
        assert controller.proposals[-1] == [ME, F3]
        controller.refuse()
        await p.settle_isr()

    asyncio.run(scenario())


def test_a_lagging_follower_is_proposed_out_and_counts_until_removed(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, clock, controller = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2])
        p.append(make_batch(1), acks=1, min_insync_replicas=1)
        fetch(p, F2, 1)
        assert p.high_watermark == 1
        p.append(make_batch(1), acks=1, min_insync_replicas=1)
        clock.advance(LAG_MS)
        assert p.maybe_shrink_isr(clock.milliseconds(), LAG_MS) is None  # not yet past
        clock.advance(1)
        assert p.maybe_shrink_isr(clock.milliseconds(), LAG_MS) == [ME]
        await settle()
        assert controller.proposals == [[ME]]
        # Until the controller answers, F2 still holds the high watermark (maximal ISR).
        assert p.maximal_isr() == [ME, F2]
        p.append(make_batch(1), acks=1, min_insync_replicas=1)
        assert p.high_watermark == 1
        controller.accept(p)
        await p.settle_isr()
        assert p.state.isr == [ME]
        assert p.high_watermark == 3

    asyncio.run(scenario())


def test_a_follower_at_the_log_end_is_never_lagging(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, clock, controller = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2])
        fetch(p, F2, 0)  # an idle partition: the follower is at the end
        clock.advance(10 * LAG_MS)
        assert p.maybe_shrink_isr(clock.milliseconds(), LAG_MS) is None
        assert controller.proposals == []

    asyncio.run(scenario())


def test_acks_all_waits_for_the_isr(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2], min_isr=2)
        info = p.append(make_batch(2), acks=-1, min_insync_replicas=2)
        wait = asyncio.create_task(p.wait_for_replication(info.last_offset + 1, 5))
        await settle()
        assert not wait.done()
        fetch(p, F2, 1)  # half-way: not yet
        await settle()
        assert not wait.done()
        fetch(p, F2, 2)
        assert await asyncio.wait_for(wait, 1) == 0

    asyncio.run(scenario())


def test_acks_all_times_out(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2])
        p.append(make_batch(1), acks=-1, min_insync_replicas=1)
        assert await p.wait_for_replication(1, 0.05) == REQUEST_TIMED_OUT

    asyncio.run(scenario())


def test_acks_all_fails_when_the_isr_shrinks_below_min_insync(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, clock, controller = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2], min_isr=2)
        p.append(make_batch(1), acks=-1, min_insync_replicas=2)
        wait = asyncio.create_task(p.wait_for_replication(1, 5))
        clock.advance(LAG_MS + 1)
        p.maybe_shrink_isr(clock.milliseconds(), LAG_MS)
        await settle()
        controller.accept(p)
        # The shrink moves the high watermark past the batch, with too small an ISR.
        assert await asyncio.wait_for(wait, 1) == NOT_ENOUGH_REPLICAS_AFTER_APPEND

    asyncio.run(scenario())


def test_acks_all_fails_when_leadership_moves(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2])
        p.append(make_batch(1), acks=-1, min_insync_replicas=1)
        wait = asyncio.create_task(p.wait_for_replication(1, 5))
        await settle()
        assert p.make_follower(PartitionState(F2, 1, [F2]), [ME, F2])
        assert await asyncio.wait_for(wait, 1) == NOT_LEADER_OR_FOLLOWER

    asyncio.run(scenario())


def test_single_node_acks_all_is_met_by_the_append(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(ME, 0, [ME]), [ME])
        info = p.append(make_batch(3), acks=-1, min_insync_replicas=1)
        assert p.high_watermark == info.last_offset + 1
        assert await p.wait_for_replication(info.last_offset + 1, 0) == 0

    asyncio.run(scenario())


def test_older_states_are_ignored(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, _ = make(
            tmp_path, PartitionState(ME, 3, [ME, F2], partition_epoch=5), [ME, F2], records=1
        )
        assert not p.make_follower(PartitionState(F2, 2, [F2]), [ME, F2])
        assert not p.make_leader(PartitionState(ME, 2, [ME]), [ME, F2])
        # Same leader epoch, older partition epoch (a stale ISR): ignored too.
        assert not p.make_leader(PartitionState(ME, 3, [ME], partition_epoch=4), [ME, F2])
        assert p.is_leader and p.state.isr == [ME, F2] and p.leader_epoch == 3
        assert p.make_leader(PartitionState(ME, 3, [ME], partition_epoch=6), [ME, F2])
        assert p.state.isr == [ME]

    asyncio.run(scenario())


def test_make_leader_starts_the_epoch_at_the_log_end_and_keeps_the_hw(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(F2, 0, [F2, ME]), [ME, F2])
        p.append_as_follower(make_batch(2, partition_leader_epoch=0))
        p.append_as_follower(make_batch(1, base_offset=2, partition_leader_epoch=0))
        assert p.update_follower_high_watermark(2) == 2
        assert p.make_leader(PartitionState(ME, 1, [ME, F2]), [ME, F2])
        cache = p.local.leader_epoch_cache
        assert cache.entries[-1].epoch == 1 and cache.entries[-1].start_offset == 3
        assert p.end_offset_for_epoch(0, 1) == (0, 3)  # where epoch 0 ended
        # The new leader does not know F2's log end: the high watermark stays.
        assert p.high_watermark == 2
        fetch(p, F2, 3)
        assert p.high_watermark == 3

    asyncio.run(scenario())


def test_a_follower_appends_as_is_and_bounds_the_hw_by_its_log_end(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(F2, 4, [F2, ME]), [ME, F2])
        batch = make_batch(3, base_offset=0, partition_leader_epoch=4)
        info = p.append_as_follower(batch)
        assert (info.first_offset, info.last_offset) == (0, 2)
        assert p.local.leader_epoch_cache.latest_epoch == 4
        assert p.update_follower_high_watermark(10) == 3  # own log end
        assert p.update_follower_high_watermark(1) == 1  # the leader's
        with pytest.raises(PartitionError) as caught:
            p.append(make_batch(1), acks=1, min_insync_replicas=1)
        assert caught.value.code == NOT_LEADER_OR_FOLLOWER

    asyncio.run(scenario())


def test_becoming_follower_wakes_long_polls(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2])
        consumer, follower = p.waiter(), p.waiter(log_end=True)
        p.make_follower(PartitionState(F2, 1, [F2, ME]), [ME, F2])
        await asyncio.wait_for(asyncio.gather(consumer, follower), 1)

    asyncio.run(scenario())


def test_an_append_wakes_follower_long_polls_only(tmp_path: Path) -> None:
    async def scenario() -> None:
        p, _, _ = make(tmp_path, PartitionState(ME, 0, [ME, F2]), [ME, F2])
        consumer, follower = p.waiter(), p.waiter(log_end=True)
        p.append(make_batch(1), acks=1, min_insync_replicas=1)
        await asyncio.wait_for(follower, 1)
        assert not consumer.done()  # the high watermark did not move
        consumer.cancel()

    asyncio.run(scenario())
