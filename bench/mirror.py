"""Mirroring benchmark: MirrorMaker 2 copying a backlog tierlog -> tierlog, against the same
MirrorMaker 2 copying it Apache Kafka -> Apache Kafka, in one run (issue 23 item 6).

Per pair (two single brokers on 127.0.0.1, started fresh): a 4-partition topic gets
``--mb`` MB of 1 KiB incompressible records (confluent-kafka, lz4 batches as producers
usually send them), then MirrorMaker 2 (``bench/mirror_maker.py``: dedicated mode, Kafka's
defaults but replication factor 1 and short intervals) starts, and the target's
``source.<topic>`` end offsets are polled every 0.2 s until they hold every record. The
figure is records per second from the first mirrored record to the last (MirrorMaker's
start-up, ~20-60 s of Connect on this box, is reported apart, not counted), and
MB/s of values. ``--rounds`` rounds (full 3, quick 1), the two pairs alternating within
each, every pair on fresh brokers; reported as the median and spread of the rounds
(``bench/reporting.py``), and ``ratio`` is tierlog's median over Kafka's.

Run (from the repository root)::

    .venv/bin/python bench/mirror.py --quick      # ~5 min: 20 MB per pair, one round
    .venv/bin/python bench/mirror.py              # 200 MB per pair, 3 rounds: ~5 min

Human-readable lines as it goes; the LAST line is one JSON object. Brokers and MirrorMaker
are stopped on exit (Ctrl-C and SIGTERM included).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kafka_ref
import mirror_maker
import reporting
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from procs import install_signal_handlers, wait_ready

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / ".work"
TOPIC = "mirrored"
PARTITIONS = 4
RECORD_BYTES = 1024


@contextmanager
def tierlog_broker(run_dir: Path) -> Iterator[str]:
    sys.path.insert(0, str(ROOT))
    from tests.broker.harness import BrokerProcess

    run_dir.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(run_dir / "data").start(timeout=60)
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@contextmanager
def kafka_broker(run_dir: Path) -> Iterator[str]:
    dist = kafka_ref.fetch_kafka(WORK)
    proc, bootstrap = kafka_ref.start_kafka(dist, run_dir)
    try:
        wait_ready(proc, bootstrap, 120)
        yield bootstrap
    finally:
        proc.stop()


def fill(bootstrap: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"}
    )
    for i in range(records):
        producer.produce(TOPIC, value=os.urandom(RECORD_BYTES), key=b"%d" % i)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0


def mirrored(bootstrap: str) -> int:
    """Records in the target's ``source.<topic>`` (sum of end offsets)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-bench-watch"})
    try:
        total = 0
        for p in range(PARTITIONS):
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(f"source.{TOPIC}", p), timeout=5
                )
            except Exception:
                return total
            total += high
        return total
    finally:
        consumer.close()


def run_pair(
    name: str,
    broker: Callable[[Path], Any],
    dist: Any,
    records: int,
    work: Path,
    timeout: float,
) -> dict[str, Any]:
    with broker(work / f"{name}-source") as source, broker(work / f"{name}-target") as target:
        fill(source, records)
        mm2 = mirror_maker.start_mirror_maker(
            dist,
            work / f"{name}-mm2",
            mirror_maker.mm2_properties(source, target, topics=TOPIC),
        )
        try:
            begin = time.monotonic()
            first = last = None
            deadline = begin + timeout
            while time.monotonic() < deadline:
                count = mirrored(target)
                now = time.monotonic()
                if count and first is None:
                    first = (now, count)
                if count >= records:
                    last = now
                    break
                if not mm2.alive():
                    raise RuntimeError(f"MirrorMaker exited: {mm2.log_tail()}")
                time.sleep(0.2)
            if first is None or last is None:
                raise TimeoutError(f"{name}: not mirrored within {timeout:.0f} s")
        finally:
            mm2.stop()
    seconds = max(last - first[0], 1e-3)
    copied = records - first[1]
    result = {
        "startup_s": round(first[0] - begin, 1),
        "seconds": round(seconds, 2),
        "records_per_s": round(copied / seconds),
        "mb_per_s": round(copied * RECORD_BYTES / 1e6 / seconds, 1),
    }
    print(f"{name}: {result}", flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 MB per pair, one round")
    parser.add_argument("--mb", type=int, default=None, help="MB of records per pair")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (full 3, quick 1)")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    install_signal_handlers()
    mb = args.mb or (20 if args.quick else 200)
    rounds = args.rounds or (1 if args.quick else 3)
    records = mb * 1_000_000 // RECORD_BYTES
    dist = mirror_maker.fetch_mirror_maker(WORK)
    report = reporting.Report("mirror", quick=args.quick)
    report.data.update(mb=mb, records=records, rounds=rounds, mirror_maker=dist.version)
    per_side: dict[str, list[dict[str, Any]]] = {"tierlog": [], "kafka": []}
    try:
        for round_no in range(1, rounds + 1):
            with tempfile.TemporaryDirectory(prefix="mirror-bench-") as tmp:
                work = Path(tmp)
                for name, broker in (("tierlog", tierlog_broker), ("kafka", kafka_broker)):
                    print(f"round {round_no}/{rounds}: {name}", flush=True)
                    try:
                        result = run_pair(name, broker, dist, records, work, args.timeout)
                    except Exception as exc:  # reported, and the other pair still runs
                        result = {"error": f"{type(exc).__name__}: {exc}"}
                        report.fail(f"{name}, round {round_no}: {result['error']}")
                    per_side[name].append(result)
    except KeyboardInterrupt:
        return finish(report, per_side, interrupted="KeyboardInterrupt")
    return finish(report, per_side)


def finish(report: reporting.Report, per_side: dict[str, list[dict[str, Any]]], **kw: Any) -> int:
    report.data.update(per_side)
    rates = {side: [r.get("records_per_s") for r in results] for side, results in per_side.items()}
    figure = report.side_by_side("mirrored records/s", rates, unit="records/s")
    report.data["ratio"] = figure.get("ratio")
    report.side_by_side(
        "MirrorMaker start-up",
        {side: [r.get("startup_s") for r in results] for side, results in per_side.items()},
        unit="s",
        better=reporting.LOWER,
    )
    return report.finish(**kw)


if __name__ == "__main__":
    sys.exit(main())
