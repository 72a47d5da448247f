"""The broker processes of ``tierlog cluster start``: started, watched, restarted with
backoff when one dies, and stopped or started one at a time on request.

A development cluster exists to show failover, so one broker dying must not take the others
down: the supervisor says which broker exited and how, keeps the rest running and starts it
again after a backoff that doubles with each quick failure (``BACKOFF_S`` up to
``MAX_BACKOFF_S``) and resets once the broker has stayed up ``STABLE_S``. A broker
SIGKILLed and restarted at once may find its old ZooKeeper registration still alive (until
``zookeeper.session.timeout.ms``): it then exits, or waits the registration out, and either
way the backoff covers it.

**Control files** (read by ``tierlog cluster stop-broker|start-broker``, in the cluster's
data dir)::

    cluster.json              {"version": 1, "supervisor_pid": P, "brokers": {"0":
                               {"pid": 123, "port": 9092, "state": "running", "log": "...",
                                "restarts": 0}, ...}}   (replaced atomically)
    control/broker-N.down     present: keep broker N down ("stop": SIGTERM, its
                               leaderships move first; "kill": SIGKILL, a crash)

States: ``starting`` -> ``running`` -> (exit) ``waiting`` (the backoff) -> ``starting``;
``stopped`` while a ``.down`` file holds it. Not thread-safe: one supervisor thread calls
``poll`` (the CLI's loop).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO

from tierlog.util.atomic_files import atomic_write

STATE_FILE = "cluster.json"
CONTROL_DIR = "control"
STATE_VERSION = 1
BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
# A broker up this long has recovered: its next failure starts the backoff again.
STABLE_S = 60.0
STOP_TIMEOUT_S = 60.0
# How often start_all looks for a broker that exited while it waits for the others.
POLL_S = 0.1


def down_file(data_dir: Path, broker_id: int) -> Path:
    return data_dir / CONTROL_DIR / f"broker-{broker_id}.down"


class BrokerProcess:
    """One ``tierlog broker start`` child; its stderr goes to ``log_path`` (appended)."""

    def __init__(self, broker_id: int, overrides: Mapping[str, str], log_path: Path) -> None:
        self.broker_id = broker_id
        self.log_path = log_path
        args = [sys.executable, "-m", "tierlog.cli", "broker", "start"]
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        self._log: IO[str] = open(log_path, "a")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=self._log, text=True, start_new_session=True
        )
        self.started = threading.Event()
        threading.Thread(target=self._watch_stdout, daemon=True).start()

    def _watch_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if "started on port" in line:
                self.started.set()

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def stop(self) -> None:
        """SIGTERM: a clean stop (leaderships move first)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._log.close()
        return code


@dataclass
class _Slot:
    """What the supervisor knows of one broker id."""

    broker_id: int
    port: int
    overrides: Mapping[str, str]
    log_path: Path
    process: BrokerProcess | None = None
    state: str = "starting"
    started_at: float = 0.0
    restart_at: float = 0.0
    backoff_s: float = BACKOFF_S
    restarts: int = 0


