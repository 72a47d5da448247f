"""What the integrity checks cost a broker (issues 10 and 20), each side by side in one run,
rounds alternating, a fresh tierlog broker per round (the settings are broker configs).

``scrubber`` (issue 10): produce latency with the background scrubber off and on.

  backlog   ``--backlog-mb`` of 1 KiB records written first (acks=1, batched), so the
            scrubber has closed segments to read during every measured round.
  latency   produce() -> delivery callback, 200-byte records at ``--rate`` msgs/s for
            ``--seconds`` (acks=1, linger.ms=0; bench/workloads.py ``produce_latency``).
  modes     ``off``: ``log.scrubber.bytes.per.second=0``; ``on``: ``--scrub-mb-s`` MiB/s
            (default 64, ~60x the shipped 1 MiB/s, so a pass runs throughout a round).

``fetch`` (issue 20, item 6): Fetch throughput with the check before serving on and off.

  backlog   ``--fetch-mb`` of ``--value-bytes`` records (acks=1, batched), in 256 MiB
            segments, scrubber off.
  cold      the first read of the backlog from offset 0 (one assigned confluent-kafka
            consumer, bench/workloads.py ``consume_backlog``): with checks on, every byte
            is read back and CRC-checked before its first answer.
  warm      a second read of the same backlog: with checks on, every byte is verified
            already and goes out with sendfile, as with checks off.
  modes     ``log.read.verify.enable=false`` (``off``, Kafka's behaviour) and ``true``
            (``on``, the default). The page cache holds the backlog in both reads (it was
            just written): "cold" means not yet verified, not read from disk.

Each section reports medians and min-max over its rounds and the on/off ratios of the
medians. The scrubber's checking rate itself (GiB/s of CRC verified, unthrottled) is
measured by bench/storage.py (``--only checks``: the "scrub" figures).

Run (from the repository root)::

    .venv/bin/python bench/integrity.py                  # both, ~6 minutes
    .venv/bin/python bench/integrity.py --only fetch --rounds 5
    .venv/bin/python bench/integrity.py --quick          # 128 MiB backlogs, 5 s rounds

Human-readable lines go to stderr, with the median of each mode's rounds, their spread and
the ratio of the medians (``bench/reporting.py``); the LAST line on stdout is one JSON
object of figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import procs
import tierlog_ref
from reporting import HIGHER, LOWER, Report
from workloads import Plan, Target, consume_backlog, produce_latency, write_backlog

READY_TIMEOUT = 60.0
VALUE_BYTES = 200
BACKLOG_VALUE_BYTES = 1024
MODES = ("off", "on")


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def plan_for(args: argparse.Namespace, backlog_mb: int) -> Plan:
    return Plan(
        produce_seconds=args.seconds,
        produce_max_messages=0,
        backlog_bytes=backlog_mb * 1024 * 1024,
        backlog_seconds=300.0,
        consume_seconds=300.0,
        latency_rate=args.rate,
        latency_seconds=args.seconds,
        soak_bytes=0,
        soak_seconds=0.0,
        rounds=1,
    )


def scrubber_round(run_dir: Path, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    rate = 0 if mode == "off" else int(args.scrub_mb_s * 1024 * 1024)
    extra = {"log.scrubber.bytes.per.second": str(rate), "log.segment.bytes": str(64 << 20)}
    proc, bootstrap, data = tierlog_ref.start_tierlog(run_dir, extra)
    try:
        procs.wait_ready(proc, bootstrap, READY_TIMEOUT)
        target = Target(f"tierlog-scrub-{mode}", bootstrap, proc.pid, data)
        plan = plan_for(args, args.backlog_mb)
        write_backlog(target, "backlog", plan, BACKLOG_VALUE_BYTES)
        cpu0 = procs.tree_cpu_seconds(proc.pid)
        result = produce_latency(target, f"latency-{mode}", plan, VALUE_BYTES)
        result["broker_cpu_s"] = round(procs.tree_cpu_seconds(proc.pid) - cpu0, 2)
        result["scrub_bytes_per_s"] = rate
        return result
    finally:
        proc.stop()


def fetch_round(run_dir: Path, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    extra = {
        "log.read.verify.enable": "true" if mode == "on" else "false",
        "log.scrubber.bytes.per.second": "0",
        "log.segment.bytes": str(256 << 20),
    }
    proc, bootstrap, data = tierlog_ref.start_tierlog(run_dir, extra)
    try:
        procs.wait_ready(proc, bootstrap, READY_TIMEOUT)
        target = Target(f"tierlog-verify-{mode}", bootstrap, proc.pid, data)
        plan = plan_for(args, args.fetch_mb)
        write_backlog(target, "fetch", plan, args.value_bytes)
        result: dict[str, Any] = {}
        for read in ("cold", "warm"):
            cpu0 = procs.tree_cpu_seconds(proc.pid)
            consumed = consume_backlog(target, "fetch", plan)
            if not consumed["complete"] or consumed["errors"]:
                raise RuntimeError(f"{mode} {read}: the backlog was not read whole: {consumed}")
            cpu = procs.tree_cpu_seconds(proc.pid) - cpu0
            result[read] = {
                "mib_per_s": consumed["mib_per_s"],
                "msgs_per_s": consumed["msgs_per_s"],
                "seconds": consumed["seconds"],
                "broker_cpu_s": round(cpu, 2),
                # What the broker spent per MiB served: steadier than MiB/s on a loaded box.
                "broker_cpu_ms_per_mib": round(cpu * 1000 / args.fetch_mb, 3),
                "client_cpu_s": consumed["client_cpu_s"],
            }
        return result
    finally:
        proc.stop()


def run_scrubber(tmp: Path, args: argparse.Namespace, report: Report) -> dict[str, Any]:
    rounds: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for n in range(args.rounds):
        for mode in MODES:
            result = scrubber_round(tmp / f"scrub-{mode}-{n}", mode, args)
            rounds[mode].append(result)
            say(
                f"  [scrubber {mode}] #{n + 1}: p50 {result.get('p50_ms')} ms  "
                f"p99 {result.get('p99_ms')} ms  p99.9 {result.get('p999_ms')} ms  "
                f"broker CPU {result['broker_cpu_s']} s  errors {result['errors']}"
            )
    for key in ("p99_ms", "p50_ms"):
        modes = {f"scrubber {m}": [r.get(key) for r in rounds[m]] for m in ("on", "off")}
        report.side_by_side(f"produce {key[:3]}", modes, unit="ms", better=LOWER)
    return {"rounds": rounds}


def run_fetch(tmp: Path, args: argparse.Namespace, report: Report) -> dict[str, Any]:
    rounds: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for n in range(args.rounds):
        for mode in MODES:
            result = fetch_round(tmp / f"fetch-{mode}-{n}", mode, args)
            rounds[mode].append(result)
            say(
                f"  [checks {mode}] #{n + 1}: cold {result['cold']['mib_per_s']} MiB/s "
                f"(broker CPU {result['cold']['broker_cpu_ms_per_mib']} ms/MiB), warm "
                f"{result['warm']['mib_per_s']} MiB/s (broker CPU "
                f"{result['warm']['broker_cpu_ms_per_mib']} ms/MiB)"
            )
    for read in ("cold", "warm"):
        for figure, unit, better in (
            ("mib_per_s", "MiB/s", HIGHER),
            ("broker_cpu_ms_per_mib", "broker CPU ms/MiB", LOWER),
        ):
            modes = {f"checks {m}": [r[read][figure] for r in rounds[m]] for m in ("on", "off")}
            report.side_by_side(f"fetch {read} {figure}", modes, unit=unit, better=better)
    return {"rounds": rounds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="128 MiB backlogs, 5 s rounds")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mode (default 3)")
    parser.add_argument("--only", choices=("scrubber", "fetch"), help="one section only")
    parser.add_argument("--backlog-mb", type=int, help="closed data to scrub (512; quick 128)")
    parser.add_argument("--rate", type=int, default=2000, help="produce msgs/s (default 2000)")
    parser.add_argument("--seconds", type=float, help="measured seconds (10; quick 5)")
    parser.add_argument("--scrub-mb-s", type=float, default=64.0, help="scrubber MiB/s when on")
    parser.add_argument("--fetch-mb", type=int, help="backlog the fetches read (1024; quick 128)")
    parser.add_argument("--value-bytes", type=int, default=4096, help="record size, fetch")
    args = parser.parse_args()
    args.backlog_mb = args.backlog_mb or (128 if args.quick else 512)
    args.fetch_mb = args.fetch_mb or (128 if args.quick else 1024)
    args.seconds = args.seconds or (5.0 if args.quick else 10.0)
    procs.install_signal_handlers()
    reason = tierlog_ref.unavailable_reason()
    if reason is not None:
        say(f"tierlog unavailable: {reason}")
        return 1
    report = Report("integrity", quick=args.quick, out=sys.stderr)
    sections: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-integrity-") as tmp:
        if args.only in (None, "scrubber"):
            sections["scrubber"] = run_scrubber(Path(tmp), args, report)
        if args.only in (None, "fetch"):
            sections["fetch"] = run_fetch(Path(tmp), args, report)
    report.data.update(plan=vars(args), **sections)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
