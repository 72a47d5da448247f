"""``tierlog broker start``: run one broker in the foreground until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import faulthandler
import io
import logging
import signal
import sys
from pathlib import Path

from tierlog.broker.broker import Broker
from tierlog.broker.config import BrokerConfig
from tierlog.util.configdef import ConfigError

log = logging.getLogger(__name__)


async def serve(config: BrokerConfig) -> None:
    broker = Broker(config)
    await broker.start()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(broker.stop()))
    loop.add_signal_handler(signal.SIGUSR2, _log_tasks)
    # One line per listener, then the line tools and tests wait for: the broker is
    # accepting connections (its port: the first listener's).
    for name, server in broker.servers.items():
        print(
            f"tierlog broker {config.broker_id} listener {name} on port {server.port}", flush=True
        )
    print(f"tierlog broker {config.broker_id} started on port {broker.port}", flush=True)
    await broker.wait_stopped()


def _log_tasks() -> None:
    """`kill -USR2 <pid>`: log what every asyncio task awaits (SIGUSR1 shows threads)."""
    for task in asyncio.all_tasks():
        buffer = io.StringIO()
        task.print_stack(file=buffer)
        log.warning("task %s:\n%s", task.get_name(), buffer.getvalue())


def run_broker(config_path: Path | None, overrides: dict[str, str]) -> int:
    logging.getLogger().setLevel(logging.INFO)
    # `kill -USR1 <pid>` writes every thread's stack to stderr (the broker's log): what a
    # broker that does not stop is waiting for (Kafka users get the same from jstack).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if config_path is not None and not config_path.is_file():
        what = "is a directory" if config_path.is_dir() else "does not exist"
        print(
            f"tierlog: config file {config_path} {what} (--config); "
            "configs/server.properties is a commented example",
            file=sys.stderr,
        )
        return 2
    try:
        config = BrokerConfig.load(config_path, overrides)
        config.check_environment()
    except ConfigError as exc:
        print(f"tierlog: bad configuration: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(config))
    except ConfigError as exc:  # found while starting (the remote store would not open)
        print(f"tierlog: bad configuration: {exc}", file=sys.stderr)
        return 2
    return 0
