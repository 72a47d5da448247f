"""Swapping cleaned segments in, cut short at every file operation: a restart finds the
old segments or the cleaned one, never a mix, and no leftover files."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from tierlog.compaction.segment_cleaner import CleanJob, SegmentFile, clean
from tierlog.local import segment_swap
from tierlog.local.log import Log
from tierlog.records.builder import Record, build_batch
from tierlog.util.clock import ManualClock

from .conftest import LogFactory, all_records, crash


class _Crash(Exception):
    pass


def _fill(log: Log) -> None:
    # Five keys written over and over; the last replaced segment holds only a keyless
    # record (dropped by the cleaner), so the cleaned replacement ends before the replaced
    # run does: the range file's case.
    for i in range(60):
        log.append(build_batch([Record(b"k%d" % (i % 5), b"v%d" % i, timestamp=1)]))
    log.roll()
    for i in range(10):
        log.append(build_batch([Record(b"k%d" % (i % 5), b"w%d" % i, timestamp=1)]))
    log.roll()
    log.append(build_batch([Record(None, b"keyless", timestamp=1)]))
    log.roll()
    log.append(build_batch([Record(b"tail", b"x", timestamp=1)]))


def _job(log: Log) -> CleanJob:
    return CleanJob(
        name=log.name,
        segments=tuple(
            SegmentFile(s.base_offset, str(s.path), s.size, nxt.base_offset)
            for s, nxt in itertools.pairwise(log.segments)
        ),
        log_start_offset=0,
        first_dirty_offset=0,
        now_ms=1,
        delete_retention_ms=0,
        segment_bytes=1 << 20,
        index_interval_bytes=64,
        max_index_size=4096,
        map_memory_bytes=1 << 16,
    )


def _records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in all_records(log)]


# More than the file operations of one swap (counted below), so every cut is tried.
SWAP_STEPS = 12


@pytest.mark.parametrize("crash_at", range(SWAP_STEPS))
def test_a_swap_cut_short_anywhere_restarts_old_or_new(
    crash_at: int, make_log: LogFactory, log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log(segment_bytes=1 << 20)
    _fill(log)
    old = _records(log)
    result = clean(_job(log))
    assert len(result.groups) == 1
    group = result.groups[0]
    replaced = [s for s in log.segments if s.base_offset in {f.base_offset for f in group.replaced}]
    steps = {"n": 0}

    def step(real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if steps["n"] == crash_at:
                raise _Crash
            steps["n"] += 1
            return real(*args, **kwargs)

        return counted

    monkeypatch.setattr(segment_swap.os, "rename", step(os.rename))
    monkeypatch.setattr(segment_swap.os, "replace", step(os.replace))
    monkeypatch.setattr(log, "_delete_segments", step(log._delete_segments))
    try:
        log.replace_segments(replaced, [s.size for s in group.replaced])
        new = _records(log)
        finished = True
    except _Crash:
        finished = False
    monkeypatch.undo()
    crash(log)
    reopened = Log(log_dir, log.config, clock=ManualClock(), had_clean_shutdown=False)
    try:
        after = _records(reopened)
        expected_new = [r for r in old if r[2] in {b"w5", b"w6", b"w7", b"w8", b"w9", b"x"}]
        assert after in (old, expected_new), after
        if finished:
            assert after == new == expected_new
        names = [p.name for p in log_dir.iterdir()]
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
        assert reopened.log_end_offset == old[-1][0] + 1
    finally:
        reopened.close()


def test_every_step_of_a_swap_was_cut(
    make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parametrised range above covers the whole swap: count its steps."""
    log = make_log(segment_bytes=1 << 20)
    _fill(log)
    result = clean(_job(log))
    group = result.groups[0]
    replaced = [s for s in log.segments if s.base_offset in {f.base_offset for f in group.replaced}]
    count = {"n": 0}

    def counting(real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            count["n"] += 1
            return real(*args, **kwargs)

        return counted

    monkeypatch.setattr(segment_swap.os, "rename", counting(os.rename))
    monkeypatch.setattr(segment_swap.os, "replace", counting(os.replace))
    monkeypatch.setattr(log, "_delete_segments", counting(log._delete_segments))
    log.replace_segments(replaced, [s.size for s in group.replaced])
    assert count["n"] < SWAP_STEPS