def last_line(log_path: Path) -> str:
    """The last non-empty line of a broker's log (where it says why it exited), or ""."""
    try:
        with open(log_path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 4096))
            tail = log.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def describe_exit(code: int) -> str:
    """``exit status 1`` or ``killed by SIGKILL``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


class ClusterSupervisor:
    """Starts the brokers, then ``poll()`` restarts dead ones and obeys the control files.

    Args:
        brokers: broker id -> (port, ``--override`` settings).
        data_dir: the cluster's directory (logs, ``cluster.json``, ``control/``).
        out: where what happens is said, one line per event.
        clock: monotonic seconds (tests pass their own).
        spawn: how a broker process is started (tests may pass a fake).
    """

    def __init__(
        self,
        brokers: Mapping[int, tuple[int, Mapping[str, str]]],
        data_dir: Path,
        out: TextIO,
        *,
        clock: Callable[[], float] = time.monotonic,
        spawn: Callable[[int, Mapping[str, str], Path], BrokerProcess] = BrokerProcess,
    ) -> None:
        self.data_dir = data_dir
        self.out = out
        self._clock = clock
        self._spawn = spawn
        self.slots = {
            broker_id: _Slot(broker_id, port, overrides, data_dir / f"broker-{broker_id}.log")
            for broker_id, (port, overrides) in brokers.items()
        }
        (data_dir / CONTROL_DIR).mkdir(parents=True, exist_ok=True)
        for slot in self.slots.values():
            # A stop asked of an earlier run of this cluster does not carry over.
            down_file(data_dir, slot.broker_id).unlink(missing_ok=True)

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def start_all(self, timeout_s: float) -> dict[int, str]:
        """Start every broker and wait for each to say it started, or to exit.

        Returns:
            Broker id -> why it did not start, for those that exited first (with the last
            line of their log, which says why) or were not up within ``timeout_s``; empty
            when all started. A broker that exits at once (its port taken, a bad setting)
            is reported then, not after the whole timeout.
        """
        for slot in self.slots.values():
            self._start(slot)
        deadline = self._clock() + timeout_s
        pending = list(self.slots.values())
        failed: dict[int, str] = {}
        while pending:
            for slot in list(pending):
                assert slot.process is not None
                code = slot.process.exit_code()
                if code is not None:
                    failed[slot.broker_id] = (
                        f"exited before it started ({describe_exit(code)}): "
                        f"{last_line(slot.log_path) or 'its log is empty'}"
                    )
                elif slot.process.started.is_set():
                    slot.state = "running"
                else:
                    continue
                pending.remove(slot)
            if pending and self._clock() >= deadline:
                for slot in pending:
                    failed[slot.broker_id] = f"was not up within {timeout_s:.0f} s"
                break
            if pending:
                assert pending[0].process is not None
                pending[0].process.started.wait(POLL_S)
        self._write_state()
        return dict(sorted(failed.items()))

    def _start(self, slot: _Slot) -> None:
        slot.process = self._spawn(slot.broker_id, slot.overrides, slot.log_path)
        slot.state = "starting"
        slot.started_at = self._clock()

    def poll(self) -> None:
        """One round: notice exits and starts, restart what is due, obey control files."""
        changed = False
        now = self._clock()
        for slot in self.slots.values():
            held = down_file(self.data_dir, slot.broker_id)
            process = slot.process
            if held.exists():
                if slot.state != "stopped":
                    self._bring_down(slot, held)
                    changed = True
                continue
            if slot.state == "stopped":
                self._say(f"broker {slot.broker_id}: starting (asked to)")
                slot.backoff_s = BACKOFF_S
                self._start(slot)
                changed = True
                continue
            if slot.state == "waiting":
                if now >= slot.restart_at:
                    slot.restarts += 1
                    self._say(f"broker {slot.broker_id}: restarting (restart {slot.restarts})")
                    self._start(slot)
                    changed = True
                continue
            assert process is not None
            code = process.exit_code()
            if code is not None:
                process.wait(STOP_TIMEOUT_S)
                if now - slot.started_at >= STABLE_S:
                    slot.backoff_s = BACKOFF_S
                slot.state = "waiting"
                slot.restart_at = now + slot.backoff_s
                alive = [s.broker_id for s in self.slots.values() if s.state == "running"]
                self._say(
                    f"broker {slot.broker_id} exited ({describe_exit(code)}; see "
                    f"{slot.log_path}); brokers {_ids(alive) or 'none'} keep running; "
                    f"restarting it in {slot.backoff_s:.0f} s"
                )
                slot.backoff_s = min(MAX_BACKOFF_S, slot.backoff_s * 2)
                changed = True
            elif slot.state == "starting" and process.started.is_set():
                slot.state = "running"
                self._say(f"broker {slot.broker_id}: running again on 127.0.0.1:{slot.port}")
                changed = True
        if changed:
            self._write_state()

    def _bring_down(self, slot: _Slot, held: Path) -> None:
        how = held.read_text().strip() or "stop"
        process = slot.process
        if process is not None and process.exit_code() is None:
            if how == "kill":
                process.kill()
            else:
                process.stop()
            code = process.wait(STOP_TIMEOUT_S)
            self._say(
                f"broker {slot.broker_id}: stopped as asked ({describe_exit(code)}); "
                f"`tierlog cluster start-broker {slot.broker_id}` starts it again"
            )
        else:
            self._say(f"broker {slot.broker_id}: held down as asked")
        slot.state = "stopped"

    def stop_all(self) -> None:
        """SIGTERM to every running broker, then wait for them all, SIGKILL for any still
        there ``STOP_TIMEOUT_S`` after the signal: one deadline for all, so a stop is bounded
        by it, not by it once per broker."""
        running = [s.process for s in self.slots.values() if s.process is not None]
        for process in running:
            process.stop()
        deadline = self._clock() + STOP_TIMEOUT_S
        for process in running:
            process.wait(max(0.0, deadline - self._clock()))
        for slot in self.slots.values():
            slot.state = "stopped"
        (self.data_dir / STATE_FILE).unlink(missing_ok=True)

    def _write_state(self) -> None:
        brokers = {}
        for slot in self.slots.values():
            alive = slot.process is not None and slot.process.exit_code() is None
            brokers[str(slot.broker_id)] = {
                "pid": slot.process.proc.pid if slot.process is not None and alive else None,
                "port": slot.port,
                "state": slot.state,
                "log": str(slot.log_path),
                "restarts": slot.restarts,
            }
        doc = {"version": STATE_VERSION, "supervisor_pid": os.getpid(), "brokers": brokers}
        atomic_write(self.data_dir / STATE_FILE, (json.dumps(doc, indent=2) + "\n").encode())


def _ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)
