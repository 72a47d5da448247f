"""Filter pushdown for batch reads: Spark's filters on ``partition``, ``offset`` and
``timestamp`` narrow the planned offset ranges, so whole remote segments and leader
ranges outside them are never read.

Spark hands a Python data source the filters of a query's WHERE clause that it can
express (``pyspark.sql.datasource.Filter``, ANDed together) when
``spark.sql.python.filterPushdown.enabled`` is true. Pruning here is by whole ranges only
and always conservative: every filter is also given back to Spark, which evaluates each
row as before, so a filter misread here could cost extra reading but never a wrong row.

* ``partition``: ``=``, ``IN`` keep those partitions.
* ``offset``: ``=``, ``IN``, ``<``, ``<=``, ``>``, ``>=`` bound every partition's range.
* ``timestamp``: ``>`` and ``>=`` start each partition at the first offset whose
  timestamp is at or after the bound (ListOffsets by timestamp, as ``startingTimestamp``):
  every record before that offset is older, whatever the order of timestamps. An upper
  bound prunes nothing: with CreateTime, a later offset may carry an older timestamp.

Anything else (other columns, ``NOT``, string filters) prunes nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from tierlog.spark.planning import OffsetRange

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PrunedBounds:
    """What the filters allow: ``partitions`` (None: all), offsets ``[offset_from,
    offset_to)`` in every partition (``offset_to`` None: no end), and records from the
    first one at or after ``timestamp_from_ms`` (None: no bound)."""

    partitions: frozenset[int] | None = None
    offset_from: int = 0
    offset_to: int | None = None
    timestamp_from_ms: int | None = None

    @property
    def prunes(self) -> bool:
        return self != PrunedBounds()


def bounds_of(filters: Iterable[Filter]) -> PrunedBounds:
    """The bounds the ANDed ``filters`` set (``PrunedBounds()`` when none applies)."""
    partitions: frozenset[int] | None = None
    offset_from, offset_to = 0, None
    timestamp_from: int | None = None
    for f in filters:
        path: tuple[str, ...] = getattr(f, "attribute", ())
        column = path[0] if len(path) == 1 else None  # a top-level column
        if column == "partition":
            values = _values(f)
            if values is not None:
                partitions = values if partitions is None else partitions & values
        elif column == "offset":
            low, high = _offset_span(f)
            offset_from = max(offset_from, low)
            if high is not None:
                offset_to = high if offset_to is None else min(offset_to, high)
        elif column == "timestamp" and isinstance(f, GreaterThan | GreaterThanOrEqual):
            millis = _millis(f.value)
            if millis is not None:
                timestamp_from = millis if timestamp_from is None else max(timestamp_from, millis)
    return PrunedBounds(partitions, offset_from, offset_to, timestamp_from)


def narrow(
    ranges: list[OffsetRange],
    bounds: PrunedBounds,
    offsets_for_times: Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, int]],
) -> list[OffsetRange]:
    """``ranges`` within ``bounds``; ``offsets_for_times`` gives each partition's first
    offset at or after a timestamp (-1: none)."""
    kept = [r for r in ranges if bounds.partitions is None or r.partition in bounds.partitions]
    firsts: Mapping[TopicPartition, int] = {}
    stamp = bounds.timestamp_from_ms
    if stamp is not None and kept:
        firsts = offsets_for_times({(r.topic, r.partition): stamp for r in kept})
    out = []
    for r in kept:
        start = max(r.start, bounds.offset_from)
        end = r.end if bounds.offset_to is None else min(r.end, bounds.offset_to)
        if stamp is not None:
            first = firsts.get((r.topic, r.partition), r.start)
            start = end if first < 0 else max(start, first)  # -1: nothing that recent
        out.append(OffsetRange(r.topic, r.partition, start, max(start, end)))
    return out


def _values(f: Filter) -> frozenset[int] | None:
    if isinstance(f, EqualTo | EqualNullSafe) and isinstance(f.value, int):
        return frozenset((f.value,))
    if isinstance(f, In) and all(isinstance(v, int) for v in f.value):
        return frozenset(f.value)
    return None


def _offset_span(f: Filter) -> tuple[int, int | None]:
    """``[low, high)`` of offsets ``f`` allows (``(0, None)``: any)."""
    value = getattr(f, "value", None)
    values = _values(f)
    if values is not None:
        return (min(values), max(values) + 1) if values else (0, 0)
    if not isinstance(value, int):
        return 0, None
    if isinstance(f, GreaterThan):
        return value + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return value, None
    if isinstance(f, LessThan):
        return 0, max(0, value)
    if isinstance(f, LessThanOrEqual):
        return 0, max(0, value + 1)
    return 0, None


def _millis(value: object) -> int | None:
    """Epoch milliseconds of a timestamp filter's value, rounded down (a record's
    timestamp is whole milliseconds; Spark's are microseconds). PySpark gives an aware
    datetime in the session's time zone (a naive one would be read as this process's
    local time, as PySpark writes naive ones)."""
    if not isinstance(value, dt.datetime):
        return None
    micros = round(value.timestamp() * 1_000_000)
    return micros // 1000
