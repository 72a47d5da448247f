"""`tierlog cluster start` (a local cluster with its own ZooKeeper), `tierlog cluster status`
and `tierlog topics describe` on it, as a user runs them; and EmbeddedCluster."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.tools.cli import Cli
from tierlog.broker.embedded import EmbeddedCluster


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports on 127.0.0.1, below the kernel's
    ephemeral range: a port from that range (what ``bind(0)`` gives) can be taken again by
    any outgoing connection, or by ZooKeeper's own ``bind(0)``, before the brokers listen."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(max(1024, low - 12_000), low - count)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def test_cluster_start_status_and_ctrl_c(tmp_path: Path) -> None:
    port = free_ports(2)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tierlog.cli",
            "cluster",
            "start",
            "--brokers",
            "2",
            "--data-dir",
            str(tmp_path / "cluster"),
            "--port",
            str(port),
            "--racks",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if not line or "cluster up" in line:
                break
        assert lines and "cluster up" in lines[-1], "".join(lines)
        cli = Cli(f"127.0.0.1:{port},127.0.0.1:{port + 1}")
        cli.ok("topics", "create", "pairs", "--partitions", "2", "--replication-factor", "2")
        status = cli.ok("cluster", "status")
        assert "Broker: 0" in status and "Broker: 1" in status
        assert "Rack: rack-0" in status and "Rack: rack-1" in status
        assert "Under-replicated partitions: 0" in status
        assert "Offline partitions: 0" in status
        described = cli.ok("topics", "describe", "pairs")
        assert "ReplicationFactor: 2" in described
        assert described.count("Isr: ") == 2
        serves_defaults(cli.bootstrap)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "stopped" in out


def start_cluster_process(data_dir: Path, port: int, brokers: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tierlog.cli",
            "cluster",
            "start",
            "--brokers",
            str(brokers),
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def read_until_up(proc: subprocess.Popen[str], timeout: float) -> list[str]:
    """The tool's lines up to "cluster up", or all of them if it ended first. A thread reads,
    so that a tool that hangs cannot hang the test past ``timeout``."""
    lines: list[str] = []
    up = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "cluster up" in line:
                break
        up.set()

    threading.Thread(target=read, daemon=True).start()
    up.wait(timeout)
    return lines


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (ZooKeeper and the brokers run in sessions of their own,
    so a signal to the tool's process group would not reach them), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def test_cluster_start_on_the_data_dir_of_a_killed_cluster(tmp_path: Path) -> None:
    """Issue 20 item 11: every process of a running cluster (the tool, ZooKeeper, the
    brokers) is SIGKILLed; `tierlog cluster start` on the same data dir comes up again. Its
    ZooKeeper brings the killed brokers' sessions back from its data dir, and each broker
    waits for its old registration to expire instead of exiting (said once by the tool)."""
    port = free_ports(2)
    data_dir = tmp_path / "cluster"
    first = start_cluster_process(data_dir, port, 2)
    try:
        lines = read_until_up(first, 90)
        assert lines and "cluster up" in lines[-1], "".join(lines)
    finally:
        victims = [first.pid, *descendants(first.pid)]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        first.wait(10)
    assert len(victims) >= 4, victims  # the tool, ZooKeeper and two brokers

    began = time.monotonic()
    again = start_cluster_process(data_dir, port, 2)
    try:
        lines = read_until_up(again, 90)
        took = time.monotonic() - began
        assert lines and "cluster up" in lines[-1], "".join(lines)
        notices = [line for line in lines if "still holds the registrations" in line]
        assert len(notices) == 1 and "brokers 0,1" in notices[0], lines
        assert took < 60, lines  # the wait is bounded by the session timeout (18 s) + 6 s
        status = Cli(f"127.0.0.1:{port}").ok("cluster", "status")
        assert "Broker: 0" in status and "Broker: 1" in status
        for n in (0, 1):
            log = (data_dir / f"broker-{n}.log").read_text()
            assert log.count(f"stale registration of broker {n} expired") == 1
            assert "Traceback" not in log
    finally:
        again.send_signal(signal.SIGINT)
        out, _ = again.communicate(timeout=120)
    assert again.returncode == 0, out


def test_cluster_start_says_why_a_broker_could_not_start(tmp_path: Path) -> None:
    """A broker whose port is taken exits at once; the tool says so with the broker's own
    reason, without waiting out its start timeout, and stops the rest."""
    port = free_ports(2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        began = time.monotonic()
        proc = start_cluster_process(tmp_path / "cluster", port, 2)
        out, _ = proc.communicate(timeout=120)
        took = time.monotonic() - began
    assert proc.returncode == 1, out
    last = out.strip().splitlines()[-1]
    assert last.startswith(
        f"tierlog: broker 1 exited before it started (exit status 1): tierlog: cannot listen "
        f"on 127.0.0.1:{port + 1}: the address is already in use"
    ), out
    assert last.endswith(f"see {tmp_path / 'cluster' / 'broker-1.log'}"), out
    assert "Traceback" not in out
    assert took < 50, f"{took:.0f} s: it waited for the start timeout (60 s)"


def serves_defaults(bootstrap: str) -> None:
    """What a user of a fresh development cluster does first: a producer with librdkafka's
    defaults (acks=all) writes to a topic created on first use (default.replication.factor),
    and a consumer group (``__consumer_offsets`` with offsets.topic.replication.factor)
    reads it back and commits. With three replicas on two brokers neither worked."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 30_000})
    acked: list[bytes] = []
    errors: list[object] = []

    def delivered(err: object, msg: Any) -> None:
        if err is None:
            acked.append(msg.value())
        else:
            errors.append(err)

    for i in range(10):
        producer.produce("first-use", b"%d" % i, on_delivery=delivered)
    assert producer.flush(40) == 0
    assert not errors and len(acked) == 10, f"acks=all records were refused: {errors[:1]}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "first-use-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["first-use"])
        seen: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(seen) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        assert sorted(seen) == sorted(acked), "the consumer group got no records"
        committed = consumer.commit(asynchronous=False)
        assert committed and all(tp.error is None for tp in committed)
    finally:
        consumer.close()


