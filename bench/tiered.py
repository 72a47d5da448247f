"""Remote-tier benchmark: replay from the remote tier vs the hot tier, offload rate, and the
local disk footprint under local.retention.bytes, side by side in one run.

A tierlog broker runs on 127.0.0.1 with the remote tier on file:// (its default, under the
log dir) and realistic segments (``--segment-mib``, 4 MiB full, 1 MiB quick); the client is
confluent-kafka. Sizes are MB = 10^6 bytes of record values (1 KiB, incompressible, no
compression).

1. Replay (file://): a fresh topic, tiering off, gets ``--replay-mb`` of records. The range
   of closed segments [0, R) is read ``--rounds`` times by an assigned consumer from the hot
   tier. Then ``remote.storage.enable=true`` (IncrementalAlterConfigs) and the broker
   offloads the backlog (figure 3), then ``local.retention.bytes=0`` makes the range
   remote-only (the bench waits until the local log start passes R), and the same consumer
   reads the same range again ``--rounds`` times. The broker's chunk cache of remote bytes
   is set smaller than the range (16 MiB), so every round reads every byte from the store
   again. Each rate runs from the first batch received to the last record (start-up is
   reported beside it); the median of each tier's rounds, their spread and the ratio of the
   medians (``bench/reporting.py``), the best rounds beside them. Goal: remote >= 0.8x
   hot. Then the broker is restarted with an empty chunk cache larger than the range and
   the range read twice more (``big_cache``): cold without evictions, then warm (every
   byte from the cache on local disk).
2. Replay (S3): the same against moto's S3 server (a separate process on 127.0.0.1) and a
   second broker whose remote.log.storage.url is s3://, with ``--s3-mb`` of records.
   Side by side with both replays (issue 24): the raw parallel ranged GET of the same
   remote objects from the same store (``raw_gets``: the log parts of the range's
   committed segments in 4 MiB ranges, ``READER_THREADS`` at once, nothing else; goal
   replay >= 0.8x of it), and the store requests the broker sent, per GiB
   (``tierlog_remote_store_requests_total`` on its metrics endpoint): GETs per GiB
   replayed, PUTs per GiB offloaded. The same again on HDFS (``--hdfs-mb``): Hadoop's
   MiniDFSCluster (the tests' ``tests/integration/minihdfs.py``, jars through ``make hdfs``)
   over ``webhdfs://``, with its raw GET and raw upload.
3. Offload: bytes committed to the manifest per second while the remote log manager catches
   up with the backlog of 1 (and 2), from the alter to the commit covering R
   (``catch_up_mb_s``, includes up to one task interval of start-up), and between the first
   and last upload starts recorded in the manifest (``upload_mb_s``). Against it, before
   the offload (file:// only), the raw write of the same work, ``--rounds`` times: the
   range's closed segment files (``.log``, ``.index``, ``.timeindex``) copied with plain
   reads and writes of the store's chunk size to a directory on the same file system, and
   after each segment one durable commit (a small file written, fsynced, renamed into
   place, its directory fsynced), the least a store must do before a local segment may be
   deleted. Goal: offload >= 0.8x raw write (issue 26 item 4 keeps a check of it). On S3
   the raw work is a raw upload of the same bytes to the same bucket (``raw_uploads``:
   each segment's files as one object, with s3fs's own ``pipe_file``, which sends a large
   object as a multipart upload), goal >= 0.8x too.
4. Footprint: a tiered topic with ``local.retention.bytes=L`` gets 20 x L of records at a
   steady ``--footprint-rate`` MB/s while the size of the partition's local ``.log`` files
   and the manifest's committed bytes are sampled every 50 ms: the maximum local bytes
   against L + one segment while the retained total grows to 20 x L.

Run (from the repository root)::

    .venv/bin/python bench/tiered.py --quick      # ~30 s: 100 MB replay, 1 MiB segments
    .venv/bin/python bench/tiered.py              # ~2 min: 400 MB replay, 4 MiB segments

Human-readable lines are printed as it goes; the LAST line is one JSON object with every
figure (a part that fails is reported as ``{"error": ...}`` and the others still run). Every
wait has a time limit; brokers and moto are stopped on exit (Ctrl-C and SIGTERM
included). Work files go to a temporary directory, removed unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from procs import ManagedProcess, free_port, install_signal_handlers, start_process, wait_ready
from reporting import Report
from tierlog_ref import tierlog_command

from tierlog.broker.config import BrokerConfig
from tierlog.remote.api import RemoteStore
from tierlog.remote.fsspec_storage import DEFAULT_COPY_CHUNK_BYTES
from tierlog.remote.manifest import (
    Manifest,
    committed_segments,
    committed_size,
    end_offset,
    segment_part,
)
from tierlog.remote.registry import open_store

MB = 1_000_000
MiB = 1 << 20
VALUE_BYTES = 1024
CALL_TIMEOUT = 15.0  # one admin round trip
GOAL_FILE_RATIO = 0.8  # issue 4: remote replay (file://) >= 0.8x the hot tier
# Offload to file:// against the raw write of the same files and commits: the project's
# usual "0.8 of the limit" (issue 26 item 4: offload fell from 521 to 214 MB/s).
GOAL_OFFLOAD_RATIO = 0.8
# Issue 24: replay >= 0.8x a raw parallel ranged GET of the same objects, offload >= 0.8x
# a raw upload of the same bytes, both to the same store.
GOAL_RAW_RATIO = 0.8
# The raw GET's parallelism and range size: Kafka's remote.log.reader.threads default and
# the broker's chunk size.
READER_THREADS = 10
RAW_RANGE_BYTES = 4 * MiB
# The broker's periodic tasks: short, so a bench of seconds is not mostly waiting for them.
TASK_INTERVAL_MS = 100
S3_OPTIONS = {
    "key": "testing",
    "secret": "testing",
    "client_kwargs.region_name": "us-east-1",
}


@dataclass(frozen=True)
class Plan:
    """Sizes and time bounds of one run."""

    segment_bytes: int
    replay_bytes: int
    s3_bytes: int
    rounds: int
    footprint_local_bytes: int
    footprint_factor: int
    footprint_rate: float  # MB/s
    wait_s: float  # bound on each wait for the broker (offload, retention) and each read
    # The broker's chunk cache of remote bytes (remote.log.reader.cache.bytes), smaller than
    # every replay range, so each remote round reads the whole range from the store again
    # and evicts as it goes: the steady state of a replay longer than the cache (the
    # default, 256 MiB, would serve a short range's repeats from local disk).
    reader_cache_bytes: int = 16 * MiB
    fetch_bytes: int = MiB  # the consumer's max.partition.fetch.bytes (librdkafka default)
    hdfs_bytes: int = 0  # records for the HDFS replay (0: no HDFS part)


def quick_plan() -> Plan:
    return Plan(MiB, 100 * MB, 30 * MB, 3, 4 * MiB, 20, 20.0, 60.0, hdfs_bytes=20 * MB)


def full_plan() -> Plan:
    return Plan(4 * MiB, 400 * MB, 100 * MB, 5, 16 * MiB, 20, 30.0, 180.0, hdfs_bytes=100 * MB)


# -- processes ----------------------------------------------------------------------------


@dataclass
class Broker:
    proc: ManagedProcess
    bootstrap: str
    data: Path
    store: RemoteStore
    log_path: Path
    store_pid: int | None = None  # the store's server process on this box (moto)
    _admin: AdminClient | None = None

    def metrics_port(self) -> int:
        found = re.findall(r"metrics on http://[^:]+:(\d+)/", self.log_path.read_text())
        assert found, "the broker serves no metrics"
        return int(found[-1])

    def store_requests(self) -> dict[str, float]:
        """GET and PUT requests the broker has sent to its remote store so far."""
        url = f"http://127.0.0.1:{self.metrics_port()}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        out = {}
        for method in ("GET", "PUT"):
            pattern = rf'^tierlog_remote_store_requests_total{{method="{method}"}} (\S+)$'
            found = re.search(pattern, text, re.M)
            out[method] = float(found.group(1)) if found else float("nan")
        return out

    def admin(self) -> AdminClient:
        # One client kept for the run: a dropped AdminClient cancels its pending futures.
        if self._admin is None:
            self._admin = AdminClient(conf(self.bootstrap))
        return self._admin


def conf(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "broker.address.family": "v4", "log_level": 0}


def start_broker(
    run_dir: Path,
    plan: Plan,
    remote_url: str | None = None,
    options: dict[str, str] | None = None,
    reader_cache_bytes: int | None = None,
) -> Broker:
    """A tierlog broker with the remote tier on (file://<data>/remote unless ``remote_url``);
    started again on the same ``run_dir``, it keeps its data."""
    port = free_port()
    data = run_dir / "data"
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = [
        "node.id=1",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        f"log.dirs={data}",
        "num.partitions=1",
        "offsets.topic.replication.factor=1",
        "group.initial.rebalance.delay.ms=0",
        f"log.segment.bytes={plan.segment_bytes}",
        "log.segment.delete.delay.ms=0",
        f"log.retention.check.interval.ms={TASK_INTERVAL_MS}",
        f"remote.log.manager.task.interval.ms={TASK_INTERVAL_MS}",
        f"remote.log.reader.cache.bytes={reader_cache_bytes or plan.reader_cache_bytes}",
        "metrics.http.port=0",
    ]
    if remote_url:
        lines.append(f"remote.log.storage.url={remote_url}")
    for key, value in (options or {}).items():
        lines.append(f"remote.log.storage.options.{key}={value}")
    config = run_dir / "server.properties"
    config.write_text("\n".join([*lines, ""]))
    argv = [str(tierlog_command()), "broker", "start", "--config", str(config)]
    log_path = run_dir / "tierlog.log"
    proc = start_process("tierlog", argv, log_path)
    bootstrap = f"127.0.0.1:{port}"
    wait_ready(proc, bootstrap, timeout=60)
    broker_config = BrokerConfig.load(config)
    store = open_store(broker_config.remote_storage_url, broker_config.remote_storage_options)
    return Broker(proc, bootstrap, data, store, log_path)


def start_moto(run_dir: Path) -> tuple[ManagedProcess, str]:
    """moto's S3 server in its own process on 127.0.0.1, and its endpoint URL."""
    port = free_port()
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    proc = start_process("moto", argv, run_dir / "moto.log")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"moto exited: {proc.log_tail()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"moto did not listen within 30 s: {proc.log_tail()}")


def create_bucket(endpoint: str, name: str) -> None:
    import boto3

    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=name)


