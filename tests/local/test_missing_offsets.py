"""Issue 20, items 1 and 2: damage below the recovery point and segment files gone are
marked and reported at load, never truncated into deletion and never skipped silently.

Each test stops the log the way a broker does (a clean close: the recovery point is then
the log end, as the log manager checkpoints it) and reopens it with those checkpoints.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tierlog.local.errors import CorruptSegmentError
from tierlog.local.log import Log
from tierlog.records.header import parse_header

from .conftest import T0, LogFactory, crash, make_batch, with_offsets

SEGMENT_BYTES = 1200


def fill(lg: Log, batches: int, epoch: int = 0) -> None:
    """Append batches of 3 records (~250 bytes, four to a segment)."""
    for i in range(batches):
        lg.append(make_batch(3, value_size=50, base_timestamp=T0 + i), leader_epoch=epoch)


def stop(lg: Log) -> dict[str, int]:
    """A clean stop; returns the checkpoints a restart reads."""
    lg.close()
    return {
        "recovery_point": lg.recovery_point,
        "log_start_offset": lg.log_start_offset,
        "had_clean_shutdown": True,
    }


def first_offset(lg: Log, offset: int) -> int:
    """The base offset of the first batch a read at ``offset`` answers with."""
    found = lg.read(offset, 1 << 20)
    assert found is not None
    try:
        return parse_header(found.read()).base_offset
    finally:
        found.release()


def remove_segment(log_dir: Path, base: int) -> None:
    for path in log_dir.glob(f"{base:020d}.*"):
        path.unlink()


def errors(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)


@pytest.mark.parametrize("where", ["inside a batch", "at a batch boundary"])
def test_a_closed_segment_cut_while_stopped_keeps_every_later_segment(
    where: str, make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's case: a closed segment cut to half its size after a clean shutdown. The
    next start truncated it there and deleted every later segment (24 became 2): its
    offset index pointed past the cut, and recovering the segment meant truncating."""
    lg = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=200)
    fill(lg, 40)
    victim = lg.segments[3]
    batches = list(victim.batches())
    bases = [s.base_offset for s in lg.segments]
    next_base, end = bases[4], lg.log_end_offset
    checkpoints = stop(lg)
    if where == "inside a batch":
        cut_batch = 1
        os.truncate(victim.path, batches[1][0] + 30)
    else:
        cut_batch = 2
        os.truncate(victim.path, batches[2][0])
    lost = batches[cut_batch][1].base_offset
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=200, **checkpoints)
    assert [s.base_offset for s in again.segments] == bases
    assert again.log_end_offset == end and again.recovered_bytes_truncated == 0
    assert str(victim.path) in errors(caplog)
    for offset in (lost, next_base - 1):
        with pytest.raises(CorruptSegmentError) as raised:
            again.read(offset, 1 << 20)
        assert raised.value.code == 56  # KAFKA_STORAGE_ERROR: consumers wait, not skip
    # What is before the cut and every later segment are still served.
    assert first_offset(again, victim.base_offset) == victim.base_offset
    assert first_offset(again, next_base) == next_base
    assert first_offset(again, 0) == 0
    assert again.append(make_batch(1)).first_offset == end


def test_a_torn_last_batch_below_the_recovery_point_is_marked_not_truncated(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The recovery point says those bytes were flushed: cutting them would hand their
    offsets to new records (a replica still holding the originals would then differ)."""
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 10)
    active = lg.active_segment
    last_position, last = list(active.batches())[-1]
    end = lg.log_end_offset
    checkpoints = stop(lg)
    os.truncate(active.path, last_position + 40)
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, **checkpoints)
    assert again.log_end_offset == end
    assert again.recovered_bytes_truncated == 0
    assert os.path.getsize(active.path) == last_position + 40  # nothing cut
    assert again.active_segment.base_offset == end  # appends go on after the damage
    with pytest.raises(CorruptSegmentError):
        again.read(last.base_offset, 1 << 20)
    assert first_offset(again, active.base_offset) == active.base_offset
    assert again.append(make_batch(1)).first_offset == end
    assert first_offset(again, end) == end
    assert f"offsets {last.base_offset}-{end - 1} are missing" in errors(caplog)


def test_the_tail_past_the_recovery_point_is_still_truncated(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 6)
    lg.flush()
    recovery_point = lg.recovery_point
    fill(lg, 1)  # past the recovery point: never flushed
    active = lg.active_segment
    last_position, last = list(active.batches())[-1]
    crash(lg)
    os.truncate(active.path, last_position + 40)
    again = make_log(segment_bytes=SEGMENT_BYTES, recovery_point=recovery_point)
    assert again.log_end_offset == last.base_offset
    assert again.recovered_bytes_truncated == 40
    assert again.append(make_batch(1)).first_offset == last.base_offset


def test_a_deleted_closed_segment_is_reported_and_never_skipped(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's case: a segment deleted under a running broker was a silent gap after
    the restart: no log line, and a consumer jumped over its offsets."""
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 20)
    bases = [s.base_offset for s in lg.segments]
    gone, after = bases[2], bases[3]
    end = lg.log_end_offset
    checkpoints = stop(lg)
    remove_segment(log_dir, gone)
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, **checkpoints)
    assert f"offsets {gone}-{after - 1} are missing" in errors(caplog)
    assert again.log_end_offset == end and again.log_start_offset == 0
    # A consumer reading up to the gap gets what is before it, then an error at it.
    before = again.read(bases[1], 1 << 20)
    assert before is not None
    assert parse_header(before.read()).base_offset == bases[1]
    before.release()
    for offset in (gone, after - 1):
        with pytest.raises(CorruptSegmentError, match="missing"):
            again.read(offset, 1 << 20)
    assert first_offset(again, after) == after
    # Still reported after the next start.
    checkpoints = stop(again)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        third = make_log(segment_bytes=SEGMENT_BYTES, **checkpoints)
    with pytest.raises(CorruptSegmentError):
        third.read(gone, 1 << 20)


