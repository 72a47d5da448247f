"""tierlog.local.scrubber against a follower's truncation during a check: no SIGBUS, no
damage reported for bytes that were cut legitimately (issue 10, item 2)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from tierlog.local import scrubber as scrubber_module
from tierlog.local.scrubber import RateLimiter, Scrubber

from .conftest import T0, LogFactory, make_batch

# A check of a closed segment racing Log.truncate_to, in a child process: SIGBUS kills the
# process it hits, and that must not be the test runner. The throttle runs after each
# checked batch; its first call truncates the log to the segment's base offset, which cuts
# the segment's file to 0 bytes in place (nothing leased it), as a follower does when its
# new leader's log diverges at that offset. The segment (3 MiB) is larger than what the
# check reads at once, so it reads again after the cut.
_CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from tierlog.local.config import LogConfig
    from tierlog.local.log import Log
    from tierlog.local.scrubber import verify_segment_crc
    from tierlog.records.builder import Record, build_batch

    lg = Log(Path(sys.argv[1]), LogConfig.from_props({"segment.bytes": str(3 << 20)}))
    for i in range(2000):
        lg.append(build_batch([Record(b"k", bytes([65 + i % 26]) * 1000)] * 4))
    segment = lg.segments[1]
    calls = []

    def cut(n):
        if not calls:
            lg.truncate_to(segment.base_offset)
        calls.append(n)

    try:
        problems = verify_segment_crc(segment.path, cut)
        print(json.dumps({"problems": [p.problem for p in problems]}))
    except OSError as exc:
        print(json.dumps({"raised": type(exc).__name__, "message": str(exc)}))
    """
)


def test_a_file_cut_during_the_check_ends_it_without_a_crash_or_a_finding(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "t-0")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # -7 (SIGBUS) when the check read the file through a memory map.
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome["raised"] == "SegmentTruncatedError", outcome
    assert "truncated meanwhile" in outcome["message"]


class PausingLimiter(RateLimiter):
    """The scrubber's rate limiter, holding the walk after its first batch until the test
    has changed the log: a slow rate with the timing made exact."""

    paused: asyncio.Event
    resume: threading.Event
    loop: asyncio.AbstractEventLoop

    def __call__(self, n: int) -> None:
        if not self.resume.is_set():
            self.loop.call_soon_threadsafe(self.paused.set)
            assert self.resume.wait(30)
        super().__call__(n)


def test_a_truncation_and_new_appends_during_a_walk_report_no_damage(
    make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg = make_log(segment_bytes=1 << 20)
    for i in range(36):  # three closed segments of 12 batches, the rest room to regrow
        lg.append(make_batch(4, value_size=230, base_timestamp=T0 + i))
        if i % 12 == 11:
            lg.roll()
    walked = lg.segments[0]
    original_size = walked.size
    original_inode = os.fstat(walked.fd).st_ino
    cut_at = [h.base_offset for _, h in walked.batches()][2]

    async def scenario() -> int:
        PausingLimiter.paused = asyncio.Event()
        PausingLimiter.resume = threading.Event()
        PausingLimiter.loop = asyncio.get_running_loop()
        monkeypatch.setattr(scrubber_module, "RateLimiter", PausingLimiter)
        scrubber = Scrubber(lambda: {("t", 0): lg}, 1 << 30, min_pass_interval_s=0)
        walk = asyncio.create_task(scrubber.run_pass())
        await asyncio.wait_for(PausingLimiter.paused.wait(), 30)
        # The walk is inside segment 0. A follower truncates into it, then takes new
        # batches of another size from its leader, past the segment's old end: an
        # in-place cut would put those bytes, misaligned, under the walk.
        lg.truncate_to(cut_at)
        i = 0
        while lg.segments[0].size <= original_size:
            lg.append(make_batch(3, value_size=411, base_timestamp=T0 + i))
            i += 1
        PausingLimiter.resume.set()
        found = await asyncio.wait_for(walk, 30)
        assert scrubber.stats.damaged == {}
        return found

    assert asyncio.run(scenario()) == 0
    assert lg.segments[0] is walked
    assert os.fstat(walked.fd).st_ino != original_inode  # cut under the walk: a copy
    assert all(segment.damaged == [] for segment in lg.segments)
    assert walked.leases == 0
    # Every batch reads: nothing was marked damaged.
    for segment in lg.segments:
        for _, header in segment.batches():
            piece = lg.read(header.base_offset, 1 << 20)
            assert piece is not None
            piece.release()


def test_a_truncation_after_a_pass_cuts_in_place(make_log: LogFactory) -> None:
    # The walk preads its bytes: once its lease is back nothing reads them, so a
    # truncation afterwards costs no copy of the kept prefix.
    lg = make_log(segment_bytes=1 << 20)
    for i in range(24):
        lg.append(make_batch(4, value_size=230, base_timestamp=T0 + i))
        if i == 11:
            lg.roll()
    walked = lg.segments[0]
    scrubber = Scrubber(lambda: {("t", 0): lg}, 1 << 30, min_pass_interval_s=0)
    assert asyncio.run(asyncio.wait_for(scrubber.run_pass(), 30)) == 0
    assert scrubber.stats.verified_segments == 1 and walked.leases == 0
    inode = os.fstat(walked.fd).st_ino
    lg.truncate_to([h.base_offset for _, h in walked.batches()][5])
    assert list(lg.segments) == [walked]
    assert os.fstat(walked.fd).st_ino == inode == os.stat(walked.path).st_ino


def test_the_lease_is_released_once_a_walk_stopped_by_shutdown_ends(
    make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg = make_log(segment_bytes=20_000)
    for i in range(30):
        lg.append(make_batch(4, value_size=230, base_timestamp=T0 + i))
    walked = lg.segments[0]

    async def scenario() -> None:
        PausingLimiter.paused = asyncio.Event()
        PausingLimiter.resume = threading.Event()
        PausingLimiter.loop = asyncio.get_running_loop()
        monkeypatch.setattr(scrubber_module, "RateLimiter", PausingLimiter)
        scrubber = Scrubber(lambda: {("t", 0): lg}, 1 << 30, min_pass_interval_s=0)
        scrubber.start()
        await asyncio.wait_for(PausingLimiter.paused.wait(), 30)
        await scrubber.stop()
        # The worker thread still reads through the lease: it is not given back yet, so
        # its fd cannot be closed (and reused) under the thread.
        assert walked.leases == 1
        PausingLimiter.resume.set()  # the limiter now raises Stopped
        for _ in range(300):
            if walked.leases == 0:
                break
            await asyncio.sleep(0.01)
        assert walked.leases == 0

    asyncio.run(scenario())