# -- client helpers -----------------------------------------------------------------------


def create_topic(broker: Broker, topic: str, configs: dict[str, str]) -> None:
    futures = broker.admin().create_topics(
        [NewTopic(topic, 1, 1, config=configs)], request_timeout=CALL_TIMEOUT
    )
    futures[topic].result(timeout=CALL_TIMEOUT)


def alter_topic(broker: Broker, topic: str, configs: dict[str, str]) -> None:
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for future in broker.admin().incremental_alter_configs([resource]).values():
        future.result(timeout=CALL_TIMEOUT)


def produce(broker: Broker, topic: str, total_bytes: int, rate_mb_s: float = 0.0) -> dict[str, Any]:
    """``total_bytes`` of 1 KiB records (acks=1, batched); paced at ``rate_mb_s`` if > 0."""
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            **conf(broker.bootstrap),
            "acks": "1",
            "linger.ms": 20,
            "batch.size": MiB,
            "batch.num.messages": 100_000,
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
        }
    )
    value = os.urandom(VALUE_BYTES)
    count = max(1, total_bytes // VALUE_BYTES)
    t0 = time.perf_counter()
    sent = 0
    while sent < count:
        try:
            producer.produce(topic, value, partition=0)
        except BufferError:
            producer.poll(0.005)
            continue
        sent += 1
        if sent & 255 == 0:
            producer.poll(0)
            if rate_mb_s > 0:
                ahead = sent * VALUE_BYTES / (rate_mb_s * MB) - (time.perf_counter() - t0)
                if ahead > 0:
                    time.sleep(ahead)
    unsent = producer.flush(120)
    seconds = time.perf_counter() - t0
    if unsent or errors:
        raise RuntimeError(f"produce to {topic}: {unsent} unsent, errors {errors[:3]}")
    return {
        "mb": round(count * VALUE_BYTES / MB, 1),
        "seconds": round(seconds, 2),
        "mb_s": round(count * VALUE_BYTES / MB / seconds, 1),
    }


def consume_range(broker: Broker, topic: str, end: int, plan: Plan) -> dict[str, Any]:
    """Read offsets [0, end) with an assigned consumer; the rate from the first record on."""
    consumer = Consumer(
        {
            **conf(broker.bootstrap),
            "group.id": f"tiered-bench-{topic}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 0,
            "queued.min.messages": 1_000_000,
            "max.partition.fetch.bytes": plan.fetch_bytes,
        }
    )
    got = nbytes = errors = first_got = first_bytes = 0
    cpu0 = client_cpu()
    broker_cpu0 = process_cpu(broker.proc.pid)
    store_cpu0 = process_cpu(broker.store_pid) if broker.store_pid else 0.0
    last_offset = -1
    t_first = 0.0
    try:
        t0 = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = t0 + plan.wait_s
        while last_offset < end - 1 and time.perf_counter() < deadline:
            # Batches of 1,000 (1 MB): the rate runs from the first batch's arrival, so
            # that batch is not counted in it.
            batch = consumer.consume(num_messages=1000, timeout=0.1)
            for msg in batch:
                if msg.error() is not None:
                    errors += 1
                    continue
                offset = msg.offset()
                if offset >= end:
                    last_offset = max(last_offset, offset)
                    continue
                if offset != last_offset + 1:
                    errors += 1  # a gap or a repeat: the replay is not exact
                last_offset = offset
                got += 1
                nbytes += len(msg.value() or b"")
            if not t_first and got:
                t_first, first_got, first_bytes = time.perf_counter(), got, nbytes
        t_end = time.perf_counter()
    finally:
        consumer.close()
    steady = t_end - t_first if t_first and got > first_got else 0.0
    return {
        "mb_s": round((nbytes - first_bytes) / steady / MB, 1) if steady else None,
        "mb_s_incl_start": round(nbytes / (t_end - t0) / MB, 1),
        "msgs_per_s": round((got - first_got) / steady) if steady else None,
        "seconds": round(t_end - t0, 2),
        "first_record_s": round(t_first - t0, 3) if t_first else None,
        "records": got,
        "complete": got == end and errors == 0,
        "client_cpu_s": round(client_cpu() - cpu0, 2),
        # With the store's own CPU (moto is a Python server on the same 2 cores), what
        # bounds a replay here: the box, not the store's parallelism.
        "broker_cpu_s": round(process_cpu(broker.proc.pid) - broker_cpu0, 2),
        "store_cpu_s": (
            round(process_cpu(broker.store_pid) - store_cpu0, 2) if broker.store_pid else None
        ),
    }


def client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) of process ``pid`` so far (Linux)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rate(read: dict[str, Any]) -> float:
    """A read's steady MB/s (with start-up when the range came in one batch)."""
    return float(read["mb_s"] if read["mb_s"] is not None else read["mb_s_incl_start"])


