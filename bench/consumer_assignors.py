"""The consumer group protocol's server-side work (KIP-848), measured without a broker.

Three parts, all in this process on the protocol's pure logic (tierlog.broker.group.consumer):

  target      Time to compute a target assignment for ``--members`` members (100) over
              ``--partitions`` partitions (1,000, spread over ``--topics`` topics), for
              each assignor (``uniform``, ``range``) and subscription shape:
              ``homogeneous`` (every member subscribes to every topic) and
              ``heterogeneous`` (each member to a seeded random subset, at least one).
              Two cases per shape: ``fresh`` (no current assignment: a new group) and
              ``sticky`` (the previous target as current, one member replaced by a new
              one: the usual rebalance). Median and best of ``--repeat`` runs.
  stable      Time to a stable group through the protocol itself: the members join one
              after the other, then heartbeat in rounds, each reporting what it was told
              to own (revocations acknowledged at once), until the group is Stable. The
              coordinator's CPU per heartbeat and in all; the heartbeats, rounds, records
              and record bytes (through the codec) it took; a heartbeat's cost once the
              group is stable (it must write nothing); and the same again when one
              member leaves a stable group.
  replay      Rebuilding the stable group from its records (a coordinator failover):
              records per second.

Run (from the repository root)::

    .venv/bin/python bench/consumer_assignors.py            # 100 members, 1,000 partitions
    .venv/bin/python bench/consumer_assignors.py --quick    # fewer repeats
    .venv/bin/python bench/consumer_assignors.py --members 500 --partitions 10000

The LAST line printed is one JSON object with every figure, with the 1-minute load average
at the start and the end (``bench/reporting.py``; there is no side-by-side figure here: no
reference runs beside it). The machine is small and shared: read the figures as orders of
magnitude, and compare shapes and assignors within one run.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from reporting import Report, spread

from tierlog.broker.group.consumer import (
    ConsumerGroupConfig,
    ConsumerGroupProtocol,
    ConsumerGroupStore,
    GroupState,
    HeartbeatRequest,
    TopicsImage,
)
from tierlog.broker.group.consumer.assignors import (
    Assignor,
    GroupSpec,
    MemberSpec,
    RangeAssignor,
    UniformAssignor,
)
from tierlog.broker.group.consumer.record_codec import encode_record
from tierlog.util.clock import ManualClock

GROUP = "bench"


def topics_image(topics: int, partitions: int) -> TopicsImage:
    per_topic, extra = divmod(partitions, topics)
    return TopicsImage.of(
        {f"topic-{i:03d}": per_topic + (1 if i < extra else 0) for i in range(topics)}
    )


def subscriptions(image: TopicsImage, members: int, shape: str, seed: int) -> list[list[str]]:
    names = sorted(image.names())
    if shape == "homogeneous":
        return [names] * members
    rnd = random.Random(seed)
    return [rnd.sample(names, rnd.randint(1, len(names))) for _ in range(members)]


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(median, best) wall seconds of ``repeat`` calls (``reporting.spread``)."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    rounds = spread(runs)
    return rounds["median"], rounds["min"]


def bench_target(args: argparse.Namespace) -> dict[str, Any]:
    image = topics_image(args.topics, args.partitions)
    counts = {
        info.topic_id: info.num_partitions
        for n in image.names()
        if (info := image.by_name(n)) is not None
    }
    ids = {n: info.topic_id for n in image.names() if (info := image.by_name(n)) is not None}
    out: dict[str, Any] = {}
    assignors: list[Assignor] = [UniformAssignor(), RangeAssignor()]
    for shape in ("homogeneous", "heterogeneous"):
        subs = subscriptions(image, args.members, shape, args.seed)
        members = {
            f"member-{i:04d}": MemberSpec(f"member-{i:04d}", frozenset(ids[n] for n in s))
            for i, s in enumerate(subs)
        }
        for assignor in assignors:
            fresh = GroupSpec(members)
            first = assignor.assign(fresh, counts)
            # One member replaced: its successor subscribes the same, owns nothing.
            current = {
                m: spec.__class__(m, spec.subscribed_topic_ids, first[m])
                for m, spec in members.items()
            }
            gone = next(iter(current))
            current["member-new"] = MemberSpec("member-new", current.pop(gone).subscribed_topic_ids)
            sticky = GroupSpec(current)
            fresh_med, fresh_best = timed(
                lambda a=assignor, s=fresh: a.assign(s, counts), args.repeat
            )
            sticky_med, sticky_best = timed(
                lambda a=assignor, s=sticky: a.assign(s, counts), args.repeat
            )
            second = assignor.assign(sticky, counts)
            moved = sum(
                len(first[m].get(t, frozenset()) - second[m].get(t, frozenset()))
                for m in first
                if m in second
                for t in first[m]
            )
            sizes = [sum(len(p) for p in a.values()) for a in second.values()]
            key = f"{assignor.name}_{shape}"
            out[key] = {
                "fresh_ms_median": round(fresh_med * 1000, 2),
                "fresh_ms_best": round(fresh_best * 1000, 2),
                "sticky_ms_median": round(sticky_med * 1000, 2),
                "sticky_ms_best": round(sticky_best * 1000, 2),
                "sticky_partitions_moved_from_others": moved,
                "sticky_min_max_per_member": [min(sizes), max(sizes)],
            }
            print(
                f"target {key:26s} fresh {fresh_med * 1000:8.2f} ms (best {fresh_best * 1000:.2f})"
                f"  sticky {sticky_med * 1000:8.2f} ms (best {sticky_best * 1000:.2f})"
                f"  moved {moved:4d}  per member {min(sizes)}..{max(sizes)}",
                flush=True,
            )
    return out


class Coordinator:
    """The protocol with a store, its records counted and sized through the codec."""

    def __init__(self, image: TopicsImage, assignor: str) -> None:
        self.clock = ManualClock()
        self.store = ConsumerGroupStore()
        others = tuple(a for a in ("uniform", "range") if a != assignor)
        self.protocol = ConsumerGroupProtocol(
            ConsumerGroupConfig(assignors=(assignor, *others)),
            self.store,
            lambda: image,
            self.clock,
        )
        self.records = 0
        self.record_bytes = 0
        self.heartbeats = 0
        self.cpu = 0.0
        self.log: list[Any] = []

    def heartbeat(self, request: HeartbeatRequest) -> Any:
        start = time.process_time()
        outcome = self.protocol.heartbeat(request)
        self.store.replay_all(outcome.records)
        self.cpu += time.process_time() - start
        self.heartbeats += 1
        self.records += len(outcome.records)
        for record in outcome.records:
            key, value = encode_record(record)
            self.record_bytes += len(key) + len(value or b"")
        self.log += outcome.records
        return outcome.response


def owned(assignment: Any) -> tuple[Any, ...]:
    return tuple((t, tuple(sorted(p))) for t, p in sorted(assignment.items()))


def until_stable(coordinator: Coordinator, told: dict[str, Any], epochs: dict[str, int]) -> int:
    rounds = 0
    group = coordinator.store.consumer_group(GROUP)
    while group.state is not GroupState.STABLE:
        rounds += 1
        if rounds > 100:
            raise RuntimeError(f"not stable after 100 rounds: {group.state}")
        for member_id in list(epochs):
            response = coordinator.heartbeat(
                HeartbeatRequest(
                    GROUP, member_id, epochs[member_id], topic_partitions=owned(told[member_id])
                )
            )
            epochs[member_id] = response.member_epoch
            if response.assignment is not None:
                told[member_id] = response.assignment
        group = coordinator.store.consumer_group(GROUP)
    return rounds


def bench_stable(args: argparse.Namespace) -> tuple[dict[str, Any], Coordinator]:
    image = topics_image(args.topics, args.partitions)
    out: dict[str, Any] = {}
    last: Coordinator | None = None
    for assignor in ("uniform", "range"):
        coordinator = Coordinator(image, assignor)
        names = tuple(sorted(image.names()))
        told: dict[str, Any] = {}
        epochs: dict[str, int] = {}
        for i in range(args.members):
            member_id = f"member-{i:04d}"
            response = coordinator.heartbeat(
                HeartbeatRequest(
                    GROUP,
                    member_id,
                    0,
                    rebalance_timeout_ms=60_000,
                    subscribed_topic_names=names,
                    topic_partitions=(),
                )
            )
            epochs[member_id] = response.member_epoch
            told[member_id] = response.assignment or {}
        rounds = until_stable(coordinator, told, epochs)
        join = {
            "heartbeats": coordinator.heartbeats,
            "rounds_after_joins": rounds,
            "coordinator_cpu_s": round(coordinator.cpu, 3),
            "cpu_us_per_heartbeat": round(coordinator.cpu / coordinator.heartbeats * 1e6, 1),
            "records": coordinator.records,
            "record_kib": round(coordinator.record_bytes / 1024, 1),
        }
        # A round of heartbeats in the stable group: the steady cost.
        steady_from = (coordinator.heartbeats, coordinator.cpu, coordinator.records)
        for member_id in list(epochs):
            coordinator.heartbeat(
                HeartbeatRequest(
                    GROUP, member_id, epochs[member_id], topic_partitions=owned(told[member_id])
                )
            )
        steady_beats = coordinator.heartbeats - steady_from[0]
        steady = {
            "cpu_us_per_heartbeat": round(
                (coordinator.cpu - steady_from[1]) / steady_beats * 1e6, 1
            ),
            "records": coordinator.records - steady_from[2],
        }
        # One member leaves a stable group: the others take its partitions.
        before = (coordinator.heartbeats, coordinator.cpu, coordinator.records)
        leaving = next(iter(epochs))
        coordinator.heartbeat(HeartbeatRequest(GROUP, leaving, -1))
        del epochs[leaving], told[leaving]
        leave_rounds = until_stable(coordinator, told, epochs)
        leave = {
            "heartbeats": coordinator.heartbeats - before[0],
            "rounds": leave_rounds,
            "coordinator_cpu_s": round(coordinator.cpu - before[1], 3),
            "records": coordinator.records - before[2],
        }
        out[assignor] = {"join": join, "steady": steady, "one_leaves": leave}
        print(
            f"stable {assignor:8s} {args.members} joins: {join['heartbeats']} heartbeats, "
            f"{rounds} rounds, {join['coordinator_cpu_s']} s CPU "
            f"({join['cpu_us_per_heartbeat']} us/heartbeat), {join['records']} records "
            f"({join['record_kib']} KiB); stable heartbeat "
            f"{steady['cpu_us_per_heartbeat']} us, {steady['records']} records; "
            f"one leaves: {leave['rounds']} rounds, "
            f"{leave['coordinator_cpu_s']} s CPU",
            flush=True,
        )
        last = coordinator
    assert last is not None
    return out, last


def bench_replay(coordinator: Coordinator, repeat: int) -> dict[str, Any]:
    def rebuild() -> None:
        ConsumerGroupStore().replay_all(coordinator.log)

    median, _ = timed(rebuild, repeat)
    rate = len(coordinator.log) / median
    print(f"replay {len(coordinator.log)} records: {median * 1000:.1f} ms ({rate:,.0f}/s)")
    return {
        "records": len(coordinator.log),
        "ms_median": round(median * 1000, 1),
        "records_per_s": round(rate),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--seed", type=int, default=848)
    parser.add_argument("--quick", action="store_true", help="3 repeats")
    args = parser.parse_args()
    if args.quick:
        args.repeat = 3
    report = Report("consumer_assignors", quick=args.quick)
    print(
        f"{args.members} members, {args.partitions} partitions over {args.topics} topics, "
        f"{args.repeat} repeats",
        flush=True,
    )
    target = bench_target(args)
    stable, coordinator = bench_stable(args)
    replay = bench_replay(coordinator, args.repeat)
    report.data.update(
        members=args.members,
        partitions=args.partitions,
        topics=args.topics,
        repeat=args.repeat,
        target=target,
        stable=stable,
        replay=replay,
    )
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
