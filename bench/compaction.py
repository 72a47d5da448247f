"""The log cleaner: tierlog vs Apache Kafka 4.x's on the same compacted data, in one run.

Both brokers run as single nodes on 127.0.0.1 (Kafka in KRaft mode, jars from
``bench/kafka_ref.py``; tierlog by ``bench/tierlog_ref.py``) with the same cleaner settings:
``log.cleaner.enable=true``, ``log.cleaner.threads=1``, ``log.cleaner.dedupe.buffer.size``
128 MiB (Kafka's default), ``log.cleaner.backoff.ms=100``. Three parts:

  throughput  A one-partition topic (``cleanup.policy=compact``, ``segment.bytes`` 256 MiB,
              ``min.cleanable.dirty.ratio=0.01``) gets ``--mib`` of records with 1 KiB
              values and 8-byte keys drawn uniformly (seeded, the same sequence for both
              brokers) from ``--keys`` keys: 1 GiB over 1M keys by default, so ~38% of the
              records are superseded. Cleaning is held back while it fills by
              ``min.compaction.lag.ms`` = 1 h. Then ``segment.ms=1`` and one small record
              roll the last data segment (the active segment is never cleaned), and
              ``min.compaction.lag.ms=0`` lets the next cleaner round take the whole log,
              all of it dirty, in one pass. A 256 MiB pass before them is not counted
              (Kafka's JIT, tierlog's worker start); then ``--rounds`` (3) measured passes
              per broker, their median and spread reported (``bench/reporting.py``), the
              fastest beside them. Figures come from each broker's own report:
              tierlog's INFO line (logger ``tierlog.compaction.cleaner``), Kafka's
              ``Log cleaner thread 0 cleaned log ...`` block (its LogCleaner logger at INFO,
              see ``kafka_ref.LOG4J2_YAML``).
  map         Offset-map bytes per key: tierlog's from its line (table bytes over the keys it
              holds when full). Kafka's ``SkimpyOffsetMap`` is 24 bytes a slot (16-byte MD5 +
              8-byte offset) and counts as full at load factor 0.9: 24 / 0.9 = 26.7 bytes a key
              by its design; the keys Kafka indexed are read back from its "Buffer
              utilization" (entries / slots).
  latency     Produce latency (confluent-kafka, acks=1, linger.ms=0, 200-byte records at
              ``--latency-rate`` msgs/s on another topic) while the cleaner works on three
              more dirty topics (``--latency-mib`` in all), one after the other, against the
              same producer with nothing to clean, windows alternating; a cleaning window
              ends 2 s after the pass's report, so it holds the deletion of the replaced
              segments (``log.segment.delete.delay.ms=1000`` on both brokers). p99 ratio
              cleaning / idle per broker.

Like with like: ``dirty_mb_s`` = MB (10^6 bytes) of dirty log / seconds of the whole pass
(building the offset map + rewriting and fsyncing the cleaned segments). tierlog prints
it; Kafka prints MB as MiB, so its figure is recomputed: "Indexed X MB" (the dirty bytes
its map read) x 2^20 / 10^6 over the pass's seconds (its "MB of log processed" over its
"MB/sec", which has more digits than its rounded seconds). On this first pass every byte
is dirty, so Kafka's "processed" and "indexed" bytes are equal. Kafka's seconds include
swapping the cleaned segments in; tierlog's do not (a rename batch on its event loop).
``dirty_mb_per_cpu_s`` divides the same MB by the CPU seconds of the broker's process tree
(tierlog's cleaner worker included) from releasing the log to the report: on a loaded
machine neither broker gets a whole core, and this figure moves much less than the clock's.

Run (from the repository root)::

    .venv/bin/python bench/compaction.py --quick     # 128 MiB over 128k keys, a few minutes
    .venv/bin/python bench/compaction.py             # 1 GiB over 1M keys
    .venv/bin/python bench/compaction.py --only tierlog --mib 256 --keys 250000

The LAST line printed is one JSON object with every figure. Read the ratios, not the
absolute numbers: both brokers and the client share a small, noisy machine. Broker logs
stay in ``bench/.work/runs/<time>/``; data dirs are removed unless ``--keep``.

One module past 600 lines, as the other benchmarks are: the parsers, the fill/clean steps
and the latency probe are only ever used together, and read best in one place.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sys
import threading
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka_ref
import procs
import reporting
import tierlog_ref
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from procs import ManagedProcess
from reporting import LOWER, Report

WORK = Path(__file__).resolve().parent / ".work"  # git-ignored
MiB = 1 << 20
MB = 1e6
READY_TIMEOUT = 120.0
CALL_TIMEOUT = 30.0
HOLD_LAG_MS = 3_600_000  # min.compaction.lag.ms while a topic fills: nothing is cleanable
AFTERMATH_SECONDS = 2.0  # after a pass's report: its replaced segments' deletion (1 s)
SEGMENT_MS = 7 * 24 * 3_600_000  # segment.ms's default, restored after the roll
DEDUPE_BYTES = 128 << 20  # Kafka's default log.cleaner.dedupe.buffer.size
KAFKA_SLOT_BYTES = 24  # SkimpyOffsetMap: 16-byte MD5 + 8-byte offset per slot
KAFKA_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
CLEANER = {
    "log.cleaner.enable": "true",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(DEDUPE_BYTES),
    "log.cleaner.backoff.ms": "100",
}


@dataclass(frozen=True)
class Plan:
    data_bytes: int
    keys: int
    value_bytes: int
    segment_bytes: int
    latency_bytes: int
    latency_rate: int
    latency_value_bytes: int
    idle_min_seconds: float
    latency_warm_up_seconds: float
    latency_passes: int
    pass_timeout: float
    seed: int
    rounds: int
    warm_up_bytes: int

    @property
    def records(self) -> int:
        return max(1, self.data_bytes // self.value_bytes)

    def latency_records(self) -> int:
        return max(1, self.latency_bytes // self.value_bytes)


def say(text: str) -> None:
    print(text, flush=True)


# -- the pass reports --------------------------------------------------------------------

_NUM = r"([\d,]+(?:\.\d+)?)"
TIERLOG_LINE = re.compile(
    rf"(?P<tp>\S+) cleaned: offsets (?P<first>\d+)-(?P<last>\d+), {_NUM} MB dirty of {_NUM} MB"
    rf" in {_NUM} s \({_NUM} MB/s of dirty log; map {_NUM} s, clean {_NUM} s\), (\d+) groups,"
    rf" {_NUM} MB written, (\d+) of (\d+) records kept, (\d+) tombstones removed,"
    rf" offset map (\d+) keys \({_NUM} B/key\)"
)
KAFKA_BLOCK = re.compile(
    rf"Log cleaner thread (\d+) cleaned log (?P<tp>\S+) \(dirty section = \[(\d+), (\d+)\]\)\s+"
    rf"{_NUM} MB of log processed in {_NUM} seconds \({_NUM} MB/sec\)\.\s+"
    rf"Indexed {_NUM} MB in {_NUM} seconds \({_NUM} Mb/sec, {_NUM}% of total time\)\s+"
    rf"Buffer utilization: {_NUM}%\s+"
    rf"Cleaned {_NUM} MB in {_NUM} seconds \({_NUM} Mb/sec, {_NUM}% of total time\)\s+"
    rf"Start size: {_NUM} MB \(([\d,]+) messages\)\s+"
    rf"End size: {_NUM} MB \(([\d,]+) messages\)"
)


def _n(text: str) -> float:
    return float(text.replace(",", ""))


def parse_tierlog(text: str, topic: str) -> list[dict[str, Any]]:
    """Every pass tierlog reported for ``topic``-0, oldest first."""
    out = []
    for m in TIERLOG_LINE.finditer(text):
        if m.group("tp") != f"{topic}-0":
            continue
        g = [m.group(i) for i in range(1, 17)]
        out.append(
            {
                "end_offset": int(g[2]),
                "dirty_mb": _n(g[3]),
                "log_mb": _n(g[4]),
                "seconds": _n(g[5]),
                "dirty_mb_s_printed": _n(g[6]),
                "map_s": _n(g[7]),
                "clean_s": _n(g[8]),
                "groups": int(g[9]),
                "written_mb": _n(g[10]),
                "records_kept": int(g[11]),
                "records_read": int(g[12]),
                "map_keys": int(g[14]),
                "map_bytes_per_key": _n(g[15]),
                "line": m.group(0),
            }
        )
    return out


def parse_kafka(text: str, topic: str, dedupe_bytes: int) -> list[dict[str, Any]]:
    """Every pass Kafka's cleaner reported for ``topic``-0; MiB turned into MB (10^6)."""
    out = []
    slots = dedupe_bytes // KAFKA_SLOT_BYTES
    for m in KAFKA_BLOCK.finditer(text):
        if m.group("tp") != f"{topic}-0":
            continue
        g = [m.group(i) for i in range(1, 21)]
        processed_mib, rate_mib = _n(g[4]), _n(g[6])
        seconds = processed_mib / rate_mib if rate_mib else _n(g[5])
        indexed_mib, utilization = _n(g[7]), _n(g[11]) / 100
        out.append(
            {
                "end_offset": int(g[3]),
                "dirty_mb": round(indexed_mib * MiB / MB, 1),
                "log_mb": round(processed_mib * MiB / MB, 1),
                "seconds": round(seconds, 3),
                "seconds_printed": _n(g[5]),
                "processed_mib_s_printed": rate_mib,
                "map_s": _n(g[8]),
                "clean_s": _n(g[13]),
                "buffer_utilization_pct": _n(g[11]),
                "map_keys_from_utilization": round(utilization * slots),
                "written_mb": round(_n(g[18]) * MiB / MB, 1),
                "records_read": int(_n(g[17])),
                "records_kept": int(_n(g[19])),
                "block": m.group(0),
            }
        )
    return out


