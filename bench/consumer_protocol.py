"""KIP-848's consumer protocol on a running broker: how fast a big group becomes stable
(tierlog vs Apache Kafka), and how long a rebalance stops consumption (classic eager vs
classic cooperative vs KIP-848).

Two parts:

  stable   ``--members`` members (100) join, all at once, a group subscribed to
           ``--partitions`` partitions (1,000, over ``--topics`` topics). Each member is a
           small asyncio client speaking ConsumerGroupHeartbeat v1 on a connection of its
           own, as Kafka's clients behave: it heartbeats every interval the coordinator
           gives it, and at once when its assignment changed (it gives partitions up at
           once: there is no processing to finish), always reporting what it owns. The
           figure is the seconds from the first join until every member is at the same
           epoch and the members' partitions are disjoint and cover all of them: the group
           is stable. Both brokers run with ``group.consumer.heartbeat.interval.ms=500``.
           Side by side: tierlog and Apache Kafka 4.x (``bench/kafka_ref.py``, KRaft).
  pause    Three librdkafka consumers read a topic of ``--pause-partitions`` partitions
           (6) that a producer feeds steadily (``--rate`` records/s); a fourth member
           joins. The pause is the longest time, in the ``--window`` seconds (20) after the
           join, during which no member received a record. Three ways: the classic
           protocol with the eager ``range`` assignor (every member gives everything up and
           waits), the classic protocol with ``cooperative-sticky`` (only moved partitions
           stop), and the consumer protocol (KIP-848, the coordinator's ``uniform``
           assignor). On tierlog; heartbeats every 500 ms for all three.

Run (from the repository root)::

    .venv/bin/python bench/consumer_protocol.py            # 3 rounds of each
    .venv/bin/python bench/consumer_protocol.py --quick    # one round: a smoke test
    .venv/bin/python bench/consumer_protocol.py --no-kafka # tierlog only

The LAST line printed is one JSON object with every figure and the load average at the
start and end (``bench/reporting.py``). Run it on a quiet machine: both parts time
rebalances, which a busy CPU stretches.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kafka_ref
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema
from procs import ManagedProcess, install_signal_handlers, tree_cpu_seconds, wait_ready
from reporting import LOWER, Report, spread
from tierlog_ref import start_tierlog, unavailable_reason

from tierlog.client.async_connection import AsyncConnection
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build

E = ErrorCode
HEARTBEAT_MS = 500
GROUP_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "group.consumer.min.heartbeat.interval.ms": str(HEARTBEAT_MS),
}
RETRY = {E.coordinator_load_in_progress, E.coordinator_not_available, E.not_coordinator}
COORDINATOR_MOVING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
}
WORK = Path(__file__).resolve().parent / ".work"


# ----------------------------------------------------------------------------- stable


class Member:
    """One simulated consumer-protocol member (see the module docstring)."""

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: frozenset[tuple[uuid.UUID, int]] = frozenset()
        self.heartbeats = 0

    def request(self, group: str, topics: list[str]) -> Any:
        owned: dict[uuid.UUID, list[int]] = {}
        for topic_id, partition in sorted(self.owned):
            owned.setdefault(topic_id, []).append(partition)
        fields: dict[str, Any] = {
            "group_id": group,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in owned.items()],
        }
        if self.epoch == 0:
            fields.update(rebalance_timeout=30_000, subscribed_topic_names=topics)
        return build(load_request_schema(68, 1), fields)


def group_is_stable(members: list[Member], partitions: int) -> bool:
    epochs = {m.epoch for m in members}
    if len(epochs) != 1 or 0 in epochs:
        return False
    owned = [m.owned for m in members]
    union = frozenset().union(*owned)
    return len(union) == partitions and sum(len(o) for o in owned) == partitions


async def run_member(
    member: Member,
    host: str,
    port: int,
    group: str,
    topics: list[str],
    done: asyncio.Event,
    changed: Callable[[], None],
) -> None:
    conn = await AsyncConnection.open(host, port, client_id=member.member_id)
    try:
        while not done.is_set():
            response = await conn.request(member.request(group, topics))
            member.heartbeats += 1
            if response.error_code in RETRY:
                await asyncio.sleep(0.1)
                continue
            if response.error_code in (E.fenced_member_epoch, E.unknown_member_id):
                member.epoch, member.owned = 0, frozenset()
                continue
            if response.error_code:
                raise RuntimeError(f"{member.member_id}: {response.error_code!r}")
            member.epoch = int(response.member_epoch)
            moved = False
            if response.assignment is not None:
                given = frozenset(
                    (t.topic_id, int(p))
                    for t in response.assignment.topic_partitions
                    for p in t.partitions
                )
                moved = given != member.owned
                member.owned = given
            changed()
            if not moved:  # an acknowledgement goes out at once; otherwise wait
                interval = response.heartbeat_interval.total_seconds()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), max(interval, 0.05))
        # Leave, so that the broker is quiet for the next round.
        leave = {"group_id": group, "member_id": member.member_id, "member_epoch": -1}
        await conn.request(build(load_request_schema(68, 1), leave))
    finally:
        await conn.close()


async def time_to_stable(
    bootstrap: str, group: str, topics: list[str], members: int, partitions: int
) -> tuple[float | None, int]:
    """Seconds from the first join to a stable group (None after 300 s), and heartbeats."""
    host, port = bootstrap.rsplit(":", 1)
    crowd = [Member(f"{group}-member-{i:03d}-{uuid.uuid4().hex[:8]}") for i in range(members)]
    done = asyncio.Event()
    stable_at: list[float] = []

    def changed() -> None:
        if not done.is_set() and group_is_stable(crowd, partitions):
            stable_at.append(time.monotonic())
            done.set()

    started = time.monotonic()
    tasks = [
        asyncio.create_task(run_member(m, host, int(port), group, topics, done, changed))
        for m in crowd
    ]
    try:
        await asyncio.wait_for(done.wait(), 300)
    except TimeoutError:
        done.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    seconds = round(stable_at[0] - started, 3) if stable_at else None
    return seconds, sum(m.heartbeats for m in crowd)


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    for future in futures.values():
        future.result(300)
    # FindCoordinator creates __consumer_offsets before the first heartbeat needs it; Kafka
    # answers NOT_COORDINATOR until the new partitions have leaders.
    probe = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-probe", "client.id": "bench-probe"}
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                probe.committed([TopicPartition(names[0], 0)], timeout=30)
                break
            except KafkaException as exc:
                if exc.args[0].code() not in COORDINATOR_MOVING or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        probe.close()


def stable_part(
    name: str, bootstrap: str, proc: ManagedProcess, args: argparse.Namespace, rounds: int
) -> dict[str, Any]:
    per_topic = args.partitions // args.topics
    topics = [f"stable-{i:02d}" for i in range(args.topics)]
    create_topics(bootstrap, topics, per_topic)
    results: list[float | None] = []
    cpu: list[float] = []
    heartbeats: list[int] = []
    for r in range(rounds):
        before = tree_cpu_seconds(proc.pid)
        seconds, beats = asyncio.run(
            time_to_stable(bootstrap, f"stable-{r}", topics, args.members, per_topic * len(topics))
        )
        cpu.append(round(tree_cpu_seconds(proc.pid) - before, 2))
        results.append(seconds)
        heartbeats.append(beats)
        print(f"  {name}: round {r + 1}: stable after {seconds} s, {beats} heartbeats", flush=True)
    return {"seconds": results, "broker_cpu_seconds": cpu, "heartbeats": heartbeats}


# ----------------------------------------------------------------------------- pause


PROTOCOLS: dict[str, dict[str, Any]] = {
    "classic_eager": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "range",
        "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": HEARTBEAT_MS,
    },
    "classic_cooperative": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": HEARTBEAT_MS,
    },
    "consumer_kip848": {"group.protocol": "consumer"},
}


def feed(bootstrap: str, topic: str, rate: int, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "client.id": "feeder"})
    n = 0
    while not stop.is_set():
        for _ in range(max(rate // 20, 1)):
            producer.produce(topic, value=str(n).encode())
            n += 1
        producer.poll(0)
        time.sleep(0.05)
    producer.flush(30)


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest interval in [start, end] without one of ``times``."""
    marks = [start, *(t for t in times if start <= t <= end), end]
    return max(b - a for a, b in itertools.pairwise(marks))


