"""Time to first result (issue 25 item 5): how long each shipped notebook takes to run on
``make demo``'s data, as a user runs it, against the 30 s the issue allows on a quiet 2-core
machine.

Run: ``.venv/bin/python bench/notebook_times.py [--quick] [--rounds N]`` (``make demo``
first, or it runs the demo itself into bench/.work; about 2 min a round). The last line
printed is one JSON object with every figure.

Each round starts from the demo's data as ``make demo`` leaves it (copied into a fresh
directory laid out as a clone, so the ingest notebook ingests all 100,000 events every
round), serves it with ``tierlog demo serve``, and runs the notebooks the shipped schedule
runs, in its order, each with ``tierlog notebook run`` on its own defaults: a new kernel,
a new Spark JVM, as a user's first Run All. A notebook's time is that command's wall
time; the executed notebook's cell times split it into the set-up cell (imports and the
Spark session) and the rest. The side-by-side figure of each notebook is its rounds
against the budget, so the ratio is the share of the 30 s it used (goal <= 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reporting import LOWER, ROOT, Report

BUDGET_S = 30.0
NOTEBOOKS = ("ingest_to_delta", "explore_events", "replay_from_object_storage", "cluster_health")
TIERLOG = ROOT / ".venv" / "bin" / "tierlog"
DEMO_CACHE = ROOT / "bench" / ".work" / "notebook-demo"
SERVE_READY_S = 120.0
NOTEBOOK_TIMEOUT_S = 900.0


def demo_data(explicit: Path | None) -> Path:
    """``make demo``'s data dir: the one given, ./data/demo, or one this bench makes once."""
    for candidate in (explicit, ROOT / "data" / "demo", DEMO_CACHE):
        if candidate is not None and finished_demo(candidate):
            return candidate
    if explicit is not None:
        sys.exit(f"{explicit} holds no finished `tierlog demo` run")
    shutil.rmtree(DEMO_CACHE, ignore_errors=True)
    print(f"no demo data: running `tierlog demo --data-dir {DEMO_CACHE}` (about a minute)")
    subprocess.run(
        [str(TIERLOG), "demo", "--data-dir", str(DEMO_CACHE)],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return DEMO_CACHE


def finished_demo(data_dir: Path) -> bool:
    """The demo's last step, its ingest notebook, made the bronze table."""
    return (data_dir / "delta" / "activity_bronze" / "_delta_log").is_dir()


def lay_out(work: Path, demo: Path) -> None:
    """``work`` as a clone after ``make demo``: the repo's code linked, the data copied."""
    for name in ("notebooks", "pipelines", "configs", "tierlog", "pyproject.toml", ".venv"):
        (work / name).symlink_to(ROOT / name)
    shutil.copytree(demo, work / "data" / "demo", ignore=shutil.ignore_patterns(".lock"))


def serve(work: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [str(TIERLOG), "demo", "serve"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + SERVE_READY_S
    assert proc.stdout is not None
    for line in proc.stdout:  # ends when the process does
        if "started on port 9092" in line:
            return proc
        if time.monotonic() > deadline:
            break
    stop(proc)
    sys.exit("`tierlog demo serve` did not start (is port 9092 taken?)")


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_notebook(work: Path, name: str) -> dict[str, float]:
    """Wall seconds of ``tierlog notebook run NAME`` and of its set-up cell."""
    runs = work / "runs"
    before = set(runs.glob("*.ipynb")) if runs.exists() else set()
    started = time.monotonic()
    result = subprocess.run(
        [str(TIERLOG), "notebook", "run", name, "-q"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=NOTEBOOK_TIMEOUT_S,
    )
    wall = time.monotonic() - started
    if result.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    (executed,) = set(runs.glob("*.ipynb")) - before
    cells = [
        cell.get("metadata", {}).get("papermill", {}).get("duration") or 0.0
        for cell in json.loads(executed.read_text())["cells"]
        if cell["cell_type"] == "code"
    ]
    # Cell 0 is the parameters, cell 1 papermill's injected ones or the set-up: the
    # set-up is the first cell that took a measurable time.
    setup = next((seconds for seconds in cells if seconds > 0.5), 0.0)
    return {"wall": wall, "setup": setup, "cells": sum(cells)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round; not a claim")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, help="make demo's data (default: data/demo)")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    report = Report("notebook_times", quick=args.quick)
    demo = demo_data(args.data_dir)
    times: dict[str, list[dict[str, float]]] = {name: [] for name in NOTEBOOKS}
    for i in range(rounds):
        work = Path(tempfile.mkdtemp(prefix="tierlog-notebook-times-"))
        try:
            lay_out(work, demo)
            broker = serve(work)
            try:
                for name in NOTEBOOKS:
                    took = run_notebook(work, name)
                    times[name].append(took)
                    report.say(
                        f"round {i + 1}: {name} {took['wall']:.1f} s "
                        f"(set-up cell {took['setup']:.1f} s, all cells {took['cells']:.1f} s)"
                    )
            finally:
                stop(broker)
        except RuntimeError as exc:
            report.fail(str(exc))
            break
        finally:
            shutil.rmtree(work, ignore_errors=True)
    for name in NOTEBOOKS:
        walls = [took["wall"] for took in times[name]]
        report.side_by_side(
            name,
            {"notebook": walls, "budget": [BUDGET_S] * len(walls)},
            unit="s",
            better=LOWER,
            goal=1.0,
        )
    report.data["details"] = {
        "budget_s": BUDGET_S,
        "demo_data": str(demo),
        "rounds": {name: times[name] for name in NOTEBOOKS},
    }
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
