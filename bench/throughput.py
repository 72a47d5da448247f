"""Broker throughput, latency and memory: tierlog vs Apache Kafka 4.x, side by side in one run.

Both brokers run as single nodes on 127.0.0.1 (Kafka in KRaft mode, broker+controller, fetched
from Maven Central by ``bench/kafka_ref.py``); both are started, warmed up (a few seconds of
produce, uncounted: the JVM's JIT), then every workload runs against one broker, then the
other, with the same client, confluent-kafka (librdkafka), on a fresh one-partition topic
that is deleted afterwards. Throughput workloads run ``rounds`` times (quick 3 x 3 s, full
3 x 10 s), brokers alternating; each workload's headline figure is reported as the median of
its rounds with their spread (min-max) and the ratio of the medians (``bench/reporting.py``),
and the best round is kept beside it, as before.

  paper_nobatch   200-byte records, one record per produce request (``batch.num.messages=1``,
                  ``linger.ms=0``), ``acks=0`` like the paper's producer, which did not wait
                  for acknowledgements: the clock stops when the broker's high watermark
                  shows every record. Paper: 50,000 msgs/s.
  paper_batch50   the same with 50 records per request (``batch.num.messages=50``,
                  ``linger.ms=5``). Paper: 400,000 msgs/s.
  modern_acks1    1 KiB records, ``linger.ms=5``, ``batch.size=1 MiB``, ``acks=1``.
  modern_acksall  the same with ``acks=all``.
  consumer        a backlog of 200-byte records (``--backlog-mb``) written by a batched
                  producer, then read from offset 0 by one assigned consumer, every round.
                  Rate from the first record on; the start-up time is reported beside it.
                  Paper: 22,000 msgs/s.
  latency         produce() -> delivery-callback latency, p50/p99, 200-byte records at
                  2,000 msgs/s, ``acks=1``, ``linger.ms=0``.
  soak            ``--soak-gb`` of 1 KiB records produced while a consumer reads them
                  concurrently; the broker's RSS every 0.25 s (is it flat?).

Throughout, the broker's RSS (VmRSS of its process tree, from /proc) is sampled every 0.25 s
and reported per workload (start/peak/end), with the broker's and the client's CPU seconds
(both share 2 cores: a client near 100% of one core is the limit, not the broker). Producer
workloads count the record batches in the broker's segment files, which shows that both
brokers received the same batching. ``x_paper`` = msgs/s divided by the paper's figure
(Kreps, Narkhede, Rao: "Kafka: a Distributed Messaging System for Log Processing", 2011).

Run (from the repository root)::

    .venv/bin/python bench/throughput.py --quick           # ~1 minute per broker
    .venv/bin/python bench/throughput.py                   # full: 2 GiB backlog, 10 GiB soak
    .venv/bin/python bench/throughput.py --only kafka --quick --soak-gb 0.5

Human-readable lines are printed as it goes; the LAST line is one JSON object with every
figure. Read the ratios (tierlog/kafka), not the absolute numbers: both brokers and the client
share a small, noisy machine. If Kafka cannot be fetched or started, or tierlog's broker is not
available, the run says why and reports the other broker alone. Every wait has a time limit;
brokers are stopped (SIGTERM, then SIGKILL) on exit, Ctrl-C and SIGTERM included. Broker logs
are kept in ``bench/.work/runs/<time>/``; their data dirs are removed unless ``--keep``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka_ref
import procs
import reporting
import tierlog_ref
import workloads as wl
from procs import ManagedProcess, RssSampler
from reporting import HIGHER, LOWER, Report
from workloads import MiB, Plan, Target

WORK = Path(__file__).resolve().parent / ".work"  # git-ignored
GiB = 1 << 30
READY_TIMEOUT = 120.0  # JVM start plus KRaft self-election take ~3 s here; a loaded box more


def _quick_plan(backlog_mb: float | None, soak_gb: float | None) -> Plan:
    return Plan(
        produce_seconds=3.0,
        produce_max_messages=10_000_000,  # the paper's run length; time is the real bound
        backlog_bytes=int((100 if backlog_mb is None else backlog_mb) * MiB),
        backlog_seconds=60.0,
        consume_seconds=60.0,
        latency_rate=2000,
        latency_seconds=5.0,
        soak_bytes=int((soak_gb or 0.0) * GiB),
        soak_seconds=180.0,
        rounds=3,  # as many as the full run: a median, and the same for both brokers
    )


def _full_plan(backlog_mb: float | None, soak_gb: float | None) -> Plan:
    # Sized so that a full run with both brokers stays near 10 minutes on 2 cores: every
    # stage is cut at its time bound, and the figures say how much actually flowed.
    return Plan(
        produce_seconds=10.0,
        produce_max_messages=10_000_000,
        backlog_bytes=int((2048 if backlog_mb is None else backlog_mb) * MiB),
        backlog_seconds=180.0,
        consume_seconds=180.0,
        latency_rate=2000,
        latency_seconds=10.0,
        soak_bytes=int((10.0 if soak_gb is None else soak_gb) * GiB),  # the issue: 10 GB
        soak_seconds=240.0,
        rounds=3,
    )


@dataclass
class Broker:
    """A started broker with its RSS sampler."""

    target: Target
    proc: ManagedProcess
    sampler: RssSampler
    info: dict[str, Any]


@dataclass(frozen=True)
class Workload:
    """``run(broker, round, plan)``; ``repeat``: ``plan.rounds`` rounds, else one.

    ``headline`` is the figure reported side by side (median of the rounds, ``better`` says
    which way is better, ``goal`` the tierlog/kafka ratio aimed for)."""

    name: str
    run: Callable[[Broker, int, Plan], dict[str, Any]]
    paper_msgs_per_s: float | None = None  # Kreps, Narkhede, Rao: Kafka, NetDB 2011, fig. 4/5
    repeat: bool = True
    headline: str = "msgs_per_s"
    better: str = HIGHER
    goal: float | None = None


def _producer(name: str, value_size: int, settings: dict[str, Any]) -> Callable[..., Any]:
    def run(broker: Broker, round_no: int, plan: Plan) -> dict[str, Any]:
        topic = f"bench-{name}-{round_no}"  # fresh per round
        return wl.produce_throughput(broker.target, topic, plan, value_size, settings)

    return run


def backlog_reader(
    topic: str,
    write: Callable[[Target, str, Plan], dict[str, Any]],
    read: Callable[[Target, str, Plan, dict[str, Any]], dict[str, Any]],
) -> Callable[[Broker, int, Plan], dict[str, Any]]:
    """A consumer workload: ``write(target, topic, plan)`` fills the backlog once per broker
    (round 0), ``read(target, topic, plan, written)`` reads it all, from offset 0, every
    round; the topic is deleted after the last round."""

    def run(broker: Broker, round_no: int, plan: Plan) -> dict[str, Any]:
        key = f"backlog_write {topic}"
        if round_no == 0:
            broker.info[key] = write(broker.target, topic, plan)
        written = broker.info.get(key, {})
        result = read(broker.target, topic, plan, written)
        result["backlog_write_msgs_per_s"] = written.get("msgs_per_s")
        result["backlog_write_mib_per_s"] = written.get("mib_per_s")
        if round_no == plan.rounds - 1:
            wl.delete_topic(broker.target, topic)
        return result

    return run


def _read_backlog(target: Target, topic: str, plan: Plan, _: dict[str, Any]) -> dict[str, Any]:
    result = wl.consume_backlog(target, topic, plan)
    result["backlog_mib"] = round(result["backlog_msgs"] * 200 / MiB, 1)
    return result


_consumer = backlog_reader(
    "bench-consumer",
    lambda target, topic, plan: wl.write_backlog(target, topic, plan, 200),
    _read_backlog,
)


def _latency(broker: Broker, round_no: int, plan: Plan) -> dict[str, Any]:
    return wl.produce_latency(broker.target, "bench-latency", plan, value_size=200)


def _soak(broker: Broker, round_no: int, plan: Plan) -> dict[str, Any]:
    free = shutil.disk_usage(broker.target.data_dir.parent).free
    if free < plan.soak_bytes * 1.2 + GiB:
        return {"error": f"skipped: {free / GiB:.1f} GiB free on disk is too little"}
    return wl.soak(broker.target, "bench-soak", plan, 1024)


PAPER_NOBATCH = {"acks": "0", "linger.ms": 0, "batch.num.messages": 1}
PAPER_BATCH50 = {"acks": "0", "linger.ms": 5, "batch.num.messages": 50}
MODERN = {"linger.ms": 5, "batch.size": MiB}
WORKLOADS = [
    Workload("paper_nobatch", _producer("paper_nobatch", 200, PAPER_NOBATCH), 50_000),
    Workload("paper_batch50", _producer("paper_batch50", 200, PAPER_BATCH50), 400_000),
    # Issue 26 item 3: at least Kafka's rate, by the median.
    Workload("modern_acks1", _producer("modern_acks1", 1024, {**MODERN, "acks": "1"}), goal=1.0),
    Workload(
        "modern_acksall", _producer("modern_acksall", 1024, {**MODERN, "acks": "all"}), goal=1.0
    ),
    Workload("consumer", _consumer, 22_000),
    Workload("latency", _latency, repeat=False, headline="p99_ms", better=LOWER),
    Workload("soak", _soak, repeat=False, headline="produce_mib_per_s"),
]


def say(text: str) -> None:
    print(text, flush=True)


def start_kafka(version: str, run_dir: Path) -> tuple[Broker | None, dict[str, Any]]:
    """Fetch (or reuse) the jars and start Kafka; (None, reason) when it cannot."""
    info: dict[str, Any] = {"available": False}
    try:
        say(f"[kafka] jars: version {version} (cache {WORK})")
        dist = kafka_ref.fetch_kafka(WORK, version)
        fetch = {k: v for k, v in asdict(dist).items() if k != "libs"}
        info.update(version=dist.version, fetch=fetch)
        how = "cached" if dist.cached else f"{dist.download_mib} MiB in {dist.fetch_seconds} s"
        say(f"[kafka] Apache Kafka {dist.version}: {dist.jar_count} jars, {how}")
        proc, bootstrap = kafka_ref.start_kafka(dist, run_dir)
        return _ready("kafka", proc, bootstrap, run_dir / "data", info)
    except (kafka_ref.KafkaUnavailable, procs.BrokerNotReady) as exc:
        info["reason"] = str(exc)
        say(f"[kafka] unavailable: {exc}")
        return None, info


def start_tierlog(
    run_dir: Path, profile: Path | None = None
) -> tuple[Broker | None, dict[str, Any]]:
    """Start tierlog's broker (under ``bench/profiling.py``, writing ``profile``, if given);
    (None, reason) when the command is missing or fails."""
    info: dict[str, Any] = {"available": False}
    reason = tierlog_ref.unavailable_reason()
    if reason is None:
        try:
            proc, bootstrap, data = tierlog_ref.start_tierlog(run_dir, profile=profile)
            return _ready("tierlog", proc, bootstrap, data, info)
        except procs.BrokerNotReady as exc:
            reason = str(exc)
    info["reason"] = reason
    say(f"[tierlog] unavailable: {reason}")
    return None, info


def _ready(
    name: str, proc: ManagedProcess, bootstrap: str, data: Path, info: dict[str, Any]
) -> tuple[Broker | None, dict[str, Any]]:
    try:
        info["ready_s"] = procs.wait_ready(proc, bootstrap, READY_TIMEOUT)
    except procs.BrokerNotReady:
        info["stop"] = asdict(proc.stop())
        raise
    info.update(available=True, bootstrap=bootstrap, pid=proc.pid, log=str(proc.log_path))
    say(f"[{name}] ready on {bootstrap} after {info['ready_s']} s (pid {proc.pid})")
    sampler = RssSampler(proc.pid).start()
    return Broker(Target(name, bootstrap, proc.pid, data), proc, sampler, info), info


def warm_up(broker: Broker, plan: Plan) -> None:
    """A second or two of small and large records, not counted: the JVM's JIT compiles
    Kafka's hot paths in its first seconds, which would otherwise land in round 1."""
    short = replace(plan, produce_seconds=1.5)
    for i, (size, settings) in enumerate([(200, PAPER_NOBATCH), (1024, {**MODERN, "acks": "1"})]):
        try:
            wl.produce_throughput(broker.target, f"bench-warm-up-{i}", short, size, settings)
        except Exception as exc:  # the workloads will show the problem in detail
            say(f"[{broker.target.name}] warm-up failed: {exc}")