# -- brokers -------------------------------------------------------------------------------


@dataclass
class Broker:
    name: str
    proc: ManagedProcess
    bootstrap: str
    data: Path
    info: dict[str, Any]
    _admin: AdminClient | None = None

    def log_text(self) -> str:
        return self.proc.log_path.read_text(errors="replace")

    def passes(self, topic: str) -> list[dict[str, Any]]:
        if self.name == "kafka":
            return parse_kafka(self.log_text(), topic, DEDUPE_BYTES)
        return parse_tierlog(self.log_text(), topic)

    def admin(self) -> AdminClient:
        """One client per broker, kept: a future outlives a client only while it lives."""
        if self._admin is None:
            conf = {"bootstrap.servers": self.bootstrap, "broker.address.family": "v4"}
            self._admin = AdminClient(conf)
        return self._admin


def start_kafka(version: str, run_dir: Path) -> tuple[Broker | None, dict[str, Any]]:
    """Fetch (or reuse) Kafka's jars and start it with the cleaner settings; (None, why)
    when it cannot."""
    info: dict[str, Any] = {"available": False}
    try:
        dist = kafka_ref.fetch_kafka(WORK, version)
        info.update(version=dist.version, jars_cached=dist.cached)
        say(f"[kafka] Apache Kafka {dist.version} ({dist.jar_count} jars, cached={dist.cached})")
        proc, bootstrap = kafka_ref.start_kafka(dist, run_dir, CLEANER)
        return _ready("kafka", proc, bootstrap, run_dir / "data", info), info
    except (kafka_ref.KafkaUnavailable, procs.BrokerNotReady) as exc:
        info["reason"] = str(exc)
        say(f"[kafka] unavailable: {exc}")
        return None, info


