"""Three-broker clusters side by side: tierlog (ZooKeeper mode) vs Apache Kafka 4.x (KRaft).

Both clusters run on 127.0.0.1 at the same time, each with the same client (confluent-kafka),
topics with replication factor 3 and ``min.insync.replicas=2``, producers with ``acks=all``,
``linger.ms=5`` and idempotence on:

  tierlog  3 broker processes (``python -m tierlog.cli broker start --override ...``) and a
           ZooKeeper from Debian's package (``tierlog.broker.coordination.zk_server``); the
           controller is one of the brokers, elected in ZooKeeper.
  kafka    1 dedicated KRaft controller (``process.roles=controller``, a one-voter static
           quorum) + 3 brokers (``process.roles=broker``), jars fetched by
           ``bench/kafka_ref.py`` (as for ``bench/throughput.py``); brokers ``-Xmx1G``, the
           controller ``-Xmx512M``. The dedicated controller plays the part ZooKeeper and
           tierlog's controller play together; neither side's controller is ever killed.

Failure detection is set equal: tierlog's ``zookeeper.session.timeout.ms`` and Kafka's
``broker.session.timeout.ms`` are both ``SESSION_TIMEOUT_MS`` (ZooKeeper's ``tickTime`` of
200 ms allows 400 ms - 60 s sessions; Kafka's brokers heartbeat every 2 s, its default),
and ``replica.lag.time.max.ms`` and ``replica.fetch.wait.max.ms`` are the same on both.
``auto.leader.rebalance.enable`` is off on both (no leadership moves back by itself).

Workloads (each side in turn, who goes first alternating):

  throughput  after a warm-up of the same records on both clusters (full 3M, quick 2M, each
              bounded by 180 s: Kafka's JIT needs ~2M records on this box to reach its
              pace), N records of 1 KiB (full 1.5M, quick 0.3M) into a fresh one-partition
              topic as fast as the client sends them; msgs/s and MB/s of acknowledged
              records; ``--rounds`` rounds (3, quick too), reported as their median and
              spread (``bench/reporting.py``), the best beside them. Around the same window: each
              broker's CPU (utime+stime from /proc/<pid>/stat), reported as broker CPU
              seconds per GiB replicated (per GiB of record values acknowledged with
              acks=all, i.e. written on three brokers), leader and followers apart, and
              the records per batch in the leader's segment files (same batching on both?).
  latency     1 KiB records at a fixed 2,000 msgs/s (same producer settings), p50/p99 of
              produce() -> delivery report (librdkafka's ``Message.latency()``).
  failover    a producer sends 1 KiB records to partition 0 at 1,000 msgs/s; the
              partition's leader gets SIGKILL 2-4 s after the first record (the extra
              0-2 s drawn per round, the same on both sides, so the kill is at a random
              phase of each side's heartbeats); measured: from the kill to the first
              successful delivery report of a record produced after the kill. Each round
              uses a fresh topic whose preferred (hence first) leader is the broker to be
              killed (never tierlog's controller); afterwards the broker is restarted and
              the bench waits until all three replicas are in sync again. Median of
              ``--failover-rounds`` (full 3, quick 1; the same on both sides).

Two more measurements follow on tierlog alone, each on clusters of its own started after the
3-broker clusters above are stopped (so they have the box to themselves):

  move        (``--only-move``; ``--no-move`` leaves it out) a 2-broker tierlog cluster with a
              shared ``file://`` ``remote.log.storage.url``; two topics of one partition, RF 1,
              on broker 0, 64 MiB segments: one tiered (``remote.storage.enable``,
              ``local.retention.bytes`` 256 MiB), one not. ``--move-gib`` GiB (full 10, quick 1)
              of 16 KiB records go into each (acks=1); once the offload has settled (remote end
              = active segment base, local log <= local retention + one segment) each partition
              is reassigned to broker 1 (AlterPartitionReassignments, raw kio to the
              controller), timed from the request to ListPartitionReassignments empty with
              broker 1 leading and in the ISR. Reported: seconds, bytes in broker 1's
              partition dir afterwards, the ratio untiered/tiered, and the new follower's
              log line saying where it started (its first fetch at 0 is answered
              OFFSET_MOVED_TO_TIERED_STORAGE, and it restarts at the leader's local log start
              with the remote segment's producer snapshot and epochs, KIP-405, copying only
              the local tail).
              Kafka is left out: its tiered topics need a RemoteStorageManager plugin (Kafka
              ships none but a test-only local one), so there is no like-for-like tiered
              move to run against.
  scale       (``--only-scale``; ``--no-scale``) one tierlog broker is one event loop, about
              one core at most: aggregate producer throughput against a 1-broker and a
              2-broker cluster (both up, measured in turn, who goes first alternating), a
              fresh topic of ``--scale-partitions`` (8) partitions, RF 1, spread round robin
              over the brokers; ``--scale-producers`` (2) producer processes (confluent-kafka,
              acks=1, 1 KiB, linger 5 ms, partitions in turn) for ``--scale-seconds`` (full 15,
              quick 5), ``--scale-rounds`` (3) rounds, reported as their median and spread.
              Around each round: the brokers' and producers' CPU, the whole box's busy cores
              (/proc/stat) and the CPU of every other process (ZooKeeper, idle brokers, kernel
              threads).

Run (from the repository root)::

    .venv/bin/python bench/cluster.py --quick     # smoke run, 6-10 minutes
    .venv/bin/python bench/cluster.py             # full run, ~15 minutes
    .venv/bin/python bench/cluster.py --only-move # the partition move alone (10 GiB, ~5 min)
    .venv/bin/python bench/cluster.py --only-scale
    .venv/bin/python bench/cluster.py --only tierlog --profile --failover-rounds 0 --rounds 1

``--profile`` runs tierlog's brokers under cProfile and prints each one's top functions by
own time at the end (slower: its figures are not comparable with Kafka's). Progress goes to
stderr; the LAST line on stdout is one JSON object with every figure.
Processes run in their own process groups and are killed on exit (errors, Ctrl-C and
SIGTERM included). Logs stay in ``bench/.work/runs/cluster-<time>/``; data dirs are removed
unless ``--keep``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka_ref
import procs
import reporting
import workloads as wl
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from procs import ManagedProcess, free_port
from reporting import LOWER, Report

WORK = Path(__file__).resolve().parent / ".work"  # git-ignored, shared with throughput.py
GiB = 1 << 30
MiB = 1 << 20

SESSION_TIMEOUT_MS = 6000  # tierlog zookeeper.session.timeout.ms = Kafka broker.session.timeout.ms
KAFKA_HEARTBEAT_MS = 2000  # Kafka's default broker.heartbeat.interval.ms
# ZooKeeper sessions may be 2..20 ticks by default; tierlog.broker.coordination.zk_server
# allows 60 s.
ZK_TICK_MS = 200
REPLICA_LAG_MS = 10000  # replica.lag.time.max.ms on both
FETCH_WAIT_MS = 500  # replica.fetch.wait.max.ms on both (Kafka's default)
BROKERS = 3
KAFKA_CONTROLLER_ID = 3000
READY_TIMEOUT = 120.0
CALL_TIMEOUT = 15.0
VALUE_BYTES = 1024
PRODUCER = {"acks": "all", "linger.ms": 5, "enable.idempotence": True}
TOPIC_CONFIG = {"min.insync.replicas": "2"}


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Plan:
    throughput_msgs: int
    throughput_max_s: float
    rounds: int
    # The same records for both clusters (Kafka's JIT needs ~2M here to reach its pace), at
    # most warm_up_s seconds each. Until issue 26 the warm-up was 30 s (quick 5 s) of time.
    warm_up_msgs: int
    warm_up_s: float
    latency_rate: int
    latency_s: float
    failover_rounds: int
    failover_rate: int
    failover_give_up_s: float


# The warm-up's bound in time only guards against a stuck cluster: at the ~100k msgs/s of a
# quiet box it takes 20-30 s; a cut warm-up is reported.
QUICK = Plan(300_000, 60.0, 3, 2_000_000, 180.0, 2000, 5.0, 1, 1000, 60.0)
FULL = Plan(1_500_000, 120.0, 3, 3_000_000, 180.0, 2000, 15.0, 3, 1000, 60.0)
FULL_MOVE_GIB = 10.0  # retained per moved topic (the size)
QUICK_MOVE_GIB = 1.0


# ---------------------------------------------------------------------------------------------
# Clusters


@dataclass
class Node:
    """One server process that can be killed and started again with the same argv."""

    name: str
    argv: list[str]
    log_path: Path
    port: int
    broker_id: int | None = None
    proc: ManagedProcess | None = None
    starts: int = 0

    def start(self) -> None:
        self.starts += 1
        log = self.log_path.with_suffix(f".{self.starts}.log")
        self.proc = procs.start_process(self.name, self.argv, log)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def cpu(self) -> float:
        return procs.tree_cpu_seconds(self.pid) if self.alive() else 0.0

    def kill(self) -> None:
        """SIGKILL the broker's process (what is measured), then reap its group."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)

    def reap(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=0.1)