def rebalance_pause(
    bootstrap: str, protocol: str, partitions: int, rate: int, window: float
) -> dict[str, float] | None:
    """What a fourth member joining does to three consuming ones, in the ``window`` s
    after it subscribes: ``member`` is the longest time one of the three received nothing
    (each gets a record every few milliseconds while it consumes), ``group`` the longest
    time nobody did."""
    topic = f"pause-{protocol}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": topic,
        "auto.offset.reset": "latest",
        "enable.auto.commit": True,
        **PROTOCOLS[protocol],
    }
    stop = threading.Event()
    feeder = threading.Thread(target=feed, args=(bootstrap, topic, rate, stop), daemon=True)
    feeder.start()
    consumers = [Consumer({**settings, "client.id": f"member-{i}"}) for i in range(3)]
    deliveries: list[list[float]] = [[] for _ in range(4)]
    try:
        for c in consumers:
            c.subscribe([topic])

        def poll_for(seconds: float, until: Callable[[], bool] | None = None) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end and not (until and until()):
                for i, c in enumerate(consumers):
                    for msg in c.consume(100, 0.005):
                        if msg.error() is None:
                            deliveries[i].append(time.monotonic())

        def all_assigned() -> bool:
            owned = [len(c.assignment()) for c in consumers]
            return sum(owned) == partitions and all(owned)

        poll_for(120, all_assigned)
        if not all_assigned():
            return None
        poll_for(3)  # steady state
        consumers.append(Consumer({**settings, "client.id": "member-joining"}))
        joined = time.monotonic()
        consumers[-1].subscribe([topic])
        poll_for(window)
    finally:
        stop.set()
        feeder.join(30)
        for c in consumers:
            c.close()
        admin.delete_topics([topic])
    end = joined + window
    everyone = sorted(t for times in deliveries for t in times)
    return {
        "member": round(max(longest_gap(deliveries[i], joined, end) for i in range(3)), 3),
        "group": round(longest_gap(everyone, joined, end), 3),
    }


