"""What the ``explore_events`` notebook shows about a topic, as functions the notebook
calls (so it stays a page of calls and the logic is tested here): topics, offsets per tier,
sample messages decoded as JSON, and the event rate over time read from both tiers with
the tier boundary marked.

Tables are pandas DataFrames and the plot a matplotlib ``Figure`` made without pyplot
(no global figure registry; a notebook shows it with ``display(fig)``). Times are UTC.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipelines import client_security
from pipelines.common import TopicSource, offsets_json

# ListOffsets' KIP-405 special timestamp: the first offset still on the broker's disk.
EARLIEST_LOCAL = -4
TIER_COLOURS = {"remote": "tab:blue", "local": "tab:orange"}
TIER_LABELS = {"remote": "remote tier (object storage)", "local": "local tier (broker)"}
# Beyond this many partitions one line per partition's boundary is clutter: the plot
# marks the earliest and the latest boundary instead.
MAX_BOUNDARY_LINES = 8


def _pandas() -> Any:
    # pandas ships no type stubs (pandas-stubs is not a dependency): typed as Any here.
    import pandas

    return pandas


@dataclass(frozen=True)
class PartitionTiers:
    """Where one partition's offsets live. ``remote_start``/``remote_end`` (the first
    offset the remote tier does not hold) are None when it holds nothing."""

    partition: int
    log_start: int
    remote_start: int | None
    remote_end: int | None
    local_start: int
    latest: int


def topics(bootstrap_servers: str) -> Any:
    """A DataFrame of the cluster's topics: partitions and messages (latest - earliest)."""
    pd = _pandas()

    from tierlog.client import EARLIEST, LATEST, LogClient

    rows = []
    with LogClient(
        bootstrap_servers,
        client_id="tierlog-explore",
        security=client_security.client_security(),
    ) as client:
        for topic in client.topics():
            tps = [(topic, p) for p in client.partitions(topic)]
            first = client.list_offsets(dict.fromkeys(tps, EARLIEST))
            last = client.list_offsets(dict.fromkeys(tps, LATEST))
            messages = sum(last[tp] - first[tp] for tp in tps)
            rows.append({"topic": topic, "partitions": len(tps), "messages": messages})
    return pd.DataFrame(rows, columns=["topic", "partitions", "messages"])


