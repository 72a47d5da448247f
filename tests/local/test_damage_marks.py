"""Damage the scrubber found stays unreadable across a restart (``damage-marks``), and a
mark never applies to a file that replaced the damaged one."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tierlog.local.damage_marks import FILE_NAME
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.scrubber import Scrubber

from .conftest import LogFactory
from .test_scrubber import SEGMENT_BYTES, batch_positions, fill, flip


def _scrub(lg: object) -> int:
    scrubber = Scrubber(lambda: {("t", 0): lg}, 100 << 20, min_pass_interval_s=0)  # type: ignore[dict-item]
    return asyncio.run(scrubber.run_pass())


def test_a_mark_survives_a_restart(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 40)
    position, base, _ = batch_positions(lg, 1)[4]
    flip(lg.segments[1].path, position + 100)
    assert _scrub(lg) == 1
    assert (log_dir / FILE_NAME).exists()
    lg.close()
    again = make_log(segment_bytes=SEGMENT_BYTES, had_clean_shutdown=True)
    # No scrubber pass yet: the saved mark alone keeps the bad bytes from being served.
    with pytest.raises(CorruptSegmentError):
        again.read(base, 1 << 20)
    before = again.read(again.segments[1].base_offset, 1 << 20)
    assert before is not None and before.position + before.size == position
    before.release()


def test_a_mark_does_not_apply_to_a_replaced_file(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 40)
    position, base, _ = batch_positions(lg, 1)[4]
    segment_path = lg.segments[1].path
    intact = segment_path.read_bytes()
    flip(segment_path, position + 100)
    assert _scrub(lg) == 1
    lg.close()
    # The segment is repaired by replacing its file (a new inode), e.g. from a replica.
    replacement = segment_path.with_name("repaired.tmp")
    replacement.write_bytes(intact)
    os.replace(replacement, segment_path)
    again = make_log(segment_bytes=SEGMENT_BYTES, had_clean_shutdown=True)
    found = again.read(base, 1 << 20)
    assert found is not None
    found.release()
    assert not (log_dir / FILE_NAME).exists(), "the stale mark was dropped"


def test_an_unreadable_marks_file_only_costs_a_rescan(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 10)
    lg.close()
    (log_dir / FILE_NAME).write_text("garbage\n")
    again = make_log(segment_bytes=SEGMENT_BYTES, had_clean_shutdown=True)
    assert again.log_end_offset == 30
    assert all(not segment.damaged for segment in again.segments)