def start_tierlog(run_dir: Path) -> tuple[Broker | None, dict[str, Any]]:
    """Start tierlog's broker with the cleaner settings; (None, why) when it cannot."""
    info: dict[str, Any] = {"available": False}
    reason = tierlog_ref.unavailable_reason()
    if reason is None:
        try:
            proc, bootstrap, data = tierlog_ref.start_tierlog(run_dir, CLEANER)
            return _ready("tierlog", proc, bootstrap, data, info), info
        except procs.BrokerNotReady as exc:
            reason = str(exc)
    info["reason"] = reason
    say(f"[tierlog] unavailable: {reason}")
    return None, info


def _ready(
    name: str, proc: ManagedProcess, bootstrap: str, data: Path, info: dict[str, Any]
) -> Broker:
    try:
        info["ready_s"] = procs.wait_ready(proc, bootstrap, READY_TIMEOUT)
    except procs.BrokerNotReady:
        proc.stop()
        raise
    info.update(available=True, bootstrap=bootstrap, pid=proc.pid, log=str(proc.log_path))
    say(f"[{name}] ready on {bootstrap} after {info['ready_s']} s (pid {proc.pid})")
    return Broker(name, proc, bootstrap, data, info)


# -- topics ----------------------------------------------------------------------------------


def create_topic(broker: Broker, topic: str, configs: dict[str, str]) -> None:
    futures = broker.admin().create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1, config=configs)],
        operation_timeout=CALL_TIMEOUT,
        request_timeout=CALL_TIMEOUT,
    )
    futures[topic].result(timeout=CALL_TIMEOUT * 2)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        meta = broker.admin().list_topics(topic=topic, timeout=CALL_TIMEOUT).topics.get(topic)
        partitions = meta.partitions if meta is not None and meta.error is None else {}
        if 0 in partitions and partitions[0].leader >= 0:
            return
        time.sleep(0.1)
    raise TimeoutError(f"{broker.name}: topic {topic} has no leader after 60 s")


def alter_topic(broker: Broker, topic: str, configs: dict[str, str]) -> None:
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    for future in broker.admin().incremental_alter_configs([resource]).values():
        future.result(timeout=CALL_TIMEOUT)


def delete_topic(broker: Broker, topic: str) -> None:
    futures = broker.admin().delete_topics([topic], operation_timeout=CALL_TIMEOUT)
    try:
        futures[topic].result(timeout=CALL_TIMEOUT * 2)
    except Exception as exc:
        say(f"[{broker.name}] delete {topic}: {exc}")


def segment_bases(broker: Broker, topic: str) -> list[int]:
    return sorted(int(p.stem) for p in (broker.data / f"{topic}-0").glob("*.log"))


