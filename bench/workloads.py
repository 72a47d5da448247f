"""The client side of bench/throughput.py: confluent-kafka workloads against one broker.

Each workload creates its own topic, clients and data, is bounded by the ``Plan``'s seconds
(and every client call by a timeout), and returns a flat dict of figures. Nothing here knows
which broker it talks to. Sizes: MiB = 2**20 bytes of record values (keys are null);
``msgs_per_s`` counts records the broker acknowledged (or, for acks=0, the records its high
watermark shows).
"""

from __future__ import annotations

import os
import resource
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec
from confluent_kafka.cimpl import NewTopic
from procs import tree_rss

MiB = 1 << 20
FLUSH_TIMEOUT = 120.0  # the producer queue holds at most ~1 GiB; even a slow broker drains it
CALL_TIMEOUT = 15.0  # one admin/metadata/list-offsets round trip


@dataclass(frozen=True)
class Target:
    """One running broker as the workloads see it."""

    name: str
    bootstrap: str
    pid: int
    data_dir: Path  # its log.dirs, for counting record batches per partition
    # librdkafka settings every client of this target adds (security.protocol, ssl.*).
    client_conf: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """Sizes and time bounds of one run (``--quick`` or full)."""

    produce_seconds: float
    produce_max_messages: int
    backlog_bytes: int
    backlog_seconds: float
    consume_seconds: float
    latency_rate: int
    latency_seconds: float
    soak_bytes: int
    soak_seconds: float
    rounds: int  # producer and consumer workloads: best of this many, brokers alternating


def _base_conf(target: Target) -> dict[str, Any]:
    return {
        "bootstrap.servers": target.bootstrap,
        "broker.address.family": "v4",
        "client.id": "tierlog-bench",
        # 4 = warnings and errors: librdkafka's info lines (BGQUEUE ... Purging as a
        # client closes) would be printed between the benchmark's results.
        "log_level": 4,
        **target.client_conf,
    }


def _client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def create_topic(target: Target, topic: str, deadline_s: float = 60.0) -> str:
    """Create a one-partition topic and wait until Metadata shows its leader.

    Falls back to auto-creation (a producer's Metadata request) when CreateTopics fails.
    Returns how the topic came to be.

    Raises:
        TimeoutError: the partition has no leader after ``deadline_s``.
    """
    admin = AdminClient(_base_conf(target))
    how = "CreateTopics"
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1)],
        operation_timeout=CALL_TIMEOUT,
        request_timeout=CALL_TIMEOUT,
    )
    try:
        futures[topic].result(timeout=CALL_TIMEOUT * 2)
    except Exception as exc:
        how = f"auto-create after CreateTopics failed: {exc}"
        producer = Producer({**_base_conf(target), "allow.auto.create.topics": True})
        producer.list_topics(topic=topic, timeout=CALL_TIMEOUT)
        producer.flush(1)
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic=topic, timeout=CALL_TIMEOUT).topics.get(topic)
        partitions = meta.partitions if meta is not None and meta.error is None else {}
        if 0 in partitions and partitions[0].leader >= 0:
            return how
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leader after {deadline_s:.0f} s ({how})")


def delete_topic(target: Target, topic: str) -> bool:
    """DeleteTopics, so a long run does not fill the disk; False if the broker refused."""
    admin = AdminClient(_base_conf(target))
    futures = admin.delete_topics([topic], operation_timeout=CALL_TIMEOUT)
    try:
        futures[topic].result(timeout=CALL_TIMEOUT * 2)
    except Exception:
        return False
    return True


class _Watermarks:
    """High watermark by ListOffsets from an AdminClient (no consumer group involved)."""

    def __init__(self, target: Target, topic: str) -> None:
        self.admin = AdminClient(_base_conf(target))
        self.tp = TopicPartition(topic, 0)

    def high(self) -> int:
        """Retries for up to CALL_TIMEOUT: a dropped connection or a metadata refresh in
        progress fails one request but is no reason to abandon the workload."""
        deadline = time.perf_counter() + CALL_TIMEOUT
        while True:
            try:
                futures = self.admin.list_offsets(
                    {self.tp: OffsetSpec.latest()}, request_timeout=CALL_TIMEOUT
                )
                offset: int = futures[self.tp].result(timeout=CALL_TIMEOUT).offset
                return offset
            except KafkaException:
                if time.perf_counter() > deadline:
                    raise
                time.sleep(0.05)

    def wait_for(self, target: int, timeout: float) -> tuple[int, float]:
        """Poll the high watermark until it reaches ``target``: (last seen, when seen)."""
        deadline = time.perf_counter() + timeout
        high = self.high()
        while high < target and time.perf_counter() < deadline:
            time.sleep(0.01)
            high = self.high()
        return high, time.perf_counter()


