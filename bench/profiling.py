"""cProfile for a tierlog broker, switched on and off from outside by a signal; the top costs.

Run as the broker's command (``tierlog_ref.start_tierlog(..., profile=PATH)`` does)::

    python bench/profiling.py PATH broker start --config server.properties

The broker runs as ``tierlog broker start`` would, in this process. The first
``PROFILE_SIGNAL`` starts cProfile on the main thread (the broker's event loop; worker
threads are not seen), the second stops it and writes the stats to PATH (``pstats``
format), so a profile holds one measured window and none of the start-up (imports,
``__transaction_state`` creation) that would swamp a few seconds of workload. ``toggle``
sends the signal and, when stopping, waits for the file; ``top_costs`` reads it back.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import pstats
import signal
import sys
import time
from pathlib import Path
from typing import Any

# SIGRTMIN+1: the broker itself uses SIGUSR1 (thread stacks) and SIGUSR2 (asyncio tasks).
PROFILE_SIGNAL = signal.SIGRTMIN + 1
# The event loop waiting for sockets: the broker is idle, not busy, for this time.
IDLE = ("<method 'poll' of 'select.epoll' objects>", "<method 'select' of 'select.")


def toggle(pid: int, path: Path, stop: bool, timeout: float = 30.0) -> bool:
    """Start (``stop`` false) or stop the profile of the broker ``pid``; when stopping, wait
    up to ``timeout`` seconds for the stats file. False if it did not appear."""
    if stop:
        for stale in (path, path.with_suffix(".done")):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
    os.kill(pid, PROFILE_SIGNAL)
    if not stop:
        time.sleep(0.2)  # the handler runs at the loop's next bytecode; let it land
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.with_suffix(".done").exists():
            return True
        time.sleep(0.05)
    return False


def top_costs(path: Path, top: int = 25) -> dict[str, Any]:
    """The ``top`` functions by own time in the stats at ``path``, each with its share of
    the busy time (all own time less the event loop's waits in ``select``/``epoll``)."""
    table: dict[Any, Any] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    rows, idle = [], 0.0
    for (file, line, func), (_cc, calls, own, cum, _callers) in table.items():
        if func.startswith(IDLE):
            idle += own
            continue
        name = short_name(file, line, func)
        rows.append({"fn": name, "calls": calls, "own_s": own, "cum_s": cum})
    busy = max(sum(r["own_s"] for r in rows), 1e-9)
    rows.sort(key=lambda r: -r["own_s"])
    for r in rows:
        r.update(own_s=round(r["own_s"], 3), cum_s=round(r["cum_s"], 3))
        r["busy_share"] = round(r["own_s"] / busy, 3)
    return {"busy_s": round(busy, 2), "idle_s": round(idle, 2), "top": rows[:top]}


def short_name(file: str, line: int, func: str) -> str:
    """``tierlog/local/log.py:196(append)``: the path from the package down; C functions
    as cProfile names them."""
    if file == "~":
        return func
    parts = Path(file).parts
    for anchor in ("tierlog", "asyncio", "concurrent"):
        if anchor in parts:
            start = len(parts) - 1 - parts[::-1].index(anchor)
            return f"{'/'.join(parts[start:])}:{line}({func})"
    return f"{Path(file).name}:{line}({func})"


def _main(argv: list[str]) -> int:
    out = Path(argv[0])
    profile = cProfile.Profile()
    running = [False]

    def on_signal(_signum: int, _frame: object) -> None:
        if not running[0]:
            profile.enable()
        else:
            profile.disable()
            profile.dump_stats(str(out))
            out.with_suffix(".done").touch()  # dump_stats is not atomic; this marks the end
        running[0] = not running[0]

    signal.signal(PROFILE_SIGNAL, on_signal)
    # This script's folder (bench/) is sys.path[0]; its module names must not shadow any
    # the broker imports.
    sys.path.pop(0)
    from tierlog.cli import main

    return main(argv[1:])


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
