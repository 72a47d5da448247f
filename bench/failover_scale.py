"""Failover at scale (tierlog only): how a broker failure's cost grows with the partition count.

For each total in ``--partitions`` (default 50, 500, 2000; 50 of them are
``__consumer_offsets``, the rest topics of 50 partitions, all RF 3) a fresh ZooKeeper and 3
tierlog brokers (``bench/cluster.py``'s ``start_tierlog``, ``zookeeper.session.timeout.ms``
2,000, ZooKeeper ``tickTime`` 200 ms) are started, every partition is brought to 3 in-sync
replicas, and then:

  refresh    one full read of the cluster state as a broker's cache does it
             (``ZkCoordinator._read_snapshot`` on a session of this process, watches set):
             median and best of 5, after one warm-up read.
  failover   a broker that is not the controller gets SIGKILL (``--rounds`` times, restarted
             and back in every ISR between rounds). Measured from the kill:
             ``session_end_s`` when ``/brokers/ids/<victim>`` goes (a watch of this process),
             ``metadata_all_leaders_s`` when every partition the victim led has another
             leader in the Metadata of EVERY live broker (each polled on its own connection
             every 50 ms), ``metadata_all_isr_s`` when no partition's ISR names the victim
             there any more, and from ZooKeeper's own clock (the state znodes' mtime):
             ``controller_first_write_s`` / ``controller_last_write_s`` after the kill and
             ``controller_writes`` (state znodes written), so
             ``controller_write_span_s`` = last - first is the controller's time for every
             write in ZooKeeper time, and ``controller_election_span_s`` the same for the
             partitions the victim led (``controller_elections_done_s``: the last of them).

Run (from the repository root)::

    .venv/bin/python bench/failover_scale.py                      # 50, 500, 2000 (~3 min)
    .venv/bin/python bench/failover_scale.py --partitions 2000 --rounds 2

To measure another commit, run this file from that commit's checkout with it on
``PYTHONPATH`` (the brokers run ``python -m tierlog.cli``, which puts the working directory
first on the path)::

    git worktree add /tmp/before 5a9ee3c
    cd /tmp/before && PYTHONPATH=$PWD /path/to/.venv/bin/python /path/to/bench/failover_scale.py

It uses only what both the old and the new cache have (``ZkCoordinator(connect, id,
session_timeout_ms=...)``, ``.zk.start()``, ``._read_snapshot()``). Progress goes to
stderr; the LAST line on stdout is one JSON object (``tierlog_from`` names the tree used,
``load_average`` the 1-minute load at the start and the end).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import procs
from cluster import WORK, Cluster, say, start_tierlog
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from reporting import Report

SESSION_TIMEOUT_MS = 2000  # the colleague's measurement (issue 9's scale note) used 2 s
PER_TOPIC = 50
OFFSETS_PARTITIONS = 50
CREATE_BATCH = 4  # topics per CreateTopics request


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient(
        {"bootstrap.servers": bootstrap, "broker.address.family": "v4", "log_level": 0}
    )


def _partitions(admin: AdminClient) -> dict[tuple[str, int], Any]:
    meta = admin.list_topics(timeout=10)
    return {
        (name, p): pm
        for name, tm in meta.topics.items()
        if tm.error is None
        for p, pm in tm.partitions.items()
    }


def _fill(cluster: Cluster, total: int) -> None:
    """``__consumer_offsets`` (50 partitions, made by a group lookup) and topics of 50."""
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "bench", "log_level": 0}
    )
    with contextlib.suppress(Exception):
        consumer.committed([TopicPartition("none", 0)], timeout=60)
    consumer.close()
    names = [f"t{i}" for i in range((total - OFFSETS_PARTITIONS) // PER_TOPIC)]
    admin = cluster.admin()
    for first in range(0, len(names), CREATE_BATCH):
        batch = [NewTopic(n, PER_TOPIC, 3) for n in names[first : first + CREATE_BATCH]]
        futures = admin.create_topics(batch, operation_timeout=120, request_timeout=130)
        for future in futures.values():
            future.result(timeout=300)
    say(f"  {len(names)} topics created; waiting for {total} partitions with 3 in sync")

    def full() -> bool:
        for node in cluster.brokers:
            found = _partitions(_admin(f"127.0.0.1:{node.port}"))
            if len(found) != total or not all(
                m.leader >= 0 and len(m.isrs) == 3 for m in found.values()
            ):
                return False
        return True

    cluster.wait_until(full, f"{total} partitions with 3 in sync everywhere", 900.0)


def time_refresh(connect: str, rounds: int = 5) -> dict[str, Any]:
    from tierlog.broker.coordination.zookeeper import ZkCoordinator

    coordinator = ZkCoordinator(connect, 999, session_timeout_ms=10_000)
    coordinator.zk.start()
    try:
        coordinator._read_snapshot()
        times = []
        for _ in range(rounds):
            begin = time.perf_counter()
            snapshot = coordinator._read_snapshot()
            times.append(time.perf_counter() - begin)
        states = sum(len(t.partition_states) for t in snapshot.topics.values())
        return {
            "states": states,
            "refresh_median_s": round(statistics.median(times), 4),
            "refresh_best_s": round(min(times), 4),
        }
    finally:
        coordinator.zk.stop()


def _state_mtimes(kz: Any) -> dict[tuple[str, int], float]:
    """Every partition state znode's mtime (ZooKeeper's clock, seconds), pipelined reads."""
    pending = []
    for topic in kz.get_children("/brokers/topics"):
        for p in kz.get_children(f"/brokers/topics/{topic}/partitions"):
            path = f"/brokers/topics/{topic}/partitions/{p}/state"
            pending.append(((topic, int(p)), kz.get_async(path)))
    return {tp: result.get(timeout=30)[1].mtime / 1000 for tp, result in pending}


def failover_round(cluster: Cluster, kz: Any) -> dict[str, Any]:
    controller = cluster.controller_id()
    before = _partitions(cluster.admin())
    # The broker (not the controller) leading the most partitions: a restarted broker leads
    # nothing until an election moves leaders back (the bench turns auto-rebalance off).
    candidates = [int(b.broker_id or 0) for b in cluster.brokers if b.broker_id != controller]
    victim = max(candidates, key=lambda b: sum(m.leader == b for m in before.values()))
    led = {tp for tp, m in before.items() if m.leader == victim}
    hosted = {tp for tp, m in before.items() if victim in m.replicas}
    live = [b for b in cluster.brokers if b.broker_id != victim]
    gone: dict[str, float] = {}

    def on_ids(children: list[str]) -> bool | None:
        if str(victim) not in children and "t" not in gone:
            gone["t"] = time.monotonic()
            return False
        return None

    kz.ChildrenWatch("/brokers/ids", on_ids)
    seen: dict[int, dict[str, float]] = {int(b.broker_id or 0): {} for b in live}
    stop = threading.Event()
    t0 = 0.0

    def poll(node: Any) -> None:
        admin = _admin(f"127.0.0.1:{node.port}")
        mine = seen[node.broker_id]
        while not stop.is_set() and len(mine) < 2:
            with contextlib.suppress(Exception):
                found = _partitions(admin)
                now = time.monotonic() - t0
                if "leaders" not in mine and all(
                    tp in found and found[tp].leader not in (-1, victim) for tp in led
                ):
                    mine["leaders"] = now
                if "isr" not in mine and all(
                    tp in found and victim not in found[tp].isrs for tp in hosted
                ):
                    mine["isr"] = now
            time.sleep(0.05)

    pollers = [threading.Thread(target=poll, args=(b,), daemon=True) for b in live]
    wall = time.time()
    t0 = time.monotonic()  # the pollers start after it is set
    cluster.broker(victim).kill()
    for thread in pollers:
        thread.start()
    deadline = t0 + 180
    while time.monotonic() < deadline and not all(len(s) == 2 for s in seen.values()):
        time.sleep(0.1)
    stop.set()
    for thread in pollers:
        thread.join(15)
    cluster.broker(victim).reap()
    time.sleep(2)  # stragglers of the controller's writes, if any
    mtimes = _state_mtimes(kz)
    written = [m - wall for m in mtimes.values() if m >= wall]
    elected = [mtimes[tp] - wall for tp in led if mtimes.get(tp, 0) >= wall]
    result: dict[str, Any] = {
        "victim": victim,
        "led_by_victim": len(led),
        "replicas_on_victim": len(hosted),
        "session_end_s": round(gone["t"] - t0, 2) if "t" in gone else None,
        "metadata_all_leaders_s": _worst(seen, "leaders"),
        "metadata_all_isr_s": _worst(seen, "isr"),
        "per_broker": {str(b): {k: round(v, 2) for k, v in s.items()} for b, s in seen.items()},
        "controller_writes": len(written),
    }
    if written:
        result["controller_first_write_s"] = round(min(written), 3)
        result["controller_last_write_s"] = round(max(written), 3)
        result["controller_write_span_s"] = round(max(written) - min(written), 3)
    if elected:
        result["controller_elections_done_s"] = round(max(elected), 3)
        result["controller_election_span_s"] = round(max(elected) - min(elected), 3)
    say(f"  kill {victim}: {json.dumps(result)}")
    node = cluster.broker(victim)
    node.start()
    cluster.wait_brokers()
    return result


def _worst(seen: dict[int, dict[str, float]], key: str) -> float | None:
    values = [s.get(key) for s in seen.values()]
    if any(v is None for v in values):
        return None
    return round(max(v for v in values if v is not None), 2)


def measure(
    run_dir: Path, total: int, rounds: int, keep: bool, profile: bool = False
) -> dict[str, Any]:
    from kazoo.client import KazooClient

    extra = {
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    }
    cluster, info = start_tierlog(run_dir, profile, extra=extra, name=f"scale-{total}")
    out: dict[str, Any] = {"partitions": total, "cluster": info, "rounds": []}
    kz = None
    try:
        begin = time.monotonic()
        _fill(cluster, total)
        out["fill_s"] = round(time.monotonic() - begin, 1)
        time.sleep(3)
        connect = f"{cluster.zookeeper.connect}/tierlog-bench"
        out.update(time_refresh(connect))
        say(f"  refresh: {out['refresh_median_s']} s median ({out['states']} states)")
        kz = KazooClient(hosts=connect, timeout=10)
        kz.start(timeout=10)
        for n in range(rounds):
            if n:
                time.sleep(3)
                cluster.wait_until(
                    lambda: all(len(m.isrs) == 3 for m in _partitions(cluster.admin()).values()),
                    "every ISR full again",
                    600.0,
                )
                time.sleep(3)
            out["rounds"].append(failover_round(cluster, kz))
    finally:
        if kz is not None:
            kz.stop()
        out["stop"] = cluster.stop()
        if not keep:
            shutil.rmtree(run_dir / "data", ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", default="50,500,2000", help="totals, comma-separated")
    parser.add_argument("--rounds", type=int, default=1, help="kills per total")
    parser.add_argument("--keep", action="store_true", help="keep the data dirs")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="brokers under cProfile (broker-N.prof in the run dir; the killed one writes none)",
    )
    args = parser.parse_args(argv)
    procs.install_signal_handlers()
    os.environ["PYTHONUNBUFFERED"] = "1"
    run_dir = WORK / "runs" / time.strftime("failover-scale-%Y%m%d-%H%M%S")
    import tierlog

    reported = Report("failover_scale", quick=False, out=sys.stderr)
    report = reported.data
    report.update(
        tierlog_from=str(Path(tierlog.__file__).resolve().parent.parent),
        session_timeout_ms=SESSION_TIMEOUT_MS,
        results=[],
    )
    try:
        for total in (int(x) for x in args.partitions.split(",")):
            say(f"{total} partitions (3 brokers, RF 3), logs in {run_dir}")
            report["results"].append(
                measure(run_dir / f"p{total}", total, args.rounds, args.keep, args.profile)
            )
    except (KeyboardInterrupt, SystemExit) as exc:
        report["interrupted"] = type(exc).__name__
    finally:
        procs._kill_all()
    return reported.finish(interrupted=report.pop("interrupted", None))


if __name__ == "__main__":
    sys.exit(main())
