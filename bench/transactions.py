"""Transactional produce and read_committed consume: tierlog vs Apache Kafka 4.x, side by side.

The brokers, their start-up, warm-up, rounds, RSS/CPU figures, ratios and the JSON report are
``bench/throughput.py``'s (imported, not copied); this module adds the transactional
workloads (issue 13), all with confluent-kafka (librdkafka's transactional producer, KIP-98):

  txn_100ms       1 KiB records (``linger.ms=5``, ``batch.size=1 MiB``, ``acks=all``), one
                  transactional producer committing every 100 ms: begin, produce as fast as
                  the client allows for 100 ms, ``commit_transaction()``, repeat.
  txn_1000        the same, committing every 1,000 records (1 MiB per transaction): the
                  per-transaction cost (AddPartitionsToTxn, EndTxn, the markers) dominates.
  read_committed  a backlog of 200-byte records (``--backlog-mb``) written once per broker by a
                  transactional producer in transactions of 10,000 records, every 10th one
                  aborted (the same backlog on both brokers: 3 aborts in the quick run's
                  64 MiB, 26 in the full run's 512 MiB), then read from offset 0 every round
                  by an assigned consumer with ``isolation.level=read_committed`` (the broker
                  serves up to the last stable offset with the aborted transactions of each
                  range; the client drops those). Every backlog record carries
                  its number in its first 8 bytes, and every round checks the exact set it
                  was given: each committed record once, no aborted one (a broker that
                  leaked aborted records would otherwise only look faster). A round that
                  fails the check fails the run (exit status 1, ``failed_checks``).

``msgs_per_s`` counts committed records only (the producers: from before the first
``begin_transaction()`` to the return of the last ``commit_transaction()``, which flushes the
transaction's records and waits for EndTxn; the consumer: from the first record to the last
committed one). Beside it: transactions per second, ``commit_transaction()`` p50/p99, and
librdkafka's request round trips (Produce or Fetch, and the transaction coordinator's).
Rounds alternate brokers (quick 3 x 3 s, full 3 x 10 s); the median of each workload's
rounds, their spread and the ratio of the medians are reported (``bench/reporting.py``),
the best round beside them.

With ``--profile`` (``auto``, the default: for the workloads whose tierlog/kafka msgs/s ratio
of the medians is below 1; ``on``: all), after the measured run a tierlog broker is started
per workload by ``bench/profiling.py``, the workload runs twice, and cProfile (on the
broker's event-loop thread, switched on by a signal) sees only the second round: the
functions with the most own time are reported (``profile`` in the JSON), as shares of the
time the loop was busy (~40 s per profiled workload). cProfile slows the broker down: those
rates are not figures.

Run (from the repository root)::

    .venv/bin/python bench/transactions.py --quick      # ~3 minutes
    .venv/bin/python bench/transactions.py              # full, ~6 min (make bench-transactions)
    .venv/bin/python bench/transactions.py --only kafka --quick --profile off

The LAST line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import procs
import profiling
import throughput as tp
import workloads as wl
from confluent_kafka import KafkaError, Message, Producer
from throughput import Broker, Workload, say
from workloads import MiB, Plan, Target

TXN = {"acks": "all", "linger.ms": 5, "batch.size": MiB}  # transactions need acks=all
BACKLOG = {"acks": "all", "linger.ms": 20, "batch.size": MiB, "batch.num.messages": 100_000}
COMMIT_EVERY_S = 0.1
COMMIT_EVERY_N = 1000
BACKLOG_TXN_RECORDS = 10_000
BACKLOG_ABORT_EVERY = 10  # every 10th backlog transaction is aborted
PROFILE_TOP = 25
ID_BYTES = 8  # a backlog record's number, big-endian, at the start of its value


def make_plan(quick: bool, backlog_mb: float | None) -> Plan:
    """Quick: 3 rounds x 3 s, 64 MiB backlog; full: 3 x 10 s, 512 MiB (~5 minutes in all)."""
    mb = backlog_mb if backlog_mb is not None else (64 if quick else 512)
    return Plan(
        produce_seconds=3.0 if quick else 10.0,
        produce_max_messages=10_000_000,
        backlog_bytes=int(mb * MiB),
        backlog_seconds=60.0 if quick else 120.0,
        consume_seconds=60.0 if quick else 120.0,
        latency_rate=0,  # throughput.py's latency and soak workloads are not run here
        latency_seconds=0.0,
        soak_bytes=0,
        soak_seconds=0.0,
        rounds=3,  # quick too: a median, and the same rounds for both brokers
    )


def produce_transactions(
    target: Target,
    topic: str,
    seconds: float,
    value_size: int,
    settings: dict[str, Any],
    *,
    every_s: float | None = None,
    every_n: int | None = None,
    max_messages: int = 10_000_000,
    abort_every: int = 0,
    keep: bool = False,
    numbered: bool = False,
) -> dict[str, Any]:
    """One transactional producer on a fresh one-partition ``topic`` for ``seconds``,
    committing every ``every_s`` seconds or ``every_n`` records, aborting every
    ``abort_every``-th transaction (0: none), until ``max_messages`` were sent.

    Returns the rate of committed records and the ``commit_transaction()`` times. With
    ``numbered``, every record's value starts with its number (``ID_BYTES``, big-endian;
    the uncounted first transaction's 100 records are 0-99) and ``committed_ids`` lists
    the [first, end) ranges of the committed ones, for ``check_exact``.

    Raises:
        KafkaException: a transactional call failed (the round becomes an error figure).
    """
    errors: list[str] = []

    purged = [0]

    def on_error(err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            return
        if err.code() == KafkaError._PURGE_QUEUE:  # unsent records of an aborted transaction
            purged[0] += 1
        else:
            errors.append(str(err))

    stats: list[str] = []
    conf = {
        **wl._base_conf(target),
        **settings,
        "transactional.id": f"tierlog-bench-{topic}",
        "delivery.report.only.error": True,
        "on_delivery": on_error,
        # librdkafka's own per-broker request round-trip times, in 1 s windows
        "statistics.interval.ms": 1000,
        "stats_cb": stats.append,
    }
    wl.create_topic(target, topic)
    producer = Producer(conf)
    producer.init_transactions(wl.CALL_TIMEOUT * 2)
    marks = wl._Watermarks(target, topic)
    value = os.urandom(value_size)
    producer.begin_transaction()  # warm-up: coordinator, producer id, the first segment
    for n in range(100):
        producer.produce(topic, numbered_value(n, value) if numbered else value, partition=0)
    producer.commit_transaction(wl.FLUSH_TIMEOUT)
    base, _ = marks.wait_for(101, wl.CALL_TIMEOUT)  # 100 records and the commit marker
    commit_s: list[float] = []  # per transaction: its records' acks, then EndTxn
    sent = committed = aborted = 0
    committed_ids = [[0, 100]]  # the first transaction's
    now = time.perf_counter
    stats.clear()
    cpu0, t0 = wl._client_cpu(), now()
    until = t0 + seconds
    while sent < max_messages and now() < until:
        producer.begin_transaction()
        limit = min(every_n or max_messages, max_messages - sent)
        txn_until = min(until, now() + every_s) if every_s else math.inf
        if numbered:
            count = pump_numbered(producer, topic, value, 100 + sent, limit, txn_until)
        else:
            count = wl._pump(producer, topic, value, limit, txn_until)
        first_id = 100 + sent
        sent += count
        began = now()
        if abort_every and (len(commit_s) + 1) % abort_every == 0:
            # Flushed first, so the aborted records are on the log for read_committed to
            # skip (an abort purges what is still queued, and its EndTxn can then race
            # librdkafka's own AddPartitionsToTxn: INVALID_TXN_STATE, from Kafka 4.4 as
            # from tierlog). Not before a commit: with delivery.report.only.error, flush()
            # sleeps in 100 ms polls, where commit_transaction() flushes without them.
            producer.flush(wl.FLUSH_TIMEOUT)
            producer.abort_transaction(wl.FLUSH_TIMEOUT)
            aborted += count
        else:
            producer.commit_transaction(wl.FLUSH_TIMEOUT)
            committed += count
            if committed_ids[-1][1] == first_id:
                committed_ids[-1][1] += count
            else:
                committed_ids.append([first_id, first_id + count])
        commit_s.append(now() - began)
    elapsed = now() - t0
    high = marks.high()
    result: dict[str, Any] = {
        "msgs": committed,
        "committed_on_topic": committed + 100,  # and the warm-up transaction's
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(committed / elapsed, 1),
        "mib_per_s": round(committed * value_size / elapsed / MiB, 2),
        "value_bytes": value_size,
        "transactions": len(commit_s),
        "txn_per_s": round(len(commit_s) / elapsed, 1),
        "records_per_txn": round(sent / max(1, len(commit_s)), 1),
        "aborted_msgs": aborted,
        "purged_msgs": purged[0],  # of them, dropped by the client before sending
        **_p50_p99("commit", commit_s),
        "commit_mean_ms": round(statistics.fmean(commit_s) * 1000, 2) if commit_s else 0.0,
        "commit_share": round(sum(commit_s) / elapsed, 3),  # of the wall time
        "on_broker": high - base,  # records, aborted ones and one marker per transaction
        "errors": len(errors),
        "client_cpu_s": round(wl._client_cpu() - cpu0, 2),
    }
    result.update(rtt_figures(stats))
    if numbered:
        result["ids"] = 100 + sent
        result["committed_ids"] = committed_ids
    if errors:
        result["first_error"] = errors[0]
    producer.flush(wl.FLUSH_TIMEOUT)
    result.update(wl.batch_stats(target, topic))  # markers are batches of one record
    if not keep:
        result["deleted"] = wl.delete_topic(target, topic)
    return result


def numbered_value(number: int, value: bytes) -> bytes:
    """``value`` with its first ``ID_BYTES`` replaced by ``number``, big-endian."""
    return number.to_bytes(ID_BYTES, "big") + value[ID_BYTES:]


def pump_numbered(
    producer: Producer, topic: str, value: bytes, first: int, max_messages: int, until: float
) -> int:
    """``workloads._pump`` for numbered records: ``first``, ``first + 1``, ... (the backlog
    only: a fresh value per record costs the client ~0.3 us, which the measured producer
    workloads do not pay)."""
    produce, poll, now = producer.produce, producer.poll, time.perf_counter
    tail = value[ID_BYTES:]
    sent = 0
    while sent < max_messages:
        try:
            produce(topic, (first + sent).to_bytes(ID_BYTES, "big") + tail, partition=0)
        except BufferError:  # local queue full: the broker is the bottleneck, wait for it
            poll(0.005)
            if now() > until:
                break
            continue
        sent += 1
        if sent & 1023 == 0:
            poll(0)
            if now() > until:
                break
    return sent


def check_exact(received: list[bytes], committed_ids: list[list[int]], ids: int) -> dict[str, int]:
    """What a read_committed consumer got against what was committed: ``received`` holds
    the first ``ID_BYTES`` of each record's value in delivery order, ``committed_ids`` the
    [first, end) ranges of committed record numbers out of ``ids`` numbered records.

    Returns counts of ``missing`` committed records, ``duplicates``, ``aborted`` records
    delivered (numbered but not committed) and ``unknown`` ones (no number given out); all
    zero when the consumer got each committed record exactly once and nothing else.
    """
    if sum(map(len, received)) != ID_BYTES * len(received):  # a value shorter than a number
        received = [r if len(r) == ID_BYTES else b"\xff" * ID_BYTES for r in received]
    got = np.frombuffer(b"".join(received), dtype=">u8").astype(np.int64)  # >= 2**63: < 0
    committed = np.zeros(ids, dtype=bool)
    for first, end in committed_ids:
        committed[first:end] = True
    known = got[(got >= 0) & (got < ids)]
    seen = np.bincount(known, minlength=ids)
    return {
        "missing": int(np.count_nonzero(committed & (seen == 0))),
        "duplicates": int(np.sum(np.maximum(seen - 1, 0))),
        "aborted": int(np.count_nonzero(~committed & (seen > 0))),
        "unknown": int(len(got) - len(known)),
    }


def rtt_figures(stats: list[str]) -> dict[str, float]:
    """Request round trips from librdkafka's statistics (``rtt``, per 1 s window): the
    median over the windows of their p50 and p99, to the broker itself (``rtt_*``: a
    producer's Produce requests, a consumer's Fetch requests) and to the logical
    ``TxnCoordinator`` broker (``coordinator_rtt_*``: AddPartitionsToTxn, EndTxn), which has
    a connection of its own."""
    windows: dict[str, tuple[list[float], list[float]]] = {"rtt": ([], []), "coord": ([], [])}
    for text in stats:
        for broker in json.loads(text).get("brokers", {}).values():
            rtt = broker.get("rtt", {})
            if rtt.get("cnt", 0) == 0:
                continue
            if broker.get("name") == "TxnCoordinator":
                kind = "coord"
            elif broker.get("nodeid", -1) >= 0:
                kind = "rtt"
            else:
                continue  # bootstrap connections
            windows[kind][0].append(rtt["p50"] / 1000)
            windows[kind][1].append(rtt["p99"] / 1000)
    out = {}
    for kind, prefix in (("rtt", "rtt"), ("coord", "coordinator_rtt")):
        p50s, p99s = windows[kind]
        if p50s:
            out[f"{prefix}_p50_ms"] = round(statistics.median(p50s), 2)
            out[f"{prefix}_p99_ms"] = round(statistics.median(p99s), 2)
    return out


def _p50_p99(name: str, seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        f"{name}_p50_ms": round(wl._percentile(ordered, 0.50) * 1000, 2) if ordered else 0.0,
        f"{name}_p99_ms": round(wl._percentile(ordered, 0.99) * 1000, 2) if ordered else 0.0,
    }


def _txn_producer(name: str, **schedule: Any) -> Any:
    def run(broker: Broker, round_no: int, plan: Plan) -> dict[str, Any]:
        topic = f"bench-{name}-{round_no}"  # fresh per round
        seconds = plan.produce_seconds
        return produce_transactions(broker.target, topic, seconds, 1024, TXN, **schedule)

    return run


def write_txn_backlog(target: Target, topic: str, plan: Plan) -> dict[str, Any]:
    """``plan.backlog_bytes`` of 200-byte records in transactions of ``BACKLOG_TXN_RECORDS``,
    every ``BACKLOG_ABORT_EVERY``-th aborted; kept for the reads."""
    count = max(1, plan.backlog_bytes // 200)
    return produce_transactions(
        target,
        topic,
        plan.backlog_seconds,
        200,
        BACKLOG,
        every_n=BACKLOG_TXN_RECORDS,
        max_messages=count,
        abort_every=BACKLOG_ABORT_EVERY,
        keep=True,
        numbered=True,
    )


class InexactRead(AssertionError):
    """A read_committed consumer was not handed exactly the committed records."""


def read_committed(
    target: Target, topic: str, plan: Plan, written: dict[str, Any]
) -> dict[str, Any]:
    """Every committed record of the backlog, read_committed, from offset 0; then the check
    that it got each committed record once and no aborted one (``check_exact``).

    Raises:
        InexactRead: it did not (``run_one`` makes the round an error; ``main`` fails the
            run).
    """
    wanted = written.get("committed_on_topic")
    stats: list[str] = []
    ids: list[bytes] = []
    result = wl.consume_backlog(target, topic, plan, "read_committed", wanted, stats, ids)
    result.update(rtt_figures(stats))  # the Fetch requests' round trips
    result["backlog_mib"] = round(result["backlog_msgs"] * 200 / MiB, 1)
    result["backlog_transactions"] = written.get("transactions")
    result["backlog_aborted_msgs"] = written.get("aborted_msgs")
    if "committed_ids" not in written:
        raise InexactRead(f"{target.name}: the backlog was not written; nothing to check")
    exact = check_exact(ids, written["committed_ids"], written["ids"])
    result["exact"] = exact
    if any(exact.values()):
        raise InexactRead(
            f"{target.name} read_committed: {exact['aborted']} aborted records delivered, "
            f"{exact['missing']} committed records missing, {exact['duplicates']} "
            f"duplicates, {exact['unknown']} unknown, of {len(ids)} received"
        )
    return result


# Issue 26 item 5 (and issue 13): at least Kafka's rate, by the median.
WORKLOADS = [
    Workload("txn_100ms", _txn_producer("txn_100ms", every_s=COMMIT_EVERY_S), goal=1.0),
    Workload("txn_1000", _txn_producer("txn_1000", every_n=COMMIT_EVERY_N), goal=1.0),
    Workload(
        "read_committed",
        tp.backlog_reader("bench-read-committed", write_txn_backlog, read_committed),
        goal=1.0,
    ),
]


def warm_up(broker: Broker, plan: Plan) -> None:
    """throughput.py's warm-up, then 1.5 s of transactions (the JIT of Kafka's coordinator
    and marker paths); not counted."""
    tp.warm_up(broker, plan)
    try:
        topic = "bench-warm-up-txn"
        produce_transactions(broker.target, topic, 1.5, 1024, TXN, every_n=COMMIT_EVERY_N)
    except Exception as exc:  # the workloads will show the problem in detail
        say(f"[{broker.target.name}] transactional warm-up failed: {exc}")


def slower(report: dict[str, Any]) -> list[str]:
    """The workloads whose tierlog/kafka msgs/s ratio (of the medians) is below 1."""
    return [
        name
        for name, figures in report["workloads"].items()
        if (figures.get("side_by_side", {}).get("ratio") or 1.0) < 1.0
    ]


def profile_tierlog(
    chosen: list[Workload], plan: Plan, run_dir: Path, top: int = PROFILE_TOP
) -> dict[str, Any]:
    """Each workload on its own tierlog broker run by ``bench/profiling.py``: round 1
    unprofiled (it writes the consumer's backlog and warms up the producers' path), round 2
    under cProfile; the top costs of round 2."""
    out: dict[str, Any] = {}
    two = replace(plan, rounds=2)  # the consumer deletes its topic after round 2
    for workload in chosen:
        stats = run_dir / f"profile-{workload.name}" / "tierlog.prof"
        say(f"[profile] {workload.name}: tierlog under cProfile, the 2nd round ({stats})")
        broker, info = tp.start_tierlog(stats.parent, profile=stats)
        if broker is None:
            out[workload.name] = {"error": info.get("reason")}
            continue
        try:
            tp.run_one(workload, broker, 0, two)
            profiling.toggle(broker.proc.pid, stats, stop=False)
            result = tp.run_one(workload, broker, 1, two)
            written = profiling.toggle(broker.proc.pid, stats, stop=True)
        finally:
            tp.stop_broker(broker, keep=False)
        if not written:
            out[workload.name] = {"error": f"no profile written; see {broker.proc.log_path}"}
            continue
        costs = profiling.top_costs(stats, top)
        costs["run"] = {k: result.get(k) for k in ("msgs_per_s", "commit_p50_ms", "error")}
        out[workload.name] = costs
        say(f"  {workload.name}: busy {costs['busy_s']} s, waiting in select {costs['idle_s']} s")
        for row in costs["top"][:12]:
            share, own, calls = row["busy_share"], row["own_s"], row["calls"]
            say(f"    {share:>6.1%} {own:>7.2f} s {calls:>9}  {row['fn']}")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    quick, backlog = "2 rounds x 3 s, 64 MiB backlog", "read_committed backlog, MiB (512; 64)"
    parser = tp.arg_parser(__doc__, WORKLOADS, quick, backlog)
    parser.add_argument(
        "--profile",
        choices=["auto", "on", "off"],
        default="auto",
        help="profile tierlog afterwards: auto = for the workloads where it was slower",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    procs.install_signal_handlers()
    plan = make_plan(args.quick, args.backlog_mb)
    chosen = tp.select(WORKLOADS, args.workloads)
    run_dir = tp.WORK / "runs" / time.strftime("%Y%m%d-%H%M%S-txn")
    report = tp.new_report("transactions", args.quick, plan)
    report.data["schedule"] = {
        "commit_every_s": COMMIT_EVERY_S,
        "commit_every_records": COMMIT_EVERY_N,
        "backlog_txn_records": BACKLOG_TXN_RECORDS,
        "backlog_abort_every": BACKLOG_ABORT_EVERY,
    }
    say(f"transactions bench: {'quick' if args.quick else 'full'} run, logs in {run_dir}")
    tp.measure(report, chosen, plan, run_dir, args.only, args.kafka_version, args.keep, warm_up)
    for name, figures in report.data["workloads"].items():
        for broker in ("tierlog", "kafka"):
            for error in figures.get(broker, {}).get("round_errors", []):
                if error.startswith(InexactRead.__name__):
                    report.fail(f"{name} on {broker}: {error}")
    if args.profile == "on" and args.only != "kafka":
        profiled = chosen
    elif args.profile == "auto" and "interrupted" not in report.data:
        profiled = [w for w in chosen if w.name in slower(report.data)]
    else:
        profiled = []
    if profiled:
        try:
            report.data["profile"] = profile_tierlog(profiled, plan, run_dir)
        except (KeyboardInterrupt, SystemExit) as exc:
            report.data["interrupted"] = type(exc).__name__
    return tp.finish(report)


if __name__ == "__main__":
    sys.exit(main())