def fill(broker: Broker, topic: str, plan: Plan, records: int) -> dict[str, Any]:
    """Create the compacted topic (cleaning held back), produce ``records`` keyed records
    (the plan's seeded key sequence), then roll the last segment with one small record."""
    create_topic(
        broker,
        topic,
        {
            "cleanup.policy": "compact",
            "segment.bytes": str(plan.segment_bytes),
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": str(HOLD_LAG_MS),
        },
    )
    errors: list[str] = []

    def on_error(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "broker.address.family": "v4",
            "acks": "1",
            "linger.ms": 20,
            "batch.size": MiB,
            "batch.num.messages": 100_000,
            "queue.buffering.max.kbytes": 256 * 1024,
            "compression.type": "none",
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
    )
    rng = random.Random(plan.seed)
    width = len(str(plan.keys - 1))
    keys = [b"k%0*d" % (width, i) for i in range(plan.keys)]
    value = random.Random(plan.seed + 1).randbytes(plan.value_bytes)
    t0 = time.perf_counter()
    produce, poll, pick = producer.produce, producer.poll, rng.randrange
    for i in range(records):
        key = keys[pick(plan.keys)]
        while True:
            try:
                produce(topic, value, key, partition=0)
                break
            except BufferError:
                poll(0.01)
        if i & 1023 == 0:
            poll(0)
    left = producer.flush(300)
    seconds = time.perf_counter() - t0
    if left or errors:
        raise RuntimeError(f"{broker.name}: {left} unsent, {len(errors)} errors: {errors[:1]}")
    # The last data segment must be closed (the active segment is never cleaned):
    # segment.ms=1 makes the next append roll it, whatever its size. That append is a
    # small record the pass does not see; should the new setting not have reached the log
    # yet, the record lands in the old segment (so counts as data) and the next one rolls.
    alter_topic(broker, topic, {"segment.ms": "1"})
    bases = segment_bases(broker, topic)
    for _ in range(50):
        producer.produce(topic, b"tail", b"tail", partition=0)
        if producer.flush(60):
            raise RuntimeError(f"{broker.name}: a tail record was not delivered")
        rolled = segment_bases(broker, topic)
        if rolled[-1] > bases[-1]:
            bases = rolled
            break
        time.sleep(0.2)
    else:
        raise RuntimeError(f"{broker.name}: the last segment of {topic} did not roll")
    alter_topic(broker, topic, {"segment.ms": str(SEGMENT_MS)})
    size = sum(p.stat().st_size for p in (broker.data / f"{topic}-0").glob("*.log"))
    return {
        "records": records,
        "end_offset": bases[-1],  # the pass cleans offsets below this
        "produce_s": round(seconds, 2),
        "produce_mib_s": round(records * plan.value_bytes / MiB / seconds, 1),
        "segments": len(bases) - 1,
        "log_bytes": size,
    }


def clean(broker: Broker, topic: str, plan: Plan, end_offset: int) -> dict[str, Any]:
    """Let the cleaner take ``topic`` and wait for its report(s) up to ``end_offset``."""
    cpu0 = procs.tree_cpu_seconds(broker.proc.pid)
    before = len(broker.passes(topic))
    t0 = time.monotonic()
    alter_topic(broker, topic, {"min.compaction.lag.ms": "0"})
    deadline = t0 + plan.pass_timeout
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        if not broker.proc.alive():
            raise RuntimeError(f"{broker.name} exited; see {broker.proc.log_path}")
        found = broker.passes(topic)[before:]
        # tierlog reports the last offset the pass covered, Kafka the end of its section.
        if found and found[-1]["end_offset"] >= end_offset - 1:
            break
        time.sleep(0.05)
    else:
        raise TimeoutError(f"{broker.name}: no complete pass over {topic} in {plan.pass_timeout} s")
    detected = time.monotonic()
    dirty_mb = sum(p["dirty_mb"] for p in found)
    seconds = sum(p["seconds"] for p in found)
    last = found[-1]
    out: dict[str, Any] = {
        "passes": len(found),
        "dirty_mb": round(dirty_mb, 1),
        "seconds": round(seconds, 3),
        "dirty_mb_s": round(dirty_mb / seconds, 1) if seconds else None,
        "map_s": round(sum(p["map_s"] for p in found), 3),
        "clean_s": round(sum(p["clean_s"] for p in found), 3),
        "written_mb": last["written_mb"],
        "records_read": last["records_read"],
        "records_kept": last["records_kept"],
        "trigger_to_report_s": round(detected - t0, 2),
        "broker_cpu_s": round(cpu := procs.tree_cpu_seconds(broker.proc.pid) - cpu0, 2),
        "dirty_mb_per_cpu_s": round(dirty_mb / cpu, 1) if cpu > 0 else None,
        "detected_at": detected,
        "report": [p.get("line") or p.get("block") for p in found],
    }
    if broker.name == "tierlog":
        out["map_keys"] = last["map_keys"]
        out["map_bytes_per_key"] = last["map_bytes_per_key"]
        out["map_bytes_per_key_source"] = "its log line: table bytes / keys it holds when full"
    else:
        out["map_keys_from_utilization"] = last["map_keys_from_utilization"]
        out["buffer_utilization_pct"] = last["buffer_utilization_pct"]
        out["map_bytes_per_key"] = round(KAFKA_SLOT_BYTES / KAFKA_LOAD_FACTOR, 1)
        out["map_bytes_per_key_source"] = "Kafka's design: 24-byte slots at load factor 0.9"
    return out


