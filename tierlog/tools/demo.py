"""``tierlog demo --broker-only``: the sample activity stream through a real broker and
real clients (the data platform demo, ``platform_demo``, builds on the helpers here).

``run_demo`` starts an embedded broker, creates a 4-partition topic, produces page-view and
click events with confluent-kafka (idempotent, lz4, batched), consumes them all with a
consumer group, checks that every event arrived once and the group's lag is 0, prints
throughput and a summary, and stops the broker cleanly. ``run_local_demo`` does the same
below the broker, on the local log tier alone.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from tierlog.local.config import LogConfig
from tierlog.local.log_manager import LogManager
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import Compression
from tierlog.records.reader import iter_batches_records
from tierlog.tools.activity import activity_stream
from tierlog.tools.demo_dir import prepare

TOPIC = "activity"


def partition_for(key: bytes, partitions: int) -> int:
    # Any stable hash keeps one user's events in one partition; clients use murmur2.
    return zlib.crc32(key) % partitions


def run_local_demo(
    data_dir: Path,
    out: TextIO,
    *,
    events: int = 200_000,
    partitions: int = 4,
    batch_records: int = 500,
    compression: str = "lz4",
    force: bool = False,
) -> dict[str, float]:
    prepare(data_dir, force=force)
    codec = Compression[compression.upper()]
    config = LogConfig.from_props({"segment.bytes": str(8 << 20)})
    manager = LogManager([data_dir / "logs"], config)
    manager.startup()
    logs = [manager.get_or_create_log(TOPIC, p) for p in range(partitions)]

    pending: list[list[Record]] = [[] for _ in range(partitions)]
    kinds: Counter[str] = Counter()
    pages: Counter[str] = Counter()
    payload_bytes = 0
    started = time.perf_counter()
    for event in activity_stream(events):
        p = partition_for(event.key(), partitions)
        pending[p].append(Record(event.key(), event.value(), timestamp=event.timestamp_ms))
        kinds[event.kind] += 1
        pages[event.page] += 1
        if len(pending[p]) == batch_records:
            payload_bytes += logs[p].append(build_batch(pending[p], compression=codec)).size
            pending[p] = []
    for p, remaining in enumerate(pending):
        if remaining:
            payload_bytes += logs[p].append(build_batch(remaining, compression=codec)).size
    write_s = time.perf_counter() - started

    started = time.perf_counter()
    read_back = 0
    for topic_log in logs:
        expected = topic_log.log_start_offset
        offset = expected
        while offset < topic_log.log_end_offset:
            chunk = topic_log.read(offset, 1 << 20)
            assert chunk is not None
            data = chunk if isinstance(chunk, bytes) else chunk.read()
            for header, decoded in iter_batches_records(data):
                for record in decoded:
                    if record.offset < offset:
                        continue  # a fetch starts at the batch holding the offset
                    if record.offset != expected:
                        raise AssertionError(f"offset {record.offset}, expected {expected}")
                    expected += 1
                    read_back += 1
                offset = header.next_offset
    read_s = time.perf_counter() - started
    segments = sum(len(lg.segments) for lg in logs)
    manager.shutdown()

    mb = payload_bytes / 1e6
    print(
        f"tierlog demo: {events} activity events into topic '{TOPIC}' ({partitions} "
        f"partitions, {compression}, {batch_records} records/batch) under {data_dir}",
        file=out,
    )
    print(
        f"  wrote {mb:.1f} MB in {write_s:.2f} s ({events / write_s:,.0f} events/s incl. "
        f"building batches)",
        file=out,
    )
    print(
        f"  read back {read_back} events in {read_s:.2f} s ({read_back / read_s:,.0f} "
        f"events/s incl. decoding), all in order: {read_back == events}",
        file=out,
    )
    print(f"  segments: {segments}; events by kind: {dict(kinds)}", file=out)
    print(f"  top pages: {', '.join(f'{p} {n}' for p, n in pages.most_common(3))}", file=out)
    if read_back != events:
        raise SystemExit(f"demo failed: wrote {events} events, read {read_back}")
    return {"events": events, "read_back": read_back, "write_s": write_s, "read_s": read_s}


def demo_broker_overrides(data_dir: Path) -> dict[str, str]:
    """The embedded broker of the demos: data under ``data_dir/logs``, the remote tier on
    its default ``file://<log dir>/remote``, checked often so offload shows quickly."""
    return {
        "log.dirs": str(data_dir / "logs"),
        "group.initial.rebalance.delay.ms": "0",
        "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "500",
    }