def test_cluster_start_fits_replication_to_the_broker_count() -> None:
    from tierlog.tools.cluster import replication_settings

    one, two, five = (replication_settings(n) for n in (1, 2, 5))
    assert one["default.replication.factor"] == one["offsets.topic.replication.factor"] == "1"
    assert one["min.insync.replicas"] == one["transaction.state.log.min.isr"] == "1"
    assert two["transaction.state.log.replication.factor"] == "2"
    assert two["min.insync.replicas"] == "1"
    assert five["default.replication.factor"] == "3" and five["min.insync.replicas"] == "2"


def test_embedded_cluster_replicates_and_survives_a_clean_broker_stop(tmp_path: Path) -> None:
    with EmbeddedCluster(3, data_dir=tmp_path / "cluster") as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("embedded", 1, 3)])["embedded"].result(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            partition = admin.list_topics("embedded", timeout=10).topics["embedded"].partitions[0]
            if partition.leader >= 0 and len(partition.isrs) == 3:
                break
            time.sleep(0.2)
        leader = partition.leader
        cluster.stop_broker(leader)  # clean: its leadership moves first
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        partition = admin.list_topics("embedded", timeout=10).topics["embedded"].partitions[0]
        assert partition.leader not in (-1, leader)
        assert leader not in partition.isrs
        # The stopped broker's replica is still assigned, out of the ISR, and offline.
        row = Cli(cluster.bootstrap).ok("topics", "describe", "embedded").splitlines()[1]
        replicas = row.split("\tReplicas: ")[1].split("\t")[0].split(",")
        assert sorted(replicas) == ["0", "1", "2"], row
        assert str(leader) not in row.split("\tIsr: ")[1].split("\t")[0].split(","), row
        assert row.endswith(f"\tOffline: {leader}"), row


def test_zookeeper_that_is_missing_or_does_not_start_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from tierlog.broker.coordination import zk_server
    from tierlog.tools import cluster
    from tierlog.tools.client_config import ToolError

    monkeypatch.setattr(zk_server, "ZK_SERVER_SH", tmp_path / "no-zkServer.sh")
    with pytest.raises(ToolError, match="make zookeeper"):
        cluster.start_cluster(1, io.StringIO(), data_dir=tmp_path / "a")
    monkeypatch.undo()

    def fails(self: object) -> None:
        raise RuntimeError("ZooKeeper did not start; log:\n...")

    monkeypatch.setattr(zk_server.ZooKeeperServer, "start", fails)
    with pytest.raises(ToolError, match="did not start on port") as raised:
        cluster.start_cluster(1, io.StringIO(), data_dir=tmp_path / "b")
    assert "\n" not in str(raised.value)


class ClusterOutput:
    """The lines ``tierlog cluster start`` prints, read on a thread, waited for by text."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        import queue
        import threading

        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._proc = proc

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self._queue.put(line.rstrip("\n"))
            self._queue.put(None)

        threading.Thread(target=read, daemon=True).start()

    def wait_for(self, text: str, timeout_s: float = 120.0) -> str:
        import queue

        for line in self.lines:
            if text in line:
                return line
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            assert line is not None, f"cluster start exited: {self.lines}"
            self.lines.append(line)
            if text in line:
                return line
        raise AssertionError(f"{text!r} not printed in {timeout_s} s: {self.lines}")

    def to_the_end(self, timeout_s: float = 10.0) -> list[str]:
        """Every line, once the process closed its output."""
        while (line := self._queue.get(timeout=timeout_s)) is not None:
            self.lines.append(line)
        return self.lines


def brokers_listed(cli: Cli, wanted: set[int], timeout_s: float = 60.0) -> str:
    """`cluster status` once it lists exactly the brokers ``wanted``."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = cli.ok("cluster", "status")
        rows = [line for line in status.splitlines() if line.startswith("Broker:")]
        listed = {int(row.split()[1]) for row in rows}
        if listed == wanted or time.monotonic() > deadline:
            assert listed == wanted, status
            return status
        time.sleep(0.5)


@pytest.mark.timeout(360)
def test_cluster_start_restarts_a_dead_broker_and_stops_one_on_request(tmp_path: Path) -> None:
    """Issue 25 item 6: kill -9 of one broker used to stop the whole cluster."""
    import json

    port = free_ports(3)
    data_dir = tmp_path / "cluster"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "tierlog.cli", "cluster", "start", "--brokers", "3"),
            *("--data-dir", str(data_dir), "--port", str(port)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    out = ClusterOutput(proc)
    cli = Cli(",".join(f"127.0.0.1:{port + n}" for n in range(3)))
    try:
        out.wait_for("cluster up")
        cli.ok("topics", "create", "orders", "--partitions", "3", "--replication-factor", "3")
        state = json.loads((data_dir / "cluster.json").read_text())
        os.kill(state["brokers"]["1"]["pid"], signal.SIGKILL)
        line = out.wait_for("broker 1 exited")
        assert "killed by SIGKILL" in line and "brokers 0, 2 keep running" in line, line
        assert "restarting it in 1 s" in line
        # The others serve acks=all meanwhile (min.insync.replicas 2 of 3).
        producer = Producer({"bootstrap.servers": cli.bootstrap, "message.timeout.ms": 60_000})
        for i in range(20):
            producer.produce("orders", b"%d" % i)
        assert producer.flush(90) == 0
        out.wait_for("broker 1: running again")
        brokers_listed(cli, {0, 1, 2})
        assert "stopping the cluster" not in "\n".join(out.lines)

        stopped = run_cli("cluster", "stop-broker", "2", "--data-dir", str(data_dir))
        assert stopped.returncode == 0, stopped.stderr
        assert "broker 2 stopped (its leaderships moved first)" in stopped.stdout
        out.wait_for("broker 2: stopped as asked")
        brokers_listed(cli, {0, 1})
        held = json.loads((data_dir / "cluster.json").read_text())["brokers"]["2"]
        assert (held["state"], held["pid"]) == ("stopped", None)  # held, not restarted
        started = run_cli("cluster", "start-broker", "2", "--data-dir", str(data_dir))
        assert started.returncode == 0, started.stderr
        assert f"broker 2 running on 127.0.0.1:{port + 2}" in started.stdout
        brokers_listed(cli, {0, 1, 2})
        unknown = run_cli("cluster", "stop-broker", "7", "--data-dir", str(data_dir))
        assert unknown.returncode == 1 and "has no broker 7 (brokers: 0, 1, 2)" in unknown.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        stop_within(proc, data_dir, out, 200)
    assert out.to_the_end()[-2:] == ["stopping the cluster...", "stopped"], out.lines
    assert proc.returncode == 0, out.lines
    assert not (data_dir / "cluster.json").exists()


def stop_within(
    proc: subprocess.Popen[str], data_dir: Path, out: ClusterOutput, timeout: float
) -> None:
    """Wait for ``cluster start`` to stop; past ``timeout`` fail with what it and its
    brokers last said (a stop once took over 120 s in a loaded full run, with no trace)."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        tails = {
            log.name: log.read_text(errors="replace").splitlines()[-15:]
            for log in sorted(data_dir.glob("broker-*.log"))
        }
        raise AssertionError(f"not stopped in {timeout:g} s: {out.lines[-10:]} {tails}") from None


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tierlog.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
