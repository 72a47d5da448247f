"""What security costs, tierlog vs Apache Kafka: produce, consume and logins over SASL_SSL.

Issue 22's figures. Two single-node brokers, tierlog and Kafka (KRaft, ``kafka_ref``),
each with three listeners on loopback:

  PLAINTEXT       the reference: no TLS, no login (and zero-copy fetch on both)
  SASL_PLAINTEXT  SCRAM-SHA-256 logins without TLS (what a login itself costs)
  SASL_SSL        TLS (a PEM keystore from ``tierlog.security.local_ca``, an EC P-256
                  key; both brokers load the same file) and SCRAM-SHA-256

One SCRAM user, created before each broker starts, as an operator does: ``tierlog users
add --data-dir`` for tierlog, ``kafka-storage format --add-scram`` for Kafka. The same
clients talk to both:

  modern_acks1    confluent-kafka producer, 1 KiB records, linger 5 ms, acks=1
                  (``bench/throughput.py``'s), on PLAINTEXT and on SASL_SSL
  consumer        confluent-kafka reading a backlog of 200-byte records from offset 0,
                  on PLAINTEXT and on SASL_SSL
  logins          new connections, each a TCP connect, the TLS handshake (SASL_SSL), a
                  SaslHandshake and a SCRAM-SHA-256 exchange, then closed; 8 at a time
                  from one asyncio client (tierlog's ``AsyncConnection``), on
                  SASL_PLAINTEXT and SASL_SSL. The client remembers the salted password
                  per salt (4,096 PBKDF2 rounds it would otherwise spend on every login),
                  so that the brokers, not the client, are measured. Besides logins/s it
                  reports the broker's CPU per login.

Under TLS a fetch cannot use sendfile on either broker (no kTLS; Kafka: KAFKA-2561):
both read the segment bytes and encrypt them in the process.

The rounds alternate between the brokers and between the listeners. Side by side: tierlog
over Kafka on each listener (goal >= 1.0 over SASL_SSL), and each broker's SASL_SSL over
its PLAINTEXT (what security costs it). Quick: 3 rounds of 3 s and a 32 MiB backlog; full:
3 rounds of 10 s and a 256 MiB backlog. ``--no-kafka`` runs tierlog alone. The LAST line
is the JSON report (``bench/reporting.py``).

    .venv/bin/python bench/tls.py --quick
    .venv/bin/python bench/tls.py
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import kafka_ref
import procs
import throughput as tp
import tierlog_ref
import workloads as wl
from procs import RssSampler, free_port
from reporting import LOWER, Report
from workloads import Plan, Target

from tierlog.client.async_connection import AsyncConnection
from tierlog.security import scram_client
from tierlog.security.client_config import ClientSecurity
from tierlog.security.local_ca import LocalCa

PLAIN, SASL, SASL_TLS = "PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"
LISTENERS = (PLAIN, SASL, SASL_TLS)
TIERLOG, KAFKA = "tierlog", "kafka"
MECHANISM = "SCRAM-SHA-256"
USER, PASSWORD = "bench", "bench-secret"  # a throwaway broker's throwaway user
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
PRODUCE = next(w for w in tp.WORKLOADS if w.name == "modern_acks1")
LOGINS_AT_ONCE = 8
MiB = 1 << 20


def _read(target: Target, topic: str, plan: Plan, _: dict[str, Any]) -> dict[str, Any]:
    return wl.consume_backlog(target, topic, plan)


def consumer(listener: str) -> tp.Workload:
    """The backlog consumer on a topic of the listener's own (they share a broker)."""
    topic = f"bench-consumer-{listener.lower()}"
    write = tp.backlog_reader(topic, lambda t, n, p: wl.write_backlog(t, n, p, 200), _read)
    return tp.Workload("consumer", write, 22_000)


def logins(broker: tp.Broker, round_no: int, plan: Plan) -> dict[str, Any]:
    """New connections that log in, for ``plan.produce_seconds``; logins/s and failures."""
    target = broker.target
    security = ClientSecurity.from_config(target.client_conf)
    host, port = target.bootstrap.rsplit(":", 1)
    return asyncio.run(_logins(host, int(port), security, plan.produce_seconds))


