"""What TLS costs a client: produce and consume over an SSL listener vs a PLAINTEXT one.

One single-node tierlog broker with two listeners (``PLAINTEXT`` and ``SSL``, a PEM
keystore from ``tierlog.security.local_ca``), so both paths share one process, one log
and one page cache; the workloads alternate between the two listeners, round by round
(``bench/throughput.py``'s producers and backlog consumer, confluent-kafka):

  modern_acks1  1 KiB records, linger 5 ms, acks=1
  consumer      a backlog of 200-byte records read from offset 0

Under TLS a fetch cannot use sendfile (no kTLS, as Kafka: KAFKA-2561): the broker reads
the segment bytes with pread and encrypts them; under PLAINTEXT they go out with sendfile.
The report is the ratio SSL / PLAINTEXT of the medians. Quick: 3 rounds of 3 s and a
32 MiB backlog; full: 3 rounds of 10 s and a 256 MiB backlog. tierlog only for now (Kafka
over SSL side by side is the next step of issue 22's figures). The LAST line is the JSON
report (``bench/reporting.py``).

    .venv/bin/python bench/tls.py --quick
    .venv/bin/python bench/tls.py
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import procs
import throughput as tp
import tierlog_ref
import workloads as wl
from procs import RssSampler, free_port
from reporting import Report
from workloads import Plan, Target

from tierlog.security.local_ca import LocalCa

PLAIN, TLS = "PLAINTEXT", "SSL"
PRODUCE = next(w for w in tp.WORKLOADS if w.name == "modern_acks1")
MiB = 1 << 20


def _read(target: Target, topic: str, plan: Plan, _: dict[str, Any]) -> dict[str, Any]:
    return wl.consume_backlog(target, topic, plan)


def consumer(listener: str) -> tp.Workload:
    """The backlog consumer on a topic of the listener's own (both share one broker)."""
    topic = f"bench-consumer-{listener.lower()}"
    write = tp.backlog_reader(topic, lambda t, n, p: wl.write_backlog(t, n, p, 200), _read)
    return tp.Workload("consumer", write, 22_000)


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


def start(run_dir: Path) -> dict[str, tp.Broker]:
    """One broker, seen as two targets: its PLAINTEXT and its SSL listener."""
    run_dir.mkdir(parents=True, exist_ok=True)
    ca = LocalCa.create()
    ca_path = ca.write_ca(run_dir / "ca.pem")
    keystore = ca.issue("localhost").write_pem_keystore(run_dir / "broker.pem")
    ports = {PLAIN: free_port(), TLS: free_port()}
    extra = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.location": str(keystore),
    }
    proc, _, data = tierlog_ref.start_tierlog(run_dir, extra=extra)
    bootstrap = f"127.0.0.1:{ports[PLAIN]}"
    ready = procs.wait_ready(proc, bootstrap, tp.READY_TIMEOUT)
    tp.say(f"tierlog ready after {ready} s (pid {proc.pid}), listeners {ports}")
    info = {"available": True, "ports": ports, "ready_s": ready, "log": str(proc.log_path)}
    sampler = RssSampler(proc.pid).start()
    plain = tp.Broker(Target(PLAIN, bootstrap, proc.pid, data), proc, sampler, info)
    tls_conf: dict[str, Any] = {"security.protocol": "SSL", "ssl.ca.location": str(ca_path)}
    tls_target = Target(TLS, f"127.0.0.1:{ports[TLS]}", proc.pid, data, tls_conf)
    return {PLAIN: plain, TLS: replace(plain, target=tls_target, info=dict(info))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 3 s (a smoke test)")
    args = parser.parse_args(argv)
    procs.install_signal_handlers()
    plan = plan_of(args.quick)
    report = Report("tls", quick=args.quick)
    report.data.update(plan=asdict(plan), brokers={}, workloads={})
    run_dir = tp.WORK / "runs" / time.strftime("tls-%Y%m%d-%H%M%S")
    listeners: dict[str, tp.Broker] = {}
    try:
        listeners = start(run_dir)
        tp.warm_up(listeners[PLAIN], plan)
        order = [TLS, PLAIN]
        for name_of_workload in ("modern_acks1", "consumer"):
            chosen = {
                name: PRODUCE if name_of_workload == "modern_acks1" else consumer(name)
                for name in (TLS, PLAIN)
            }
            workload = chosen[PLAIN]
            tp.say(f"{workload.name}:")
            rounds: dict[str, list[dict[str, Any]]] = {TLS: [], PLAIN: []}
            for round_no in range(plan.rounds):
                for name in order if round_no % 2 == 0 else order[::-1]:
                    # Each listener's own topics: the consumer's backlog is written once
                    # per listener (round 0), over that listener.
                    broker = listeners[name]
                    result = tp.run_one(chosen[name], broker, round_no, plan)
                    rounds[name].append(result)
                    tp.say(tp.describe(workload.name, f"{name} #{round_no + 1}", result))
                    if "error" in result:
                        report.fail(f"{workload.name} on {name}: {result['error']}")
            report.data["workloads"][workload.name] = rounds
            report.side_by_side(
                workload.name,
                {name: [r.get(workload.headline) for r in rounds[name]] for name in (TLS, PLAIN)},
                unit=workload.headline,
                better=workload.better,
            )
            order.reverse()
    except (KeyboardInterrupt, SystemExit) as exc:
        report.data["interrupted"] = type(exc).__name__
    finally:
        if listeners:
            broker = listeners[PLAIN]
            report.data["brokers"]["tierlog"] = {
                **broker.info,
                **tp.stop_broker(broker, keep=False),
            }
    return report.finish(interrupted=report.data.pop("interrupted", None))


if __name__ == "__main__":
    sys.exit(main())