# -- broker state -------------------------------------------------------------------------


def local_logs(broker: Broker, topic: str) -> list[tuple[int, int]]:
    """(base offset, size) of the partition's local .log files."""
    out = []
    with os.scandir(broker.data / f"{topic}-0") as entries:
        for entry in entries:
            if entry.name.endswith(".log"):
                try:
                    out.append((int(entry.name[:-4]), entry.stat().st_size))
                except (FileNotFoundError, ValueError):
                    continue  # deleted meanwhile
    return sorted(out)


def manifest(broker: Broker, topic: str) -> Manifest:
    return broker.store.read_manifest(topic, 0)


def wait_until(what: str, check: Any, timeout: float, interval: float = 0.05) -> float:
    """Poll ``check()`` until true; returns the seconds it took."""
    t0 = time.perf_counter()
    while not check():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(interval)
    return time.perf_counter() - t0


# -- 1-3. replay and offload ----------------------------------------------------------------


def raw_write(sources: list[Path], target: Path) -> float:
    """Seconds to copy each closed segment (``sources``: its ``.log`` paths; the ``.index``
    and ``.timeindex`` beside it go too) into ``target`` with plain reads and writes of the
    store's chunk size, each followed by one durable commit of a small file: the offload's
    work on file:// without tierlog in it (module docstring, part 3)."""
    target.mkdir(parents=True)
    buffer = bytearray(DEFAULT_COPY_CHUNK_BYTES)
    t0 = time.perf_counter()
    for log in sources:
        for source in (log, log.with_suffix(".index"), log.with_suffix(".timeindex")):
            with open(source, "rb", buffering=0) as src, open(target / source.name, "wb") as dst:
                while got := src.readinto(buffer):
                    dst.write(memoryview(buffer)[:got])
        commit, entry = target / "commit", f"{log.stem} {log.stat().st_size}\n".encode()
        fd = os.open(commit.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, entry)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(commit.with_suffix(".tmp"), commit)
        directory = os.open(target, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    return time.perf_counter() - t0


def raw_writes(broker: Broker, topic: str, end: int, work: Path, rounds: int) -> list[float]:
    """MB/s of ``raw_write`` for the closed segments below ``end``, ``rounds`` times (the
    copies are removed between rounds, outside the clock)."""
    logs = [(base, size) for base, size in local_logs(broker, topic) if base < end]
    sources = [broker.data / f"{topic}-0" / f"{base:020d}.log" for base, _ in logs]
    mb = sum(size for _, size in logs) / MB
    rates = []
    for n in range(rounds):
        target = work / f"raw-write-{n}"
        rates.append(round(mb / raw_write(sources, target), 1))
        shutil.rmtree(target)
    return rates


def raw_uploads(broker: Broker, topic: str, end: int, rounds: int) -> list[float]:
    """MB/s of a raw upload of the closed segments below ``end`` to the broker's own store,
    ``rounds`` times: each segment's ``.log``, ``.index`` and ``.timeindex`` read and sent
    as one object with the store's own ``pipe_file`` (s3fs: one PUT, or a multipart upload
    when large), one after another, as the offload sends them; no tierlog code on the way.
    The objects go under a ``raw-upload`` prefix and are removed between rounds, outside
    the clock."""
    store: Any = broker.store  # the fsspec store: its filesystem and paths
    fs = store.fs
    logs = [(base, size) for base, size in local_logs(broker, topic) if base < end]
    directory = broker.data / f"{topic}-0"
    mb = sum(size for _, size in logs) / MB
    rates = []
    for n in range(rounds):
        target = f"{store.partition_path('raw-upload', n)}"
        fs.makedirs(target, exist_ok=True)  # directory stores (file://) need it
        t0 = time.perf_counter()
        for base, _ in logs:
            stem = directory / f"{base:020d}"
            data = b"".join(
                stem.with_suffix(suffix).read_bytes() for suffix in (".log", ".index", ".timeindex")
            )
            fs.pipe_file(f"{target}/{base:020d}.segment", data)
        rates.append(round(mb / (time.perf_counter() - t0), 1))
        fs.rm(target, recursive=True)
    return rates


def raw_gets(broker: Broker, topic: str, end: int, rounds: int) -> list[float]:
    """MB/s of a raw parallel ranged GET of the remote ``.log`` bytes of the committed
    segments below ``end`` from the broker's store, ``rounds`` times: ranges of
    ``RAW_RANGE_BYTES``, ``READER_THREADS`` at once, straight through the store's fsspec
    filesystem (no checks, no cache, no Kafka protocol)."""
    store: Any = broker.store
    fs = store.fs
    ranges = []
    for segment in committed_segments(manifest(broker, topic)):
        if segment.base_offset >= end:
            continue
        part = segment_part(segment, "log")
        path = store.object_path(segment, "log")
        for start in range(0, part.size, RAW_RANGE_BYTES):
            stop = min(start + RAW_RANGE_BYTES, part.size)
            ranges.append((path, part.offset + start, part.offset + stop))
    total = sum(hi - lo for _, lo, hi in ranges)
    rates = []
    store_cores = []
    with ThreadPoolExecutor(READER_THREADS) as pool:
        for _ in range(rounds):
            t0 = time.perf_counter()
            store_cpu0 = process_cpu(broker.store_pid) if broker.store_pid else 0.0
            got = sum(
                len(data)
                for data in pool.map(lambda r: fs.cat_file(r[0], start=r[1], end=r[2]), ranges)
            )
            elapsed = time.perf_counter() - t0
            if broker.store_pid:
                store_cores.append((process_cpu(broker.store_pid) - store_cpu0) / elapsed)
            assert got == total, f"raw GET read {got} of {total} bytes"
            rates.append(round(total / MB / elapsed, 1))
    if store_cores:
        print(f"raw GET: the store busy {statistics.median(store_cores):.2f} cores, median")
    return rates


def per_gib(requests: float, nbytes: float) -> float:
    return round(requests / (nbytes / (1 << 30)), 1) if nbytes else float("nan")


def replay(
    broker: Broker,
    topic: str,
    total_bytes: int,
    plan: Plan,
    label: str,
    raw_work: Path | None = None,
    raw_upload: bool = False,
) -> dict[str, Any]:
    """Hot reads, offload catch-up, then remote reads of the same range (module docstring);
    with ``raw_work``, the raw write of the range's segments there first; with
    ``raw_upload``, a raw upload of them to the same store. The raw parallel ranged GET of
    the offloaded objects follows the offload in every case."""
    create_topic(broker, topic, {"remote.storage.enable": "false", "retention.ms": "-1"})
    produced = produce(broker, topic, total_bytes)
    logs = local_logs(broker, topic)
    end = logs[-1][0]  # the active segment's base: [0, end) is closed, so it can go remote
    range_bytes = sum(size for _, size in logs[:-1])
    print(
        f"{label}: produced {produced['mb']} MB at {produced['mb_s']} MB/s; range [0, {end}) "
        f"in {len(logs) - 1} closed segments ({range_bytes / MB:.1f} MB on disk)",
        flush=True,
    )
    hot = [consume_range(broker, topic, end, plan) for _ in range(plan.rounds)]
    print(f"{label}: hot tier    " + ", ".join(f"{rate(r)} MB/s" for r in hot), flush=True)
    raw = raw_writes(broker, topic, end, raw_work, plan.rounds) if raw_work else []
    if raw:
        print(f"{label}: raw write   " + ", ".join(f"{r} MB/s" for r in raw), flush=True)
    uploads = raw_uploads(broker, topic, end, plan.rounds) if raw_upload else []
    if uploads:
        print(f"{label}: raw upload  " + ", ".join(f"{r} MB/s" for r in uploads), flush=True)

    before_offload = broker.store_requests()
    t0 = time.perf_counter()
    alter_topic(broker, topic, {"remote.storage.enable": "true"})
    wait_until(
        f"{label}: offload of [0, {end})",
        lambda: end_offset(manifest(broker, topic)) >= end,
        plan.wait_s,
    )
    catch_up = time.perf_counter() - t0
    done = manifest(broker, topic)
    committed = committed_segments(done)
    uploaded = committed_size(done)
    span_ms = committed[-1].created_ms - committed[0].created_ms if len(committed) > 1 else 0
    offload = {
        "segments": len(committed),
        "mb": round(uploaded / MB, 1),
        "catch_up_s": round(catch_up, 2),
        "catch_up_mb_s": round(uploaded / MB / catch_up, 1),
        # Upload starts of the first and last segment: all but the last one's bytes moved.
        "upload_mb_s": (
            round((uploaded - committed[-1].size_bytes) / MB / (span_ms / 1000), 1)
            if span_ms > 0
            else None
        ),
    }
    if raw:
        offload["raw_write_mb_s"] = raw
    if uploads:
        offload["raw_upload_mb_s"] = uploads
    after_offload = broker.store_requests()
    offload["puts_per_gib"] = per_gib(after_offload["PUT"] - before_offload["PUT"], uploaded)
    print(
        f"{label}: offloaded {offload['mb']} MB in {offload['segments']} segments in "
        f"{offload['catch_up_s']} s -> {offload['catch_up_mb_s']} MB/s "
        f"(between upload starts {offload['upload_mb_s']} MB/s)",
        flush=True,
    )

    alter_topic(broker, topic, {"local.retention.bytes": "0"})
    trimmed = wait_until(
        f"{label}: local log start past {end}",
        lambda: local_logs(broker, topic)[0][0] >= end,
        plan.wait_s,
    )
    before_replay = broker.store_requests()
    remote = [consume_range(broker, topic, end, plan) for _ in range(plan.rounds)]
    after_replay = broker.store_requests()
    cores = statistics.median(r["broker_cpu_s"] / r["seconds"] for r in remote)
    busy = f"the broker busy {cores:.2f} cores"
    if broker.store_pid:
        store = statistics.median(r["store_cpu_s"] / r["seconds"] for r in remote)
        busy += f", the store {store:.2f}"
    print(
        f"{label}: remote tier "
        + ", ".join(f"{rate(r)} MB/s" for r in remote)
        + f" ({busy}, medians)",
        flush=True,
    )
    gets = raw_gets(broker, topic, end, plan.rounds)
    print(f"{label}: raw GET     " + ", ".join(f"{r} MB/s" for r in gets), flush=True)
    requests = {
        "gets_per_gib_replayed": per_gib(
            after_replay["GET"] - before_replay["GET"], range_bytes * plan.rounds
        ),
        "puts_per_gib_offloaded": offload["puts_per_gib"],
    }
    print(
        f"{label}: {requests['gets_per_gib_replayed']} GETs per GiB replayed, "
        f"{requests['puts_per_gib_offloaded']} PUTs per GiB offloaded",
        flush=True,
    )
    hot_best = max(rate(r) for r in hot)
    remote_best = max(rate(r) for r in remote)
    result = {
        "range_records": end,
        "range_mb": round(range_bytes / MB, 1),
        "produce": produced,
        "hot": hot,
        "remote": remote,
        "hot_mb_s": hot_best,
        "remote_mb_s": remote_best,
        "ratio_remote_hot": round(remote_best / hot_best, 3),
        "ratio_remote_hot_median": round(
            statistics.median(rate(r) for r in remote) / statistics.median(rate(r) for r in hot),
            3,
        ),
        "raw_get": gets,
        "ratio_remote_raw_get_median": round(
            statistics.median(rate(r) for r in remote) / statistics.median(gets), 3
        ),
        "requests": requests,
        "complete": all(r["complete"] for r in hot + remote),
        "local_trim_s": round(trimmed, 2),
        "offload": offload,
    }
    print(
        f"{label}: remote/hot = {result['ratio_remote_hot']} (best rounds), "
        f"{result['ratio_remote_hot_median']} (medians); every record in order: "
        f"{result['complete']}",
        flush=True,
    )
    return result


def replay_big_cache(run_dir: Path, plan: Plan, topic: str, end: int) -> dict[str, Any]:
    """Restart the file:// broker with an empty chunk cache larger than the range, and read
    the remote range twice: cold without evictions, then warm (served from the cache)."""
    cache_bytes = max(2 * plan.replay_bytes, 256 * MiB)
    broker = start_broker(run_dir, plan, reader_cache_bytes=cache_bytes)
    try:
        reads = [consume_range(broker, topic, end, plan) for _ in range(2)]
    finally:
        broker.proc.stop()
    print(
        f"file://: remote tier, empty {cache_bytes // MiB} MiB chunk cache: "
        f"{rate(reads[0])} MB/s cold (no evictions), {rate(reads[1])} MB/s warm (from the cache)",
        flush=True,
    )
    return {
        "reader_cache_bytes": cache_bytes,
        "reads": reads,
        "cold_mb_s": rate(reads[0]),
        "warm_mb_s": rate(reads[1]),
    }


# -- 4. footprint -----------------------------------------------------------------------------


class Sampler:
    """Samples local .log bytes and the manifest's committed bytes every 50 ms (a thread)."""

    def __init__(self, broker: Broker, topic: str) -> None:
        self.broker, self.topic = broker, topic
        self.max_local = 0
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> tuple[int, int]:
        logs = local_logs(self.broker, self.topic)
        local = sum(size for _, size in logs)
        remote = committed_size(manifest(self.broker, self.topic))
        self.max_local = max(self.max_local, local)
        self.samples.append((time.perf_counter(), local, remote))
        return local, remote

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.sample()

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def footprint(broker: Broker, plan: Plan) -> dict[str, Any]:
    topic = "footprint"
    limit = plan.footprint_local_bytes
    create_topic(
        broker,
        topic,
        {
            "remote.storage.enable": "true",
            "local.retention.bytes": str(limit),
            "retention.ms": "-1",
        },
    )
    total = limit * plan.footprint_factor
    with Sampler(broker, topic) as sampler:
        produced = produce(broker, topic, total, rate_mb_s=plan.footprint_rate)
        active = local_logs(broker, topic)[-1][0]
        wait_until(
            "footprint: offload caught up",
            lambda: end_offset(manifest(broker, topic)) >= active,
            plan.wait_s,
        )
        time.sleep(3 * TASK_INTERVAL_MS / 1000)  # a retention pass after the last upload
        local, remote = sampler.sample()
    bound = limit + plan.segment_bytes
    # Offload and local retention are periodic: a segment closes, waits up to one
    # remote-log-manager interval to be uploaded and one retention check to be deleted, and
    # meanwhile records keep arriving at the produce rate.
    lag = int(produced["mb_s"] * MB * 2 * TASK_INTERVAL_MS / 1000)
    result = {
        "local_retention_bytes": limit,
        "segment_bytes": plan.segment_bytes,
        "produced_mb": produced["mb"],
        "produce_mb_s": produced["mb_s"],
        "growth_x": round((local + remote) / limit, 1),
        "max_local_bytes": sampler.max_local,
        "bound_bytes": bound,
        "max_local_over_bound": round(sampler.max_local / bound, 3),
        "within_bound": sampler.max_local <= bound,
        "bound_with_task_lag_bytes": bound + lag,
        "within_bound_with_task_lag": sampler.max_local <= bound + lag,
        "final_local_bytes": local,
        "final_remote_bytes": remote,
        "samples": len(sampler.samples),
    }
    print(
        f"footprint: produced {produced['mb']} MB at {produced['mb_s']} MB/s into "
        f"local.retention.bytes={limit} ({result['growth_x']}x retained): local max "
        f"{sampler.max_local} bytes vs bound "
        f"{bound} (L + one segment) -> {result['max_local_over_bound']}x, within L + one "
        f"segment + 2 task intervals of produce ({bound + lag}): "
        f"{result['within_bound_with_task_lag']}; final local {local}, remote {remote}",
        flush=True,
    )
    return result


def part(figures: dict[str, Any], name: str, run: Callable[[], dict[str, Any]]) -> bool:
    """Run one part of the bench into ``figures[name]``; a failure is recorded, not raised."""
    try:
        figures[name] = run()
        return True
    except Exception as exc:  # report and go on with the other parts
        figures[name] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"{name}: FAILED: {exc}", flush=True)
        return False