@dataclass
class Cluster:
    """Three brokers plus the coordination service (a KRaft controller or ZooKeeper)."""

    name: str
    run_dir: Path
    brokers: list[Node] = field(default_factory=list)
    coordinator: Node | None = None
    zookeeper: Any = None  # tierlog.broker.coordination.zk_server.ZooKeeperServer
    settings: dict[str, Any] = field(default_factory=dict)
    _admin: AdminClient | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    def broker(self, broker_id: int) -> Node:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def conf(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "broker.address.family": "v4",
            "client.id": "tierlog-bench-cluster",
            "log_level": 0,  # refused connections to a killed broker are expected
        }

    def admin(self) -> AdminClient:
        """One client for the cluster's life: a future outlives a client that is freed."""
        if self._admin is None:
            self._admin = AdminClient(self.conf())
        return self._admin

    def coordination_cpu(self) -> float:
        if self.coordinator is not None:
            return self.coordinator.cpu()
        proc = getattr(self.zookeeper, "_proc", None)
        return procs.tree_cpu_seconds(proc.pid) if proc is not None else 0.0

    def partition(self, topic: str) -> tuple[int, list[int], list[int]] | None:
        """(leader, replicas, isr) of partition 0 as Metadata shows it, None if unknown."""
        meta = self.admin().list_topics(topic=topic, timeout=5).topics.get(topic)
        if meta is None or meta.error is not None or 0 not in meta.partitions:
            return None
        p = meta.partitions[0]
        return p.leader, list(p.replicas), list(p.isrs)

    def wait_until(self, check: Any, what: str, timeout: float) -> float:
        begin = time.monotonic()
        while time.monotonic() - begin < timeout:
            try:
                if check():
                    return time.monotonic() - begin
            except procs.BrokerNotReady:
                raise
            except Exception:  # a broker mid-restart: ask again
                pass
            time.sleep(0.1)
        raise TimeoutError(f"[{self.name}] {what} not reached in {timeout:.0f} s")

    def wait_brokers(self, timeout: float = READY_TIMEOUT) -> float:
        def all_up() -> bool:
            for b in self.brokers:
                if not b.alive():
                    raise procs.BrokerNotReady(f"{b.name} exited; see {b.log_path.parent}")
            meta = self.admin().list_topics(timeout=2)
            return len(meta.brokers) == len(self.brokers)

        try:
            return self.wait_until(all_up, f"{len(self.brokers)} brokers in Metadata", timeout)
        except procs.BrokerNotReady:
            raise
        except TimeoutError as exc:
            raise procs.BrokerNotReady(str(exc)) from exc

    def create_topic(self, topic: str, replicas: list[int] | None = None) -> None:
        """RF 3, min ISR 2; ``replicas`` fixes the order (its first is the first leader)."""
        if replicas is None:
            new = NewTopic(topic, num_partitions=1, replication_factor=BROKERS, config=TOPIC_CONFIG)
        else:
            new = NewTopic(topic, 1, replica_assignment=[replicas], config=TOPIC_CONFIG)
        futures = self.admin().create_topics(
            [new], operation_timeout=CALL_TIMEOUT, request_timeout=CALL_TIMEOUT
        )
        futures[topic].result(timeout=CALL_TIMEOUT * 2)
        self.wait_full_isr(topic, 60.0)

    def wait_full_isr(self, topic: str, timeout: float) -> float:
        def full() -> bool:
            found = self.partition(topic)
            return found is not None and found[0] >= 0 and len(found[2]) == BROKERS

        return self.wait_until(full, f"{topic}: {BROKERS} replicas in sync", timeout)

    def delete_topic(self, topic: str) -> None:
        futures = self.admin().delete_topics([topic], operation_timeout=CALL_TIMEOUT)
        with contextlib.suppress(Exception):
            futures[topic].result(timeout=CALL_TIMEOUT * 2)

    def controller_id(self) -> int | None:
        """tierlog's controller (a broker); None for Kafka, whose controller is its own node."""
        if self.coordinator is not None:
            return None
        cluster: Any = self.admin().describe_cluster(request_timeout=CALL_TIMEOUT)
        described = cluster.result(timeout=CALL_TIMEOUT)
        return described.controller.id if described.controller is not None else None

    def stop(self) -> dict[str, Any]:
        """SIGTERM every broker at once, then SIGKILL what is left; then the coordinator."""
        begin = time.monotonic()
        for b in self.brokers:
            if b.alive():
                assert b.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    b.proc.popen.send_signal(signal.SIGTERM)
        clean = []
        for b in self.brokers:
            if b.proc is not None:
                left = max(0.5, 20.0 - (time.monotonic() - begin))
                clean.append(b.proc.stop(timeout=left).clean)
        if self.coordinator is not None and self.coordinator.proc is not None:
            self.coordinator.proc.stop(timeout=10)
        if self.zookeeper is not None:
            self.zookeeper.close()
        return {"clean": all(clean), "seconds": round(time.monotonic() - begin, 1)}


def _kafka_properties(role: str, node_id: int, port: int, cport: int, data: Path) -> str:
    common = [
        f"process.roles={role}",
        f"node.id={node_id}",
        f"controller.quorum.voters={KAFKA_CONTROLLER_ID}@127.0.0.1:{cport}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"log.dirs={data}",
        f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}",
        f"broker.heartbeat.interval.ms={KAFKA_HEARTBEAT_MS}",
    ]
    if role == "controller":
        return "\n".join([*common, f"listeners=CONTROLLER://127.0.0.1:{cport}", ""])
    return "\n".join(
        [
            *common,
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "inter.broker.listener.name=PLAINTEXT",
            "num.partitions=1",
            f"default.replication.factor={BROKERS}",
            "min.insync.replicas=2",
            "auto.create.topics.enable=false",
            "unclean.leader.election.enable=false",
            "auto.leader.rebalance.enable=false",
            f"replica.lag.time.max.ms={REPLICA_LAG_MS}",
            f"replica.fetch.wait.max.ms={FETCH_WAIT_MS}",
            f"offsets.topic.replication.factor={BROKERS}",
            f"transaction.state.log.replication.factor={BROKERS}",
            "transaction.state.log.min.isr=2",
            f"share.coordinator.state.topic.replication.factor={BROKERS}",
            "share.coordinator.state.topic.min.isr=2",
            "group.initial.rebalance.delay.ms=0",
            "log.segment.delete.delay.ms=1000",
            "",
        ]
    )


