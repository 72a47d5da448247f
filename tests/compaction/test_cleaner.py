"""The log cleaner against a model of what compaction must keep.

Random keys, values and tombstones over many segments, cleaned (in several passes, with
appends between them) and read from offset 0: every key's last value is there, in order,
with its original offset; superseded values are gone from the cleaned part; tombstones
stay for delete.retention.ms after their first pass and go after.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from pathlib import Path

import pytest

from tierlog.compaction.cleaner import CHECKPOINT_FILE, CleanerConfig, LogCleaner
from tierlog.local.checkpoint import read_offsets
from tierlog.local.log import Log
from tierlog.local.log_manager import LogManager
from tierlog.records.header import Attr, Compression, iter_batches
from tierlog.util.clock import ManualClock

from .conftest import KeyValue, append, compacted, read_all

HOUR = 3_600_000


def _check_against_model(log: Log, written: dict[int, KeyValue], map_end: int) -> None:
    """What any compacted log must satisfy (module docstring), ``map_end`` being the end
    of the part the cleaner has seen."""
    records = read_all(log)
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets must rise"
    for r in records:
        assert written[r.offset] == (r.key, r.value), f"record {r.offset} changed"
    latest: dict[bytes, int] = {}
    for offset in sorted(written):
        latest[written[offset][0]] = offset
    present = set(offsets)
    for key, offset in latest.items():
        value = written[offset][1]
        if value is not None:
            assert offset in present, f"{key!r}'s last value at {offset} is gone"
    per_key_cleaned: dict[bytes, list[int]] = defaultdict(list)
    for r in records:
        if r.offset < map_end:
            assert r.key is not None
            per_key_cleaned[r.key].append(r.offset)
    for key, kept in per_key_cleaned.items():
        assert len(kept) == 1, f"{key!r} kept {kept} in the cleaned part"


@pytest.mark.parametrize("compression_type", ["producer", "zstd"])
@pytest.mark.parametrize("seed", range(6))
def test_cleaned_log_keeps_the_last_value_of_every_key(
    seed: int,
    compression_type: str,
    manager: LogManager,
    cleaner: LogCleaner,
    clock: ManualClock,
) -> None:
    """Also on a zstd topic, whose batches the leader recompressed (issue 23 item 5): the
    cleaner keeps each batch's codec, so the cleaned log stays zstd."""
    rnd = random.Random(seed)
    codec = rnd.choice(list(Compression))
    log = manager.get_or_create_log(
        "t", 0, compacted(delete_retention_ms=HOUR, compression_type=compression_type)
    )
    written: dict[int, KeyValue] = {}
    keys = rnd.randrange(5, 200)
    for _round in range(4):
        for _ in range(rnd.randrange(20, 80)):
            items: list[KeyValue] = [
                (
                    b"key-%d" % rnd.randrange(keys),
                    None if rnd.random() < 0.15 else rnd.randbytes(rnd.randrange(0, 60)),
                )
                for _ in range(rnd.randrange(1, 8))
            ]
            first, _ = append(log, items, clock, codec)
            written.update({first + i: kv for i, kv in enumerate(items)})
            clock.advance(rnd.randrange(0, 1000))
        before = log.size
        while cleaner.clean_once():
            pass
        _check_against_model(log, written, cleaner.state.logs[("t", 0)].first_dirty)
        assert log.size <= before
    # Past the delete horizon every tombstone of the cleaned part goes.
    clock.advance(HOUR + 1)
    assert cleaner.clean_once()
    first_dirty = cleaner.state.logs[("t", 0)].first_dirty
    _check_against_model(log, written, first_dirty)
    assert not [r for r in read_all(log) if r.value is None and r.offset < first_dirty]
    if compression_type == "zstd":
        stored = {
            header.attributes & Attr.COMPRESSION_MASK
            for segment in log.segments
            for _, header in iter_batches(segment.path.read_bytes())
        }
        assert stored == {Compression.ZSTD}