def run_one(workload: Workload, broker: Broker, round_no: int, plan: Plan) -> dict[str, Any]:
    """One workload against one broker, with RSS and CPU around it; errors become figures."""
    if not broker.proc.alive():
        return {
            "error": f"broker exited ({broker.proc.popen.returncode}); see {broker.proc.log_path}"
        }
    cpu0, t0 = procs.tree_cpu_seconds(broker.proc.pid), time.monotonic()
    try:
        result = workload.run(broker, round_no, plan)
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}"}
        traceback.print_exc(file=sys.stderr)
    broker.sampler.sample()
    result["broker_cpu_s"] = round(procs.tree_cpu_seconds(broker.proc.pid) - cpu0, 2)
    result["wall_s"] = round(time.monotonic() - t0, 2)
    result.update(broker.sampler.window(t0, time.monotonic()))
    if workload.paper_msgs_per_s and "msgs_per_s" in result:
        result["x_paper"] = round(result["msgs_per_s"] / workload.paper_msgs_per_s, 3)
    return result


def best_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the highest msgs/s (noise on a shared box only ever slows a run down),
    with every round's msgs/s beside it."""
    good = [r for r in rounds if "msgs_per_s" in r]
    if not good:
        return rounds[-1]
    best = dict(max(good, key=lambda r: float(r["msgs_per_s"])))
    if len(rounds) > 1:
        best["rounds_msgs_per_s"] = [r.get("msgs_per_s") for r in rounds]
    return best


