"""The ``uniform`` server assignor: balanced first, then sticky (Kafka 4's default).

Balance: when every member subscribes to the same topics (homogeneous), each member gets
either ⌊P/M⌋ or ⌈P/M⌉ of the P partitions (M members), so no two differ by more than one.
When subscriptions differ (heterogeneous), a member can only take partitions of topics it
subscribes to, so perfect balance may not exist; the assignor then guarantees that no single
partition could move to another subscriber of its topic and narrow the gap: for every
partition held by a member with n partitions, every other subscriber of its topic has at
least n - 1.

Stickiness: a member keeps the partitions the current target gives it as long as balance
allows; only the excess moves. So when nothing changes, the target stays as it is, and
when one member joins, the others each give up only what the newcomer needs.

Steps (both cases):

1. Keep: each member keeps its current partitions that still exist and that it still
   subscribes to (a partition two members claim goes to the first by member id).
2. Homogeneous: quotas are ⌊P/M⌋, plus one for the P mod M members that keep the most
   (the stickiest choice); each member drops its excess over its quota, then members under
   quota take the free partitions in order.
   Heterogeneous: every free partition, the most constrained topics first (fewest
   subscribers), goes to the least loaded subscriber; then partitions move one at a time
   from a member to a subscriber with at least two fewer, until none can. Each move lowers
   the sum of squared member sizes, so this ends.

Kafka's rack-aware variant is not built: Kafka 4's assignors do not use racks either.
Member ids break every tie, so the result is deterministic.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping

from tierlog.broker.group.consumer.assignors.spec import GroupSpec, partition_count
from tierlog.broker.group.consumer.member import Assignment

# Inside the assignor a partition is (topic index, partition): topic ids are numbered once,
# because hashing a uuid.UUID is a Python-level call and this code hashes partitions a lot.
_Partition = tuple[int, int]


class UniformAssignor:
    """Kafka's ``uniform`` assignor (see the module docstring)."""

    name = "uniform"

    def assign(self, spec: GroupSpec, partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        topic_ids = sorted({t for m in spec.members.values() for t in m.subscribed_topic_ids})
        index = {t: i for i, t in enumerate(topic_ids)}
        counts = [partition_count(partitions, t) for t in topic_ids]
        subscribed = {
            m.member_id: frozenset(index[t] for t in m.subscribed_topic_ids)
            for m in spec.members.values()
        }
        kept = _kept_partitions(spec, index, counts, subscribed)
        if spec.homogeneous:
            owned = _assign_homogeneous(counts, kept)
        else:
            owned = _assign_heterogeneous(counts, kept, subscribed)
        return {
            member_id: {topic_ids[t]: frozenset(ps) for t, ps in by_topic.items() if ps}
            for member_id, by_topic in owned.items()
        }


def _kept_partitions(
    spec: GroupSpec,
    index: Mapping[uuid.UUID, int],
    counts: list[int],
    subscribed: Mapping[str, frozenset[int]],
) -> dict[str, list[_Partition]]:
    """Step 1: each member's current partitions that are still valid for it, sorted."""
    taken: set[_Partition] = set()
    kept: dict[str, list[_Partition]] = {}
    for member_id in sorted(spec.members):
        current = spec.members[member_id].current
        mine: list[_Partition] = []
        for topic_id, ps in current.items():
            t = index.get(topic_id)
            if t is None or t not in subscribed[member_id]:
                continue
            for p in ps:
                if p < counts[t] and (t, p) not in taken:
                    taken.add((t, p))
                    mine.append((t, p))
        mine.sort()
        kept[member_id] = mine
    return kept


def _assign_homogeneous(
    counts: list[int], kept: dict[str, list[_Partition]]
) -> dict[str, dict[int, list[int]]]:
    total = sum(counts)
    quota, extra = divmod(total, len(kept))
    # The members that keep the most get the extra partitions: fewest moves.
    by_size = sorted(kept, key=lambda m: (-len(kept[m]), m))
    quotas = {m: quota + (1 if i < extra else 0) for i, m in enumerate(by_size)}
    owned = {m: kept[m][: quotas[m]] for m in kept}
    taken = {tp for tps in owned.values() for tp in tps}
    free = ((t, p) for t, n in enumerate(counts) for p in range(n) if (t, p) not in taken)
    for member_id in sorted(owned):
        need = quotas[member_id] - len(owned[member_id])
        owned[member_id].extend(next(free) for _ in range(need))
    return {m: _by_topic(tps) for m, tps in owned.items()}


def _assign_heterogeneous(
    counts: list[int],
    kept: dict[str, list[_Partition]],
    subscribed: Mapping[str, frozenset[int]],
) -> dict[str, dict[int, list[int]]]:
    subscribers: dict[int, list[str]] = {t: [] for t in range(len(counts))}
    for member_id in sorted(subscribed):
        for t in subscribed[member_id]:
            subscribers[t].append(member_id)
    owned = {m: {t: set(ps) for t, ps in _by_topic(tps).items()} for m, tps in kept.items()}
    load = {m: len(tps) for m, tps in kept.items()}
    taken = {tp for tps in kept.values() for tp in tps}

    # Most constrained topics first: a partition few members may take is placed while
    # those members still have room. Within a topic, a heap of its subscribers by load
    # (only this topic's placements change their loads meanwhile).
    for t in sorted(subscribers, key=lambda t: (len(subscribers[t]), t)):
        free = [p for p in range(counts[t]) if (t, p) not in taken]
        if not free:
            continue
        heap = [(load[m], m) for m in subscribers[t]]
        heapq.heapify(heap)
        for p in free:
            n, member_id = heapq.heappop(heap)
            owned[member_id].setdefault(t, set()).add(p)
            load[member_id] = n + 1
            heapq.heappush(heap, (n + 1, member_id))

    # Move single partitions to a subscriber with at least two fewer until none can move.
    # least[topic] caches its least loaded subscriber; a move invalidates the topics of
    # the two members whose loads changed.
    least: dict[int, str] = {}

    def least_loaded(t: int) -> str:
        member_id = least.get(t)
        if member_id is None:
            member_id = min(subscribers[t], key=lambda m: (load[m], m))
            least[t] = member_id
        return member_id

    moved = True
    while moved:
        moved = False
        for member_id in sorted(owned, key=lambda m: (-load[m], m)):
            for t in sorted(owned[member_id]):
                held = owned[member_id][t]
                while held:
                    target = least_loaded(t)
                    if load[target] >= load[member_id] - 1:
                        break
                    p = max(held)
                    held.remove(p)
                    owned[target].setdefault(t, set()).add(p)
                    load[member_id] -= 1
                    load[target] += 1
                    for changed in subscribed[member_id] | subscribed[target]:
                        least.pop(changed, None)
                    moved = True
    return {m: {t: sorted(ps) for t, ps in by_topic.items()} for m, by_topic in owned.items()}


def _by_topic(tps: list[_Partition]) -> dict[int, list[int]]:
    grouped: dict[int, list[int]] = {}
    for t, p in tps:
        grouped.setdefault(t, []).append(p)
    return grouped
