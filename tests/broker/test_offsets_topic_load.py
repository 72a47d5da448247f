"""Loading ``__consumer_offsets`` from a real log: ``read_batches`` hands the group
coordinator every batch, transaction markers included, so transactional offset commits
(KIP-98) come back committed, aborted or still pending."""

from __future__ import annotations

from pathlib import Path

from tests.broker.group.helpers import make_coordinator, run
from tierlog.broker.errors import error_code
from tierlog.broker.group import AppendError, GroupConfig, GroupCoordinator
from tierlog.broker.group.offsets_codec import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_offset_commit_value,
)
from tierlog.broker.offsets_topic import read_batches
from tierlog.local.log import Log
from tierlog.protocol.errors import ErrorCode as E
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.util.clock import ManualClock

GROUP = "g"


def _commit(topic: str, offset: int) -> Record:
    return Record(
        encode_key(OffsetCommitKey(GROUP, topic, 0)),
        encode_offset_commit_value(OffsetCommitValue(offset, -1, "", 1000)),
    )


class _Writer:
    """Appends batches at the offsets a leader would have given them."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def commits(self, *pairs: tuple[str, int], producer_id: int = -1) -> None:
        txn = producer_id >= 0
        batch = build_batch(
            [_commit(t, o) for t, o in pairs],
            base_offset=self.log.log_end_offset,
            producer_id=producer_id,
            producer_epoch=0 if txn else -1,
            transactional=txn,
            base_timestamp=1000,
        )
        self.log.append_as_follower(batch)

    def marker(self, producer_id: int, kind: ControlType) -> None:
        self.log.append_as_follower(
            build_control_batch(
                kind,
                producer_id=producer_id,
                producer_epoch=0,
                base_offset=self.log.log_end_offset,
                timestamp=1000,
            )
        )


def test_load_from_a_log_with_transaction_markers(tmp_path: Path) -> None:
    log = Log(tmp_path / "__consumer_offsets-0", clock=ManualClock())
    try:
        w = _Writer(log)
        w.commits(("a", 1), ("b", 1))  # plain OffsetCommit
        w.commits(("a", 10), ("c", 10), producer_id=1)
        w.commits(("b", 20), producer_id=2)
        w.commits(("c", 5))  # appended after producer 1's commit of c: wins
        w.commits(("d", 30), producer_id=3)  # never settled in the log
        w.marker(2, ControlType.ABORT)
        w.marker(1, ControlType.COMMIT)
        batches = list(read_batches(log, log.log_end_offset))
        assert sum(1 for header, _ in batches if header.is_control) == 2

        c = make_coordinator(partitions=[])
        partition = c.partition_for(GROUP)
        assert c.load_partition(partition, read_batches(log, log.log_end_offset)) == 1
        fetched = c.fetch_offsets(GROUP, None).partitions
        assert {tp: f.offset for tp, f in fetched.items()} == {
            ("a", 0): 10,
            ("b", 0): 1,
            ("c", 0): 5,
        }
        d = ("d", 0)
        assert c.fetch_offsets(GROUP, [d], require_stable=True).partitions[d].error == (
            E.unstable_offset_commit
        )
        w.marker(3, ControlType.COMMIT)
        c.complete_txn(partition, 3, True)
        assert c.fetch_offsets(GROUP, [d]).partitions[d].offset == 30

        # Reading only below an offset stops there (the marker of producer 1 is left out).
        again = make_coordinator(partitions=[])
        again.load_partition(partition, read_batches(log, batches[-1][0].base_offset))
        assert again.fetch_offsets(GROUP, [("a", 0)]).partitions[("a", 0)].offset == 1
    finally:
        log.close()


def test_txn_offset_commits_through_a_real_log(tmp_path: Path) -> None:
    log = Log(tmp_path / "__consumer_offsets-0", clock=ManualClock())

    async def append(partition: int, batch: bytes) -> None:
        del partition
        try:
            log.append(batch, 0, coordinator=True)
        except Exception as exc:
            raise AppendError(error_code(exc), str(exc)) from exc

    async def go() -> None:
        c = GroupCoordinator(append, config=GroupConfig(num_partitions=1), clock=ManualClock())
        c.load_partition(0, [])
        a, b = ("a", 0), ("b", 0)
        await c.commit_offsets(GROUP, "", -1, {a: (1, -1, ""), b: (2, -1, "")})
        ok = await c.txn_offset_commit(GROUP, 1, 0, "", -1, None, {a: (10, -1, "")})
        assert ok.error == E.none
        ok = await c.txn_offset_commit(GROUP, 2, 0, "", -1, None, {b: (20, -1, "")})
        assert ok.error == E.none
        log.append_marker(1, 0, 0, True, 0)
        c.complete_txn(0, 1, True)
        log.append_marker(2, 0, 0, False, 0)
        c.complete_txn(0, 2, False)
        # Producer 1 moves to epoch 1; a zombie with epoch 0 is fenced by the log.
        ok = await c.txn_offset_commit(GROUP, 1, 1, "", -1, None, {b: (30, -1, "")})
        assert ok.error == E.none
        fenced = await c.txn_offset_commit(GROUP, 1, 0, "", -1, None, {b: (99, -1, "")})
        assert fenced.error in (E.invalid_producer_epoch, E.producer_fenced)
        fetched = c.fetch_offsets(GROUP, [a, b], require_stable=True).partitions
        assert (fetched[a].offset, fetched[b].error) == (10, E.unstable_offset_commit)
        await c.close()

        fresh = GroupCoordinator(append, config=GroupConfig(num_partitions=1))
        fresh.load_partition(0, read_batches(log, log.log_end_offset))
        loaded = fresh.fetch_offsets(GROUP, [a, b], require_stable=True).partitions
        assert (loaded[a].offset, loaded[b].error) == (10, E.unstable_offset_commit)
        assert fresh.fetch_offsets(GROUP, [b]).partitions[b].offset == 2
        await fresh.close()

    try:
        run(go())
    finally:
        log.close()