def start_kafka(version: str, run_dir: Path) -> tuple[Cluster, dict[str, Any]]:
    """Fetch (or reuse) the jars; format and start 1 controller + 3 brokers."""
    dist = kafka_ref.fetch_kafka(WORK, version)
    info: dict[str, Any] = {"version": dist.version, "jars_cached": dist.cached}
    say(f"[kafka] Apache Kafka {dist.version} ({dist.jar_count} jars)")
    run_dir.mkdir(parents=True, exist_ok=True)
    log4j = run_dir / "log4j2.yaml"
    log4j.write_text(kafka_ref.LOG4J2_YAML)
    java = ["java", f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{dist.libs}/*"]
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    cport = free_port()
    cluster = Cluster("kafka", run_dir)
    nodes = [("controller", KAFKA_CONTROLLER_ID, cport)] + [
        ("broker", n, free_port()) for n in range(BROKERS)
    ]
    for role, node_id, port in nodes:
        name = "controller" if role == "controller" else f"broker-{node_id}"
        props = run_dir / f"{name}.properties"
        props.write_text(_kafka_properties(role, node_id, port, cport, run_dir / "data" / name))
        fmt = [*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)]
        done = subprocess.run(fmt, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise kafka_ref.KafkaUnavailable(f"format {name}: {done.stderr.strip()[-500:]}")
        heap = ["-Xmx512M", "-Xms512M"] if role == "controller" else ["-Xmx1G", "-Xms1G"]
        flags = [f for f in kafka_ref.JVM_FLAGS if not f.startswith(("-Xmx", "-Xms"))]
        argv = [java[0], *heap, *flags, *java[1:], "kafka.Kafka", str(props)]
        node = Node(
            f"kafka-{name}", argv, run_dir / name, port, None if role == "controller" else node_id
        )
        if role == "controller":
            cluster.coordinator = node
        else:
            cluster.brokers.append(node)
        node.start()
    info["ready_s"] = round(cluster.wait_brokers(), 2)
    info["topology"] = "1 KRaft controller (static one-voter quorum) + 3 brokers"
    info["heap"] = "brokers -Xmx1G -Xms1G, controller -Xmx512M -Xms512M, G1"
    cluster.settings = {
        "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
        "broker.heartbeat.interval.ms": KAFKA_HEARTBEAT_MS,
        "replica.lag.time.max.ms": REPLICA_LAG_MS,
        "replica.fetch.wait.max.ms": FETCH_WAIT_MS,
        "auto.leader.rebalance.enable": False,
    }
    say(f"[kafka] 3 brokers up after {info['ready_s']} s: {cluster.bootstrap}")
    return cluster, info


def start_tierlog(
    run_dir: Path,
    profile: bool = False,
    brokers: int = BROKERS,
    extra: dict[str, str] | None = None,
    name: str = "tierlog",
) -> tuple[Cluster, dict[str, Any]]:
    """A ZooKeeper (tick 200 ms) and ``brokers`` tierlog brokers in ZooKeeper mode; with
    ``profile`` each broker runs under cProfile (its main thread, the event loop) and writes
    ``broker-N.prof`` when it stops. ``extra`` adds or replaces broker overrides."""
    from tierlog.broker.coordination.zk_server import ZooKeeperServer

    run_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(name, run_dir)
    begin = time.monotonic()
    cluster.zookeeper = ZooKeeperServer(run_dir / "zookeeper", tick_time_ms=ZK_TICK_MS).start()
    connect = f"{cluster.zookeeper.connect}/tierlog-bench"
    replication = str(min(brokers, BROKERS))
    for n in range(brokers):
        port = free_port()
        overrides = {
            "broker.id": str(n),
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(run_dir / "data" / f"broker-{n}"),
            "zookeeper.connect": connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "num.partitions": "1",
            "default.replication.factor": replication,
            "min.insync.replicas": "2" if brokers > 1 else "1",
            "auto.create.topics.enable": "false",
            "unclean.leader.election.enable": "false",
            "auto.leader.rebalance.enable": "false",
            "replica.lag.time.max.ms": str(REPLICA_LAG_MS),
            "replica.fetch.wait.max.ms": str(FETCH_WAIT_MS),
            "offsets.topic.replication.factor": replication,
            "group.initial.rebalance.delay.ms": "0",
            "log.segment.delete.delay.ms": "1000",
            **(extra or {}),
        }
        argv = [sys.executable, "-m", "tierlog.cli", "broker", "start"]
        if profile:
            argv[1:1] = ["-m", "cProfile", "-o", str(run_dir / f"broker-{n}.prof")]
        for key, value in overrides.items():
            argv += ["--override", f"{key}={value}"]
        node = Node(f"{name}-broker-{n}", argv, run_dir / f"broker-{n}", port, n)
        cluster.brokers.append(node)
        node.start()
    cluster.wait_brokers()
    cluster.wait_until(lambda: cluster.controller_id() is not None, "a controller", 60.0)
    info = {
        "ready_s": round(time.monotonic() - begin, 2),
        "topology": f"ZooKeeper (Debian package, standalone) + {brokers} brokers, "
        "one of them controller",
        "controller": cluster.controller_id(),
    }
    cluster.settings = {
        "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
        "zookeeper tickTime ms": ZK_TICK_MS,
        "replica.lag.time.max.ms": REPLICA_LAG_MS,
        "replica.fetch.wait.max.ms": FETCH_WAIT_MS,
        "auto.leader.rebalance.enable": False,
    }
    if extra:
        cluster.settings.update(extra)
    say(f"[{name}] {brokers} brokers up after {info['ready_s']} s: {cluster.bootstrap}")
    return cluster, info


# ---------------------------------------------------------------------------------------------
# Workloads


def _client_cpu() -> float:
    usage = os.times()
    return usage.user + usage.system


def _producer(cluster: Cluster, **extra: Any) -> Producer:
    return Producer({**cluster.conf(), **PRODUCER, **extra})


def throughput(cluster: Cluster, topic: str, count: int, max_s: float) -> dict[str, Any]:
    """``count`` records of 1 KiB as fast as the client sends them; broker CPU around it."""
    cluster.create_topic(topic)
    leader = cluster.partition(topic)
    assert leader is not None
    errors: list[str] = []

    def on_error(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    producer = _producer(cluster, **{"delivery.report.only.error": True, "on_delivery": on_error})
    value = os.urandom(VALUE_BYTES)
    for _ in range(100):  # connections, producer id, the first segment
        producer.produce(topic, value, partition=0)
    producer.flush(CALL_TIMEOUT)
    cpu0 = {b.broker_id: b.cpu() for b in cluster.brokers}
    coord0, client0 = cluster.coordination_cpu(), _client_cpu()
    produce, poll, now = producer.produce, producer.poll, time.perf_counter
    t0 = now()
    until = t0 + max_s
    sent = 0
    while sent < count and now() < until:
        try:
            produce(topic, value, partition=0)
        except BufferError:  # the local queue is full: wait for the brokers
            poll(0.005)
            continue
        sent += 1
        if sent & 1023 == 0:
            poll(0)
    unsent = producer.flush(max_s)
    elapsed = now() - t0
    cpu = {b.broker_id: round(b.cpu() - cpu0[b.broker_id], 2) for b in cluster.brokers}
    coord = cluster.coordination_cpu() - coord0
    client = _client_cpu() - client0
    delivered = sent - unsent - len(errors)
    gib = delivered * VALUE_BYTES / GiB
    lead = leader[0]
    followers = [c for b, c in cpu.items() if b != lead]
    result: dict[str, Any] = {
        "msgs": delivered,
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(delivered / elapsed, 1),
        "mb_per_s": round(delivered * VALUE_BYTES / elapsed / 1e6, 2),
        "errors": len(errors) + unsent,
        "gib": round(gib, 3),
        "leader": lead,
        "broker_cpu_s": cpu,
        "brokers_cpu_s_per_gib": round(sum(cpu.values()) / gib, 2) if gib else None,
        "leader_cpu_s_per_gib": round(cpu[lead] / gib, 2) if gib else None,
        "follower_cpu_s_per_gib": round(statistics.fmean(followers) / gib, 2) if gib else None,
        "coordination_cpu_s": round(coord, 2),
        "client_cpu_s": round(client, 2),
    }
    if errors:
        result["first_error"] = errors[0]
    # Record batches in the leader's segment files: how the client batched for this broker.
    data = cluster.run_dir / "data" / f"broker-{lead}"
    result.update(wl.batch_stats(wl.Target(cluster.name, "", 0, data), topic))
    cluster.delete_topic(topic)
    return result


def latency(cluster: Cluster, topic: str, rate: int, seconds: float) -> dict[str, Any]:
    """produce() -> delivery report at a fixed rate; one second first, not counted."""
    cluster.create_topic(topic)
    latencies: list[float] = []
    errors: list[str] = []

    def done(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(str(err))
        elif (lat := msg.latency()) is not None:
            latencies.append(lat)

    producer = _producer(cluster, on_delivery=done, **{"socket.nagle.disable": True})
    value = os.urandom(VALUE_BYTES)
    stop = threading.Event()

    def serve() -> None:  # poll() returns as soon as a report arrives
        while not stop.is_set():
            producer.poll(0.1)

    def paced(count: int) -> float:
        t0 = time.perf_counter()
        for i in range(count):
            wait = t0 + i / rate - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            producer.produce(topic, value, partition=0)
        while len(producer) and time.perf_counter() < t0 + count / rate + CALL_TIMEOUT:
            time.sleep(0.001)
        return time.perf_counter() - t0

    server = threading.Thread(target=serve, name="delivery-reports", daemon=True)
    server.start()
    try:
        paced(rate)
        latencies.clear()
        elapsed = paced(int(rate * seconds))
    finally:
        stop.set()
        server.join(timeout=CALL_TIMEOUT)
    producer.flush(CALL_TIMEOUT)
    cluster.delete_topic(topic)
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)

    result: dict[str, Any] = {
        "msgs": len(ordered),
        "rate_target": rate,
        "rate_achieved": round(len(ordered) / elapsed, 1),
        "errors": len(errors),
    }
    if ordered:
        result.update(p50_ms=pct(0.5), p99_ms=pct(0.99), p999_ms=pct(0.999))
        result["max_ms"] = round(ordered[-1] * 1000, 3)
    return result


def failover(
    cluster: Cluster, topic: str, victim: int, plan: Plan, extra_delay_s: float = 0.0
) -> dict[str, Any]:
    """SIGKILL partition 0's leader while producing; time to the first acknowledged record
    produced after the kill. Restarts the victim and waits for a full ISR afterwards.

    The kill comes 2 s + ``extra_delay_s`` after the first record. The extra delay is drawn
    per round and is the same for both clusters. Without it the kill phase-locked to
    tierlog's session: creating the round's topic touches every broker's ZooKeeper session
    (watch reads), and kazoo then pings every 2 s when idle, so a kill exactly 2 s later
    always came right after a ping. Detection then took the full 6 s, never the 4-6 s a
    random failure sees. Kafka's 2 s heartbeats do not depend on the topic creation."""
    others = [b.broker_id for b in cluster.brokers if b.broker_id != victim]
    cluster.create_topic(topic, [victim, *others])  # type: ignore[list-item]
    # A Metadata answer can lag the creation on the broker asked (seen once with Kafka:
    # no leader yet right after a full ISR was shown), so ask for a few seconds.
    found: list[Any] = [None]

    def victim_leads() -> bool:
        found[0] = cluster.partition(topic)
        return found[0] is not None and found[0][0] == victim

    try:
        cluster.wait_until(victim_leads, f"{topic}: broker {victim} leading", 10.0)
    except TimeoutError as exc:
        raise RuntimeError(f"{topic}: leader {found[0]} is not the chosen victim {victim}") from exc
    t_kill = [float("inf")]
    first_ok_after: list[float] = []
    first_ok_any: list[float] = []
    errors: list[str] = []
    acked = [0]

    def report(sent_at: float, err: KafkaError | None, _msg: Message) -> None:
        now = time.perf_counter()
        if err is not None:
            errors.append(str(err))
            return
        acked[0] += 1
        if now > t_kill[0] and not first_ok_any:
            first_ok_any.append(now)
        if sent_at > t_kill[0] and not first_ok_after:
            first_ok_after.append(now)

    producer = _producer(cluster)
    value = os.urandom(VALUE_BYTES)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            producer.poll(0.05)

    leader_seen: list[tuple[float, int]] = []

    def watch_metadata() -> None:  # when Metadata first names a new leader, for the record
        admin = cluster.admin()
        while not stop.is_set() and not leader_seen:
            with contextlib.suppress(Exception):
                meta = admin.list_topics(topic=topic, timeout=1).topics[topic].partitions[0]
                if meta.leader >= 0 and meta.leader != victim:
                    leader_seen.append((time.perf_counter(), meta.leader))
            time.sleep(0.05)

    server = threading.Thread(target=serve, name="delivery-reports", daemon=True)
    server.start()
    watcher: threading.Thread | None = None
    interval = 1.0 / plan.failover_rate
    node = cluster.broker(victim)
    try:
        t0 = time.perf_counter()
        i = 0
        killed = False
        give_up = float("inf")
        after_ok = float("inf")
        while True:
            now = time.perf_counter()
            # Two seconds of steady acks=all first, then a random phase (see above).
            if not killed and now >= t0 + 2.0 + extra_delay_s:
                t_kill[0] = time.perf_counter()
                node.kill()
                killed = True
                give_up = t_kill[0] + plan.failover_give_up_s
                watcher = threading.Thread(target=watch_metadata, daemon=True)
                watcher.start()
            if first_ok_after and after_ok == float("inf"):
                after_ok = now
            if now > after_ok + 0.5 or now > give_up:
                break
            wait = t0 + i * interval - now
            if wait > 0:
                time.sleep(wait)
            producer.produce(
                topic,
                value,
                partition=0,
                on_delivery=functools.partial(report, time.perf_counter()),
            )
            i += 1
        unsent = producer.flush(CALL_TIMEOUT)
    finally:
        stop.set()
        server.join(timeout=CALL_TIMEOUT)
        if watcher is not None:
            watcher.join(timeout=5)
        node.reap()
    result: dict[str, Any] = {
        "victim": victim,
        "failover_s": round(first_ok_after[0] - t_kill[0], 3) if first_ok_after else None,
        "first_ack_any_s": round(first_ok_any[0] - t_kill[0], 3) if first_ok_any else None,
        "sent": i,
        "acked": acked[0],
        "errors": len(errors) + unsent,
    }
    if leader_seen:
        result["new_leader"] = leader_seen[0][1]
        result["metadata_new_leader_s"] = round(leader_seen[0][0] - t_kill[0], 3)
    if errors:
        result["first_error"] = errors[0]
    # Back to three in-sync replicas before anything else runs.
    restart = time.monotonic()
    node.start()
    result["rejoin_s"] = round(cluster.wait_full_isr(topic, 120.0), 2)
    result["restart_to_full_isr_s"] = round(time.monotonic() - restart, 2)
    cluster.wait_brokers()
    cluster.delete_topic(topic)
    return result


# ---------------------------------------------------------------------------------------------
# Partition move (tierlog only): tiered vs untiered

MOVE_SEGMENT = 64 * MiB  # segment.bytes of both moved topics
MOVE_LOCAL_RETENTION = 256 * MiB  # local.retention.bytes of the tiered one
MOVE_VALUE_BYTES = 16 * 1024  # larger records only to fill the log fast; bytes are what move
MOVE_TASK_MS = 500  # remote.log.manager.task.interval.ms and log.retention.check.interval.ms
NOT_CONTROLLER = 41
# The follower's log lines (replica_fetcher) when it starts at the leader's local log start
# instead of copying from 0: after OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405, with the remote
# segment's producer snapshot and epochs), or after OFFSET_OUT_OF_RANGE (no remote tier).
BELOW_LEADER_START = ("the leader's local log starts at", "is below the leader's start")


def call_controller(cluster: Cluster, api_key: int, version: int, data: dict[str, Any]) -> Any:
    """A raw kio request to the controller (confluent-kafka's AdminClient has no
    reassignment APIs), retried where the answer is NOT_CONTROLLER, as Kafka's client does."""
    from kio.index import load_request_schema

    from tierlog.client.connection import BrokerConnection
    from tierlog.protocol.kio_build import build

    body = build(load_request_schema(api_key, version), data)
    deadline = time.monotonic() + 30.0
    while True:
        try:
            controller = cluster.controller_id()
            if controller is not None:
                port = cluster.broker(controller).port
                conn = BrokerConnection("127.0.0.1", port, timeout=10.0, client_id="bench-move")
                try:
                    response = conn.call(body)
                finally:
                    conn.close()
                if int(response.error_code) != NOT_CONTROLLER:
                    return response
        except Exception:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError("no controller answered")
        time.sleep(0.2)


def alter_reassignment(cluster: Cluster, topic: str, replicas: list[int]) -> int:
    """AlterPartitionReassignments v0 of partition 0; its error code."""
    from tierlog.protocol import ApiKey

    response = call_controller(
        cluster,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        0,
        {
            "timeout": 30_000,
            "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "replicas": replicas}]}
            ],
        },
    )
    if int(response.error_code) != 0:
        raise RuntimeError(f"AlterPartitionReassignments: {response}")
    return int(response.responses[0].partitions[0].error_code)


def reassigning(cluster: Cluster) -> set[tuple[str, int]]:
    """ListPartitionReassignments v0: every partition being moved."""
    from tierlog.protocol import ApiKey

    response = call_controller(
        cluster, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout": 30_000, "topics": None}
    )
    if int(response.error_code) != 0:
        raise RuntimeError(f"ListPartitionReassignments: {response}")
    return {(str(t.name), int(p.partition_index)) for t in response.topics for p in t.partitions}


def _dir_bytes(directory: Path, pattern: str = "*") -> int:
    total = 0
    for path in directory.glob(pattern):
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return total


def _segment_bases(directory: Path) -> list[int]:
    bases = []
    for path in directory.glob("*.log"):
        with contextlib.suppress(ValueError):
            bases.append(int(path.stem))
    return sorted(bases)


def _fill(cluster: Cluster, topics: list[str], total_bytes: int) -> dict[str, Any]:
    """``total_bytes`` of 16 KiB records into partition 0 of each topic (interleaved),
    acks=1, as fast as the leader takes them."""
    errors: list[str] = []

    def on_error(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            **cluster.conf(),
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1_000_000,  # under the topic's max.message.bytes (1 MiB + 12)
            "queue.buffering.max.kbytes": 256 * 1024,
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
    )
    value = os.urandom(MOVE_VALUE_BYTES)
    count = total_bytes // MOVE_VALUE_BYTES
    produce, poll = producer.produce, producer.poll
    t0 = time.perf_counter()
    for i in range(count * len(topics)):
        topic = topics[i % len(topics)]
        while True:
            try:
                produce(topic, value, partition=0)
                break
            except BufferError:
                poll(0.01)
        if i & 255 == 0:
            poll(0)
    unsent = producer.flush(600)
    seconds = time.perf_counter() - t0
    if unsent or errors:
        raise RuntimeError(f"filling {topics}: {unsent} unsent, errors {errors[:3]}")
    written = count * MOVE_VALUE_BYTES * len(topics)
    return {
        "records_per_topic": count,
        "value_bytes": MOVE_VALUE_BYTES,
        "seconds": round(seconds, 1),
        "mb_per_s": round(written / seconds / 1e6, 1),
    }


def _wait_offload(cluster: Cluster, topic: str, remote_url: str, timeout: float) -> dict[str, Any]:
    """Until the remote tier ends where the active segment begins and local retention has
    brought the local log down to ``local.retention.bytes`` plus at most the active segment."""
    from tierlog.remote import manifest as mf
    from tierlog.remote.registry import open_store

    store = open_store(remote_url)
    directory = cluster.run_dir / "data" / "broker-0" / f"{topic}-0"
    state: dict[str, Any] = {}

    def settled() -> bool:
        manifest = store.read_manifest(topic, 0)
        bases = _segment_bases(directory)
        local = _dir_bytes(directory, "*.log")
        state.update(
            remote_end=mf.end_offset(manifest),
            remote_bytes=sum(s.size_bytes for s in mf.committed_segments(manifest)),
            remote_segments=len(mf.committed_segments(manifest)),
            active_base=bases[-1] if bases else None,
            local_start=bases[0] if bases else None,
            local_log_bytes=local,
            local_segments=len(bases),
        )
        return (
            bool(bases)
            and state["remote_end"] == bases[-1]
            and local <= MOVE_LOCAL_RETENTION + MOVE_SEGMENT
            and not list(directory.glob("*.deleted"))
        )

    waited = cluster.wait_until(settled, f"{topic}: offload to settle", timeout)
    state["waited_s"] = round(waited, 1)
    return state


def _time_move(cluster: Cluster, topic: str, source: int, target: int) -> dict[str, Any]:
    """Reassign partition 0 from ``source`` to ``target``; from the request to
    ListPartitionReassignments empty with ``target`` leading and in the ISR."""
    t0 = time.monotonic()
    code = alter_reassignment(cluster, topic, [target])
    if code != 0:
        raise RuntimeError(f"{topic}: AlterPartitionReassignments answered error {code}")
    accepted = time.monotonic() - t0
    in_isr: list[float] = []

    def done() -> bool:
        found = cluster.partition(topic)
        if found is not None and target in found[2] and not in_isr:
            in_isr.append(time.monotonic() - t0)
        return (
            found is not None
            and found[1] == [target]
            and found[0] == target
            and target in found[2]
            and (topic, 0) not in reassigning(cluster)
        )

    cluster.wait_until(done, f"{topic}: the move to broker {target}", 1800.0)
    seconds = time.monotonic() - t0
    old = cluster.run_dir / "data" / f"broker-{source}" / f"{topic}-0"
    new = cluster.run_dir / "data" / f"broker-{target}" / f"{topic}-0"
    with contextlib.suppress(TimeoutError):
        cluster.wait_until(lambda: not old.exists(), f"broker {source} to drop {topic}-0", 30.0)
    bases = _segment_bases(new)
    return {
        "seconds": round(seconds, 2),
        "accepted_s": round(accepted, 3),
        "target_in_isr_s": round(in_isr[0], 2) if in_isr else None,
        "copied_bytes": _dir_bytes(new),  # every file of the new replica's partition dir
        "copied_log_bytes": _dir_bytes(new, "*.log"),
        "target_log_start": bases[0] if bases else None,
        "source_dir_removed": not old.exists(),
    }


def _follower_lines(cluster: Cluster, broker_id: int, topic: str) -> list[str]:
    """The new replica's log lines saying it started at the leader's local log start."""
    lines = []
    for log in sorted(cluster.run_dir.glob(f"broker-{broker_id}.*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if topic in line and any(text in line for text in BELOW_LEADER_START):
                lines.append(line.strip())
    return lines


def move(run_dir: Path, gib: float, keep: bool = False) -> dict[str, Any]:
    """Two topics of one partition, RF 1, on broker 0 of a 2-broker tierlog cluster: one
    tiered (local retention 256 MiB), one not, ``gib`` GiB each; both are moved to broker 1."""
    remote = run_dir / "remote"
    remote.mkdir(parents=True, exist_ok=True)
    extra = {
        "remote.log.storage.url": remote.as_uri(),
        "remote.log.manager.task.interval.ms": str(MOVE_TASK_MS),
        "log.retention.check.interval.ms": str(MOVE_TASK_MS),
    }
    size = int(gib * GiB)
    result: dict[str, Any] = {
        "retained_gib": gib,
        "segment_bytes": MOVE_SEGMENT,
        "local_retention_bytes": MOVE_LOCAL_RETENTION,
        "brokers": 2,
        "broker_settings": extra,
        "replica.fetch.max.bytes": "1 MiB (default, as Kafka's)",
    }
    cluster, info = start_tierlog(run_dir, brokers=2, extra=extra, name="tierlog-move")
    result["cluster"] = info
    try:
        topics = {
            "untiered": ("move-untiered", {"segment.bytes": str(MOVE_SEGMENT)}),
            "tiered": (
                "move-tiered",
                {
                    "segment.bytes": str(MOVE_SEGMENT),
                    "remote.storage.enable": "true",
                    "local.retention.bytes": str(MOVE_LOCAL_RETENTION),
                },
            ),
        }
        admin = cluster.admin()
        new = [NewTopic(t, 1, replica_assignment=[[0]], config=c) for t, c in topics.values()]
        for topic, future in admin.create_topics(new, operation_timeout=CALL_TIMEOUT).items():
            future.result(timeout=CALL_TIMEOUT * 2)
            cluster.wait_until(
                lambda t=topic: (found := cluster.partition(t)) is not None and found[0] == 0,
                f"{topic} led by broker 0",
                60.0,
            )
        say(f"  [move] filling {gib:g} GiB into each of {[t for t, _ in topics.values()]}")
        result["fill"] = _fill(cluster, [t for t, _ in topics.values()], size)
        say(
            f"  [move] filled in {result['fill']['seconds']} s "
            f"({result['fill']['mb_per_s']} MB/s, both topics)"
        )
        tiered_topic = topics["tiered"][0]
        result["offload"] = _wait_offload(cluster, tiered_topic, remote.as_uri(), 1200.0)
        off = result["offload"]
        say(
            f"  [move] offload settled {off['waited_s']} s after the fill: remote "
            f"{off['remote_bytes'] / GiB:.2f} GiB to offset {off['remote_end']}, local "
            f"{off['local_log_bytes'] / MiB:.0f} MiB from offset {off['local_start']} "
            f"({off['local_segments']} segments)"
        )
        untiered_dir = cluster.run_dir / "data" / "broker-0" / f"{topics['untiered'][0]}-0"
        result["untiered_source_log_bytes"] = _dir_bytes(untiered_dir, "*.log")
        reassigning(cluster)  # the controller's connection and Metadata, before the clock
        time.sleep(2.0)  # a quiet moment: no fill or offload traffic left
        for kind in ("untiered", "tiered"):
            topic = topics[kind][0]
            cpu0 = {b.broker_id: b.cpu() for b in cluster.brokers}
            moved = _time_move(cluster, topic, 0, 1)
            moved["broker_cpu_s"] = {
                b.broker_id: round(b.cpu() - cpu0[b.broker_id], 2) for b in cluster.brokers
            }
            moved["mb_per_s"] = round(moved["copied_log_bytes"] / moved["seconds"] / 1e6, 1)
            result[kind] = moved
            say(
                f"  [move] {kind}: {moved['seconds']} s, {moved['copied_log_bytes'] / MiB:,.0f} "
                f"MiB copied to broker 1 ({moved['mb_per_s']} MB/s), its log starts at "
                f"{moved['target_log_start']}"
            )
        lines = _follower_lines(cluster, 1, tiered_topic)
        leader_start = result["offload"]["local_start"]
        result["tiered_follower"] = {
            "restart_lines": lines[:3],
            "started_at_leader_local_start": result["tiered"]["target_log_start"] == leader_start,
            "leader_local_start": leader_start,
        }
        result["untiered_follower_lines"] = _follower_lines(cluster, 1, topics["untiered"][0])[:3]
        say(f"  [move] the tiered follower's log: {lines[:1] or 'no restart at the leader start'}")
        result["ratio_untiered_tiered_s"] = _ratio(
            result["untiered"]["seconds"], result["tiered"]["seconds"]
        )
        result["ratio_untiered_tiered_bytes"] = _ratio(
            result["untiered"]["copied_log_bytes"], result["tiered"]["copied_log_bytes"]
        )
        say(
            f"  [move] untiered/tiered: {result['ratio_untiered_tiered_s']}x the time, "
            f"{result['ratio_untiered_tiered_bytes']}x the bytes"
        )
    finally:
        result["stop"] = cluster.stop()
        if not keep:
            shutil.rmtree(run_dir / "data", ignore_errors=True)
            shutil.rmtree(remote, ignore_errors=True)
    return result


# ---------------------------------------------------------------------------------------------
# Scale-out on one host (tierlog only): 1 broker vs 2 brokers

SCALE_PRODUCER = {"acks": 1, "linger.ms": 5}


def _box_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return float(sum(fields) - idle), float(sum(fields))


def _all_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds so far of every process on the machine: pid -> (name, seconds)."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        out[int(entry.name)] = (name, (int(fields[11]) + int(fields[12])) / ticks)
    return out


def _other_cpu(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], known: set[int]
) -> dict[str, float]:
    """CPU seconds of the processes not in ``known``, by name (kernel threads included)."""
    by_name: dict[str, float] = {}
    for pid, (name, seconds) in after.items():
        if pid in known or pid not in before:  # one started inside the window is left out
            continue
        used = seconds - before[pid][1]
        if used > 0:
            key = name.split("/")[0]
            if pid == os.getpid():
                key = "bench"
            elif name == "python":
                with contextlib.suppress(OSError):
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                    key = "idle brokers" if b"broker\0start" in argv else key
            by_name[key] = round(by_name.get(key, 0.0) + used, 2)
    return dict(sorted(by_name.items(), key=lambda kv: -kv[1])[:6])


def producer_worker(spec: dict[str, Any]) -> None:
    """One producer process of the scale-out measurement: connects and warms up, waits for
    ``start_at`` (wall clock), produces 1 KiB records over every partition until
    ``start_at + seconds``, flushes and prints one JSON line with what it did."""
    errors = [0]

    def on_error(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors[0] += 1

    producer = Producer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "broker.address.family": "v4",
            **SCALE_PRODUCER,
            "queue.buffering.max.kbytes": 64 * 1024,  # a short flush at the end
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
    )
    topic, partitions = spec["topic"], spec["partitions"]
    value = os.urandom(VALUE_BYTES)
    for p in range(partitions):
        producer.produce(topic, value, partition=p)
    producer.flush(CALL_TIMEOUT)
    late = time.time() - spec["start_at"]
    if late < 0:
        time.sleep(-late)
    cpu0 = _client_cpu()
    t0 = time.perf_counter()
    until = t0 + spec["seconds"]
    produce, poll, now = producer.produce, producer.poll, time.perf_counter
    sent = 0
    offset = spec["index"]
    while now() < until:
        try:
            produce(topic, value, partition=(sent + offset) % partitions)
        except BufferError:
            poll(0.002)
            continue
        sent += 1
        if sent & 1023 == 0:
            poll(0)
    unsent = producer.flush(60)
    elapsed = time.perf_counter() - t0
    out = {
        "sent": sent,
        "delivered": sent - unsent - errors[0],
        "errors": errors[0] + unsent,
        "seconds": round(elapsed, 3),
        "cpu_s": round(_client_cpu() - cpu0, 2),
        "late_s": round(max(late, 0.0), 3),
    }
    print(json.dumps(out), flush=True)


def scale_round(
    cluster: Cluster, run_dir: Path, topic: str, partitions: int, producers: int, seconds: float
) -> dict[str, Any]:
    """``producers`` producer processes for ``seconds`` against a fresh topic of
    ``partitions`` partitions, RF 1, spread round robin over the cluster's brokers."""
    ids = [b.broker_id for b in cluster.brokers if b.broker_id is not None]
    assignment = [[ids[p % len(ids)]] for p in range(partitions)]
    new = NewTopic(topic, partitions, replica_assignment=assignment)
    admin = cluster.admin()
    admin.create_topics([new], operation_timeout=CALL_TIMEOUT)[topic].result(CALL_TIMEOUT * 2)

    def all_led() -> bool:
        meta = admin.list_topics(topic=topic, timeout=5).topics[topic]
        return len(meta.partitions) == partitions and all(
            m.leader >= 0 for m in meta.partitions.values()
        )

    cluster.wait_until(all_led, f"{topic}: every partition led", 60.0)
    start_at = time.time() + 4.0  # the workers start and warm up meanwhile
    workers = []
    for w in range(producers):
        spec = {
            "bootstrap": cluster.bootstrap,
            "topic": topic,
            "partitions": partitions,
            "start_at": start_at,
            "seconds": seconds,
            "index": w,
        }
        argv = [sys.executable, __file__, "--producer-worker", json.dumps(spec)]
        log = run_dir / f"{topic}-producer-{w}.log"
        workers.append((procs.start_process(f"producer-{w}", argv, log), log))
    try:
        time.sleep(max(0.0, start_at - time.time()))
        cpu0 = {b.broker_id: b.cpu() for b in cluster.brokers}
        box0, all0 = _box_cpu(), _all_cpu()
        for proc, _ in workers:
            proc.popen.wait(timeout=seconds + 120)
        box1, all1 = _box_cpu(), _all_cpu()
        cpu = {b.broker_id: round(b.cpu() - cpu0[b.broker_id], 2) for b in cluster.brokers}
    finally:
        for proc, _ in workers:
            proc.stop(timeout=1)
    known = {b.pid for b in cluster.brokers} | {proc.pid for proc, _ in workers}
    reports = []
    for _, log in workers:
        lines = [x for x in log.read_text(errors="replace").splitlines() if x.startswith("{")]
        if not lines:
            raise RuntimeError(f"a producer reported nothing; see {log}")
        reports.append(json.loads(lines[-1]))
    delivered = sum(r["delivered"] for r in reports)
    elapsed = max(r["seconds"] for r in reports)
    client_cpu = sum(r["cpu_s"] for r in reports)
    cores = os.cpu_count() or 1
    result = {
        "msgs": delivered,
        "seconds": round(elapsed, 2),
        "msgs_per_s": round(delivered / elapsed, 1),
        "mb_per_s": round(delivered * VALUE_BYTES / elapsed / 1e6, 1),
        "errors": sum(r["errors"] for r in reports),
        "broker_cpu_s": cpu,
        "broker_cores": round(sum(cpu.values()) / elapsed, 2),
        "client_cpu_s": round(client_cpu, 2),
        "client_cores": round(client_cpu / elapsed, 2),
        "box_busy_cores": round((box1[0] - box0[0]) / (box1[1] - box0[1]) * cores, 2),
        "other_cpu_s": _other_cpu(all0, all1, known),
        "late_s": max(r["late_s"] for r in reports),
    }
    cluster.delete_topic(topic)
    return result


def scale(
    run_dir: Path, rounds: int, seconds: float, producers: int, partitions: int, keep: bool
) -> dict[str, Any]:
    """Aggregate producer throughput: a 1-broker and a 2-broker tierlog cluster (both up,
    measured in turn, who goes first alternating)."""
    clusters: dict[str, Cluster] = {}
    result: dict[str, Any] = {
        "producer": {**SCALE_PRODUCER, "value_bytes": VALUE_BYTES},
        "producers": producers,
        "partitions": partitions,
        "seconds_per_round": seconds,
        "rounds": rounds,
        "replication_factor": 1,
    }
    try:
        for n in (1, 2):
            name = f"brokers_{n}"
            clusters[name], info = start_tierlog(run_dir / name, brokers=n, name=f"tierlog-{n}b")
            result.setdefault("clusters", {})[name] = info
        per: dict[str, list[dict[str, Any]]] = {name: [] for name in clusters}
        order = list(clusters)
        for r in range(rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                res = _guard(
                    name,
                    "scale",
                    lambda c=clusters[name], r=r, d=run_dir / name: scale_round(
                        c, d, f"scale-{r}", partitions, producers, seconds
                    ),
                )
                per[name].append(res)
                if "error" not in res:
                    say(
                        f"  [scale {name}] #{r + 1}: {res['msgs_per_s']:,.0f} msgs/s "
                        f"{res['mb_per_s']} MB/s; brokers {res['broker_cores']} cores "
                        f"{res['broker_cpu_s']}, {producers} producers {res['client_cores']} "
                        f"cores, box busy {res['box_busy_cores']} of {os.cpu_count()}; "
                        f"others (CPU s) {res['other_cpu_s']}; errors {res['errors']}"
                    )
        for name, results in per.items():
            good = [x for x in results if "msgs_per_s" in x]
            best = dict(max(good, key=lambda x: x["msgs_per_s"])) if good else results[-1]
            best["rounds_msgs_per_s"] = [x.get("msgs_per_s") for x in results]
            result[name] = best
        result["ratio_2_1"] = _ratio(
            result["brokers_2"].get("msgs_per_s"), result["brokers_1"].get("msgs_per_s")
        )
        say(f"  [scale] 2 brokers / 1 broker: {result['ratio_2_1']}")
    finally:
        for name, cluster in clusters.items():
            with contextlib.suppress(Exception):
                result["clusters"][name]["stop"] = cluster.stop()
            if not keep:
                shutil.rmtree(cluster.run_dir / "data", ignore_errors=True)
    return result


# ---------------------------------------------------------------------------------------------
# Driver


def _victims(cluster: Cluster, rounds: int) -> list[int]:
    """Round robin over the brokers that are not the controller (tierlog's is a broker)."""
    controller = cluster.controller_id()
    candidates = [b.broker_id for b in cluster.brokers if b.broker_id != controller]
    return [candidates[r % len(candidates)] for r in range(rounds)]  # type: ignore[misc]


def _guard(name: str, what: str, run: Any) -> dict[str, Any]:
    try:
        result: dict[str, Any] = run()
        return result
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        say(f"  [{name}] {what} failed: {type(exc).__name__}: {exc}")
        return {"error": f"{type(exc).__name__}: {exc}"}


def _ratio(a: Any, b: Any) -> float | None:
    if isinstance(a, int | float) and isinstance(b, int | float) and b:
        return round(a / b, 3)
    return None


def run_all(clusters: dict[str, Cluster], plan: Plan, report: dict[str, Any]) -> None:
    order = list(clusters)
    say(
        f"warm-up (not counted): {plan.warm_up_msgs:,} records of the throughput workload on "
        f"each (at most {plan.warm_up_s:g} s)"
    )
    report["warm_up"] = {}
    for name in order:
        warm = _guard(
            name,
            "warm-up",
            lambda c=clusters[name]: throughput(c, "warm-up", plan.warm_up_msgs, plan.warm_up_s),
        )
        report["warm_up"][name] = {k: warm.get(k) for k in ("msgs", "seconds", "msgs_per_s")}
        cut = (warm.get("msgs") or 0) < plan.warm_up_msgs
        say(
            f"  [{name}] warm-up {warm.get('msgs')} records in {warm.get('seconds')} s: "
            f"{warm.get('msgs_per_s', warm.get('error'))} msgs/s"
            + (
                f" (CUT SHORT at {plan.warm_up_s:g} s: the clusters' warm-ups differ)"
                if cut
                else ""
            )
        )

    say(f"throughput: {plan.throughput_msgs:,} x 1 KiB, acks=all, linger 5 ms, idempotent")
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    for r in range(plan.rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            c = clusters[name]
            res = _guard(
                name,
                "throughput",
                lambda c=c, r=r: throughput(
                    c, f"tput-{r}", plan.throughput_msgs, plan.throughput_max_s
                ),
            )
            rounds[name].append(res)
            if "error" not in res:
                say(
                    f"  [{name}] #{r + 1}: {res['msgs_per_s']:,.0f} msgs/s {res['mb_per_s']} MB/s"
                    f"  broker CPU {res['brokers_cpu_s_per_gib']} s/GiB (leader "
                    f"{res['leader_cpu_s_per_gib']}, follower {res['follower_cpu_s_per_gib']})"
                    f"  client CPU {res['client_cpu_s']} s in {res['seconds']} s"
                    f"  {res.get('records_per_batch')} records/batch"
                    f"  errors {res['errors']}"
                )
    tput: dict[str, Any] = {}
    for name, results in rounds.items():
        good = [x for x in results if "msgs_per_s" in x]
        best = dict(max(good, key=lambda x: x["msgs_per_s"])) if good else results[-1]
        best["rounds_msgs_per_s"] = [x.get("msgs_per_s") for x in results]
        best["rounds_cpu_s_per_gib"] = [x.get("brokers_cpu_s_per_gib") for x in results]
        tput[name] = best
    report["throughput"] = tput
    order.reverse()

    say(f"latency: {plan.latency_rate:,} msgs/s x 1 KiB for {plan.latency_s:g} s, same producer")
    lat: dict[str, Any] = {}
    for name in order:
        c = clusters[name]
        lat[name] = _guard(
            name, "latency", lambda c=c: latency(c, "latency", plan.latency_rate, plan.latency_s)
        )
        if "p99_ms" in lat[name]:
            x = lat[name]
            say(
                f"  [{name}] p50 {x['p50_ms']} ms  p99 {x['p99_ms']} ms  p99.9 {x['p999_ms']} ms"
                f"  at {x['rate_achieved']:,.0f}/s  errors {x['errors']}"
            )
    report["latency"] = lat
    order.reverse()

    say(
        f"failover: SIGKILL of partition 0's leader while producing {plan.failover_rate}/s; "
        f"session timeout {SESSION_TIMEOUT_MS} ms on both sides"
    )
    fo: dict[str, Any] = {name: {"rounds": []} for name in order}
    victims = {name: _victims(clusters[name], plan.failover_rounds) for name in order}
    # One random kill phase per round, the same on both sides (see ``failover``).
    rng = random.Random(20261125)
    phases = [rng.randrange(0, 2000) for _ in range(plan.failover_rounds)]
    for r in range(plan.failover_rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            c = clusters[name]
            res = _guard(
                name,
                "failover",
                lambda c=c, r=r, v=victims[name][r]: failover(
                    c, f"failover-{r}", v, plan, phases[r] / 1000
                ),
            )
            fo[name]["rounds"].append(res)
            if "error" not in res:
                say(
                    f"  [{name}] #{r + 1}: killed broker {res['victim']} -> first ack of a "
                    f"post-kill record after {res['failover_s']} s "
                    f"(any ack {res['first_ack_any_s']} s, Metadata names "
                    f"{res.get('new_leader')} at {res.get('metadata_new_leader_s')} s)"
                    f"; restarted broker back in ISR after {res['restart_to_full_isr_s']} s"
                    f"; errors {res['errors']}"
                )
    for entry in fo.values():
        times = [x["failover_s"] for x in entry["rounds"] if x.get("failover_s") is not None]
        entry["median_s"] = round(statistics.median(times), 3) if times else None
        meta = [x["metadata_new_leader_s"] for x in entry["rounds"] if "metadata_new_leader_s" in x]
        entry["median_metadata_new_leader_s"] = round(statistics.median(meta), 3) if meta else None
    report["failover"] = fo


def profile_summary(run_dir: Path, top: int = 15) -> dict[str, Any]:
    """The functions with the most own time in each tierlog broker's profile."""
    import pstats

    out: dict[str, Any] = {}
    for path in sorted(run_dir.glob("broker-*.prof")):
        stats: Any = pstats.Stats(str(path))
        total = stats.total_tt
        rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
        out[path.stem] = {
            "total_s": round(total, 2),
            "top_tottime": [
                [f"{Path(f).name}:{line}:{fn}", round(tt, 3), round(ct, 3), calls]
                for (f, line, fn), (_cc, calls, tt, ct, _callers) in rows
            ],
        }
        say(f"profile {path} ({total:.1f} s in the main thread), most own time:")
        for name, tt, ct, calls in out[path.stem]["top_tottime"]:
            say(f"  {tt:8.3f} s own {ct:8.3f} s cum {calls:>9} calls  {name}")
    return out


def side_by_side(report: Report) -> None:
    """The figures of both sides (and of the tierlog-only comparisons) as medians and
    spreads of their rounds (``bench/reporting.py``)."""
    data = report.data

    def rounds(section: str, key: str) -> dict[str, list[Any]]:
        per = data.get(section, {})
        return {side: per.get(side, {}).get(key) or [] for side in ("tierlog", "kafka")}

    if data.get("throughput"):
        # Issue 26 item 2: at least Kafka's rate, by the median of the rounds.
        tput = rounds("throughput", "rounds_msgs_per_s")
        report.side_by_side("throughput acks=all RF 3", tput, unit="msgs/s", goal=1.0)
        cpu = rounds("throughput", "rounds_cpu_s_per_gib")
        report.side_by_side("broker CPU per GiB replicated", cpu, unit="s", better=LOWER)
    if data.get("latency"):
        lat = {side: [data["latency"].get(side, {}).get("p99_ms")] for side in ("tierlog", "kafka")}
        report.side_by_side("p99 at 2,000 msgs/s", lat, unit="ms", better=LOWER)
    if data.get("failover"):
        fo = {
            side: [r.get("failover_s") for r in data["failover"].get(side, {}).get("rounds", [])]
            for side in ("tierlog", "kafka")
        }
        report.side_by_side("failover to first ack", fo, unit="s", better=LOWER, goal=1.0)
    mv = data.get("move", {})
    if mv.get("tiered") and mv.get("untiered"):
        moves = {k: [mv[k].get("seconds")] for k in ("tiered", "untiered")}
        # 10x faster tiered is the goal for 10 GiB retained; the gain grows with the size
        # (retained / local retention), so a smaller (quick) move has no goal.
        goal = 0.1 if (mv.get("retained_gib") or 0) >= FULL_MOVE_GIB else None
        report.side_by_side("partition move (tierlog)", moves, unit="s", better=LOWER, goal=goal)
    sc = data.get("scale", {})
    if sc.get("brokers_2") and sc.get("brokers_1"):
        per = {
            "2 brokers": sc["brokers_2"].get("rounds_msgs_per_s") or [],
            "1 broker": sc["brokers_1"].get("rounds_msgs_per_s") or [],
        }
        report.side_by_side("scale-out on one host (tierlog)", per, unit="msgs/s")


def summarise(report: dict[str, Any]) -> None:
    """The best rounds, as reported before medians (``figures`` and ``goals`` in the JSON)."""
    t, k = report.get("throughput", {}), report.get("latency", {})
    tt, tk = t.get("tierlog", {}), t.get("kafka", {})
    lt, lk = k.get("tierlog", {}), k.get("kafka", {})
    ft = report.get("failover", {}).get("tierlog", {}).get("median_s")
    fk = report.get("failover", {}).get("kafka", {}).get("median_s")
    figures = {
        "throughput_msgs_per_s": {"tierlog": tt.get("msgs_per_s"), "kafka": tk.get("msgs_per_s")},
        "throughput_mb_per_s": {"tierlog": tt.get("mb_per_s"), "kafka": tk.get("mb_per_s")},
        "p50_ms": {"tierlog": lt.get("p50_ms"), "kafka": lk.get("p50_ms")},
        "p99_ms": {"tierlog": lt.get("p99_ms"), "kafka": lk.get("p99_ms")},
        "failover_median_s": {"tierlog": ft, "kafka": fk},
        "broker_cpu_s_per_gib": {
            "tierlog": tt.get("brokers_cpu_s_per_gib"),
            "kafka": tk.get("brokers_cpu_s_per_gib"),
        },
    }
    for entry in figures.values():
        entry["ratio_tierlog_kafka"] = _ratio(entry["tierlog"], entry["kafka"])
    mv, sc = report.get("move", {}), report.get("scale", {})
    if mv:
        figures["move_s_tierlog_only"] = {
            "untiered": mv.get("untiered", {}).get("seconds"),
            "tiered": mv.get("tiered", {}).get("seconds"),
            "ratio_untiered_tiered": mv.get("ratio_untiered_tiered_s"),
            "retained_gib": mv.get("retained_gib"),
        }
    if sc:
        figures["scale_out_msgs_per_s_tierlog_only"] = {
            "brokers_1": sc.get("brokers_1", {}).get("msgs_per_s"),
            "brokers_2": sc.get("brokers_2", {}).get("msgs_per_s"),
            "ratio_2_1": sc.get("ratio_2_1"),
        }
    tr = figures["throughput_msgs_per_s"]["ratio_tierlog_kafka"]
    goals = {
        "throughput_ratio_ge_1": None if tr is None else tr >= 1.0,
        "failover_no_slower_than_kafka": None if ft is None or fk is None else ft <= fk,
    }
    mr = mv.get("ratio_untiered_tiered_s")
    if mv:
        goals["tiered_move_10x_faster"] = None if mr is None else mr >= 10.0
    report["figures"] = figures
    report["goals"] = goals
    say("best rounds (tierlog / kafka / ratio):")
    for key, entry in figures.items():
        if "ratio_tierlog_kafka" not in entry:
            say(f"  {key}: {entry}")
        elif entry["tierlog"] is not None or entry["kafka"] is not None:
            say(
                f"  {key:<24} {entry['tierlog']} / {entry['kafka']} / "
                f"{entry['ratio_tierlog_kafka']}"
            )
    say(f"  goals: {goals}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        epilog="The last line on stdout is one JSON object with every figure.",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run (< 2 min)")
    parser.add_argument("--only", choices=["tierlog", "kafka"], help="run one cluster only")
    parser.add_argument("--msgs", type=int, help="records per throughput round")
    parser.add_argument("--rounds", type=int, help="throughput rounds per cluster")
    parser.add_argument("--failover-rounds", type=int, help="failover rounds per cluster")
    parser.add_argument("--kafka-version", default="auto", help="e.g. 4.4.0; auto = newest cached")
    parser.add_argument(
        "--only-move",
        action="store_true",
        help="only the partition move (tierlog: tiered vs untiered)",
    )
    parser.add_argument(
        "--only-scale",
        action="store_true",
        help="only the scale-out (tierlog: 1 broker vs 2 brokers on this host)",
    )
    parser.add_argument("--no-move", action="store_true", help="leave the partition move out")
    parser.add_argument("--no-scale", action="store_true", help="leave the scale-out out")
    parser.add_argument(
        "--move-gib",
        type=float,
        help=f"GiB retained in each moved topic (full {FULL_MOVE_GIB:g}, quick {QUICK_MOVE_GIB:g})",
    )
    parser.add_argument("--scale-seconds", type=float, help="seconds per scale-out round")
    parser.add_argument("--scale-rounds", type=int, help="scale-out rounds per cluster")
    parser.add_argument(
        "--scale-producers", type=int, default=2, help="producer processes (default 2)"
    )
    parser.add_argument(
        "--scale-partitions", type=int, default=8, help="partitions of the topic (default 8)"
    )
    parser.add_argument("--producer-worker", help=argparse.SUPPRESS)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run tierlog's brokers under cProfile (slower: figures not comparable)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the clusters' data dirs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.producer_worker:  # a child of the scale-out measurement
        producer_worker(json.loads(args.producer_worker))
        return 0
    procs.install_signal_handlers()
    os.environ["PYTHONUNBUFFERED"] = "1"
    plan = QUICK if args.quick else FULL
    if args.msgs:
        plan = Plan(**{**plan.__dict__, "throughput_msgs": args.msgs})
    if args.rounds:
        plan = Plan(**{**plan.__dict__, "rounds": args.rounds})
    if args.failover_rounds is not None:
        plan = Plan(**{**plan.__dict__, "failover_rounds": args.failover_rounds})
    run_dir = WORK / "runs" / time.strftime("cluster-%Y%m%d-%H%M%S")
    reported = Report("cluster", quick=args.quick, out=sys.stderr)
    reported.data["env"].update(
        confluent_kafka=metadata.version("confluent-kafka"),
        librdkafka=confluent_kafka.libversion()[0],
        tierlog=reporting.tierlog_source(),
    )
    report = reported.data
    report.update({
        "profiled": args.profile,
        "plan": plan.__dict__,
        "producer": {**PRODUCER, "value_bytes": VALUE_BYTES},
        "topic": {"replication_factor": BROKERS, **TOPIC_CONFIG},
        "timeouts": {
            "failure_detection_ms": SESSION_TIMEOUT_MS,
            "tierlog": "zookeeper.session.timeout.ms (ZooKeeper tickTime 200 ms)",
            "kafka": "broker.session.timeout.ms (broker.heartbeat.interval.ms 2000)",
            "replica.lag.time.max.ms": REPLICA_LAG_MS,
            "replica.fetch.wait.max.ms": FETCH_WAIT_MS,
        },
        "clusters": {},
    })  # fmt: skip
    only = args.only_move or args.only_scale
    run_main = not only
    run_move = args.only_move or (not only and not args.no_move)
    run_scale = args.only_scale or (not only and not args.no_scale)
    move_gib = args.move_gib or (QUICK_MOVE_GIB if args.quick else FULL_MOVE_GIB)
    scale_seconds = args.scale_seconds or (5.0 if args.quick else 15.0)
    scale_rounds = args.scale_rounds or 3
    say(f"cluster bench: {'quick' if args.quick else 'full'} run, logs in {run_dir}")
    clusters: dict[str, Cluster] = {}
    try:
        for name in ("kafka", "tierlog"):
            if args.only not in (None, name) or not run_main:
                continue
            try:
                if name == "kafka":
                    cluster, info = start_kafka(args.kafka_version, run_dir / name)
                else:
                    cluster, info = start_tierlog(run_dir / name, args.profile)
                clusters[name] = cluster
                report["clusters"][name] = {**info, "settings": cluster.settings}
            except (kafka_ref.KafkaUnavailable, procs.BrokerNotReady, RuntimeError) as exc:
                say(f"[{name}] unavailable: {exc}")
                report["clusters"][name] = {"error": str(exc)}
        if clusters:
            run_all(clusters, plan, report)
        for name, cluster in list(clusters.items()):  # the next sections get the box alone
            with contextlib.suppress(Exception):
                report["clusters"][name]["stop"] = cluster.stop()
            if not args.keep:
                shutil.rmtree(cluster.run_dir / "data", ignore_errors=True)
            del clusters[name]
        if run_move:
            say(
                f"move (tierlog only): {move_gib:g} GiB in a tiered topic (local retention "
                f"{MOVE_LOCAL_RETENTION // MiB} MiB) and in an untiered one, broker 0 -> 1"
            )
            report["move"] = _guard(
                "tierlog", "move", lambda: move(run_dir / "move", move_gib, args.keep)
            )
        if run_scale:
            say(
                f"scale-out (tierlog only): {args.scale_producers} producer processes, acks=1, "
                f"1 KiB, linger 5 ms, {args.scale_partitions} partitions RF 1; 1 vs 2 brokers"
            )
            report["scale"] = _guard(
                "tierlog",
                "scale",
                lambda: scale(
                    run_dir / "scale",
                    scale_rounds,
                    scale_seconds,
                    args.scale_producers,
                    args.scale_partitions,
                    args.keep,
                ),
            )
    except (KeyboardInterrupt, SystemExit) as exc:
        report["interrupted"] = type(exc).__name__
        say(f"interrupted ({type(exc).__name__}); stopping the clusters")
    finally:
        for name, cluster in clusters.items():
            with contextlib.suppress(Exception):
                report["clusters"][name]["stop"] = cluster.stop()
            if not args.keep:
                shutil.rmtree(cluster.run_dir / "data", ignore_errors=True)
        procs._kill_all()
        if args.profile:
            report["profile"] = profile_summary(run_dir / "tierlog")
    summarise(report)
    side_by_side(reported)
    return reported.finish(interrupted=report.pop("interrupted", None))


if __name__ == "__main__":
    sys.exit(main())
