"""The broker under test: ``<venv>/bin/tierlog broker start --config FILE`` on a free port.

The config file uses Kafka's ``server.properties`` keys and only those tierlog's broker
config knows (it rejects unknown keys), so the two brokers get the same settings where it
matters: one partition per topic, auto-creation on, no initial rebalance delay, deleted
topics' files removed after 1 s (the bench deletes each topic when done with it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from procs import ManagedProcess, free_port, start_process


def tierlog_command() -> Path:
    """The ``tierlog`` console script of the venv running this benchmark."""
    return Path(sys.executable).parent / "tierlog"


def unavailable_reason() -> str | None:
    """None if ``tierlog broker start --help`` works here, else why not."""
    cmd = tierlog_command()
    if not cmd.exists():
        return f"{cmd} does not exist (pip install -e . in this venv)"
    try:
        done = subprocess.run(
            [str(cmd), "broker", "start", "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "tierlog broker start --help did not return within 60 s"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        return f"tierlog broker start is not available yet ({' '.join(tail)})"
    return None


def start_tierlog(
    run_dir: Path, extra: dict[str, str] | None = None, profile: Path | None = None
) -> tuple[ManagedProcess, str, Path]:
    """Start a tierlog broker with a fresh log dir: (process, bootstrap, data dir);
    ``extra`` adds server.properties keys. With ``profile``, the broker runs under
    ``bench/profiling.py``: a signal starts and stops cProfile, which writes ``profile``."""
    port = free_port()
    data = run_dir / "data"
    run_dir.mkdir(parents=True, exist_ok=True)
    config = run_dir / "server.properties"
    config.write_text(
        "\n".join(
            [
                "node.id=1",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                f"log.dirs={data}",
                "num.partitions=1",
                "auto.create.topics.enable=true",
                "offsets.topic.replication.factor=1",
                "group.initial.rebalance.delay.ms=0",
                "log.segment.delete.delay.ms=1000",
                *(f"{key}={value}" for key, value in (extra or {}).items()),
                "",
            ]
        )
    )
    command = [str(tierlog_command())]
    if profile is not None:
        command = [sys.executable, str(Path(__file__).with_name("profiling.py")), str(profile)]
    argv = [*command, "broker", "start", "--config", str(config)]
    proc = start_process("tierlog", argv, run_dir / "tierlog.log")
    return proc, f"127.0.0.1:{port}", data
