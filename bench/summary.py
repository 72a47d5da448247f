"""Every side-by-side figure of every benchmark in one table (``make bench-summary``).

Runs the quick variant of each benchmark with side-by-side figures (``BENCHES``; not
``failover_scale.py`` or ``consumer_assignors.py``, which measure tierlog alone) ``--runs``
times (3), round robin (each once, then each again, so that a slow spell of the machine
falls on several benchmarks rather than on every run of one), each in its own process with
its output kept in ``bench/.work/runs/summary-<time>/``. From the JSON line each prints
last it takes the side-by-side figures (``side_by_side``, made by ``bench/reporting.py``:
each side's median over the run's rounds and the ratio of the medians) and prints one
table: per figure, the ratio of every run, the median of those ratios and each side's
median over the runs, and whether the median ratio meets the figure's goal. Then the
checks (``CHECKS``): the two file:// remote-tier ratios of issue 26 item 4, replay from the
remote tier against the hot tier and offload against a raw write of the same files, must
meet their goals by the median of the runs; a check whose figure is missing fails too.
Then each run's seconds and 1-minute load average at its start and end.

The LAST line on stdout is one JSON object (``figures``, ``checks``, ``runs``). Exit status
1 when a check failed or a run ended without its JSON line, else 0.

Quick variants are smoke tests of the harness: the medians of three of them show what a
change did, roughly, and the checks catch regressions, but only full runs are quoted as
claims (BENCHMARKS.md). One pass over every benchmark took about 45 minutes on the 2-core
machine shared with other work (load 10-36; 2026-11-27, each quick variant timed once), so
three take over two hours, less on a quiet machine; ``--only``/``--skip`` and ``--runs``
run less::

    .venv/bin/python bench/summary.py                          # everything, 3 runs
    .venv/bin/python bench/summary.py --only tiered --runs 3   # the remote-tier checks
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import procs
from reporting import HIGHER, QUICK_NOTICE, load_average, meets, number

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / ".work"  # git-ignored


@dataclass(frozen=True)
class Bench:
    """One benchmark's quick variant: its script and arguments."""

    name: str
    argv: tuple[str, ...]


BENCHES = (
    Bench("storage", ("storage.py", "--quick")),
    Bench("throughput", ("throughput.py", "--quick")),
    Bench("transactions", ("transactions.py", "--quick", "--profile", "off")),
    Bench("cluster", ("cluster.py", "--quick")),
    Bench("compaction", ("compaction.py", "--quick")),
    Bench("tiered", ("tiered.py", "--quick")),
    Bench("spark_read", ("spark_read.py", "--quick")),
    Bench("remote_split_read", ("remote_split_read.py", "--quick")),
    Bench("changelog_rebuild", ("changelog_rebuild.py", "--quick")),
    Bench("intake", ("intake.py", "--quick")),
    Bench("integrity", ("integrity.py", "--quick")),
    Bench("acl_authorizer", ("acl_authorizer.py", "--quick")),
    Bench("acl_produce", ("acl_produce.py", "--quick")),
    Bench("tls", ("tls.py", "--quick")),
    Bench("consumer_protocol", ("consumer_protocol.py", "--quick")),
    Bench("mirror", ("mirror.py", "--quick")),
    Bench("notebook_times", ("notebook_times.py", "--quick")),
)
# Issue 26 item 4: the file:// remote tier's two ratios, checked in every summary.
CHECKS = (
    ("tiered", "replay file:// remote vs hot"),
    ("tiered", "offload file:// vs raw write"),
)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_one(bench: Bench, number_: int, run_dir: Path, timeout: float) -> dict[str, Any]:
    """One run of one benchmark: its exit status, seconds, the machine's load average
    around it and the report it printed last (None if it printed none)."""
    argv = [sys.executable, str(HERE / bench.argv[0]), *bench.argv[1:]]
    log = run_dir / f"{bench.name}-{number_}.log"
    load_start, t0 = load_average(), time.monotonic()
    proc = procs.start_process(bench.name, argv, log, cwd=ROOT)
    timed_out = False
    try:
        proc.popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        proc.stop(timeout=30)
    run: dict[str, Any] = {
        "bench": bench.name,
        "run": number_,
        "command": " ".join(["bench/" + bench.argv[0], *bench.argv[1:]]),
        "exit": proc.popen.returncode,
        "seconds": round(time.monotonic() - t0, 1),
        "load_average": {"start": load_start, "end": load_average()},
        "log": str(log),
    }
    report = last_report(log)
    if timed_out:
        run["error"] = f"did not finish within {timeout:.0f} s"
    elif report is None:
        run["error"] = f"no JSON line at the end; see {log}:\n{proc.log_tail(5)}"
    run["report"] = report
    return run