# -- latency -----------------------------------------------------------------------------------


class LatencyProbe:
    """Produces ``value_bytes`` records at ``rate`` msgs/s (acks=1, linger.ms=0) from a
    thread until stopped, keeping (send time, latency) per delivered record. Latency is
    librdkafka's ``Message.latency()`` (produce() to delivery report); a second thread sits
    in ``poll()`` so reports are served at once."""

    def __init__(self, broker: Broker, topic: str, rate: int, value_bytes: int) -> None:
        self.samples: list[tuple[float, float]] = []
        self.errors = 0
        self.rate = rate
        self.topic = topic
        self.value = os.urandom(value_bytes)
        self.producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "broker.address.family": "v4",
                "acks": "1",
                "linger.ms": 0,
                "socket.nagle.disable": True,
                "on_delivery": self._done,
            }
        )
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._send, daemon=True),
            threading.Thread(target=self._serve, daemon=True),
        ]

    def _done(self, err: KafkaError | None, msg: Message) -> None:
        latency = msg.latency()
        if err is not None or latency is None:
            self.errors += 1
        else:
            now = time.monotonic()
            self.samples.append((now - latency, latency))

    def _serve(self) -> None:
        while not self._stop.is_set():
            self.producer.poll(0.1)

    def _send(self) -> None:
        t0, interval, i = time.monotonic(), 1.0 / self.rate, 0
        while not self._stop.is_set():
            wait = t0 + i * interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                self.producer.produce(self.topic, self.value, partition=0)
            except BufferError:
                self.errors += 1
            i += 1

    def start(self) -> LatencyProbe:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=CALL_TIMEOUT)
        self.producer.flush(CALL_TIMEOUT)

    def window(self, *bounds: float) -> dict[str, Any]:
        """Percentiles (ms) of the records sent in [t0, t1] (time.monotonic()), or in
        several such intervals: ``window(t0, t1, t2, t3)``."""
        spans = list(zip(bounds[::2], bounds[1::2], strict=True))
        samples = list(self.samples)
        got = sorted(lat for sent, lat in samples if any(a <= sent <= b for a, b in spans))
        if not got:
            return {"msgs": 0}

        def pct(q: float) -> float:
            return round(got[min(len(got) - 1, int(q * len(got)))] * 1000, 3)

        return {
            "msgs": len(got),
            "seconds": round(sum(b - a for a, b in spans), 2),
            "p50_ms": pct(0.5),
            "p99_ms": pct(0.99),
            "p999_ms": pct(0.999),
            "max_ms": round(got[-1] * 1000, 3),
        }