def run_workload(
    workload: Workload, brokers: dict[str, Broker], order: list[str], plan: Plan, report: Report
) -> dict[str, Any]:
    """All rounds of one workload, brokers alternating within and across rounds; its
    headline figure goes to ``report`` side by side (medians and spreads)."""
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    for round_no in range(plan.rounds if workload.repeat else 1):
        for name in order if round_no % 2 == 0 else order[::-1]:
            result = run_one(workload, brokers[name], round_no, plan)
            rounds[name].append(result)
            tag = f"{name}" + (f" #{round_no + 1}" if workload.repeat else "")
            say(describe(workload.name, tag, result))
    figures: dict[str, Any] = {name: best_of(results) for name, results in rounds.items()}
    for name, results in rounds.items():  # a failed round is not the best one: keep it seen
        errors = [r["error"] for r in results if "error" in r]
        if errors:
            figures[name]["round_errors"] = errors
    ratio = ratios(figures)
    if ratio:
        figures["ratio_tierlog_kafka"] = ratio
        shown = "  ".join(f"{k} {v}" for k, v in ratio.items())
        say(f"  {workload.name:<15} {'ratio':<10}  {shown}  (best rounds, tierlog/kafka)")
    if len(rounds) == 2:
        figures["side_by_side"] = report.side_by_side(
            workload.name,
            {
                name: [r.get(workload.headline) for r in rounds[name]]
                for name in ("tierlog", "kafka")
            },
            unit=workload.headline,
            better=workload.better,
            goal=workload.goal,
        )
    return figures


