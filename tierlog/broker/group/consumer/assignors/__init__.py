"""Server-side assignors of the consumer group protocol (KIP-848), by name.

``uniform`` (balanced and sticky, the default) and ``range`` (co-partitioned ranges), as in
Kafka 4. ``assignors_by_name`` builds the registry ``group.consumer.assignors`` selects from;
the coordinator picks a member's ``ServerAssignor`` or, when the members name none, the
first configured one.
"""

from __future__ import annotations

from collections.abc import Iterable

from tierlog.broker.group.consumer.assignors.range import RangeAssignor
from tierlog.broker.group.consumer.assignors.spec import Assignor, GroupSpec, MemberSpec
from tierlog.broker.group.consumer.assignors.uniform import UniformAssignor

BUILTIN: dict[str, type[UniformAssignor] | type[RangeAssignor]] = {
    "uniform": UniformAssignor,
    "range": RangeAssignor,
}


def assignors_by_name(names: Iterable[str]) -> dict[str, Assignor]:
    """One instance of each named built-in assignor, in the given order (the first is the
    default). Names are checked by ``ConsumerGroupConfig``; an unknown one is a KeyError."""
    return {name: BUILTIN[name]() for name in names}


__all__ = [
    "Assignor",
    "GroupSpec",
    "MemberSpec",
    "RangeAssignor",
    "UniformAssignor",
    "assignors_by_name",
]
