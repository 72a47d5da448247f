"""Options and failure handling every Kafka client tool shares."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.broker.harness import BrokerProcess
from tests.tools.cli import tierlog


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "command",
    [
        ["topics", "list"],
        ["topics", "describe", "t"],
        ["topics", "create", "t"],
        ["produce", "t"],
        ["consume", "t", "--timeout-ms", "500"],
        ["groups", "list"],
        ["groups", "describe", "g"],
    ],
    ids=lambda c: "-".join(c[:2]),
)
def test_unreachable_broker_fails_fast_with_a_message(command: list[str]) -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    result = tierlog(
        *command, "--bootstrap-server", bootstrap, "--request-timeout-ms", "800",
        stdin="x\n", timeout=15,
    )  # fmt: skip
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert time.monotonic() - started < 8
    assert "Traceback" not in result.stderr
    assert f"cannot reach a broker at {bootstrap}" in result.stderr, result.stderr


def test_command_config_supplies_bootstrap_and_client_properties(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        f"# like Kafka's --command-config\nbootstrap.servers = {broker.bootstrap}\n"
        "client.id=ops-tool\ncompression.type=gzip\n"
    )
    created = tierlog("topics", "create", "cfg", "--command-config", str(config))
    assert created.returncode == 0, created.stderr
    produced = tierlog("produce", "cfg", "--command-config", str(config), stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    listed = tierlog("topics", "list", "--command-config", str(config))
    assert "cfg" in listed.stdout.split()

    missing = tierlog("topics", "list", "--command-config", str(tmp_path / "nope.properties"))
    assert missing.returncode == 1 and "nope.properties" in missing.stderr
    assert "Traceback" not in missing.stderr
    unknown = tmp_path / "unknown.properties"
    unknown.write_text(f"bootstrap.servers={broker.bootstrap}\nno.such.property=1\n")
    result = tierlog("topics", "list", "--command-config", str(unknown))
    assert result.returncode == 1 and "no.such.property" in result.stderr, result.stderr


def test_dump_log_does_not_load_confluent_kafka() -> None:
    code = (
        "import sys; from tierlog.cli import main; main(['dump-log', '/nonexistent/0.log']); "
        "sys.exit('confluent_kafka' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_help_lists_every_command() -> None:
    out = tierlog("--help").stdout
    for command in ("broker", "dump-log", "demo", "topics", "produce", "consume", "groups"):
        assert command in out