def describe(name: str, broker: str, r: dict[str, Any]) -> str:
    """One human line for one workload on one broker."""
    head = f"  {name:<15} {broker:<10}"
    if "error" in r:
        return f"{head} ERROR {r['error']}"
    parts = []
    if "p50_ms" in r:
        parts.append(f"p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms")
        parts.append(f"at {r['rate_achieved']:,.0f}/s")
    elif "produce_mib_per_s" in r:
        parts.append(f"{r['gib']} GiB  in {r['produce_mib_per_s']:.1f} MiB/s")
        parts.append(f"out {r['consume_mib_per_s']:.1f} MiB/s")
        parts.append(f"rss before {r['rss_first_mib']:.0f} MiB, 2nd half")
        parts.append(f"{r['rss_second_half_min_mib']:.0f}-{r['rss_second_half_max_mib']:.0f} MiB")
    else:
        parts.append(f"{r['msgs_per_s']:>11,.0f} msgs/s {r['mib_per_s']:>8.2f} MiB/s")
    if r.get("first_record_s") is not None:
        parts.append(f"first record after {r['first_record_s']:.2f} s")
        if "rtt_p50_ms" in r:
            parts.append(f"fetch rtt p50 {r['rtt_p50_ms']:g} p99 {r['rtt_p99_ms']:g} ms")
    if "x_paper" in r:
        parts.append(f"x_paper {r['x_paper']:.2f}")
    if "commit_p50_ms" in r:
        parts.append(f"{r['txn_per_s']:g} txn/s, commit p50 {r['commit_p50_ms']:g} ms")
        if "rtt_p50_ms" in r:
            parts.append(f"produce rtt p50 {r['rtt_p50_ms']:g} p99 {r['rtt_p99_ms']:g} ms")
        if "coordinator_rtt_p50_ms" in r:
            parts.append(f"coordinator rtt p50 {r['coordinator_rtt_p50_ms']:g} ms")
    if "exact" in r:  # bench/transactions.py's read_committed check, passed
        parts.append("exactly the committed records")
    if "records_per_batch" in r:
        parts.append(f"{r['records_per_batch']:g} rec/batch")
    if r.get("errors"):
        parts.append(f"{r['errors']} errors")
    if "rss_peak_mib" in r:
        parts.append(f"rss {r['rss_start_mib']:.0f}/{r['rss_peak_mib']:.0f}/{r['rss_end_mib']:.0f}")
    parts.append(f"cpu b {r['broker_cpu_s']} c {r.get('client_cpu_s', '-')}")
    return head + "  " + "  ".join(parts)