async def _logins(host: str, port: int, security: ClientSecurity, seconds: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    done, failed, errors = 0, 0, set()
    stop_at = loop.time() + seconds

    async def one_after_another() -> None:
        nonlocal done, failed
        while loop.time() < stop_at:
            try:
                connection = await AsyncConnection.open(host, port, security=security)
            except OSError as exc:
                failed += 1
                errors.add(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.01)
                continue
            await connection.close()
            done += 1

    started, cpu0 = time.monotonic(), time.process_time()
    await asyncio.gather(*(one_after_another() for _ in range(LOGINS_AT_ONCE)))
    wall = time.monotonic() - started
    result: dict[str, Any] = {
        "logins": done,
        "logins_per_s": round(done / wall, 1),
        "failed": failed,
        "client_cpu_s": round(time.process_time() - cpu0, 2),
    }
    if errors:
        result["errors"] = sorted(errors)[:3]
    if failed and not done:
        result["error"] = f"no login succeeded: {sorted(errors)[:1]}"
    return result


LOGINS = tp.Workload("logins", logins, headline="logins_per_s")


def _remember_salted_passwords() -> None:
    # The client's PBKDF2 (4,096 rounds of HMAC-SHA-256 per login) would otherwise be the
    # bottleneck of the logins workload; a broker never runs it on a login (it keeps the
    # stored key and server key).
    scram_client.hi = functools.lru_cache(maxsize=16)(scram_client.hi)


def plan_of(quick: bool) -> Plan:
    seconds = 3.0 if quick else 10.0
    return Plan(
        produce_seconds=seconds,
        produce_max_messages=10_000_000,  # time is the bound
        backlog_bytes=(32 if quick else 256) * MiB,
        backlog_seconds=60.0,
        consume_seconds=60.0,
        latency_rate=0,
        latency_seconds=0.0,
        soak_bytes=0,
        soak_seconds=0.0,
        rounds=3,
    )


def _client_conf(listener: str, ca: Path) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": listener}
    if listener != PLAIN:
        conf.update({"sasl.mechanism": MECHANISM, "sasl.username": USER, "sasl.password": PASSWORD})
    if listener == SASL_TLS:
        conf["ssl.ca.location"] = str(ca)
    return conf


def _security_properties(keystore: Path) -> dict[str, str]:
    """The same keys for both brokers: Kafka's names are tierlog's."""
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": MECHANISM,
    }
    for listener in (SASL, SASL_TLS):
        props[f"listener.name.{listener.lower()}.{MECHANISM.lower()}.sasl.jaas.config"] = (
            SCRAM_LOGIN
        )
    return props


def _as_targets(
    name: str, broker: tp.Broker, ports: dict[str, int], ca: Path
) -> dict[str, tp.Broker]:
    """One broker seen as one target per listener (one process, log and page cache)."""
    targets = {}
    for listener, port in ports.items():
        target = Target(
            f"{name} {listener}",
            f"127.0.0.1:{port}",
            broker.target.pid,
            broker.target.data_dir,
            _client_conf(listener, ca),
        )
        targets[listener] = replace(broker, target=target, info=dict(broker.info))
    return targets


def start_tierlog(run_dir: Path, keystore: Path) -> tp.Broker:
    data = run_dir / "data"
    data.mkdir(parents=True)
    add = [str(tierlog_ref.tierlog_command()), "users", "add", USER, "--mechanism", MECHANISM]
    add += ["--password-file", "-", "--data-dir", str(data)]
    subprocess.run(add, input=PASSWORD, text=True, check=True, capture_output=True, timeout=60)
    ports = {listener: free_port() for listener in LISTENERS}
    extra = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        **_security_properties(keystore),
    }
    proc, _, data = tierlog_ref.start_tierlog(run_dir, extra=extra)
    return _ready(TIERLOG, proc, ports, data)


def start_kafka(run_dir: Path, keystore: Path, version: str) -> tp.Broker:
    dist = kafka_ref.fetch_kafka(tp.WORK, version)
    ports = {listener: free_port() for listener in LISTENERS}
    scram = f"{MECHANISM}=[name={USER},password={PASSWORD}]"
    proc, _ = kafka_ref.start_kafka(
        dist,
        run_dir,
        _security_properties(keystore),
        listeners=ports,
        format_args=("--add-scram", scram),
    )
    broker = _ready(KAFKA, proc, ports, run_dir / "data")
    broker.info["version"] = dist.version
    return broker


def _ready(name: str, proc: procs.ManagedProcess, ports: dict[str, int], data: Path) -> tp.Broker:
    bootstrap = f"127.0.0.1:{ports[PLAIN]}"
    try:
        ready = procs.wait_ready(proc, bootstrap, tp.READY_TIMEOUT)
    except procs.BrokerNotReady:
        proc.stop()
        raise
    tp.say(f"[{name}] ready after {ready} s (pid {proc.pid}), listeners {ports}")
    info = {"available": True, "ports": ports, "ready_s": ready, "log": str(proc.log_path)}
    sampler = RssSampler(proc.pid).start()
    return tp.Broker(Target(name, bootstrap, proc.pid, data), proc, sampler, info)


# (workload, its listeners): the producer and consumer compare TLS+SASL with nothing, the
# logins compare a login with and without TLS.
WORKLOADS: list[tuple[Callable[[str], tp.Workload], tuple[str, ...]]] = [
    (lambda _: PRODUCE, (SASL_TLS, PLAIN)),
    (consumer, (SASL_TLS, PLAIN)),
    (lambda _: LOGINS, (SASL_TLS, SASL)),
]


def _per_login(result: dict[str, Any]) -> float | None:
    logins_done = result.get("logins")
    return round(result["broker_cpu_s"] * 1000 / logins_done, 3) if logins_done else None