def batch_stats(target: Target, topic: str) -> dict[str, float]:
    """Record batches and records in the partition's segment files (v2 batch headers).

    Tells whether both brokers received the same batching from the client: one batch is one
    produce request's worth for a single partition.
    """
    batches = records = 0
    for path in sorted((target.data_dir / f"{topic}-0").glob("*.log")):
        fd = os.open(path, os.O_RDONLY)
        try:
            size, pos = os.fstat(fd).st_size, 0
            while pos + 61 <= size:
                header = os.pread(fd, 61, pos)
                length = int.from_bytes(header[8:12], "big", signed=True)
                if length <= 0 or header[16] != 2:
                    break  # preallocated tail or not a v2 batch
                batches += 1
                records += int.from_bytes(header[57:61], "big", signed=True)
                pos += 12 + length
        finally:
            os.close(fd)
    if batches == 0:
        return {}
    return {"batches": batches, "records_per_batch": round(records / batches, 2)}


def _pump(
    producer: Producer,
    topic: str,
    value: bytes,
    max_messages: int,
    until: float,
    on_progress: Callable[[int], None] | None = None,
) -> int:
    """produce() as fast as the client allows until a count or a perf_counter() deadline."""
    produce, poll, now = producer.produce, producer.poll, time.perf_counter
    sent = 0
    while sent < max_messages:
        try:
            produce(topic, value, partition=0)
        except BufferError:  # local queue full: the broker is the bottleneck, wait for it
            poll(0.005)
            if now() > until:
                break
            continue
        sent += 1
        if sent & 1023 == 0:
            poll(0)
            if on_progress is not None:
                on_progress(sent)
            if now() > until:
                break
    return sent


