"""The coordinator's state machine with an in-memory store and marker recorder (unit
tests; the broker tests run it against real logs and clients)."""

from __future__ import annotations

import asyncio
import functools

import pytest

from tierlog.broker.txn.coordinator import TransactionCoordinator, TxnConfig
from tierlog.broker.txn.id_pattern import compile_id_pattern
from tierlog.broker.txn.log_codec import TxnLogValue, TxnState
from tierlog.protocol.errors import ErrorCode as E
from tierlog.util.clock import ManualClock

S = TxnState


class Store:
    """The coordinator's two outside effects, recorded: writes and marker sends."""

    def __init__(self) -> None:
        self.written: list[tuple[str, TxnLogValue | None]] = []
        self.markers: list[tuple[int, int, int, bool, frozenset[tuple[str, int]]]] = []
        self.fail_next: int = 0
        self.next_id = 1000

    async def write(self, partition, coordinator_epoch, transactional_id, value):
        await asyncio.sleep(0)
        if self.fail_next:
            code, self.fail_next = self.fail_next, 0
            return code
        self.written.append((transactional_id, value))
        return 0

    async def send_markers(self, pid, epoch, coordinator_epoch, commit, partitions, still):
        self.markers.append((pid, epoch, coordinator_epoch, commit, partitions))

    async def producer_id(self):
        self.next_id += 1
        return self.next_id


