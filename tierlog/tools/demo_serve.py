"""``tierlog demo serve``: a broker in the foreground on the data a demo left behind.

``tierlog demo`` stops its embedded broker when it ends; its data stays in its data dir
(topic ``activity``, the remote tier under ``<data dir>/logs/remote``). This serves that
data again on a fixed address (127.0.0.1:9092 by default, what the README, the console
tools, ``configs/*.toml`` and the notebooks' defaults point at) with the same broker
settings the demo used, until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TextIO

from tierlog.local.log_manager import LOCK_FILE
from tierlog.tools.demo import TOPIC, demo_broker_overrides
from tierlog.tools.demo_dir import in_use
from tierlog.util.cli_errors import CliError

DEFAULT_PORT = 9092


def serve_overrides(data_dir: Path, port: int) -> dict[str, str]:
    """The demo's own broker settings, listening on 127.0.0.1:``port``."""
    return {**demo_broker_overrides(data_dir), "listeners": f"PLAINTEXT://127.0.0.1:{port}"}


def check_demo_data(data_dir: Path) -> None:
    """Refuse, in one line, a data dir with no demo data or one a broker already serves.

    Raises:
        CliError: with the fix (run the demo first, or stop the other broker).
    """
    if not (data_dir / "logs" / "meta.properties").is_file():
        raise CliError(
            f"no demo data in {data_dir} (no broker logs under {data_dir / 'logs'}); run "
            "`make demo` (or `tierlog demo`) first, or pass the demo's --data-dir"
        )
    busy = in_use(data_dir)
    if busy is not None:
        raise CliError(
            f"{data_dir} is already served by a running broker (it holds {busy / LOCK_FILE}); use "
            "that one, or stop it first (Ctrl-C in its shell)"
        )


def serve_demo(data_dir: Path, port: int, out: TextIO) -> int:
    """Run a broker on ``data_dir``'s demo data until SIGINT/SIGTERM; its exit status.

    Raises:
        CliError: no demo data there, a broker already serves it, or ``port`` is taken.
    """
    from tierlog.broker.runner import run_broker

    check_demo_data(data_dir)
    remote = (data_dir / "logs" / "remote").resolve()
    print(
        f"serving the demo's data in {data_dir} on 127.0.0.1:{port}: topic '{TOPIC}', remote "
        f"tier {remote.as_uri()} (Ctrl-C stops it)",
        file=out,
        flush=True,
    )
    try:
        return run_broker(None, serve_overrides(data_dir, port))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise CliError(
            f"cannot listen on 127.0.0.1:{port}: the address is already in use (another "
            "broker?); stop that process, or pick a free port with --port PORT"
        ) from exc