def produce_throughput(
    target: Target,
    topic: str,
    plan: Plan,
    value_size: int,
    settings: dict[str, Any],
    keep: bool = False,
) -> dict[str, Any]:
    """Send ``value_size``-byte records for ``plan.produce_seconds``; rate of acknowledged ones.

    With acks=0 nothing is acknowledged, so the clock stops when the broker's high watermark
    shows every record sent (polled every 10 ms), as the Kafka paper's producer also did not
    wait for acknowledgements. The topic is deleted afterwards unless ``keep``.
    """
    errors: list[str] = []

    def on_error(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    conf = {
        **_base_conf(target),
        **settings,
        "delivery.report.only.error": True,
        "on_delivery": on_error,
    }
    create_topic(target, topic)
    producer = Producer(conf)
    marks = _Watermarks(target, topic)
    value = os.urandom(value_size)
    for _ in range(100):  # warm-up: connections, metadata, the broker's first segment
        producer.produce(topic, value, partition=0)
    producer.flush(FLUSH_TIMEOUT)
    base, _ = marks.wait_for(100, CALL_TIMEOUT)
    cpu0, t0 = _client_cpu(), time.perf_counter()
    sent = _pump(producer, topic, value, plan.produce_max_messages, t0 + plan.produce_seconds)
    unsent = producer.flush(FLUSH_TIMEOUT)
    t_end = time.perf_counter()
    if str(settings["acks"]) == "0":
        high, t_end = marks.wait_for(base + sent, FLUSH_TIMEOUT)
        delivered = high - base
    else:
        delivered = sent - unsent - len(errors)
        high = marks.high()
    elapsed = t_end - t0
    result: dict[str, Any] = {
        "msgs": delivered,
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(delivered / elapsed, 1),
        "mib_per_s": round(delivered * value_size / elapsed / MiB, 2),
        "value_bytes": value_size,
        "sent": sent,
        "on_broker": high - base,
        "errors": len(errors) + unsent,
        "client_cpu_s": round(_client_cpu() - cpu0, 2),
    }
    if errors:
        result["first_error"] = errors[0]
    result.update(batch_stats(target, topic))
    if not keep:
        result["deleted"] = delete_topic(target, topic)
    return result


def write_backlog(target: Target, topic: str, plan: Plan, value_size: int) -> dict[str, Any]:
    """Fill ``topic`` with ``plan.backlog_bytes`` of records, batched for speed (acks=1)."""
    settings = {"acks": "1", "linger.ms": 20, "batch.size": MiB, "batch.num.messages": 100_000}
    count = max(1, plan.backlog_bytes // value_size)
    fast = replace(plan, produce_seconds=plan.backlog_seconds, produce_max_messages=count)
    return produce_throughput(target, topic, fast, value_size, settings, keep=True)


def _consumer_conf(target: Target, topic: str) -> dict[str, Any]:
    # librdkafka stops fetching for fetch.queue.backoff.ms (default 1 s) whenever its local
    # queue holds queued.min.messages (default 100k): with small records that, not the
    # broker, set the pace. Measured here: 0.3M -> 2.3M msgs/s from Kafka 4.3 on loopback.
    return {
        **_base_conf(target),
        "group.id": f"tierlog-bench-{topic}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 0,
        "queued.min.messages": 1_000_000,
    }


def consume_backlog(
    target: Target,
    topic: str,
    plan: Plan,
    isolation: str = "read_uncommitted",
    wanted: int | None = None,
    stats: list[str] | None = None,
    ids: list[bytes] | None = None,
) -> dict[str, Any]:
    """Read the whole partition from offset 0 with an assigned (group-less) consumer.

    ``msgs_per_s`` runs from the first record received to the last: the ~0.5 s before the
    first record (bootstrap, metadata, ListOffsets, librdkafka's fetcher start) is reported
    apart as ``first_record_s`` and folded in by ``msgs_per_s_incl_start``.

    Args:
        isolation: the consumer's ``isolation.level``.
        wanted: records to read before stopping; default the high watermark, which is
            right only without transactions (markers and aborted records are never read
            by a ``read_committed`` consumer).
        stats: if given, librdkafka's statistics JSON is appended to it every second.
        ids: if given, the first 8 bytes of every record's value are appended to it (the
            record's number, for checking which records were read, not only how many).
    """
    if wanted is None:
        wanted = _Watermarks(target, topic).high()
    conf = {**_consumer_conf(target, topic), "isolation.level": isolation}
    if stats is not None:
        conf.update({"statistics.interval.ms": 1000, "stats_cb": stats.append})
    consumer = Consumer(conf)
    got = size = errors = first_got = 0
    try:
        cpu0, t0 = _client_cpu(), time.perf_counter()
        t_first = 0.0
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = t0 + plan.consume_seconds
        while got < wanted and time.perf_counter() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.1):
                if msg.error() is not None:
                    errors += 1
                    continue
                got += 1
                value = msg.value() or b""
                size += len(value)
                if ids is not None:
                    ids.append(value[:8])
            if not t_first and got:
                t_first, first_got = time.perf_counter(), got
        t_end = time.perf_counter()
    finally:
        consumer.close()
    steady = max(t_end - t_first, 1e-9) if t_first else t_end - t0
    per_record = size / got if got else 0.0
    return {
        "msgs": got,
        "seconds": round(t_end - t0, 3),
        "msgs_per_s": round((got - first_got) / steady, 1),
        "mib_per_s": round((got - first_got) * per_record / steady / MiB, 2),
        "msgs_per_s_incl_start": round(got / (t_end - t0), 1),
        "first_record_s": round(t_first - t0, 3) if t_first else None,
        "backlog_msgs": wanted,
        "complete": got >= wanted,
        "errors": errors,
        "client_cpu_s": round(_client_cpu() - cpu0, 2),
    }


def _percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def produce_latency(target: Target, topic: str, plan: Plan, value_size: int) -> dict[str, Any]:
    """Produce latency at a fixed rate (acks=1, linger.ms=0), p50/p99 in milliseconds.

    Latency is ``produce()`` to the delivery callback (librdkafka's ``Message.latency()``,
    which is stamped when the callback is served). A thread sits in ``poll()``, which
    returns as soon as a delivery report arrives, so callbacks are served at once; the main
    thread paces sends with ``time.sleep`` (busy polling would take a core from the broker
    on a 2-core box). One second at the same rate is sent first and not counted
    (connections, JIT, the first segment).
    """
    latencies: list[float] = []
    errors: list[str] = []

    def done(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(str(err))
        elif (seconds := msg.latency()) is not None:
            latencies.append(seconds)

    conf = {**_base_conf(target), "acks": "1", "linger.ms": 0, "socket.nagle.disable": True}
    create_topic(target, topic)
    producer = Producer({**conf, "on_delivery": done})
    value = os.urandom(value_size)
    interval = 1.0 / plan.latency_rate
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            producer.poll(0.1)

    def paced(count: int, budget: float) -> float:
        t0 = time.perf_counter()
        give_up = t0 + budget  # a broker slower than the rate makes the schedule slip
        for i in range(count):
            now = time.perf_counter()
            if now > give_up:
                break
            if (wait := t0 + i * interval - now) > 0:
                time.sleep(wait)
            try:
                producer.produce(topic, value, partition=0)
            except BufferError:
                errors.append("local queue full")
        deadline = time.perf_counter() + FLUSH_TIMEOUT
        while len(producer) and time.perf_counter() < deadline:
            time.sleep(0.001)  # the serving thread polls; flush() here would race it
        return time.perf_counter() - t0

    server = threading.Thread(target=serve, name="delivery-reports", daemon=True)
    server.start()
    try:
        paced(plan.latency_rate, 3.0)
        latencies.clear()
        cpu0 = _client_cpu()
        total = int(plan.latency_rate * plan.latency_seconds)
        elapsed = paced(total, 3 * plan.latency_seconds)
    finally:
        stop.set()
        server.join(timeout=CALL_TIMEOUT)
    unsent = producer.flush(FLUSH_TIMEOUT)
    ordered = sorted(latencies)
    ms = 1000.0
    result: dict[str, Any] = {
        "msgs": len(ordered),
        "rate_target": plan.latency_rate,
        "rate_achieved": round(len(ordered) / elapsed, 1),
        "errors": len(errors) + unsent,
        "client_cpu_s": round(_client_cpu() - cpu0, 2),
    }
    if ordered:
        result.update(
            p50_ms=round(_percentile(ordered, 0.50) * ms, 3),
            p99_ms=round(_percentile(ordered, 0.99) * ms, 3),
            p999_ms=round(_percentile(ordered, 0.999) * ms, 3),
            max_ms=round(ordered[-1] * ms, 3),
            mean_ms=round(statistics.fmean(ordered) * ms, 3),
        )
    return result


def soak(target: Target, topic: str, plan: Plan, value_size: int) -> dict[str, Any]:
    """Push ``plan.soak_bytes`` through one partition while a consumer reads it concurrently.

    Returns produce/consume rates and the broker's RSS along the way, as ``points`` of
    [seconds, MiB produced, MiB consumed, RSS MiB] every 0.25 s (at most 80 kept, evenly
    spaced), to show whether memory stays flat however much has flowed.
    """
    create_topic(target, topic)
    count = max(1, plan.soak_bytes // value_size)
    settings = {"acks": "1", "linger.ms": 5, "batch.size": MiB}
    producer = Producer({**_base_conf(target), **settings})
    consumed = [0]
    stop = threading.Event()

    def consume() -> None:
        consumer = Consumer(_consumer_conf(target, topic))
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        try:
            while consumed[0] < count and not stop.is_set():
                batch = consumer.consume(num_messages=1000, timeout=0.1)
                consumed[0] += sum(1 for m in batch if m.error() is None)
        finally:
            consumer.close()

    points: list[list[float]] = []
    cpu0, t0 = _client_cpu(), time.perf_counter()
    due = [t0]

    def progress(sent: int, force: bool = False) -> None:
        now = time.perf_counter()
        if now >= due[0] or force:
            due[0] = now + 0.25
            rss = tree_rss(target.pid)[0]
            points.append(
                [
                    round(now - t0, 2),
                    round(sent * value_size / MiB),
                    round(consumed[0] * value_size / MiB),
                    round(rss / MiB, 1),
                ]
            )

    reader = threading.Thread(target=consume, name="soak-consumer", daemon=True)
    reader.start()
    value = os.urandom(value_size)
    deadline = t0 + plan.soak_seconds
    try:
        sent = _pump(producer, topic, value, count, deadline, progress)
        unsent = producer.flush(FLUSH_TIMEOUT)
        t_produced = time.perf_counter()
        while reader.is_alive() and consumed[0] < sent - unsent and time.perf_counter() < deadline:
            reader.join(timeout=0.25)
            progress(sent)
        t_consumed = time.perf_counter()
    finally:
        stop.set()
        reader.join(timeout=CALL_TIMEOUT)
    progress(sent, force=True)
    delete_topic(target, topic)
    delivered = sent - unsent
    rss = [p[3] for p in points]
    half = rss[len(rss) // 2 :]
    step = max(1, -(-len(points) // 80))
    return {
        "msgs": delivered,
        "gib": round(delivered * value_size / (1 << 30), 2),
        "produce_mib_per_s": round(delivered * value_size / (t_produced - t0) / MiB, 2),
        "consumed_msgs": consumed[0],
        "consume_mib_per_s": round(consumed[0] * value_size / (t_consumed - t0) / MiB, 2),
        "complete": consumed[0] >= delivered and delivered >= count,
        "rss_first_mib": rss[0],
        "rss_last_mib": rss[-1],
        "rss_second_half_min_mib": min(half),
        "rss_second_half_max_mib": max(half),
        "client_cpu_s": round(_client_cpu() - cpu0, 2),
        "points": points[::step] + ([points[-1]] if (len(points) - 1) % step else []),
    }