def pause_part(
    bootstrap: str, args: argparse.Namespace, rounds: int
) -> dict[str, dict[str, list[float | None]]]:
    results: dict[str, dict[str, list[float | None]]] = {
        p: {"member": [], "group": []} for p in PROTOCOLS
    }
    for r in range(rounds):
        for protocol in PROTOCOLS:
            pause = rebalance_pause(
                bootstrap, protocol, args.pause_partitions, args.rate, args.window
            )
            for kind in ("member", "group"):
                results[protocol][kind].append(None if pause is None else pause[kind])
            print(f"  pause, round {r + 1}: {protocol}: {pause}", flush=True)
    return results


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round of each: a smoke test")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--pause-partitions", type=int, default=6)
    parser.add_argument("--rate", type=int, default=1000, help="records/s fed in the pause part")
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--no-kafka", action="store_true", help="tierlog only")
    parser.add_argument("--parts", default="stable,pause")
    args = parser.parse_args(argv)
    install_signal_handlers()
    rounds = 1 if args.quick else args.rounds
    parts = set(args.parts.split(","))
    report = Report("consumer_protocol", quick=args.quick)
    report.data["settings"] = {
        "members": args.members,
        "partitions": args.partitions,
        "topics": args.topics,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "pause_partitions": args.pause_partitions,
        "rate": args.rate,
        "window_s": args.window,
        "rounds": rounds,
    }
    reason = unavailable_reason()
    if reason:
        report.fail(f"tierlog unavailable: {reason}")
        return report.finish()
    run_dir = Path(tempfile.mkdtemp(prefix="bench-kip848-"))
    try:
        proc, bootstrap, _ = start_tierlog(run_dir / "tierlog", GROUP_SETTINGS)
        try:
            wait_ready(proc, bootstrap, 120)
            if "stable" in parts:
                tierlog = stable_part("tierlog", bootstrap, proc, args, rounds)
                report.data["stable_tierlog"] = tierlog
            if "pause" in parts:
                pauses = pause_part(bootstrap, args, rounds)
                report.data["pause"] = {
                    p: {kind: spread(v) for kind, v in by_kind.items()}
                    for p, by_kind in pauses.items()
                }
                kip848 = pauses["consumer_kip848"]["member"]
                for other, label in (
                    ("classic_eager", "eager"),
                    ("classic_cooperative", "cooperative"),
                ):
                    report.side_by_side(
                        f"longest pause of a member when one joins, KIP-848 vs classic {label}",
                        {"consumer": kip848, label: pauses[other]["member"]},
                        unit="s",
                        better=LOWER,
                    )
        finally:
            proc.stop()
        if "stable" in parts and not args.no_kafka:
            try:
                dist = kafka_ref.fetch_kafka(WORK)
                kproc, kbootstrap = kafka_ref.start_kafka(dist, run_dir / "kafka", GROUP_SETTINGS)
            except kafka_ref.KafkaUnavailable as exc:
                report.fail(f"Apache Kafka unavailable: {exc}")
                return report.finish()
            try:
                wait_ready(kproc, kbootstrap, 180)
                kafka = stable_part("kafka", kbootstrap, kproc, args, rounds)
                report.data["stable_kafka"] = kafka
                report.data["kafka_version"] = dist.version
            finally:
                kproc.stop()
            report.side_by_side(
                f"time to a stable group ({args.members} members, {args.partitions} partitions)",
                {"tierlog": tierlog["seconds"], "kafka": kafka["seconds"]},
                unit="s",
                better=LOWER,
            )
        if "stable" in parts and any(s is None for s in tierlog["seconds"]):
            report.fail("a tierlog round did not reach a stable group in 300 s")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