def run_all(work: Path, plan: Plan, figures: dict[str, Any]) -> None:
    broker = start_broker(work / "file", plan)
    print(f"broker on {broker.bootstrap}, remote tier {broker.store.url}", flush=True)
    replayed = part(
        figures,
        "replay_file",
        lambda: replay(broker, "replay", plan.replay_bytes, plan, "file://", work, raw_upload=True),
    )
    part(figures, "footprint", lambda: footprint(broker, plan))
    broker.proc.stop()
    if replayed:
        replay_file = figures["replay_file"]
        shutil.rmtree(broker.data / ".remote-cache")  # the broker's disposable chunk cache
        if part(
            replay_file,
            "big_cache",
            lambda: replay_big_cache(work / "file", plan, "replay", replay_file["range_records"]),
        ):
            replay_file["ratio_big_cache_cold_hot"] = round(
                replay_file["big_cache"]["cold_mb_s"] / replay_file["hot_mb_s"], 3
            )
    if plan.s3_bytes:
        moto, endpoint = start_moto(work)
        try:
            create_bucket(endpoint, "tierlog-bench")
            options = {**S3_OPTIONS, "endpoint_url": endpoint}
            s3 = start_broker(work / "s3", plan, "s3://tierlog-bench/tiered", options)
            s3.store_pid = moto.pid
            part(
                figures,
                "replay_s3",
                lambda: replay(s3, "replay", plan.s3_bytes, plan, "s3 (moto)", raw_upload=True),
            )
            s3.proc.stop()
        finally:
            moto.stop()
    if plan.hdfs_bytes:
        part(figures, "replay_hdfs", lambda: replay_hdfs(work, plan))