def create_tiered_topic(bootstrap: str, partitions: int) -> None:
    """The demo topic, tiered: small segments and 512 KiB of local retention per partition,
    so the older part of the stream lives only in the remote tier by the time it is read."""
    from confluent_kafka.admin import AdminClient, NewTopic

    # log_level 4: librdkafka's info line about purging its queue at close is noise here.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    tiered = {
        "remote.storage.enable": "true",
        "segment.bytes": str(256 << 10),
        "local.retention.bytes": str(512 << 10),
    }
    admin.create_topics([NewTopic(TOPIC, partitions, 1, config=tiered)])[TOPIC].result(timeout=10)


def produce_events(bootstrap: str, events: int, *, rate: int = 500) -> tuple[int, float]:
    """``events`` activity events into the demo topic with an idempotent, lz4, batching
    confluent-kafka producer; returns (value bytes, seconds)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "log_level": 4,  # as the admin client above: no info lines at close
        }
    )
    payload = 0
    started = time.perf_counter()
    # Events of the last few minutes: retention.ms (7 days) would rightly delete a stream
    # stamped long ago, from both tiers.
    recent = int(time.time() * 1000) - events * 1000 // rate
    for event in activity_stream(events, start_ms=recent, events_per_second=rate):
        value = event.value()
        payload += len(value)
        while True:
            try:
                producer.produce(TOPIC, value, event.key(), timestamp=event.timestamp_ms)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.05)
    if producer.flush(60):
        raise SystemExit("demo failed: messages left undelivered")
    return payload, time.perf_counter() - started


class Phases:
    """Prints each phase of a demo as it ends, with the time since the demo began, so a
    long run shows where it is (``[  12.3 s] produced ...``).

    Args:
        out: where the lines go (flushed at once: a terminal or a pipe to ``tee``).
        clock: seconds, monotonic.
    """

    def __init__(self, out: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.clock = clock
        self.started = clock()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def done(self, text: str) -> None:
        print(f"[{self.elapsed():7.1f} s] {text}", file=self.out, flush=True)


def start_phases(broker: Any, data_dir: Path, partitions: int, phases: Phases) -> None:
    """The phases every demo shares before producing: broker up, tiered topic created."""
    phases.done(f"broker started on {broker.bootstrap}, data under {data_dir}")
    create_tiered_topic(broker.bootstrap, partitions)
    phases.done(
        f"topic '{TOPIC}' created: {partitions} partitions, tiered (256 KiB segments, "
        "512 KiB kept locally per partition)"
    )


def run_demo(
    data_dir: Path,
    out: TextIO,
    *,
    events: int = 200_000,
    partitions: int = 4,
    force: bool = False,
) -> dict[str, float]:
    import json

    from confluent_kafka import Consumer, TopicPartition

    from tierlog.broker.embedded import EmbeddedBroker

    prepare(data_dir, force=force)
    phases = Phases(out)
    overrides = demo_broker_overrides(data_dir)
    kinds: Counter[str] = Counter()
    pages: Counter[str] = Counter()
    with EmbeddedBroker(overrides) as broker:
        start_phases(broker, data_dir, partitions, phases)
        payload, produce_s = produce_events(broker.bootstrap, events)
        phases.done(f"produced {events:,} events ({payload / 1e6:.1f} MB)")
        remote_dir = data_dir / "logs" / "remote"
        offloaded = wait_for_offload(remote_dir, TOPIC, partitions, timeout_s=20)
        phases.done(f"{offloaded['segments']} segments offloaded to the remote tier")

        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "activity-summary",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([TOPIC])
        consumed = 0
        started = time.perf_counter()
        deadline = started + 120
        while consumed < events and time.perf_counter() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                if msg.error() is not None:
                    continue
                record = json.loads(msg.value() or b"{}")
                kinds[record["event"]] += 1
                pages[record["page"]] += 1
                consumed += 1
        consume_s = time.perf_counter() - started
        phases.done(f"consumed {consumed:,} events with group 'activity-summary'")
        consumer.commit(asynchronous=False)
        tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
        committed = consumer.committed(tps, timeout=10)
        lag = sum(
            consumer.get_watermark_offsets(tp, timeout=10)[1] - c.offset
            for tp, c in zip(tps, committed, strict=True)
        )
        consumer.close()
        bootstrap = broker.bootstrap
        local_bytes = sum(
            f.stat().st_size
            for p in range(partitions)
            for f in (data_dir / "logs" / f"{TOPIC}-{p}").glob("*.log")
        )
    mb = payload / 1e6
    print(
        f"tierlog demo: {events} activity events (page views and clicks) through a broker "
        f"on {bootstrap}, data under {data_dir}",
        file=out,
    )
    print(
        f"  produced with confluent-kafka (idempotent, lz4, {partitions} partitions): "
        f"{events / produce_s:,.0f} msgs/s, {mb / produce_s:.1f} MB/s",
        file=out,
    )
    print(
        f"  consumed by group 'activity-summary': {consumed} events, "
        f"{consumed / consume_s:,.0f} msgs/s; lag after commit: {lag}",
        file=out,
    )
    print(
        f"  remote tier ({remote_dir.resolve().as_uri()}): {offloaded['segments']} segments, "
        f"{offloaded['bytes'] / 1e6:.1f} MB, offsets below {offloaded['ends']} per partition "
        f"read back from it; local tier now {local_bytes / 1e6:.1f} MB",
        file=out,
    )
    print(f"  events by kind: {dict(kinds)}", file=out)
    print(f"  top pages: {', '.join(f'{p} {n}' for p, n in pages.most_common(3))}", file=out)
    if consumed != events or lag != 0:
        raise SystemExit(f"demo failed: produced {events}, consumed {consumed}, lag {lag}")
    return {"events": events, "consumed": consumed, "produce_s": produce_s, "consume_s": consume_s}


def wait_for_offload(
    remote_dir: Path, topic: str, partitions: int, timeout_s: float
) -> dict[str, Any]:
    """Until every partition has remote segments, or offload has settled (bounded)."""
    from tierlog.remote.api import SegmentState
    from tierlog.remote.registry import open_store

    # Through the store: a manifest is a pointer to its current version (remote/manifest.py).
    store = open_store(remote_dir.resolve().as_uri())
    deadline = time.monotonic() + timeout_s
    summary: dict[str, Any] = {"segments": 0, "bytes": 0, "ends": []}
    last_change = time.monotonic()
    while time.monotonic() < deadline:
        segments, size, ends = 0, 0, []
        for p in range(partitions):
            manifest = store.read_manifest(topic, p)
            done = [s for s in manifest.segments if s.state is SegmentState.COPY_FINISHED]
            segments += len(done)
            size += sum(s.size_bytes for s in done)
            ends.append(max((s.next_offset for s in done), default=0))
        now = {"segments": segments, "bytes": size, "ends": ends}
        if now != summary:
            summary, last_change = now, time.monotonic()
        # Done when every partition has offloaded, or offload has settled (a partition
        # too small to roll a segment never will).
        if all(ends) or (segments and time.monotonic() - last_change > 1.5):
            break
        time.sleep(0.25)
    return summary