def test_tombstones_stay_for_delete_retention_after_their_first_pass(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted(delete_retention_ms=HOUR))
    append(log, [(b"a", b"1"), (b"b", b"1")], clock)
    append(log, [(b"a", None)], clock)  # a tombstone for a
    log.roll()
    append(log, [(b"c", b"1")], clock)
    assert cleaner.clean_once()
    assert [(r.key, r.value) for r in read_all(log)] == [(b"b", b"1"), (b"a", None), (b"c", b"1")]
    clock.advance(HOUR - 1)
    cleaner.clean_once()
    assert (b"a", None) in [(r.key, r.value) for r in read_all(log)]
    clock.advance(2)
    assert cleaner.clean_once(), "a passed horizon makes the log due whatever its ratio"
    assert [(r.key, r.value) for r in read_all(log)] == [(b"b", b"1"), (b"c", b"1")]


def test_offsets_and_the_log_end_do_not_change(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted())
    for i in range(200):
        append(log, [(b"k%d" % (i % 7), b"v%d" % i)], clock)
    end, start = log.log_end_offset, log.log_start_offset
    assert cleaner.clean_once()
    assert (log.log_start_offset, log.log_end_offset) == (start, end)
    survivors = read_all(log)
    assert len(survivors) <= 7 + len(log.active_segment.path.read_bytes())
    # Reads from an offset that was cleaned away start at the next record kept.
    gone = next(o for o in range(end) if o not in {r.offset for r in survivors})
    found = log.read(gone, 1 << 20)
    assert found is not None
    found.release()


def test_small_cleaned_segments_are_merged_up_to_segment_bytes(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted(segment_bytes=2048))
    for i in range(400):
        append(log, [(b"k%d" % (i % 5), b"x" * 20)], clock)
    segments_before = len(log.segments)
    assert segments_before > 5
    assert cleaner.clean_once()  # groups by the sizes before cleaning, as Kafka does
    append(log, [(b"k0", b"y")], clock)
    log.roll()
    assert cleaner.clean_once()  # now the small cleaned segments merge
    assert len(log.segments) < segments_before / 2
    assert all(s.size <= 2048 for s in log.segments)


def test_an_idempotent_producers_last_batch_survives_as_an_empty_batch(
    tmp_path: Path, manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted())
    producer = {"producer_id": 7, "producer_epoch": 0}
    append(log, [(b"a", b"1")], clock, base_sequence=0, **producer)
    _, last = append(log, [(b"a", b"2")], clock, base_sequence=1, **producer)
    append(log, [(b"a", b"3")], clock)  # supersedes the producer's records
    log.roll()
    assert cleaner.clean_once()
    kept = [h for s in log.segments for _, h in s.batches()]
    mine = [h for h in kept if h.producer_id == 7]
    assert len(mine) == 1 and mine[0].record_count == 0
    assert (mine[0].last_offset, mine[0].last_sequence) == (last, 1)
    manager.shutdown()
    reopened = LogManager([tmp_path / "logs"], clock=clock)
    reopened.startup()
    try:
        entry = reopened.get_log("t", 0).producer_state.last_entry(7)  # type: ignore[union-attr]
        assert entry is not None and entry.last_seq == 1
    finally:
        reopened.shutdown()


def test_min_compaction_lag_keeps_recent_segments_dirty(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted(min_compaction_lag_ms=HOUR))
    for i in range(300):
        append(log, [(b"k", b"v%d" % i)], clock)
    assert not cleaner.clean_once(), "every record is younger than the lag"
    clock.advance(HOUR + 1)
    assert cleaner.clean_once()


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log(
        "t", 0, compacted(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=HOUR)
    )
    for i in range(300):
        append(log, [(b"k%d" % i, b"v")], clock)
    assert cleaner.clean_once()  # first pass: all dirty, ratio 1.0
    for i in range(60):
        append(log, [(b"k%d" % i, b"w")], clock)
    log.roll()
    assert not cleaner.clean_once(), "dirty ratio below 0.99"
    clock.advance(HOUR + 1)
    assert cleaner.clean_once(), "max.compaction.lag.ms passed"