def replay_hdfs(work: Path, plan: Plan) -> dict[str, Any]:
    """The replay part on a real HDFS: Hadoop's MiniDFSCluster (the tests' helper, jars
    from Maven Central through ``make hdfs``) over ``webhdfs://``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.integration.minihdfs import running

    with running(work / "hdfs-cluster") as hdfs:
        broker = start_broker(work / "hdfs", plan, hdfs.url("/tiered"), hdfs.storage_options)
        broker.store_pid = hdfs.proc.pid
        try:
            label = "hdfs (MiniDFSCluster)"
            return replay(broker, "replay", plan.hdfs_bytes, plan, label, raw_upload=True)
        finally:
            broker.proc.stop()


# -- main -------------------------------------------------------------------------------------


def side_by_side(report: Report, figures: dict[str, Any]) -> None:
    """The replays (remote against hot), the offload against the raw write and the big
    cache's cold read against the hot tier, as medians and spreads of their rounds."""
    for key, label, goal in (
        ("replay_file", "file://", GOAL_FILE_RATIO),
        ("replay_s3", "s3 (moto)", None),
        ("replay_hdfs", "hdfs (MiniDFSCluster)", None),
    ):
        part_ = figures.get(key, {})
        if "hot" in part_:
            tiers = {
                "remote": [rate(r) for r in part_["remote"]],
                "hot": [rate(r) for r in part_["hot"]],
            }
            report.side_by_side(f"replay {label} remote vs hot", tiers, unit="MB/s", goal=goal)
            if part_.get("raw_get"):
                raw = {"remote": tiers["remote"], "raw GET": part_["raw_get"]}
                report.side_by_side(
                    f"replay {label} remote vs raw parallel GET", raw, unit="MB/s",
                    goal=GOAL_RAW_RATIO,
                )  # fmt: skip
            if "big_cache" in part_:
                cold = {"big cache cold": [part_["big_cache"]["cold_mb_s"]], "hot": tiers["hot"]}
                report.side_by_side(f"replay {label} big cache cold vs hot", cold, unit="MB/s")
    for key, label in (
        ("replay_file", "file://"),
        ("replay_s3", "s3 (moto)"),
        ("replay_hdfs", "hdfs (MiniDFSCluster)"),
    ):
        uploaded = figures.get(key, {}).get("offload", {})
        if uploaded.get("raw_upload_mb_s"):
            rates = {
                "offload": [uploaded["catch_up_mb_s"]],
                "raw upload": uploaded["raw_upload_mb_s"],
            }
            report.side_by_side(
                f"offload {label} vs raw upload", rates, unit="MB/s", goal=GOAL_RAW_RATIO
            )
    offload = figures.get("replay_file", {}).get("offload", {})
    if offload.get("raw_write_mb_s"):
        rates = {"offload": [offload["catch_up_mb_s"]], "raw write": offload["raw_write_mb_s"]}
        report.side_by_side(
            "offload file:// vs raw write", rates, unit="MB/s", goal=GOAL_OFFLOAD_RATIO
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (~1 minute)")
    parser.add_argument("--replay-mb", type=int, help="records for the file:// replay (MB)")
    parser.add_argument("--s3-mb", type=int, help="records for the S3 replay (MB); 0 = skip")
    parser.add_argument("--hdfs-mb", type=int, help="records for the HDFS replay (MB); 0 = skip")
    parser.add_argument("--segment-mib", type=int, help="log.segment.bytes in MiB")
    parser.add_argument("--rounds", type=int, help="reads of each tier")
    parser.add_argument("--footprint-rate", type=float, help="MB/s produced in the footprint")
    parser.add_argument("--fetch-mib", type=int, help="consumer max.partition.fetch.bytes")
    parser.add_argument(
        "--reader-cache-mib", type=int, help="the brokers' remote.log.reader.cache.bytes in MiB"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    plan = quick_plan() if args.quick else full_plan()
    overrides = {
        "replay_bytes": args.replay_mb and args.replay_mb * MB,
        "s3_bytes": None if args.s3_mb is None else args.s3_mb * MB,
        "hdfs_bytes": None if args.hdfs_mb is None else args.hdfs_mb * MB,
        "segment_bytes": args.segment_mib and args.segment_mib * MiB,
        "rounds": args.rounds,
        "footprint_rate": args.footprint_rate,
        "fetch_bytes": args.fetch_mib and args.fetch_mib * MiB,
        "reader_cache_bytes": args.reader_cache_mib and args.reader_cache_mib * MiB,
    }
    plan = Plan(**{**asdict(plan), **{k: v for k, v in overrides.items() if v is not None}})
    install_signal_handlers()
    report = Report("tiered", quick=args.quick)
    work = Path(tempfile.mkdtemp(prefix="tierlog-tiered-"))
    figures: dict[str, Any] = report.data
    figures["plan"] = asdict(plan)
    try:
        run_all(work, plan, figures)
    finally:
        if args.keep:
            print(f"work directory kept: {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    file_replay = figures.get("replay_file", {})
    footprint_ = figures.get("footprint", {})
    figures["offload"] = {
        name: figures[key]["offload"]
        for name, key in (("file", "replay_file"), ("s3", "replay_s3"), ("hdfs", "replay_hdfs"))
        if "offload" in figures.get(key, {})
    }
    figures["goal_file_ratio"] = GOAL_FILE_RATIO
    ratio = file_replay.get("ratio_remote_hot")
    figures["meets_goal"] = ratio is not None and ratio >= GOAL_FILE_RATIO
    print(
        f"best rounds: file:// remote/hot {ratio} (goal >= {GOAL_FILE_RATIO}: "
        f"{'met' if figures['meets_goal'] else 'NOT met'}); footprint max local / (L + one "
        f"segment) {footprint_.get('max_local_over_bound')}; offload MB/s "
        + ", ".join(f"{k} {v['catch_up_mb_s']}" for k, v in figures["offload"].items()),
        flush=True,
    )
    side_by_side(report, figures)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
