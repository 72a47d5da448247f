"""The ACL authorizer's decision cost with 10 to 10,000 literal and prefixed ACLs.

No broker and no I/O: ``AclAuthorizer.allowed`` on an in-memory ``AclCache`` holding N
bindings, half of them LITERAL topic ACLs (``topic-<i>``), half PREFIXED (``team-<i>-``),
for 100 principals, plus a wildcard Describe and a handful of Denies. Each size is timed on
the same mix of checks: an allowed literal topic, an allowed prefixed topic, a denied one
and a topic with no ACLs. The claim in ``tierlog/security/acl_cache.py``: the cost does
not grow with N (one dict probe per distinct prefix length). Prints a line per size and
one JSON object last: microseconds per decision at each N, and the ratio of the largest
to the smallest, with the median of 5 rounds and their spread (``bench/reporting.py``).

    .venv/bin/python bench/acl_authorizer.py            # sizes 10, 100, 1000, 10000
    .venv/bin/python bench/acl_authorizer.py --quick    # fewer decisions per size
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from reporting import LOWER, Report

from tierlog.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tierlog.security.acl_authorizer import AclAuthorizer
from tierlog.security.principal import KafkaPrincipal

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def build(size: int) -> AclAuthorizer:
    authorizer = AclAuthorizer()
    bindings = []
    for i in range(size):
        principal = f"User:user-{i % 100}"
        if i % 2:
            pattern = ResourcePattern(ResourceType.TOPIC, f"team-{i}-", PatternType.PREFIXED)
        else:
            pattern = ResourcePattern(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL)
        operation = AclOperation.READ if i % 3 else AclOperation.WRITE
        bindings.append(AclBinding(pattern, AccessControlEntry(principal, "*", operation, ALLOW)))
    bindings.append(
        AclBinding(
            ResourcePattern(ResourceType.TOPIC, "*"),
            AccessControlEntry("User:*", "*", AclOperation.DESCRIBE, ALLOW),
        )
    )
    for i in range(0, min(size, 50), 10):
        bindings.append(
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, f"topic-{i}"),
                AccessControlEntry("User:user-99", "10.0.0.9", AclOperation.ALL, DENY),
            )
        )
    results = asyncio.run(authorizer.create_acls(bindings))
    assert all(r.error is None for r in results)
    return authorizer


def checks(size: int) -> list[tuple[KafkaPrincipal, AclOperation, ResourcePattern, bool]]:
    last_literal = (size - 2) if size % 2 == 0 else (size - 1)
    last_prefixed = size - 1 if size % 2 == 0 else size - 2
    topic = lambda name: ResourcePattern(ResourceType.TOPIC, name)  # noqa: E731
    return [
        (
            KafkaPrincipal.user(f"user-{last_literal % 100}"),
            AclOperation.READ if last_literal % 3 else AclOperation.WRITE,
            topic(f"topic-{last_literal}"),
            True,
        ),
        (
            KafkaPrincipal.user(f"user-{last_prefixed % 100}"),
            AclOperation.READ if last_prefixed % 3 else AclOperation.WRITE,
            topic(f"team-{last_prefixed}-daily"),
            True,
        ),
        (KafkaPrincipal.user("intruder"), AclOperation.READ, topic(f"topic-{last_literal}"), False),
        (KafkaPrincipal.user("user-1"), AclOperation.READ, topic("unknown-topic"), False),
    ]


def measure(size: int, rounds: int) -> list[float]:
    """Microseconds per decision at ``size`` ACLs, in each of 5 rounds of ``rounds`` x the
    checks."""
    authorizer = build(size)
    cases = checks(size)
    for principal, operation, resource, expected in cases:
        assert authorizer.allowed(principal, "10.0.0.1", operation, resource) is expected, (
            size,
            resource,
        )
    out = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            for principal, operation, resource, _expected in cases:
                authorizer.allowed(principal, "10.0.0.1", operation, resource)
        out.append((time.perf_counter() - start) / (rounds * len(cases)) * 1e6)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 2_000 if args.quick else 20_000
    report = Report("acl_authorizer", quick=args.quick)
    figures = report.data
    per_size: dict[int, list[float]] = {}
    for size in (10, 100, 1_000, 10_000):
        per_size[size] = measured = measure(size, rounds)
        us = statistics.median(measured)
        figures[f"us_per_decision_{size}"] = round(min(measured), 3)  # the best, as before
        print(f"{size:>6} ACLs: {us:.2f} us per decision ({1e6 / us:,.0f} decisions/s)", flush=True)
    figures["ratio_10000_vs_10"] = round(
        figures["us_per_decision_10000"] / figures["us_per_decision_10"], 2
    )
    sizes = {"10,000 ACLs": per_size[10_000], "10 ACLs": per_size[10]}
    report.side_by_side("decision cost", sizes, unit="us", better=LOWER)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
