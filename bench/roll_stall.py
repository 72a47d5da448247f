"""How long a segment roll holds the event loop (issue 26, item 7): the rolled segment's
fsyncs on the loop (before) against on the scheduler's worker thread (now), in one run.

A ``Log`` with 64 MiB segments on an ``AsyncioScheduler`` takes 1 MiB batches from a
coroutine, as fast as the loop lets it, for ``--mib`` MiB (8 rolls by default), while a
second coroutine ticks every millisecond and records how late each tick is: the longest
lateness is the longest time the loop could serve no request. The "on the loop" side is
the same scheduler with its blocking jobs run inline (what the roll did before: the flush
task ran on the loop). Rounds alternate the two; each figure is the median of its rounds
with the spread (``bench/reporting.py``): the longest stall, the longest append that
rolled (ms, lower is better) and the append rate (MiB/s). What a roll still does on the
loop: the directory's fsync for the new segment's files and the producer snapshot's.

Run (from the repository root)::

    .venv/bin/python bench/roll_stall.py            # ~1 minute
    .venv/bin/python bench/roll_stall.py --quick

The LAST line on stdout is one JSON object of figures.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(1, str(HERE))

from reporting import HIGHER, LOWER, Report  # noqa: E402

from tierlog.local.config import LogConfig  # noqa: E402
from tierlog.local.log import Log  # noqa: E402
from tierlog.records.builder import Record, build_batch  # noqa: E402
from tierlog.util.scheduler import AsyncioScheduler, Completion, Task  # noqa: E402

MIB = 1 << 20
SEGMENT_BYTES = 64 * MIB


class OnTheLoop(AsyncioScheduler):
    """The scheduler as it was for a roll: the blocking job runs where it is asked for."""

    def run_blocking(self, name: str, job: Task, then: Completion) -> None:
        try:
            job()
        except Exception as exc:
            then(exc)
        else:
            then(None)


async def one_round(directory: Path, mib: int, on_loop: bool) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    scheduler = OnTheLoop(loop) if on_loop else AsyncioScheduler(loop)
    log = Log(directory, LogConfig(segment_bytes=SEGMENT_BYTES), scheduler=scheduler)
    batch = build_batch([Record(None, bytes(1000)) for _ in range(MIB // 1100)])
    late: list[float] = []
    writing = True

    async def tick() -> None:
        while writing:
            due = time.perf_counter() + 0.001
            await asyncio.sleep(0.001)
            late.append(max(0.0, time.perf_counter() - due) * 1000)

    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    written = 0
    rolls: list[float] = []
    while written < mib * MIB:
        segments = len(log.segments)
        before = time.perf_counter()
        log.append(batch)
        if len(log.segments) != segments:  # this append rolled: time it held the loop
            rolls.append((time.perf_counter() - before) * 1000)
        written += len(batch)
        await asyncio.sleep(0)  # let the ticker (a request) in between appends
    took = time.perf_counter() - started
    writing = False
    await ticker
    scheduler.cancel_all()
    log.close()
    # The flush the roll scheduled ran after the append returned (a task due at once):
    # the ticks' lateness catches it, the append's own time does not.
    return {
        "max_stall_ms": max(late, default=0.0),
        "max_roll_ms": max(rolls, default=0.0),
        "mib_per_s": written / MIB / took,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer MiB and rounds")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 5; quick 3)")
    parser.add_argument("--mib", type=int, default=None, help="MiB per round (default 512)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 5)
    mib = args.mib or (192 if args.quick else 512)
    report = Report("roll_stall", quick=args.quick)
    results: dict[str, list[dict[str, float]]] = {"worker": [], "loop": []}
    work = Path(tempfile.mkdtemp(prefix="roll-stall-"))
    try:
        for n in range(rounds):
            for side in ("worker", "loop") if n % 2 == 0 else ("loop", "worker"):
                directory = work / f"{side}-{n}" / "t-0"
                result = asyncio.run(one_round(directory, mib, on_loop=side == "loop"))
                shutil.rmtree(directory.parent)
                results[side].append(result)
                report.say(
                    f"round {n + 1} {side:>6}: longest stall {result['max_stall_ms']:.1f} ms, "
                    f"longest roll {result['max_roll_ms']:.1f} ms, "
                    f"{result['mib_per_s']:.0f} MiB/s"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def side(key: str) -> dict[str, Any]:
        return {name: [r[key] for r in results[name]] for name in ("worker", "loop")}

    report.side_by_side("longest_stall", side("max_stall_ms"), unit="ms", better=LOWER)
    report.side_by_side("longest_roll", side("max_roll_ms"), unit="ms", better=LOWER)
    report.side_by_side("append_rate", side("mib_per_s"), unit="MiB/s", better=HIGHER)
    report.data.update(mib_per_round=mib, segment_bytes=SEGMENT_BYTES, rounds=rounds)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
