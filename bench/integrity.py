"""The background scrubber's effect on produce latency (issue 10): one tierlog broker with a
backlog of closed segments, produce latency at a fixed rate with the scrubber off and with
it re-checking segments at a high rate, rounds alternating, side by side in one run.

  backlog   ``--backlog-mb`` of 1 KiB records written first (acks=1, batched), so the
            scrubber has closed segments to read during every measured round.
  latency   produce() -> delivery callback, 200-byte records at ``--rate`` msgs/s for
            ``--seconds`` (acks=1, linger.ms=0; bench/workloads.py ``produce_latency``).
  modes     ``off``: ``log.scrubber.bytes.per.second=0``; ``on``: ``--scrub-mb-s`` MiB/s
            (default 64, ~60x the shipped 1 MiB/s, so a pass runs throughout a round).

Each round starts a fresh broker for its mode (the setting is a broker config), fills the
backlog, measures, stops it. The scrubber's checking rate itself (GiB/s of CRC verified,
unthrottled) is measured by bench/storage.py (``--only checks``: the "scrub" figures).

Run (from the repository root)::

    .venv/bin/python bench/integrity.py            # ~2 minutes
    .venv/bin/python bench/integrity.py --quick    # 3 rounds, 128 MiB backlog, 5 s
    .venv/bin/python bench/integrity.py --rounds 1 --backlog-mb 128 --seconds 5

Human-readable lines go to stderr, with the median of each mode's rounds, their spread and
the ratio of the medians (``bench/reporting.py``); the LAST line on stdout is one JSON
object of figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import procs
import tierlog_ref
from reporting import LOWER, Report
from workloads import Plan, Target, produce_latency, write_backlog

READY_TIMEOUT = 60.0
VALUE_BYTES = 200
BACKLOG_VALUE_BYTES = 1024


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def one_round(run_dir: Path, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    rate = 0 if mode == "off" else int(args.scrub_mb_s * 1024 * 1024)
    extra = {"log.scrubber.bytes.per.second": str(rate), "log.segment.bytes": str(64 << 20)}
    proc, bootstrap, data = tierlog_ref.start_tierlog(run_dir, extra)
    try:
        procs.wait_ready(proc, bootstrap, READY_TIMEOUT)
        target = Target(f"tierlog-scrub-{mode}", bootstrap, proc.pid, data)
        plan = Plan(
            produce_seconds=args.seconds,
            produce_max_messages=0,
            backlog_bytes=args.backlog_mb * 1024 * 1024,
            backlog_seconds=120.0,
            consume_seconds=0.0,
            latency_rate=args.rate,
            latency_seconds=args.seconds,
            soak_bytes=0,
            soak_seconds=0.0,
            rounds=1,
        )
        write_backlog(target, "backlog", plan, BACKLOG_VALUE_BYTES)
        cpu0 = procs.tree_cpu_seconds(proc.pid)
        result = produce_latency(target, f"latency-{mode}", plan, VALUE_BYTES)
        result["broker_cpu_s"] = round(procs.tree_cpu_seconds(proc.pid) - cpu0, 2)
        result["scrub_bytes_per_s"] = rate
        return result
    finally:
        proc.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="128 MiB backlog, 5 s rounds")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mode (default 3)")
    parser.add_argument("--backlog-mb", type=int, help="closed data to scrub (512; quick 128)")
    parser.add_argument("--rate", type=int, default=2000, help="produce msgs/s (default 2000)")
    parser.add_argument("--seconds", type=float, help="measured seconds (10; quick 5)")
    parser.add_argument("--scrub-mb-s", type=float, default=64.0, help="scrubber MiB/s when on")
    args = parser.parse_args()
    args.backlog_mb = args.backlog_mb or (128 if args.quick else 512)
    args.seconds = args.seconds or (5.0 if args.quick else 10.0)
    procs.install_signal_handlers()
    reason = tierlog_ref.unavailable_reason()
    if reason is not None:
        say(f"tierlog unavailable: {reason}")
        return 1
    report = Report("integrity", quick=args.quick, out=sys.stderr)
    results: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-integrity-") as tmp:
        for n in range(args.rounds):
            for mode in ("off", "on"):
                result = one_round(Path(tmp) / f"{mode}-{n}", mode, args)
                results[mode].append(result)
                say(
                    f"  [scrubber {mode}] #{n + 1}: p50 {result.get('p50_ms')} ms  "
                    f"p99 {result.get('p99_ms')} ms  p99.9 {result.get('p999_ms')} ms  "
                    f"broker CPU {result['broker_cpu_s']} s  errors {result['errors']}"
                )
    figures: dict[str, Any] = {}
    for mode, rounds in results.items():
        p99s = [r["p99_ms"] for r in rounds if "p99_ms" in r]
        p50s = [r["p50_ms"] for r in rounds if "p50_ms" in r]
        figures[mode] = {
            "p50_ms_median": statistics.median(p50s) if p50s else None,
            "p99_ms_median": statistics.median(p99s) if p99s else None,
        }
    off, on = figures["off"]["p99_ms_median"], figures["on"]["p99_ms_median"]
    ratio = round(on / off, 3) if off and on else None
    for key in ("p99_ms", "p50_ms"):
        modes = {f"scrubber {m}": [r.get(key) for r in results[m]] for m in ("on", "off")}
        report.side_by_side(f"produce {key[:3]}", modes, unit="ms", better=LOWER)
    report.data.update(
        plan=vars(args), rounds=results, figures={**figures, "p99_ratio_on_off": ratio}
    )
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