def last_report(log: Path) -> dict[str, Any] | None:
    """The last line of ``log`` that is a benchmark's JSON report (brokers' and helpers'
    lines may follow it in the same file)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith('{"bench":'):
            try:
                report: dict[str, Any] = json.loads(line)
                return report
            except ValueError:
                continue
    return None


def aggregate(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per side-by-side figure over the runs: each run's ratio, their median and
    spread, each side's median of the runs' medians, and the goal against the median."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        for figure in (run.get("report") or {}).get("side_by_side", []):
            key = (run["bench"], figure["name"])
            row = rows.setdefault(
                key,
                {
                    "bench": run["bench"],
                    "name": figure["name"],
                    "unit": figure["unit"],
                    "better": figure["better"],
                    "sides": figure["sides"],
                    "goal": figure.get("goal"),
                    "ratios": [],
                    "side_medians": {side: [] for side in figure["sides"]},
                },
            )
            row["ratios"].append(figure["ratio"])
            for side in row["sides"]:
                row["side_medians"][side].append((figure.get(side) or {}).get("median"))
    out = []
    for row in rows.values():
        ratios = [r for r in row["ratios"] if r is not None]
        row["ratio"] = statistics.median(ratios) if ratios else None
        row["ratio_min"] = min(ratios) if ratios else None
        row["ratio_max"] = max(ratios) if ratios else None
        for side, values in row.pop("side_medians").items():
            got = [v for v in values if v is not None]
            row[side] = statistics.median(got) if got else None
        row["meets_goal"] = meets(row["ratio"], row["goal"], row["better"])
        out.append(row)
    return out


def check(rows: list[dict[str, Any]], benches: set[str]) -> list[dict[str, Any]]:
    """``CHECKS`` of the ``benches`` that ran against the aggregated rows: passed only if
    the figure is there and its median ratio meets its goal."""
    found = {(r["bench"], r["name"]): r for r in rows}
    results = []
    for bench, name in CHECKS:
        if bench not in benches:
            continue
        row = found.get((bench, name))
        if row is None:
            results.append({"bench": bench, "name": name, "passed": False, "why": "not measured"})
            continue
        results.append(
            {
                "bench": bench,
                "name": name,
                "ratio": row["ratio"],
                "ratios": row["ratios"],
                "goal": row["goal"],
                "passed": row["meets_goal"] is True,
            }
        )
    return results


def table(rows: list[dict[str, Any]], runs: int) -> list[str]:
    """The figures as fixed-width lines for people."""
    lines = [
        f"{'bench':<18} {'figure':<38} {'sides: median of the runs':<52} "
        f"{'ratio per run':<22} {'median':>7}  goal",
    ]
    for r in rows:
        sides = " / ".join(f"{side} {number(r[side])}" for side in r["sides"])
        sides += f" {r['unit']}"
        per_run = " ".join(number(x) for x in r["ratios"])
        if len(r["ratios"]) < runs:
            per_run += f" ({runs - len(r['ratios'])} missing)"
        goal = ""
        if r["goal"] is not None:
            sign = ">=" if r["better"] == HIGHER else "<="
            verdict = {True: "met", False: "NOT met", None: "unknown"}[r["meets_goal"]]
            goal = f"{sign} {r['goal']:g} {verdict}"
        lines.append(
            f"{r['bench']:<18} {r['name'][:38]:<38} {sides[:52]:<52} {per_run[:22]:<22} "
            f"{number(r['ratio']):>7}  {goal}"
        )
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    names = ",".join(b.name for b in BENCHES)
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        epilog="The last line printed is one JSON object.",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of each benchmark (3)")
    parser.add_argument("--only", help=f"comma-separated subset of {names}")
    parser.add_argument("--skip", help="comma-separated benchmarks to leave out")
    parser.add_argument(
        "--timeout-min", type=float, default=45.0, help="minutes one run may take (45)"
    )
    args = parser.parse_args(argv)
    known = {b.name for b in BENCHES}
    for option in (args.only, args.skip):
        unknown = set((option or "").split(",")) - known - {""}
        if unknown:
            parser.error(f"unknown benchmark(s) {', '.join(sorted(unknown))}; known: {names}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    procs.install_signal_handlers()
    os.environ["PYTHONUNBUFFERED"] = "1"
    only = set(args.only.split(",")) if args.only else None
    skip = set(args.skip.split(",")) if args.skip else set()
    chosen = [b for b in BENCHES if (only is None or b.name in only) and b.name not in skip]
    run_dir = WORK / "runs" / time.strftime("summary-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    say(f"bench summary: {len(chosen)} benchmarks x {args.runs} quick runs, logs in {run_dir}")
    runs: list[dict[str, Any]] = []
    interrupted = None
    try:
        for n in range(1, args.runs + 1):
            for i, bench in enumerate(chosen, 1):
                say(f"[run {n}/{args.runs}, {i}/{len(chosen)}] {bench.name}: {bench.argv}")
                run = run_one(bench, n, run_dir, args.timeout_min * 60)
                runs.append(run)
                load = run["load_average"]
                say(
                    f"  {run['seconds']} s, exit {run['exit']}, load {load['start']} -> "
                    f"{load['end']}" + (f"; {run['error']}" if "error" in run else "")
                )
    except (KeyboardInterrupt, SystemExit) as exc:
        interrupted = type(exc).__name__
        say(f"interrupted ({interrupted})")
    rows = aggregate(runs)
    checks = check(rows, {b.name for b in chosen})
    print(f"side-by-side figures, quick variants, median of {args.runs} runs:", flush=True)
    for line in table(rows, args.runs):
        print(line, flush=True)
    print("checks (issue 26 item 4, the file:// remote tier):", flush=True)
    for c in checks:
        verdict = "passed" if c["passed"] else "FAILED"
        detail = c.get("why") or f"median {number(c['ratio'])} of {c['ratios']}, goal {c['goal']}"
        print(f"  {c['bench']} {c['name']}: {verdict} ({detail})", flush=True)
    print("runs (seconds, 1-minute load average at start -> end, exit status):", flush=True)
    for run in runs:
        load = run["load_average"]
        error = f"  {run['error'].splitlines()[0]}" if "error" in run else ""
        print(
            f"  {run['bench']:<18} #{run['run']}  {run['seconds']:>7} s  "
            f"{load['start']} -> {load['end']}  exit {run['exit']}{error}",
            flush=True,
        )
    print(QUICK_NOTICE, flush=True)
    failed_runs = [r for r in runs if "error" in r or r["exit"] not in (0, None)]
    summary = {
        "bench": "summary",
        "quick": True,
        "claim": False,
        "runs_per_bench": args.runs,
        "figures": rows,
        "checks": checks,
        "runs": [{k: v for k, v in r.items() if k != "report"} for r in runs],
        "failed_runs": len(failed_runs),
    }
    if interrupted:
        summary["interrupted"] = interrupted
    print(json.dumps(summary, separators=(",", ":")), flush=True)
    if interrupted:
        return 130
    return 1 if failed_runs or not all(c["passed"] for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