def warm_up(broker: tp.Broker, listeners: dict[str, tp.Broker], plan: Plan) -> None:
    """Not counted: ``throughput.warm_up`` on PLAINTEXT, then produce over SASL_SSL and
    logins on both SASL listeners, so the JVM has compiled its TLS and SCRAM paths too
    (Kafka's first SASL_SSL logins cost it several times its later ones)."""
    tp.warm_up(broker, plan)
    short = replace(plan, produce_seconds=1.5)
    for listener in (SASL_TLS, SASL):
        try:
            if listener == SASL_TLS:
                settings = {**tp.MODERN, "acks": "1"}
                wl.produce_throughput(
                    listeners[listener].target, "bench-warm-up-tls", short, 1024, settings
                )
            logins(listeners[listener], 0, short)
        except Exception as exc:  # the workloads will show the problem in detail
            tp.say(f"[{broker.target.name}] {listener} warm-up failed: {exc}")


def _describe(workload: str, target: str, result: dict[str, Any]) -> str:
    if "logins_per_s" not in result:
        return tp.describe(workload, target, result)
    return (
        f"  {workload:<15} {target:<24} {result['logins_per_s']:>9,.1f} logins/s"
        f"  failed {result['failed']}  cpu b {result['broker_cpu_s']} c {result['client_cpu_s']}"
    )


def measure(brokers: dict[str, dict[str, tp.Broker]], plan: Plan, report: Report) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for choose, listeners in WORKLOADS:
        workload = choose(PLAIN)
        tp.say(f"{workload.name}:")
        order = [(b, listener) for listener in listeners for b in brokers]
        rounds: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key in order}
        for round_no in range(plan.rounds):
            for broker_name, listener in order if round_no % 2 == 0 else order[::-1]:
                target = brokers[broker_name][listener]
                result = tp.run_one(choose(listener), target, round_no, plan)
                rounds[(broker_name, listener)].append(result)
                tp.say(_describe(workload.name, f"{target.target.name} #{round_no + 1}", result))
                if "error" in result:
                    report.fail(f"{workload.name} on {target.target.name}: {result['error']}")
        results[workload.name] = {f"{b} {listener}": r for (b, listener), r in rounds.items()}
        headline = {key: [r.get(workload.headline) for r in rs] for key, rs in rounds.items()}
        figure = functools.partial(report.side_by_side, unit=workload.headline)
        if KAFKA in brokers:
            for listener in listeners:
                figure(
                    f"{workload.name} {listener}",
                    {b: headline[(b, listener)] for b in (TIERLOG, KAFKA)},
                    better=workload.better,
                    goal=1.0 if listener == SASL_TLS else None,
                )
        secured, reference = listeners
        for b in brokers:
            figure(
                f"{workload.name} {b} {secured}/{reference}",
                {secured: headline[(b, secured)], reference: headline[(b, reference)]},
                better=workload.better,
            )
        if workload is LOGINS and KAFKA in brokers:
            for listener in listeners:
                report.side_by_side(
                    f"broker CPU per login {listener}",
                    {b: [_per_login(r) for r in rounds[(b, listener)]] for b in (TIERLOG, KAFKA)},
                    unit="ms",
                    better=LOWER,
                )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 3 s (a smoke test)")
    parser.add_argument("--no-kafka", action="store_true", help="tierlog alone")
    parser.add_argument("--kafka-version", default="auto")
    args = parser.parse_args(argv)
    procs.install_signal_handlers()
    _remember_salted_passwords()
    plan = plan_of(args.quick)
    report = Report("tls", quick=args.quick)
    report.data.update(plan=asdict(plan), brokers={}, workloads={}, mechanism=MECHANISM)
    run_dir = tp.WORK / "runs" / time.strftime("tls-%Y%m%d-%H%M%S")
    started: dict[str, tp.Broker] = {}
    try:
        ca = LocalCa.create()
        run_dir.mkdir(parents=True, exist_ok=True)
        ca_path = ca.write_ca(run_dir / "ca.pem")
        keystore = ca.issue("localhost").write_pem_keystore(run_dir / "broker.pem")
        started[TIERLOG] = start_tierlog(run_dir / TIERLOG, keystore)
        if not args.no_kafka:
            try:
                started[KAFKA] = start_kafka(run_dir / KAFKA, keystore, args.kafka_version)
            except (kafka_ref.KafkaUnavailable, procs.BrokerNotReady) as exc:
                report.fail(f"Kafka did not start, tierlog runs alone: {exc}")
        brokers = {
            name: _as_targets(name, broker, broker.info["ports"], ca_path)
            for name, broker in started.items()
        }
        for name, broker in started.items():
            warm_up(broker, brokers[name], plan)
        report.data["workloads"] = measure(brokers, plan, report)
    except (KeyboardInterrupt, SystemExit) as exc:
        report.data["interrupted"] = type(exc).__name__
    finally:
        for name, broker in started.items():
            report.data["brokers"][name] = {**broker.info, **tp.stop_broker(broker, keep=False)}
    return report.finish(interrupted=report.data.pop("interrupted", None))


if __name__ == "__main__":
    sys.exit(main())