def test_max_compaction_lag_rolls_the_active_segment(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted(max_compaction_lag_ms=HOUR))
    append(log, [(b"k", b"1")], clock)
    clock.advance(HOUR + 1)
    append(log, [(b"k", b"2")], clock)
    assert len(log.segments) == 2


def test_the_dirtiest_log_is_cleaned_first(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    calm = manager.get_or_create_log("calm", 0, compacted())
    busy = manager.get_or_create_log("busy", 0, compacted())
    for i in range(200):
        append(calm, [(b"k%d" % i, b"v")], clock)
        append(busy, [(b"k%d" % (i % 3), b"v")], clock)
    for log in (calm, busy):
        log.roll()
    assert cleaner.clean_once() and cleaner.clean_once()
    for i in range(20):
        append(calm, [(b"k%d" % i, b"w")], clock)
        append(busy, [(b"k%d" % (i % 3), b"w")], clock)
    for log in (calm, busy):
        log.roll()
    ratios = {tp[0]: part.dirty_ratio for tp, part in cleaner.candidates()}
    assert ratios["busy"] > ratios["calm"]
    chosen = cleaner.choose()
    assert chosen is not None and chosen[0] == ("busy", 0)


def test_a_log_too_big_for_the_map_is_reported_and_the_others_are_cleaned(
    manager: LogManager, clock: ManualClock
) -> None:
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=20 * 50), clock=clock, workers=0)
    wide = manager.get_or_create_log("wide", 0, compacted(segment_bytes=1 << 20))
    narrow = manager.get_or_create_log("narrow", 0, compacted())
    append(wide, [(b"k%d" % i, b"v") for i in range(500)], clock)
    wide.roll()
    for i in range(100):
        append(narrow, [(b"k%d" % (i % 3), b"v")], clock)
    narrow.roll()
    cleaned = [cleaner.clean_once() for _ in range(3)]
    assert ("wide", 0) in cleaner.state.uncleanable
    assert "dedupe.buffer.size" in cleaner.state.uncleanable[("wide", 0)]
    assert cleaned.count(True) == 1
    assert cleaner.state.logs[("narrow", 0)].last is not None


def test_the_first_dirty_offset_survives_a_restart_in_kafkas_checkpoint(
    tmp_path: Path, manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted())
    for i in range(200):
        append(log, [(b"k%d" % (i % 9), b"v")], clock)
    assert cleaner.clean_once()
    first_dirty = cleaner.state.logs[("t", 0)].first_dirty
    path = tmp_path / "logs" / CHECKPOINT_FILE
    assert path.read_text().splitlines()[:3] == ["0", "1", f"t 0 {first_dirty}"]
    assert read_offsets(path) == {("t", 0): first_dirty}
    again = LogCleaner(manager, clock=clock, workers=0)
    assert again.state.logs[("t", 0)].first_dirty == first_dirty
    assert not again.clean_once(), "nothing new is dirty"


def test_a_segment_removed_while_cleaning_discards_the_pass(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted())
    for i in range(200):
        append(log, [(b"k%d" % (i % 4), b"v")], clock)
    chosen = cleaner.choose()
    assert chosen is not None
    tp, part = chosen
    from tierlog.compaction.segment_cleaner import clean

    result = clean(cleaner.job_for(tp, part))
    log.advance_log_start_offset(log.segments[1].base_offset)
    log.delete_old_segments()  # retention takes the first segment meanwhile
    before = read_all(log)
    assert cleaner.apply(tp, part, result) == 0
    assert cleaner.stats.stale_swaps == 1
    assert read_all(log) == before
    leftovers = [p.name for p in log.directory.iterdir() if ".cleaned" in p.name]
    assert leftovers == []