def latency(broker: Broker, plan: Plan) -> dict[str, Any]:
    """p99 of a steady producer while the cleaner works, against idle, alternating.

    ``plan.latency_passes`` dirty topics share ``plan.latency_bytes``; the probe runs
    throughout: idle, clean topic 1, idle, clean topic 2, ..., idle. Cleaning windows are
    pooled, and so are idle ones (each at least ``idle_min_seconds`` and as long as the
    pass before it), so load from elsewhere on the machine weighs on both sides alike. A
    cleaning window runs from the pass's start to ``AFTERMATH_SECONDS`` after its report:
    the replaced segments are deleted ``log.segment.delete.delay.ms`` (1 s) after the swap,
    which is part of what a pass costs the broker (tierlog measured a ~170 ms stall then).
    """
    probe_topic = "compaction-latency-probe"
    records = max(1, plan.latency_records() // plan.latency_passes)
    topics = [f"compaction-latency-{i}" for i in range(plan.latency_passes)]
    filled = [fill(broker, topic, plan, records) for topic in topics]
    create_topic(broker, probe_topic, {"cleanup.policy": "delete"})
    probe = LatencyProbe(broker, probe_topic, plan.latency_rate, plan.latency_value_bytes).start()
    busy: list[float] = []
    idle: list[float] = []
    passes: list[dict[str, Any]] = []
    try:
        # Warm-up, not counted: connections, the new topic, and the JVM's JIT (Kafka's first
        # seconds on a new topic measured up to 1.8 s of latency here on a loaded box).
        time.sleep(plan.latency_warm_up_seconds)
        last = plan.idle_min_seconds
        for topic, f in zip(topics, filled, strict=True):
            t0 = time.monotonic()
            time.sleep(max(plan.idle_min_seconds, last))
            idle += [t0, time.monotonic()]
            cleaning = clean(broker, topic, plan, f["end_offset"])
            end = cleaning["detected_at"]
            # From the pass's start (0.1 s: the report's polling) until the replaced segments
            # are deleted, log.segment.delete.delay.ms (1 s, both brokers) after the swap.
            time.sleep(AFTERMATH_SECONDS)
            busy += [end - cleaning["seconds"] - 0.1, end + AFTERMATH_SECONDS]
            passes.append({k: v for k, v in cleaning.items() if k not in ("detected_at",)})
            last = cleaning["seconds"]
        t0 = time.monotonic()
        time.sleep(max(plan.idle_min_seconds, last))
        idle += [t0, time.monotonic()]
    finally:
        probe.stop()
    for topic in [*topics, probe_topic]:
        delete_topic(broker, topic)
    during, quiet = probe.window(*busy), probe.window(*idle)
    out: dict[str, Any] = {
        "rate": plan.latency_rate,
        "value_bytes": plan.latency_value_bytes,
        "errors": probe.errors,
        "dirty_topics": filled,
        "passes": passes,
        "pass_dirty_mb_s": [p["dirty_mb_s"] for p in passes],
        "cleaning": during,
        "idle": quiet,
    }
    if during.get("p99_ms") and quiet.get("p99_ms"):
        out["p99_ratio_cleaning_idle"] = round(during["p99_ms"] / quiet["p99_ms"], 2)
    return out


# -- the run -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        epilog="The last line printed is one JSON object with every figure.",
    )
    parser.add_argument("--quick", action="store_true", help="128 MiB over 128k keys")
    parser.add_argument("--only", choices=["tierlog", "kafka"], help="run one broker only")
    parser.add_argument("--mib", type=float, help="MiB of record values to clean (1024; 128)")
    parser.add_argument("--keys", type=int, help="distinct keys drawn from (1M; 128k)")
    parser.add_argument("--segment-mib", type=int, help="segment.bytes in MiB (256; 32)")
    parser.add_argument(
        "--latency-mib", type=float, help="dirty MiB cleaned while latency is measured (= --mib)"
    )
    parser.add_argument("--latency-rate", type=int, default=1000, help="probe msgs/s (1000)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="measured passes per broker, median reported (3)"
    )
    parser.add_argument(
        "--warm-up-mib", type=float, default=256, help="uncounted first pass, MiB (256)"
    )
    parser.add_argument("--no-latency", action="store_true", help="skip the latency part")
    parser.add_argument(
        "--kafka-version", default="auto", help="e.g. 4.4.0; auto = newest cached, else newest"
    )
    parser.add_argument("--keep", action="store_true", help="keep the brokers' data dirs")
    return parser.parse_args(argv)


def make_plan(args: argparse.Namespace) -> Plan:
    mib = args.mib or (128 if args.quick else 1024)
    return Plan(
        data_bytes=int(mib * MiB),
        keys=args.keys or (128_000 if args.quick else 1_000_000),
        value_bytes=1024,
        segment_bytes=(args.segment_mib or (32 if args.quick else 256)) * MiB,
        latency_bytes=int((args.latency_mib or mib) * MiB),
        latency_rate=args.latency_rate,
        latency_value_bytes=200,
        idle_min_seconds=5.0 if args.quick else 10.0,
        latency_warm_up_seconds=8.0,
        latency_passes=3,
        pass_timeout=900.0,
        seed=12,
        rounds=args.rounds,
        warm_up_bytes=int(args.warm_up_mib * MiB),
    )


def one_pass(broker: Broker, topic: str, plan: Plan, records: int) -> dict[str, Any]:
    """Fill ``topic``, clean it in one go, delete it: the fill and the pass's figures."""
    say(f"[{broker.name}] {topic}: {records:,} records over {plan.keys:,} keys")
    f = fill(broker, topic, plan, records)
    say(
        f"[{broker.name}]   {f['log_bytes'] / MB:,.1f} MB in {f['segments']} closed segments, "
        f"produced at {f['produce_mib_s']} MiB/s"
    )
    t = clean(broker, topic, plan, f["end_offset"])
    t.pop("detected_at")
    say(
        f"[{broker.name}]   cleaned {t['dirty_mb']:,.1f} MB dirty in {t['seconds']} s: "
        f"{t['dirty_mb_s']} MB/s (map {t['map_s']} s, clean {t['clean_s']} s), "
        f"{t['passes']} pass(es), {t['records_kept']:,} of {t['records_read']:,} records kept, "
        f"{t['map_bytes_per_key']} B/key, broker CPU {t['broker_cpu_s']} s"
    )
    for report in t["report"]:
        say("    " + report.strip().replace("\n", "\n    "))
    delete_topic(broker, topic)
    return {**t, "fill": f}


