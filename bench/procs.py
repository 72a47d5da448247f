"""Broker child processes for the benchmarks: free ports, start/stop, readiness, RSS sampling.

Every process started here is recorded in a module-level registry and killed (its whole
process group, by id) at interpreter exit, so an exception or Ctrl-C never leaves a broker
behind. ``install_signal_handlers`` turns SIGTERM/SIGHUP into ``SystemExit`` so ``finally``
blocks run on those too. Not thread-safe: start and stop processes from the main thread.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

_LIVE: dict[int, ManagedProcess] = {}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def install_signal_handlers() -> None:
    """Make SIGTERM and SIGHUP unwind the stack like Ctrl-C does, so cleanup code runs."""

    def _exit(signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGHUP, _exit)


@dataclass
class StopResult:
    """How a process ended: ``clean`` means it exited by itself after SIGTERM."""

    clean: bool
    returncode: int | None
    seconds: float


@dataclass
class ManagedProcess:
    """A child process in its own session, output captured to ``log_path``."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the captured output, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> StopResult:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL the process group."""
        begin = time.monotonic()
        clean = True
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                clean = False
        self._kill_group()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)
        _LIVE.pop(self.pid, None)
        return StopResult(clean, self.popen.returncode, round(time.monotonic() - begin, 2))

    def _kill_group(self) -> None:
        # The child leads its own session (start_new_session), so its process group id is
        # its pid: this reaches helpers it spawned and nothing else.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)


def start_process(
    name: str, argv: Sequence[str], log_path: Path, cwd: Path | None = None
) -> ManagedProcess:
    """Start ``argv`` in a new session with stdout+stderr going to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as out:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )
    proc = ManagedProcess(name, popen, log_path)
    _LIVE[popen.pid] = proc
    return proc


@atexit.register
def _kill_all() -> None:
    for proc in list(_LIVE.values()):
        proc._kill_group()
        _LIVE.pop(proc.pid, None)


class BrokerNotReady(RuntimeError):
    """The broker exited or did not answer Metadata in time; the message has its log tail."""


def wait_ready(proc: ManagedProcess, bootstrap: str, timeout: float) -> float:
    """Poll Metadata with a confluent-kafka AdminClient until it lists a broker.

    Returns the seconds from process start to the first good answer.

    Raises:
        BrokerNotReady: the process died or ``timeout`` passed.
    """
    from confluent_kafka.admin import AdminClient

    # log_level 0: librdkafka would log every refused connection while the broker starts.
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "broker.address.family": "v4"}
    conf["log_level"] = 0
    admin = AdminClient(conf)
    deadline = time.monotonic() + timeout
    last_error = "no answer"
    while time.monotonic() < deadline:
        if not proc.alive():
            raise BrokerNotReady(
                f"{proc.name} exited with {proc.popen.returncode} before answering; "
                f"log {proc.log_path}:\n{proc.log_tail()}"
            )
        try:
            meta = admin.list_topics(timeout=2.0)
            if meta.brokers:
                return round(time.monotonic() - proc.started, 2)
        except Exception as exc:  # KafkaException while the port is not open yet
            last_error = str(exc)
        time.sleep(0.2)
    raise BrokerNotReady(
        f"{proc.name} did not answer Metadata within {timeout:.0f} s ({last_error}); "
        f"log {proc.log_path}:\n{proc.log_tail()}"
    )


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            out.extend(int(c) for c in task.read_text().split())
    return out


def tree_rss(pid: int) -> tuple[int, int, int]:
    """(VmRSS, RssAnon, RssFile) in bytes summed over ``pid`` and its descendants.

    Shared pages of a forked tree are counted once per process (an upper bound).
    """
    totals = [0, 0, 0]
    keys = {"VmRSS": 0, "RssAnon": 1, "RssFile": 2}
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/status") as status:
                for line in status:
                    key, _, value = line.partition(":")
                    if key in keys:
                        totals[keys[key]] += int(value.split()[0]) * 1024
        except OSError:
            continue
        pending.extend(_children(current))
    return totals[0], totals[1], totals[2]


def tree_cpu_seconds(pid: int) -> float:
    """User+system CPU seconds used so far by ``pid`` and its live descendants."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            stat = Path(f"/proc/{current}/stat").read_text()
        except OSError:
            continue
        # Field 2 (comm) may hold spaces; the fields after its closing parenthesis are fixed.
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        pending.extend(_children(current))
    return total / ticks


@dataclass(frozen=True)
class RssSample:
    t: float  # time.monotonic()
    rss: int
    anon: int
    file: int


class RssSampler:
    """Samples a process tree's RSS every ``interval`` seconds in a daemon thread.

    ``window(t0, t1)`` summarises the samples taken between two ``time.monotonic()`` stamps.
    """

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[RssSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-{pid}", daemon=True)

    def start(self) -> RssSampler:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def sample(self) -> RssSample | None:
        rss, anon, file = tree_rss(self.pid)
        if rss == 0:
            return None
        point = RssSample(time.monotonic(), rss, anon, file)
        self.samples.append(point)  # list.append is atomic under the GIL
        return point

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def window(self, t0: float, t1: float) -> dict[str, float]:
        """Start/peak/end VmRSS (MiB) and end RssAnon/RssFile for samples in [t0, t1]."""
        inside = [s for s in list(self.samples) if t0 <= s.t <= t1]
        if not inside:
            return {}
        mib = 1 << 20
        return {
            "rss_start_mib": round(inside[0].rss / mib, 1),
            "rss_peak_mib": round(max(s.rss for s in inside) / mib, 1),
            "rss_end_mib": round(inside[-1].rss / mib, 1),
            "anon_end_mib": round(inside[-1].anon / mib, 1),
            "file_end_mib": round(inside[-1].file / mib, 1),
        }