RATIO_KEYS = (
    "msgs_per_s",
    "mib_per_s",
    "p50_ms",
    "p99_ms",
    "first_record_s",
    "produce_mib_per_s",
    "consume_mib_per_s",
    "rss_peak_mib",
    # bench/transactions.py
    "txn_per_s",
    "commit_p50_ms",
    "commit_p99_ms",
    "rtt_p50_ms",
    "rtt_p99_ms",
    "coordinator_rtt_p50_ms",
)


def ratios(by_broker: dict[str, dict[str, Any]]) -> dict[str, float]:
    """tierlog/kafka for every comparable figure (for *_ms and rss, above 1 is worse)."""
    t, k = by_broker.get("tierlog", {}), by_broker.get("kafka", {})
    out = {}
    for key in RATIO_KEYS:
        if isinstance(t.get(key), int | float) and isinstance(k.get(key), int | float) and k[key]:
            out[key] = round(t[key] / k[key], 3)
    return out


def arg_parser(
    doc: str | None, workloads: list[Workload], quick: str, backlog: str
) -> argparse.ArgumentParser:
    """The options of every side-by-side bench (``--quick``, ``--only``, ``--backlog-mb``,
    ``--kafka-version``, ``--workloads``, ``--keep``); the caller adds its own."""
    parser = argparse.ArgumentParser(
        description=(doc or "").splitlines()[0],
        epilog="The last line printed is one JSON object with every figure.",
    )
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--only", choices=["tierlog", "kafka"], help="run one broker only")
    parser.add_argument("--backlog-mb", type=float, help=backlog)
    parser.add_argument(
        "--kafka-version", default="auto", help="e.g. 4.3.1; auto = newest cached, else newest"
    )
    parser.add_argument(
        "--workloads", help="comma-separated subset of " + ",".join(w.name for w in workloads)
    )
    parser.add_argument("--keep", action="store_true", help="keep the brokers' data dirs")
    return parser