def tier_offsets(
    bootstrap_servers: str,
    topic: str,
    remote_url: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> list[PartitionTiers]:
    """Each partition's offsets per tier: log start, latest and local log start from the
    broker (ListOffsets -2, -1, -4), the remote range from the partition's manifest.

    Raises:
        ClientError: the topic does not exist.
    """
    from tierlog.client import EARLIEST, LATEST, LogClient
    from tierlog.remote.manifest import committed_segments
    from tierlog.remote.registry import open_store
    from tierlog.spark.planning import remote_end

    with LogClient(
        bootstrap_servers,
        client_id="tierlog-explore",
        security=client_security.client_security(),
    ) as client:
        tps = [(topic, p) for p in client.partitions(topic)]
        earliest = client.list_offsets(dict.fromkeys(tps, EARLIEST))
        local = client.list_offsets(dict.fromkeys(tps, EARLIEST_LOCAL))
        latest = client.list_offsets(dict.fromkeys(tps, LATEST))
    store = open_store(remote_url, dict(storage_options or {})) if remote_url else None
    out = []
    for tp in sorted(tps):
        manifest = store.read_manifest(*tp) if store else None
        held = manifest is not None and bool(committed_segments(manifest))
        out.append(
            PartitionTiers(
                partition=tp[1],
                log_start=earliest[tp],
                remote_start=manifest.log_start_offset if held and manifest else None,
                remote_end=remote_end(manifest) if held else None,
                local_start=local[tp],
                latest=latest[tp],
            )
        )
    return out


# What a table shows where a partition has no such offset (the remote tier holds nothing).
NO_OFFSET = "\u2014"  # an em dash


def tier_table(tiers: list[PartitionTiers]) -> Any:
    """``tiers`` as a DataFrame indexed by partition: offsets as integers, and ``NO_OFFSET``
    where there is none (pandas would show ``13428.0`` and ``NaN`` for a column with a gap).
    """
    import dataclasses

    pd = _pandas()
    columns = [f.name for f in dataclasses.fields(PartitionTiers)]
    rows = [[NO_OFFSET if v is None else int(v) for v in dataclasses.astuple(t)] for t in tiers]
    return pd.DataFrame(rows, columns=columns, dtype=object).set_index("partition")


def sample_messages(spark: Any, source: TopicSource, count: int = 5, *, newest: bool) -> Any:
    """Up to ``count`` messages per partition, the oldest (likely from the remote tier) or
    the newest (the local tier), with JSON values spread into columns.

    Returns:
        A DataFrame: partition, offset, timestamp, tier, key, then the value's fields
        (``value`` as text when it is not a JSON object).
    """
    pd = _pandas()
    first, latest = source.offsets("earliest")
    start = {p: max(first[p], latest[p] - count) if newest else first[p] for p in latest}
    end = {p: min(latest[p], start[p] + count) for p in latest}
    rows = (
        source.read(
            spark,
            startingOffsets=offsets_json(source.topic, start),
            endingOffsets=offsets_json(source.topic, end),
        )
        .select("partition", "offset", "timestamp", "tier", "key", "value")
        .orderBy("partition", "offset")
        .collect()
    )
    records = []
    for r in rows:
        record = {
            "partition": r["partition"],
            "offset": r["offset"],
            "timestamp": r["timestamp"],
            "tier": r["tier"],
            "key": None if r["key"] is None else bytes(r["key"]).decode(errors="replace"),
        }
        record.update(_decoded(r["value"]))
        records.append(record)
    return pd.DataFrame(records)


def _decoded(value: bytes | bytearray | None) -> dict[str, Any]:
    if value is None:
        return {"value": None}
    text = bytes(value).decode(errors="replace")
    try:
        doc = json.loads(text)
    except ValueError:
        return {"value": text}
    return doc if isinstance(doc, dict) else {"value": doc}


@dataclass
class EventRate:
    """Events per time bin and tier, and where each partition's reads switch tiers.

    ``bins`` is a DataFrame indexed by the bin's start (UTC) with a column of event counts
    per tier; ``boundaries`` maps a partition that was read from both tiers to the
    timestamp of its first record read from the local tier.
    """

    topic: str
    bin_seconds: int
    bins: Any
    boundaries: dict[int, Any] = field(default_factory=dict)

    @property
    def per_minute(self) -> Any:
        """``bins`` as events per minute."""
        return self.bins * (60 / self.bin_seconds)

    def totals(self) -> dict[str, int]:
        return {str(tier): int(self.bins[tier].sum()) for tier in self.bins.columns}


def event_rate(spark: Any, source: TopicSource, bin_seconds: int = 60) -> EventRate:
    """Count the whole topic's records per ``bin_seconds`` of their timestamp and per tier,
    reading both tiers in one query.

    Raises:
        ValueError: ``bin_seconds`` is below 1.
    """
    from pyspark.sql import functions as F

    pd = _pandas()

    if bin_seconds < 1:
        raise ValueError(f"bin_seconds: {bin_seconds} is below 1")
    # One pass gives both answers: counts per bin, and per partition the earliest record
    # read from the local tier (the boundary), so the topic is read once.
    grouped = (
        source.read(spark)
        .groupBy(
            F.window("timestamp", f"{bin_seconds} seconds").start.alias("bin"),
            "tier",
            "partition",
        )
        .agg(F.count("*").alias("events"), F.min("timestamp").alias("first"))
        .toPandas()
    )
    if grouped.empty:
        bins = pd.DataFrame(columns=["remote", "local"], dtype="int64")
        return EventRate(source.topic, bin_seconds, bins)
    bins = grouped.pivot_table(
        index="bin", columns="tier", values="events", aggfunc="sum", fill_value=0
    )
    bins = bins.reindex(columns=["remote", "local"], fill_value=0).sort_index()
    bins.columns.name = None
    tiers = grouped.groupby("partition")["tier"].agg(set)
    both = {int(p) for p, seen in tiers.items() if seen == {"remote", "local"}}
    local = grouped[grouped["tier"] == "local"].groupby("partition")["first"].min()
    boundaries = {int(p): ts for p, ts in local.items() if int(p) in both}
    return EventRate(source.topic, bin_seconds, bins.astype("int64"), boundaries)


def plot_event_rate(rate: EventRate) -> Any:
    """Stacked bars of events per minute, coloured by tier, with dashed lines where each
    partition's reads switch from the remote to the local tier."""
    import matplotlib.dates as mdates
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.5), layout="constrained")
    ax = fig.add_subplot()
    per_minute = rate.per_minute
    width = rate.bin_seconds / 86400  # matplotlib dates are in days
    bottom = None
    for tier in ("remote", "local"):
        if tier not in per_minute or not per_minute[tier].any():
            continue
        values = per_minute[tier]
        ax.bar(
            per_minute.index,
            values,
            width=width,
            align="edge",
            bottom=bottom,
            color=TIER_COLOURS[tier],
            label=TIER_LABELS[tier],
        )
        bottom = values if bottom is None else bottom + values
    marks = sorted(rate.boundaries.items(), key=lambda item: item[1])
    if len(marks) > MAX_BOUNDARY_LINES:
        marks = [marks[0], marks[-1]]
    for n, (partition, ts) in enumerate(marks):
        ax.axvline(
            ts,
            color="black",
            linestyle="--",
            linewidth=1,
            label="tier boundary (first local record per partition)" if n == 0 else None,
        )
        ax.annotate(
            f"p{partition}",
            (mdates.date2num(ts), 1),
            xycoords=("data", "axes fraction"),
            xytext=(2, -12),
            textcoords="offset points",
            fontsize=8,
        )
    ax.set_title(f"{rate.topic}: events per minute by tier ({rate.bin_seconds} s bins)")
    ax.set_xlabel("record timestamp (UTC)")
    ax.set_ylabel("events per minute")
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator()))
    if bottom is not None and bottom.max() > 0:
        ax.set_ylim(0, bottom.max() * 1.15)  # headroom for the partition labels
    fig.legend(loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return fig