def run_broker(broker: Broker, plan: Plan, with_latency: bool) -> dict[str, Any]:
    """Warm-up pass, ``plan.rounds`` measured passes (their median and spread are reported,
    the fastest beside them), then latency."""
    out: dict[str, Any] = {}
    # Not counted: compiles Kafka's cleaner (JIT), starts tierlog's worker process. Kafka
    # measured 78-82 MB/s on 128 MiB passes after a 16 MiB warm-up, and 211 MB/s on its
    # second 1 GiB pass: its JIT needs a few hundred MB of cleaning.
    warm = max(1, plan.warm_up_bytes // plan.value_bytes)
    out["warm_up"] = one_pass(broker, "compaction-warm-up", plan, warm)
    rounds = [
        one_pass(broker, f"compaction-bench-{r}", plan, plan.records) for r in range(plan.rounds)
    ]
    best = max(rounds, key=lambda r: r["dirty_mb_s"] or 0.0)
    out["throughput"] = {
        **best,
        "rounds_dirty_mb_s": [r["dirty_mb_s"] for r in rounds],
        "rounds_dirty_mb_per_cpu_s": [r.get("dirty_mb_per_cpu_s") for r in rounds],
    }
    if with_latency:
        say(f"[{broker.name}] latency: {plan.latency_rate} msgs/s while cleaning, then idle")
        out["latency"] = lat = latency(broker, plan)
        for part in ("cleaning", "idle"):
            w = lat[part]
            say(
                f"[{broker.name}]   {part:<8} p50 {w.get('p50_ms')} ms  p99 {w.get('p99_ms')} ms"
                f"  max {w.get('max_ms')} ms  ({w['msgs']} msgs over {w.get('seconds')} s)"
            )
        say(
            f"[{broker.name}]   p99 cleaning/idle {lat.get('p99_ratio_cleaning_idle')} "
            f"(passes under the probe: {lat['pass_dirty_mb_s']} MB/s)"
        )
    return out


def side_by_side(report: Report) -> None:
    """tierlog's cleaner against Kafka's: medians and spreads of the passes (and the one
    latency window of each) by ``bench/reporting.py``."""
    b = report.data["brokers"]

    def per_broker(section: str, key: str) -> dict[str, list[Any]]:
        return {
            name: b.get(name, {}).get(section, {}).get(key) or [] for name in ("tierlog", "kafka")
        }

    if any(per_broker("throughput", "rounds_dirty_mb_s").values()):
        mb_s = per_broker("throughput", "rounds_dirty_mb_s")
        report.side_by_side("cleaner pass", mb_s, unit="MB/s of dirty log", goal=1.0)
        per_cpu = per_broker("throughput", "rounds_dirty_mb_per_cpu_s")
        report.side_by_side("cleaner pass per CPU second", per_cpu, unit="MB/CPU s")
        per_key = {
            name: [b.get(name, {}).get("throughput", {}).get("map_bytes_per_key")]
            for name in ("tierlog", "kafka")
        }
        report.side_by_side("offset map bytes per key", per_key, unit="B", better=LOWER)
    p99 = {
        name: [b.get(name, {}).get("latency", {}).get("p99_ratio_cleaning_idle")]
        for name in ("tierlog", "kafka")
    }
    if any(v != [None] for v in p99.values()):
        # Issue 26 item 6: produce p99 while cleaning over idle, no worse than Kafka's.
        report.side_by_side("produce p99 cleaning/idle", p99, unit="x", better=LOWER, goal=1.0)


def summarise(report: dict[str, Any]) -> dict[str, Any]:
    """The best passes, as reported before medians (``summary`` in the JSON)."""
    b = report["brokers"]
    t = b.get("tierlog", {}).get("throughput", {})
    k = b.get("kafka", {}).get("throughput", {})
    out: dict[str, Any] = {
        "tierlog_dirty_mb_s": t.get("dirty_mb_s"),
        "kafka_dirty_mb_s": k.get("dirty_mb_s"),
        "tierlog_map_bytes_per_key": t.get("map_bytes_per_key"),
        "kafka_map_bytes_per_key": k.get("map_bytes_per_key"),
    }
    if t.get("dirty_mb_s") and k.get("dirty_mb_s"):
        out["ratio_throughput_tierlog_kafka"] = round(t["dirty_mb_s"] / k["dirty_mb_s"], 3)
    if t.get("dirty_mb_per_cpu_s") and k.get("dirty_mb_per_cpu_s"):
        # Per CPU second of the broker's processes during the pass: less sensitive to other
        # load on the machine than the wall-clock rate.
        out["tierlog_dirty_mb_per_cpu_s"] = t["dirty_mb_per_cpu_s"]
        out["kafka_dirty_mb_per_cpu_s"] = k["dirty_mb_per_cpu_s"]
        ratio = t["dirty_mb_per_cpu_s"] / k["dirty_mb_per_cpu_s"]
        out["ratio_dirty_mb_per_cpu_s_tierlog_kafka"] = round(ratio, 3)
    for name, figures in (("tierlog", t), ("kafka", k)):
        if figures.get("rounds_dirty_mb_s"):
            out[f"{name}_rounds_dirty_mb_s"] = figures["rounds_dirty_mb_s"]
    for name in ("tierlog", "kafka"):
        lat = b.get(name, {}).get("latency", {})
        if "p99_ratio_cleaning_idle" in lat:
            out[f"{name}_p99_ratio_cleaning_idle"] = lat["p99_ratio_cleaning_idle"]
            out[f"{name}_p99_ms_cleaning"] = lat["cleaning"]["p99_ms"]
            out[f"{name}_p99_ms_idle"] = lat["idle"]["p99_ms"]
    out["goals"] = {
        "throughput_ratio_at_least_1": (out.get("ratio_throughput_tierlog_kafka") or 0) >= 1.0,
        "bytes_per_key_at_most_24": (t.get("map_bytes_per_key") or 99) <= 24,
    }
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    procs.install_signal_handlers()
    plan = make_plan(args)
    run_dir = WORK / "runs" / time.strftime("compaction-%Y%m%d-%H%M%S")
    reported = Report("compaction", quick=args.quick)
    reported.data["env"].update(
        confluent_kafka=metadata.version("confluent-kafka"),
        librdkafka=confluent_kafka.libversion()[0],
        tierlog=reporting.tierlog_source(),
    )
    report = reported.data
    report.update(
        plan={**asdict(plan), "records": plan.records, "latency_records": plan.latency_records()},
        cleaner_settings=CLEANER,
        brokers={},
    )
    say(
        f"compaction bench: {plan.data_bytes / MiB:,.0f} MiB of {plan.value_bytes}-byte values "
        f"over {plan.keys:,} keys, segment.bytes {plan.segment_bytes // MiB} MiB; logs in {run_dir}"
    )
    brokers: list[Broker] = []
    try:
        for name in ("kafka", "tierlog"):
            if args.only not in (None, name):
                continue
            # One broker at a time: the other's idle JVM or event loop stays off the 2 cores.
            if name == "kafka":
                broker, info = start_kafka(args.kafka_version, run_dir / "kafka")
            else:
                broker, info = start_tierlog(run_dir / "tierlog")
            report["brokers"][name] = info
            if broker is None:
                continue
            brokers.append(broker)
            try:
                broker.info.update(run_broker(broker, plan, not args.no_latency))
            except Exception as exc:
                broker.info["error"] = f"{type(exc).__name__}: {exc}"
                say(f"[{name}] ERROR {broker.info['error']}")
            finally:
                stop = broker.proc.stop()
                broker.info["stop"] = asdict(stop)
                if not args.keep:
                    shutil.rmtree(broker.data, ignore_errors=True)
    except (KeyboardInterrupt, SystemExit) as exc:
        report["interrupted"] = type(exc).__name__
        say(f"interrupted ({type(exc).__name__}); stopping the brokers")
    finally:
        for broker in brokers:
            if broker.proc.alive():
                broker.proc.stop()
    report["summary"] = summary = summarise(report)
    say("best passes:")
    say(
        f"  cleaner throughput (MB of dirty log / s of the pass): tierlog "
        f"{summary['tierlog_dirty_mb_s']}  kafka {summary['kafka_dirty_mb_s']}  "
        f"tierlog/kafka {summary.get('ratio_throughput_tierlog_kafka')}"
    )
    if "ratio_dirty_mb_per_cpu_s_tierlog_kafka" in summary:
        say(
            f"  per broker CPU second (MB of dirty log): tierlog "
            f"{summary['tierlog_dirty_mb_per_cpu_s']}  kafka {summary['kafka_dirty_mb_per_cpu_s']}"
            f"  tierlog/kafka {summary['ratio_dirty_mb_per_cpu_s_tierlog_kafka']}"
        )
    say(
        f"  offset map bytes per key: tierlog {summary['tierlog_map_bytes_per_key']}  "
        f"kafka {summary['kafka_map_bytes_per_key']} (24 B slots / 0.9, its design)"
    )
    for name in ("tierlog", "kafka"):
        if f"{name}_p99_ratio_cleaning_idle" in summary:
            cleaning, idle = summary[f"{name}_p99_ms_cleaning"], summary[f"{name}_p99_ms_idle"]
            ratio = summary[f"{name}_p99_ratio_cleaning_idle"]
            say(f"  {name} produce p99: cleaning {cleaning} ms / idle {idle} ms = {ratio}")
    side_by_side(reported)
    return reported.finish(interrupted=report.pop("interrupted", None))


if __name__ == "__main__":
    sys.exit(main())