def select(workloads: list[Workload], names: str | None) -> list[Workload]:
    """The workloads named in ``--workloads`` (all when not given), in their own order."""
    return workloads if not names else [w for w in workloads if w.name in names.split(",")]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    quick, backlog = "short stages, 100 MiB backlog", "consumer backlog in MiB (2048; 100)"
    parser = arg_parser(__doc__, WORKLOADS, quick, backlog)
    parser.add_argument("--soak-gb", type=float, help="GiB through the soak (10; quick: 0 = off)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    procs.install_signal_handlers()
    plan = (_quick_plan if args.quick else _full_plan)(args.backlog_mb, args.soak_gb)
    chosen = [w for w in WORKLOADS if w.name != "soak" or plan.soak_bytes > 0]
    chosen = select(chosen, args.workloads)
    run_dir = WORK / "runs" / time.strftime("%Y%m%d-%H%M%S")
    report = new_report("throughput", args.quick, plan)
    report.data["paper_msgs_per_s"] = {
        w.name: w.paper_msgs_per_s for w in WORKLOADS if w.paper_msgs_per_s
    }
    say(f"throughput bench: {'quick' if args.quick else 'full'} run, logs in {run_dir}")
    measure(report, chosen, plan, run_dir, args.only, args.kafka_version, args.keep)
    return finish(report)


def new_report(bench: str, quick: bool, plan: Plan) -> Report:
    """The report's skeleton: what ran, on what, with which client."""
    report = Report(bench, quick=quick)
    report.data["plan"] = asdict(plan)
    report.data["env"].update(
        confluent_kafka=metadata.version("confluent-kafka"),
        librdkafka=confluent_kafka.libversion()[0],
        tierlog=reporting.tierlog_source(),
    )
    report.data.update(brokers={}, workloads={})
    return report


def measure(
    report: Report,
    chosen: list[Workload],
    plan: Plan,
    run_dir: Path,
    only: str | None,
    kafka_version: str,
    keep: bool,
    warm: Callable[[Broker, Plan], None] | None = None,
) -> None:
    """Start the brokers (``only`` one of them, if set), warm them up (``warm``, default
    ``warm_up``), run ``chosen`` on both (``run_workload``), stop them; fills
    ``report.data["brokers"]`` and ``["workloads"]``. An interrupt (Ctrl-C, SIGTERM/SIGHUP
    via ``procs``) is recorded as ``interrupted``. Both brokers get the same warm-up and the
    same rounds."""
    data = report.data
    brokers: dict[str, Broker] = {}
    try:
        for name in ("kafka", "tierlog"):
            if only not in (None, name):
                continue
            if name == "kafka":
                broker, info = start_kafka(kafka_version, run_dir / "kafka")
            else:
                broker, info = start_tierlog(run_dir / "tierlog")
            data["brokers"][name] = info
            if broker is not None:
                brokers[name] = broker
        if not brokers:
            say("no broker available; nothing to measure")
        order = list(brokers)
        for broker in brokers.values():
            (warm or warm_up)(broker, plan)
        for workload in chosen if brokers else []:
            say(f"{workload.name}:")
            data["workloads"][workload.name] = run_workload(workload, brokers, order, plan, report)
            order.reverse()  # who goes first alternates, to spread drift over both
    except (KeyboardInterrupt, SystemExit) as exc:  # SIGINT, or SIGTERM/SIGHUP via procs
        data["interrupted"] = type(exc).__name__
        say(f"interrupted ({type(exc).__name__}); stopping the brokers")
    finally:
        for name, broker in brokers.items():
            data["brokers"][name].update(stop_broker(broker, keep))


def stop_broker(broker: Broker, keep: bool) -> dict[str, Any]:
    """Stop the sampler and the broker, remove its data unless ``keep``: RSS and stop info."""
    broker.sampler.stop()
    whole = broker.sampler.window(0.0, time.monotonic())
    stop = broker.proc.stop()
    name = broker.target.name
    say(f"[{name}] stopped: clean={stop.clean} rc={stop.returncode} in {stop.seconds} s")
    data = broker.target.data_dir
    if not keep and data.exists():
        shutil.rmtree(data, ignore_errors=True)
    return {"rss": whole, "stop": asdict(stop)}


def finish(report: Report) -> int:
    """The best-round summary, then the side-by-side table and the JSON line (last); the
    exit code (130 if interrupted, 1 if a check failed)."""
    summarise(report.data)
    return report.finish(interrupted=report.data.pop("interrupted", None))


def summarise(data: dict[str, Any]) -> None:
    """The best rounds, as reported before medians: msgs/s (or p99) per broker, the ratio,
    and x_paper."""
    say("best rounds (msgs/s; latency: p99 ms; soak: produce MiB/s):")
    for name, figures in data["workloads"].items():
        key = {"latency": "p99_ms", "soak": "produce_mib_per_s"}.get(name, "msgs_per_s")
        cells = []
        for broker in ("kafka", "tierlog"):
            value = figures.get(broker, {}).get(key)
            if value is not None:
                paper = figures[broker].get("x_paper")
                cells.append(f"{broker} {value:,.2f}" + (f" (x_paper {paper})" if paper else ""))
        ratio = figures.get("ratio_tierlog_kafka", {}).get(key)
        if ratio is not None:
            cells.append(f"tierlog/kafka {ratio}")
        say(f"  {name:<15} " + ("  ".join(cells) or "no figures (see the errors above)"))


if __name__ == "__main__":
    sys.exit(main())