def test_remote_storage_topics_are_not_cleaned_locally(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted(remote_storage_enable="true"))
    for i in range(200):
        append(log, [(b"k", b"v%d" % i)], clock)
    assert not cleaner.clean_once()


def test_describe_reports_the_dirty_ratio_and_the_last_pass(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted())
    manager.get_or_create_log("plain", 0)  # not compacted: not described
    for i in range(200):
        append(log, [(b"k%d" % (i % 4), b"v")], clock)
    before = cleaner.describe()
    assert list(before) == [("t", 0)]
    assert before[("t", 0)]["dirty_ratio"] == 1.0 and before[("t", 0)]["last_clean"] is None
    assert cleaner.clean_once()
    after = cleaner.describe()[("t", 0)]
    assert after["dirty_ratio"] == 0.0
    last = after["last_clean"]
    assert isinstance(last, dict) and last["records_kept"] < last["records_read"]


def test_a_topic_created_again_is_cleaned_from_its_start(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted())
    for i in range(300):
        append(log, [(b"k%d" % (i % 3), b"v")], clock)
    assert cleaner.clean_once()
    assert cleaner.state.logs[("t", 0)].first_dirty > 200
    manager.delete_log("t", 0)
    again = manager.get_or_create_log("t", 0, compacted())
    for i in range(150):  # superseded below the old log's first dirty offset...
        append(again, [(b"k%d" % (i % 3), b"w")], clock)
    for i in range(300):  # ...and new keys above it
        append(again, [(b"u%d" % i, b"w")], clock)
    again.roll()
    assert cleaner.clean_once()
    assert len([r for r in read_all(again) if r.key.startswith(b"k")]) == 3


def test_stopping_the_cleaner_ends_a_pass_waited_for_by_another_thread(
    manager: LogManager, clock: ManualClock
) -> None:
    import asyncio
    import dataclasses
    import threading
    import time

    from tierlog.compaction.cleaner import CleanerStoppedError

    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=1 << 20), clock=clock, workers=1)
    log = manager.get_or_create_log("t", 0, compacted())
    for i in range(300):
        append(log, [(b"k%d" % (i % 5), b"v" * 50)], clock)
    chosen = cleaner.choose()
    assert chosen is not None
    job = dataclasses.replace(cleaner.job_for(*chosen), io_bytes_per_second=2000.0)  # slow
    outcome: list[BaseException | object] = []

    def wait_for_pass() -> None:
        try:
            outcome.append(cleaner.run_blocking(job))
        except BaseException as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait_for_pass)
    waiter.start()
    time.sleep(1)
    started = time.monotonic()
    asyncio.run(cleaner.stop())
    waiter.join(timeout=10)
    assert not waiter.is_alive(), "the waiting thread was left blocked"
    assert isinstance(outcome[0], CleanerStoppedError)
    assert time.monotonic() - started < 10


def test_a_new_thread_count_starts_tasks_or_lets_extra_ones_end(manager: LogManager) -> None:
    """log.cleaner.threads as a dynamic broker config (KIP-226): tasks are added at once;
    extra ones end after their current round, never cut short."""

    async def scenario() -> None:
        cleaner = LogCleaner(manager, CleanerConfig(threads=1, backoff_ms=10), workers=0)
        cleaner.start()

        def running() -> list[str]:
            return sorted(t.get_name() for t in asyncio.all_tasks() if "cleaner" in t.get_name())

        assert running() == ["log-cleaner-0"]
        cleaner.reconfigure(CleanerConfig(threads=3, backoff_ms=10, io_max_bytes_per_second=5.0))
        assert running() == ["log-cleaner-0", "log-cleaner-1", "log-cleaner-2"]
        assert cleaner.config.io_max_bytes_per_second == 5.0
        cleaner.reconfigure(CleanerConfig(threads=1, backoff_ms=10))
        for _ in range(200):
            if running() == ["log-cleaner-0"]:
                break
            await asyncio.sleep(0.01)
        assert running() == ["log-cleaner-0"]
        await cleaner.stop()

    asyncio.run(scenario())
