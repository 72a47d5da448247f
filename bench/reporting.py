"""How every benchmark reports: rounds as a median and a spread, the load average, one JSON line.

A benchmark makes one ``Report`` when it starts and calls ``finish()`` last. In between it
puts whatever figures it has into ``report.data`` and hands every side-by-side figure to
``side_by_side``: the rounds of both sides (tierlog and Apache Kafka, tierlog and the OS
limit, new and old code), from which come each side's median and spread (min-max over the
rounds) and the ratio of the two medians. ``finish`` adds the 1-minute load average taken at
the start and at the end, prints the table of side-by-side figures, and prints the report as
one JSON object, the LAST line on stdout (``bench/summary.py``, ``make bench-summary``,
reads it)::

    report = reporting.Report("mybench", quick=args.quick)
    report.side_by_side("append 1 MiB", {"tierlog": [810, 790, 805], "os.write": [900, 950,
                        870]}, unit="MB/s", goal=0.8)
    report.data["details"] = {...}
    sys.exit(report.finish())

Why medians (issue 26): on a shared 2-core machine noise only ever slows a round down, so
the best round flatters whichever side got a quiet moment, and the best rounds of two runs
minutes apart differed by more than the margins they claimed. The median is what a user
sees most often; the spread says how far one run can be trusted. The best rounds stay in
each benchmark's own figures, as they were, for comparison with the history in
BENCHMARKS.md.

A quick run (``quick=True``) says, in its output and its JSON (``"claim": false``), that it
is a smoke test of the harness: only full runs are quoted as claims. ``fail`` records a
check that did not hold (for example, a read_committed consumer that was handed an aborted
record): it is printed loudly at the end and ``finish`` returns exit status 1.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
QUICK_NOTICE = (
    "quick run: a smoke test of the harness; its figures are not claims "
    "(only full runs are quoted in BENCHMARKS.md and the README)"
)
HIGHER, LOWER = "higher", "lower"


def load_average() -> float:
    """The machine's 1-minute load average (runnable and waiting tasks, over 2 cores here)."""
    return round(os.getloadavg()[0], 2)


def spread(values: Iterable[float | None]) -> dict[str, Any]:
    """``{"median", "min", "max", "rounds"}`` of the rounds that produced a number (None is a
    round that failed: it is left out); ``{}`` when none did."""
    got = [float(v) for v in values if isinstance(v, int | float)]
    if not got:
        return {}
    return {
        "median": _round(statistics.median(got)),
        "min": _round(min(got)),
        "max": _round(max(got)),
        "rounds": [_round(v) for v in got],
    }


def _round(value: float) -> float:
    """Four significant digits: enough for figures that move by percents between runs."""
    return float(f"{value:.4g}")


def number(value: float | None) -> str:
    """A figure for people: thousands separated, about three significant digits."""
    if value is None:
        return "-"
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def meets(ratio: float | None, goal: float | None, better: str) -> bool | None:
    """Whether a ratio of the first side over the second meets ``goal`` (at least it when
    more is better, at most it when less is); None when either is unknown."""
    if ratio is None or goal is None:
        return None
    return ratio >= goal if better == HIGHER else ratio <= goal


