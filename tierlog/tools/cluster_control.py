"""``tierlog cluster stop-broker|start-broker N``: take one broker of a running
``tierlog cluster start`` down on purpose (to watch failover), and bring it back.

They talk to the supervisor through its control files (``cluster_supervisor``): a
``control/broker-N.down`` file holds broker N down, and ``cluster.json`` says when the
supervisor has done it. Each command waits (bounded) until it has, and says what happened.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any, TextIO

from tierlog.tools.client_config import ToolError
from tierlog.tools.cluster_supervisor import STATE_FILE, down_file

# A clean stop hands leaderships over first: seconds; a start replays the log.
WAIT_S = 90.0


def read_cluster(data_dir: Path) -> dict[str, Any]:
    """The running supervisor's ``cluster.json``.

    Raises:
        ToolError: no ``tierlog cluster start`` runs on ``data_dir``.
    """
    path = data_dir / STATE_FILE
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
        os.kill(int(doc["supervisor_pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        raise ToolError(
            f"no `tierlog cluster start` is running on {data_dir} (no live {path}); start "
            "one, or give its directory with --data-dir"
        ) from None
    return doc


def _broker_state(data_dir: Path, broker_id: int) -> str:
    brokers = read_cluster(data_dir)["brokers"]
    if str(broker_id) not in brokers:
        raise ToolError(
            f"the cluster on {data_dir} has no broker {broker_id} (brokers: "
            f"{', '.join(sorted(brokers, key=int))})"
        )
    state: str = brokers[str(broker_id)]["state"]
    return state


def _wait_for(data_dir: Path, broker_id: int, wanted: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while _broker_state(data_dir, broker_id) != wanted:
        if time.monotonic() > deadline:
            raise ToolError(
                f"broker {broker_id} is not {wanted} after {timeout_s:.0f} s; see the "
                f"output of `tierlog cluster start` and {data_dir}/broker-{broker_id}.log"
            )
        time.sleep(0.2)


def stop_broker(
    data_dir: Path, broker_id: int, out: TextIO, *, kill: bool = False, timeout_s: float = WAIT_S
) -> int:
    """Hold broker ``broker_id`` down: SIGTERM (a clean stop) or SIGKILL (a crash)."""
    state = _broker_state(data_dir, broker_id)
    held = down_file(data_dir, broker_id)
    if state == "stopped":
        print(f"broker {broker_id} is stopped already", file=out)
        return 0
    held.write_text("kill\n" if kill else "stop\n")
    _wait_for(data_dir, broker_id, "stopped", timeout_s)
    how = "killed (SIGKILL, a crash)" if kill else "stopped (its leaderships moved first)"
    print(
        f"broker {broker_id} {how}; the cluster keeps it down until "
        f"`tierlog cluster start-broker {broker_id} --data-dir {data_dir}`",
        file=out,
    )
    return 0


def start_broker(data_dir: Path, broker_id: int, out: TextIO, *, timeout_s: float = WAIT_S) -> int:
    """Let broker ``broker_id`` run again, and wait until it has started."""
    state = _broker_state(data_dir, broker_id)
    down_file(data_dir, broker_id).unlink(missing_ok=True)
    if state != "running":
        _wait_for(data_dir, broker_id, "running", timeout_s)
    port = read_cluster(data_dir)["brokers"][str(broker_id)]["port"]
    print(f"broker {broker_id} running on 127.0.0.1:{port}", file=out)
    return 0


def add_commands(cluster: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``stop-broker`` and ``start-broker`` under ``tierlog cluster``."""
    from tierlog.tools.client_config import run_tool

    def stop(args: argparse.Namespace) -> int:
        import sys

        return run_tool(
            lambda: stop_broker(Path(args.data_dir), args.broker, sys.stdout, kill=args.kill)
        )

    def start(args: argparse.Namespace) -> int:
        import sys

        return run_tool(lambda: start_broker(Path(args.data_dir), args.broker, sys.stdout))

    down = cluster.add_parser(
        "stop-broker",
        help="stop one broker of a running `cluster start` and keep it down (try failover)",
    )
    up = cluster.add_parser("start-broker", help="start a broker stop-broker took down")
    for command in (down, up):
        command.add_argument("broker", type=int, metavar="ID", help="the broker id")
        command.add_argument(
            "--data-dir",
            default="./data/cluster",
            help="the --data-dir of `cluster start` (default: %(default)s)",
        )
    down.add_argument(
        "--kill", action="store_true", help="SIGKILL, a crash (default: SIGTERM, a clean stop)"
    )
    down.set_defaults(func=stop)
    up.set_defaults(func=start)
