"""What authorization costs a producer: tierlog with 10,000 ACLs vs tierlog with no authorizer.

Two single-node tierlog brokers run side by side, the same workloads alternating between
them (``bench/throughput.py``'s producers and latency probe, confluent-kafka):

  no authorizer   ``authorizer.class.name`` unset: every request allowed without a lookup.
  10,000 ACLs     ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``, not a
                  super user, 10,000 ACLs of 100 other principals written into the metadata
                  store before it starts, half LITERAL (``topic-<i>``), half PREFIXED
                  (``team-<i>-``), plus the producer's own: ``User:ANONYMOUS`` may do
                  anything to topics prefixed ``bench-``, so every request is decided by a
                  prefixed match among the 10,000.

Workloads: ``paper_nobatch`` (one 200-byte record per produce request: the most checks per
byte), ``modern_acks1`` (1 KiB records, linger 5 ms, acks=1) and ``latency`` (p99 of
produce to delivery at 2,000 msgs/s). The goal (issue 22): at most 5% cost, i.e. a ratio
of the medians (ACLs / none) >= 0.95 for throughput and <= 1.05 for p99. Quick: 3 rounds of
3 s (latency: 5 s); full: 5 rounds of 10 s each, latency too, since the margin is as small
as the spread between rounds. The LAST line is the JSON report (``bench/reporting.py``).

    .venv/bin/python bench/acl_produce.py --quick
    .venv/bin/python bench/acl_produce.py
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import procs
import throughput as tp
import tierlog_ref
from procs import RssSampler
from reporting import HIGHER, LOWER, Report
from workloads import Plan, Target

from tierlog.broker.coordination.local import LocalCoordinator
from tierlog.broker.coordination.local_security import LocalAclStore
from tierlog.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

ACL_COUNT = 10_000
NONE, ACLS = "no authorizer", "10,000 ACLs"
SECURED = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
ALLOW = AclPermissionType.ALLOW
# Latency too in every round (throughput.py measures it once): its p99 is a median here.
WORKLOADS = [
    replace(w, repeat=True)
    for w in tp.WORKLOADS
    if w.name in ("paper_nobatch", "modern_acks1", "latency")
]
GOALS = {HIGHER: 0.95, LOWER: 1.05}


def acls(count: int) -> dict[ResourcePattern, AccessControlEntry]:
    """``count`` ACLs of 100 principals, half literal, half prefixed; then the producer's."""
    out = {}
    for i in range(count):
        principal = f"User:user-{i % 100}"
        if i % 2:
            pattern = ResourcePattern(ResourceType.TOPIC, f"team-{i}-", PatternType.PREFIXED)
        else:
            pattern = ResourcePattern(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL)
        operation = AclOperation.READ if i % 3 else AclOperation.WRITE
        out[pattern] = AccessControlEntry(principal, "*", operation, ALLOW)
    producer = ResourcePattern(ResourceType.TOPIC, "bench-", PatternType.PREFIXED)
    out[producer] = AccessControlEntry("User:ANONYMOUS", "*", AclOperation.ALL, ALLOW)
    return out


async def write_acls(data_dir: Path, count: int) -> None:
    """Into the single node's metadata store, before its broker first runs."""
    coordinator = LocalCoordinator(data_dir)
    try:
        store = LocalAclStore(coordinator)
        for pattern, entry in acls(count).items():
            await store.update(pattern, lambda current, e=entry: current | {e})
    finally:
        await coordinator.stop()


def start(name: str, run_dir: Path, extra: dict[str, str], count: int | None) -> tp.Broker:
    """A broker; with ``count`` (0 included), ``count`` ACLs and the producer's written
    first."""
    data = run_dir / "data"
    if count is not None:
        data.mkdir(parents=True)
        began = time.monotonic()
        asyncio.run(write_acls(data, count))
        tp.say(f"[{name}] {count + 1} ACLs written in {time.monotonic() - began:.1f} s")
    proc, bootstrap, data = tierlog_ref.start_tierlog(run_dir, extra=extra)
    ready = procs.wait_ready(proc, bootstrap, tp.READY_TIMEOUT)
    tp.say(f"[{name}] ready on {bootstrap} after {ready} s (pid {proc.pid})")
    info = {"available": True, "bootstrap": bootstrap, "ready_s": ready, "log": str(proc.log_path)}
    sampler = RssSampler(proc.pid).start()
    return tp.Broker(Target(name, bootstrap, proc.pid, data), proc, sampler, info)


def plan_of(quick: bool) -> Plan:
    """Producers and the latency probe only (no backlog, no soak)."""
    seconds = 3.0 if quick else 10.0
    return Plan(
        produce_seconds=seconds,
        produce_max_messages=10_000_000,  # time is the bound
        backlog_bytes=0,
        backlog_seconds=0.0,
        consume_seconds=0.0,
        latency_rate=2000,
        latency_seconds=5.0 if quick else 10.0,
        soak_bytes=0,
        soak_seconds=0.0,
        rounds=3 if quick else 5,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 3 s (a smoke test)")
    parser.add_argument("--acls", type=int, default=ACL_COUNT, help="ACLs besides the producer's")
    args = parser.parse_args(argv)
    procs.install_signal_handlers()
    plan = plan_of(args.quick)
    report = Report("acl_produce", quick=args.quick)
    report.data.update(plan=asdict(plan), acls=args.acls, brokers={}, workloads={})
    run_dir = tp.WORK / "runs" / time.strftime("acl-%Y%m%d-%H%M%S")
    brokers: dict[str, tp.Broker] = {}
    try:
        brokers[NONE] = start(NONE, run_dir / "none", {}, None)
        brokers[ACLS] = start(ACLS, run_dir / "acls", SECURED, args.acls)
        for broker in brokers.values():
            tp.warm_up(broker, plan)
        order = [ACLS, NONE]
        for workload in WORKLOADS:
            tp.say(f"{workload.name}:")
            rounds: dict[str, list[dict[str, Any]]] = {ACLS: [], NONE: []}
            for round_no in range(plan.rounds if workload.repeat else 1):
                for name in order if round_no % 2 == 0 else order[::-1]:
                    result = tp.run_one(workload, brokers[name], round_no, plan)
                    rounds[name].append(result)
                    tp.say(tp.describe(workload.name, f"{name} #{round_no + 1}", result))
                    if "error" in result:
                        report.fail(f"{workload.name} on {name}: {result['error']}")
            report.data["workloads"][workload.name] = rounds
            report.side_by_side(
                workload.name,
                {name: [r.get(workload.headline) for r in rounds[name]] for name in (ACLS, NONE)},
                unit=workload.headline,
                better=workload.better,
                goal=GOALS[workload.better],
            )
            order.reverse()
    except (KeyboardInterrupt, SystemExit) as exc:
        report.data["interrupted"] = type(exc).__name__
    finally:
        for name, broker in brokers.items():
            report.data["brokers"][name] = {**broker.info, **tp.stop_broker(broker, keep=False)}
    return report.finish(interrupted=report.data.pop("interrupted", None))


if __name__ == "__main__":
    sys.exit(main())