def tierlog_source() -> dict[str, Any]:
    """Which tierlog a broker started from this venv imports (``PYTHONPATH`` may point it at
    a snapshot, e.g. a ``git archive`` of one commit while others edit the working tree),
    the repository's HEAD, and whether its tierlog/ has uncommitted changes."""
    info: dict[str, Any] = {"version": metadata.version("tierlog")}
    done = subprocess.run(
        [str(Path(sys.executable)), "-c", "import tierlog; print(tierlog.__file__)"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(sys.executable).parent,  # as the tierlog script runs: no cwd on sys.path
    )
    package = Path(done.stdout.strip()).parent if done.returncode == 0 else None
    info["package"] = str(package)
    info["package_is_this_repository"] = package == ROOT / "tierlog"
    git = shutil.which("git")
    if git is not None:

        def run(*argv: str) -> str:
            cmd = (git, "-C", str(ROOT), *argv)
            return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()

        info["repository_head"] = run("rev-parse", "--short", "HEAD")
        info["repository_tierlog_changed"] = bool(run("status", "--porcelain", "--", "tierlog"))
    return info


class Report:
    """One benchmark run's report: its figures (``data``), its side-by-side figures, the
    load average around it, the checks that failed; printed by ``finish``.

    Args:
        bench: the benchmark's name (``"throughput"``), the JSON's ``bench``.
        quick: a quick run (a smoke test, never a claim).
        out: where the human-readable lines go (stdout unless the benchmark writes its
            progress to stderr); the JSON line always goes to stdout.
    """

    def __init__(self, bench: str, *, quick: bool, out: TextIO | None = None) -> None:
        self.out = out
        self.started = time.monotonic()
        self.figures: list[dict[str, Any]] = []
        self.failed: list[str] = []
        self.data: dict[str, Any] = {
            "bench": bench,
            "quick": quick,
            "claim": not quick,
            "load_average": {"start": load_average()},
            "env": {"cpus": os.cpu_count(), "python": platform.python_version()},
        }
        if quick:
            self.say(QUICK_NOTICE)

    def say(self, text: str) -> None:
        print(text, file=self.out or sys.stdout, flush=True)

    def side_by_side(
        self,
        name: str,
        rounds: Mapping[str, Sequence[float | None]],
        *,
        unit: str,
        better: str = HIGHER,
        goal: float | None = None,
    ) -> dict[str, Any]:
        """Record (and print) one side-by-side figure.

        Args:
            name: what is compared, unique within the benchmark (``"modern_acks1"``).
            rounds: the two sides in order, each side's value per round; the ratio is the
                first side's median over the second's (``{"tierlog": [...], "kafka":
                [...]}`` gives tierlog/kafka).
            unit: of the values (``"msgs/s"``, ``"ms"``).
            better: ``"higher"`` or ``"lower"``: which way the values are better.
            goal: the ratio the project aims for (at least it when higher is better, at
                most it when lower is), if there is one.

        Returns:
            The figure as it goes into the JSON's ``side_by_side`` list.
        """
        if better not in (HIGHER, LOWER) or len(rounds) != 2:
            raise ValueError(f"{name}: two sides and better=higher|lower, not {better!r}")
        (first, a_rounds), (second, b_rounds) = rounds.items()
        a, b = spread(a_rounds), spread(b_rounds)
        ratio = _round(a["median"] / b["median"]) if a and b and b["median"] else None
        figure: dict[str, Any] = {
            "name": name,
            "unit": unit,
            "better": better,
            "sides": [first, second],
            first: a,
            second: b,
            "ratio": ratio,
        }
        if goal is not None:
            figure["goal"] = goal
            figure["meets_goal"] = meets(ratio, goal, better)
        self.figures.append(figure)
        self.say(describe(figure))
        return figure

    def fail(self, message: str) -> None:
        """A check did not hold: say so now, again at the end, and exit with status 1."""
        self.failed.append(message)
        self.say(f"CHECK FAILED: {message}")

    def finish(self, *, interrupted: str | None = None) -> int:
        """Print the side-by-side table and the JSON line (last, on stdout); the exit status:
        130 if ``interrupted`` (its name goes into the JSON), 1 if a check failed, else 0."""
        self.data["load_average"]["end"] = load_average()
        self.data["seconds"] = round(time.monotonic() - self.started, 1)
        self.data["side_by_side"] = self.figures
        self.data["failed_checks"] = self.failed
        if interrupted:
            self.data["interrupted"] = interrupted
        if self.figures:
            self.say("side by side (median of the rounds, min-max; ratio of the medians):")
            for figure in self.figures:
                self.say(describe(figure))
        load = self.data["load_average"]
        self.say(f"load average (1 min): {load['start']} at the start, {load['end']} at the end")
        if self.data["quick"]:
            self.say(QUICK_NOTICE)
        for message in self.failed:
            self.say(f"CHECK FAILED: {message}")
        print(json.dumps(self.data, separators=(",", ":"), default=str), flush=True)
        if interrupted:
            return 130
        return 1 if self.failed else 0


def describe(figure: Mapping[str, Any]) -> str:
    """One line: each side's median (min-max, rounds), the ratio, the goal if any."""
    cells = []
    for side in figure["sides"]:
        s = figure[side]
        if not s:
            cells.append(f"{side} -")
            continue
        n = len(s["rounds"])
        span = f"{number(s['min'])}-{number(s['max'])}, {n} rounds" if n > 1 else "1 round"
        cells.append(f"{side} {number(s['median'])} ({span})")
    first, second = figure["sides"]
    ratio = f"{first}/{second} {number(figure['ratio'])}"
    if "goal" in figure:
        sign = ">=" if figure["better"] == HIGHER else "<="
        verdict = {True: "met", False: "NOT met", None: "unknown"}[figure["meets_goal"]]
        ratio += f" (goal {sign} {figure['goal']:g}: {verdict})"
    head = f"  {figure['name']} [{figure['unit']}, {figure['better']} is better]"
    return f"{head:<60} " + "  ".join(cells) + "  " + ratio
