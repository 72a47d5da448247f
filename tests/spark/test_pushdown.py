"""Filter pushdown bounds (no Spark session): which filters narrow which ranges, and that
what cannot be pruned safely is not."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from tierlog.spark.planning import OffsetRange
from tierlog.spark.pushdown import PrunedBounds, bounds_of, narrow

UTC = dt.UTC


def test_partition_and_offset_filters_bound_the_ranges() -> None:
    bounds = bounds_of(
        [
            IsNotNull(("offset",)),
            In(("partition",), (0, 2, 5)),
            EqualTo(("partition",), 2),
            GreaterThan(("offset",), 9),
            GreaterThanOrEqual(("offset",), 5),
            LessThanOrEqual(("offset",), 99),
            LessThan(("offset",), 200),
        ]
    )
    assert bounds == PrunedBounds(frozenset({2}), 10, 100, None)
    assert bounds_of([In(("offset",), (7, 3, 40))]) == PrunedBounds(None, 3, 41)
    assert bounds_of([EqualTo(("offset",), 12)]) == PrunedBounds(None, 12, 13)


def test_what_cannot_be_pruned_safely_is_not() -> None:
    unchanged = [
        Not(EqualTo(("partition",), 1)),  # NOT: anything but
        LessThan(("timestamp",), dt.datetime(2026, 1, 1, tzinfo=UTC)),  # out-of-order stamps
        EqualTo(("key",), b"k"),  # another column
        StringStartsWith(("topic",), "a"),
        EqualTo(("headers", "key"), "x"),  # a nested field, not the column
        GreaterThan(("offset",), "12"),  # not a number
    ]
    assert bounds_of(unchanged) == PrunedBounds()
    assert not bounds_of(unchanged).prunes


def test_a_timestamp_lower_bound_starts_each_partition_at_its_first_offset_that_recent() -> None:
    stamp = dt.datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
    bounds = bounds_of([GreaterThan(("timestamp",), stamp)])
    millis = int(stamp.timestamp() * 1000)  # rounded down: a record's stamp is whole ms
    assert bounds.timestamp_from_ms == millis
    asked: list[Mapping[tuple[str, int], int]] = []

    def first_at(stamps: Mapping[tuple[str, int], int]) -> Mapping[tuple[str, int], int]:
        asked.append(stamps)
        return {("t", 0): 40, ("t", 1): -1, ("t", 2): 5}  # 1: nothing that recent

    ranges = [OffsetRange("t", p, 10, 100) for p in range(3)]
    assert narrow(ranges, bounds, first_at) == [
        OffsetRange("t", 0, 40, 100),
        OffsetRange("t", 1, 100, 100),
        OffsetRange("t", 2, 10, 100),  # never before where the range started
    ]
    assert asked == [{("t", p): millis for p in range(3)}]


def test_narrowing_keeps_ranges_well_formed_and_asks_nothing_without_a_timestamp() -> None:
    bounds = PrunedBounds(frozenset({1}), 50, 60)
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 55), OffsetRange("t", 1, 70, 90)]

    def refuse(stamps: Mapping[tuple[str, int], int]) -> Mapping[tuple[str, int], int]:
        raise AssertionError("no timestamp bound: no lookup")

    assert narrow(ranges, bounds, refuse) == [
        OffsetRange("t", 1, 50, 55),
        OffsetRange("t", 1, 70, 70),  # empty, not inverted
    ]