def bounded(test):
    """Run an async test body with ``asyncio.run``, failing it after 5 s."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        async def body():
            async with asyncio.timeout(5):
                await test(*args, **kwargs)

        asyncio.run(body())

    return run


@pytest.fixture
def store():
    return Store()


@pytest.fixture
def clock():
    return ManualClock()


def make(store, clock, partitions=1, **config):
    coordinator = TransactionCoordinator(
        store.write,
        store.send_markers,
        store.producer_id,
        TxnConfig(num_partitions=partitions, **config),
        clock=clock,
    )
    for p in range(partitions):
        coordinator.load_partition(p, 5, [])
    return coordinator


async def settle(coordinator):
    for _ in range(20):
        await asyncio.sleep(0)


@bounded
async def test_init_gives_epoch_0_then_bumps_it(store, clock):
    c = make(store, clock)
    first = await c.init_producer_id("tx", 60_000)
    assert (first.error, first.producer_epoch) == (0, 0)
    again = await c.init_producer_id("tx", 60_000)
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
    assert [v.state for _, v in store.written] == [S.EMPTY, S.EMPTY]


@bounded
async def test_timeouts_above_the_maximum_are_refused(store, clock):
    c = make(store, clock, max_timeout_ms=1000)
    assert (await c.init_producer_id("tx", 1001)).error == E.invalid_transaction_timeout
    assert (await c.init_producer_id("tx", 0)).error == E.invalid_transaction_timeout
    assert store.written == []


@bounded
async def test_not_loaded_and_loading_partitions_answer_so(store, clock):
    c = TransactionCoordinator(
        store.write, store.send_markers, store.producer_id, TxnConfig(num_partitions=1), clock=clock
    )
    assert (await c.init_producer_id("tx", 1000)).error == E.not_coordinator
    c.begin_loading(0)
    assert (await c.init_producer_id("tx", 1000)).error == E.coordinator_load_in_progress


@bounded
async def test_commit_writes_prepare_then_markers_then_complete(store, clock):
    c = make(store, clock)
    init = await c.init_producer_id("tx", 60_000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert await c.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)]) == 0
    assert await c.add_partitions("tx", pid, epoch, [("t", 1)]) == 0  # no new write
    assert c.verify("tx", pid, epoch, [("t", 0), ("u", 0)]) == {
        ("t", 0): 0,
        ("u", 0): E.invalid_txn_state,
    }
    assert await c.end_txn("tx", pid, epoch, commit=True) == 0
    await settle(c)
    assert store.markers == [(pid, epoch, 5, True, frozenset({("t", 0), ("t", 1)}))]
    states = [v.state for _, v in store.written]
    assert states == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert store.written[-1][1].partitions == ()
    # A retried commit is answered; an abort now is a state error.
    assert await c.end_txn("tx", pid, epoch, commit=True) == 0
    assert await c.end_txn("tx", pid, epoch, commit=False) == E.invalid_txn_state
    assert c.verify("tx", pid, epoch, [("t", 0)]) == {("t", 0): E.invalid_txn_state}


@bounded
async def test_a_failed_write_changes_nothing(store, clock):
    c = make(store, clock)
    init = await c.init_producer_id("tx", 60_000)
    store.fail_next = E.not_enough_replicas
    code = await c.add_partitions("tx", init.producer_id, init.producer_epoch, [("t", 0)])
    assert code == E.not_enough_replicas
    assert c.describe("tx")[1].state == S.EMPTY


@bounded
async def test_a_new_instance_fences_and_aborts_the_open_transaction(store, clock):
    c = make(store, clock)
    old = await c.init_producer_id("tx", 60_000)
    await c.add_partitions("tx", old.producer_id, old.producer_epoch, [("t", 0)])
    retry = await c.init_producer_id("tx", 60_000)
    assert retry.error == E.concurrent_transactions
    await settle(c)
    # The abort marker carries the bumped epoch, fencing the old instance's batches.
    assert store.markers == [(old.producer_id, 1, 5, False, frozenset({("t", 0)}))]
    new = await c.init_producer_id("tx", 60_000)
    assert (new.error, new.producer_epoch) == (0, 2)
    assert await c.end_txn("tx", old.producer_id, 0, commit=True) == E.producer_fenced
    assert (
        await c.add_partitions(
            "tx", old.producer_id, 0, [("t", 1)], fenced=E.invalid_producer_epoch
        )
        == E.invalid_producer_epoch
    )


@bounded
async def test_requests_during_a_write_are_concurrent(store, clock):
    c = make(store, clock)
    init = await c.init_producer_id("tx", 60_000)
    pid, epoch = init.producer_id, init.producer_epoch
    adding = asyncio.ensure_future(c.add_partitions("tx", pid, epoch, [("t", 0)]))
    await asyncio.sleep(0)  # the write is in flight
    assert await c.end_txn("tx", pid, epoch, commit=True) == E.concurrent_transactions
    assert await adding == 0


@bounded
async def test_expired_transactions_are_aborted_with_a_bumped_epoch(store, clock):
    c = make(store, clock)
    init = await c.init_producer_id("tx", 1000)
    await c.add_partitions("tx", init.producer_id, init.producer_epoch, [("t", 0)])
    assert await c.abort_timed_out() == 0
    clock.advance(1001)
    assert await c.abort_timed_out() == 1
    await settle(c)
    assert store.markers[-1][1:4] == (1, 5, False)
    assert c.describe("tx")[1].state == S.COMPLETE_ABORT
    assert (
        await c.end_txn("tx", init.producer_id, init.producer_epoch, commit=True)
        == E.producer_fenced
    )


@bounded
async def test_idle_ids_expire_with_a_tombstone(store, clock):
    c = make(store, clock, id_expiration_ms=5000)
    await c.init_producer_id("tx", 1000)
    clock.advance(4999)
    assert await c.expire_ids() == 0
    clock.advance(1)
    assert await c.expire_ids() == 1
    assert store.written[-1] == ("tx", None)
    assert c.describe("tx")[0] == E.transactional_id_not_found


@bounded
async def test_an_expiration_whose_write_raises_leaves_the_id_usable(store, clock):
    c = make(store, clock, id_expiration_ms=5000)
    await c.init_producer_id("tx", 1000)
    clock.advance(5000)

    async def broken(*args):
        raise OSError("disk gone")

    c.write = broken
    assert await c.expire_ids() == 0
    c.write = store.write
    # Not left pending (DEAD): the next request is served, not CONCURRENT_TRANSACTIONS.
    again = await c.init_producer_id("tx", 1000)
    assert (again.error, again.producer_epoch) == (0, 1)


@bounded
async def test_loading_a_prepared_transaction_finishes_it(store, clock):
    c = make(store, clock)
    c.load_partition(
        0,
        9,
        [
            ("gone", TxnLogValue(1, 0, 1000, S.EMPTY, (), 0, -1)),
            ("gone", None),
            ("tx", TxnLogValue(2, 4, 1000, S.PREPARE_ABORT, (("t", 3),), 0, 0)),
        ],
    )
    await settle(c)
    assert store.markers == [(2, 4, 9, False, frozenset({("t", 3)}))]
    assert c.describe("gone")[0] == E.transactional_id_not_found
    assert c.describe("tx")[1].state == S.COMPLETE_ABORT


@bounded
async def test_list_filters_by_state_and_producer(store, clock):
    c = make(store, clock)
    a = await c.init_producer_id("a", 1000)
    await c.init_producer_id("b", 1000)
    await c.add_partitions("a", a.producer_id, a.producer_epoch, [("t", 0)])
    assert [m.transactional_id for m in c.list()] == ["a", "b"]
    assert [m.transactional_id for m in c.list(frozenset({S.ONGOING}))] == ["a"]
    assert [m.transactional_id for m in c.list(producer_ids=frozenset({a.producer_id}))] == ["a"]
    # KIP-1152: the pattern matches whole ids, ANDed with the other filters.
    await c.init_producer_id("ab", 1000)
    assert [m.transactional_id for m in c.list(id_pattern=compile_id_pattern("a.*"))] == ["a", "ab"]
    assert [m.transactional_id for m in c.list(id_pattern=compile_id_pattern("b"))] == ["b"]
    ongoing_a = c.list(frozenset({S.ONGOING}), id_pattern=compile_id_pattern("a.*"))
    assert [m.transactional_id for m in ongoing_a] == ["a"]