def test_a_deleted_first_segment_keeps_the_log_start(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 12)
    second = lg.segments[1].base_offset
    checkpoints = stop(lg)
    remove_segment(log_dir, 0)
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, **checkpoints)
    # The earliest offset does not move over acknowledged data without anyone saying so.
    assert again.log_start_offset == 0
    assert f"offsets 0-{second - 1} are missing" in errors(caplog)
    with pytest.raises(CorruptSegmentError):
        again.read(0, 1 << 20)
    assert first_offset(again, second) == second
    # DeleteRecords is the operator's way to give the range up.
    again.advance_log_start_offset(second)
    again.delete_old_segments()
    assert again.log_start_offset == second
    assert first_offset(again, second) == second


def test_a_deleted_active_segment_keeps_the_log_end(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 10)
    active = lg.active_segment.base_offset
    end = lg.log_end_offset
    checkpoints = stop(lg)
    remove_segment(log_dir, active)
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, **checkpoints)
    assert again.log_end_offset == end
    assert f"offsets {active}-{end - 1} are missing" in errors(caplog)
    with pytest.raises(CorruptSegmentError):
        again.read(active, 1 << 20)
    # New records never take the offsets of acknowledged ones.
    assert again.append(make_batch(1)).first_offset == end


def test_a_retention_pass_cut_short_by_a_crash_reports_nothing_missing(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Retention moves the epoch history (written at once) before it deletes segments,
    so a crash between the two cannot look like segments lost; the log-start checkpoint
    written after the pass is older then."""
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 12)
    lg.advance_log_start_offset(lg.segments[2].base_offset)

    class Killed(BaseException):
        pass

    real = lg._delete_segments

    def die_after_deleting(*args: object) -> None:
        real(*args)  # type: ignore[arg-type]
        raise Killed

    lg._delete_segments = die_after_deleting  # type: ignore[method-assign]
    with pytest.raises(Killed):
        lg.delete_old_segments()
    crash(lg)
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, recovery_point=0, log_start_offset=0)
    assert "missing" not in caplog.text
    assert again.log_start_offset == again.segments[0].base_offset


def test_a_compacted_topic_may_have_gaps_between_segments(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Compaction removes records, and a follower rolls at the gap it leaves: offsets that
    do not meet are normal there. The epoch history proves nothing either: compaction may
    remove the batch an epoch began at (tests/broker/test_log_cleaner.py restarts a
    cleaned log whose first segment was emptied that way)."""
    lg = make_log(cleanup_policy="compact")
    lg.append_as_follower(with_offsets(make_batch(3), 0))
    lg.roll(10)  # a follower whose next batch starts past a gap
    lg.append_as_follower(with_offsets(make_batch(3), 10))
    checkpoints = stop(lg)
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(cleanup_policy="compact", **checkpoints)
    assert "missing" not in caplog.text
    assert first_offset(again, 3) == 10


def test_a_gap_below_where_the_cleaner_has_been_is_not_missing(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A topic compacted once and switched to cleanup.policy=delete keeps compaction's gaps
    (the cleaner's checkpoint says how far it went); past that point offsets are dense."""
    lg = make_log(cleanup_policy="compact")
    lg.append_as_follower(with_offsets(make_batch(3), 0))
    lg.roll(10)
    lg.append_as_follower(with_offsets(make_batch(3), 10))
    lg.roll(20)
    lg.append_as_follower(with_offsets(make_batch(3), 20))
    checkpoints = stop(lg)
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(cleanup_policy="delete", cleaned_up_to=13, **checkpoints)
    assert "offsets 3-9" not in caplog.text
    assert "offsets 13-19 are missing" in errors(caplog)
    assert first_offset(again, 3) == 10


def test_a_follower_truncating_into_missing_offsets_ends_before_them(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 20)
    bases = [s.base_offset for s in lg.segments]
    gone = bases[2]
    checkpoints = stop(lg)
    remove_segment(log_dir, gone)
    again = make_log(segment_bytes=SEGMENT_BYTES, **checkpoints)
    again.truncate_to(gone + 2)  # its new leader's log diverged inside the gap
    assert again.log_end_offset == gone
    # It fetches the rest from its leader, at the right offsets.
    info = again.append_as_follower(with_offsets(make_batch(3), gone))
    assert info.first_offset == gone
    assert first_offset(again, gone) == gone
