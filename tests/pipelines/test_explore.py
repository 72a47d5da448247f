"""pipelines.explore without Spark (the explore_events notebook test runs the rest): offsets
per tier against a real partly offloaded topic, value decoding, and the plot's marks."""

from __future__ import annotations

from typing import Any

import pandas as pd

from pipelines.explore import (
    NO_OFFSET,
    EventRate,
    PartitionTiers,
    _decoded,
    plot_event_rate,
    tier_offsets,
    tier_table,
    topics,
)
from tests.tiered_data import TieredTopic


def test_offsets_per_tier(tiered: TieredTopic) -> None:
    ends = tiered.remote_ends()
    tiers = tier_offsets(tiered.bootstrap, tiered.topic, tiered.remote_url)
    assert [t.partition for t in tiers] == [0, 1]
    assert sum(t.latest for t in tiers) == 4000
    for t in tiers:
        assert t.log_start == t.remote_start == 0
        assert t.remote_end == ends[t.partition]
        assert 0 < t.local_start <= t.remote_end <= t.latest
    hot_only = tier_offsets(tiered.bootstrap, tiered.topic)
    assert all(t.remote_start is None and t.remote_end is None for t in hot_only)
    listed = topics(tiered.bootstrap).set_index("topic")
    assert listed.loc[tiered.topic].tolist() == [2, 4000]


def test_values_are_decoded_as_json_when_they_are_objects() -> None:
    assert _decoded(b'{"event":"click","ts":5}') == {"event": "click", "ts": 5}
    assert _decoded(b"[1, 2]") == {"value": [1, 2]}
    assert _decoded(b"plain \xff") == {"value": "plain \ufffd"}
    assert _decoded(None) == {"value": None}


def test_the_plot_stacks_tiers_and_marks_each_boundary() -> None:
    index = pd.date_range("2024-05-01 12:00", periods=4, freq="60s")
    bins = pd.DataFrame({"remote": [10, 10, 4, 0], "local": [0, 0, 6, 10]}, index=index)
    marks = {0: index[2] + pd.Timedelta("10s"), 1: index[2] + pd.Timedelta("40s")}
    rate = EventRate("t", 60, bins, marks)
    assert rate.totals() == {"remote": 24, "local": 16}
    fig: Any = plot_event_rate(rate)
    ax = fig.axes[0]
    assert len(ax.patches) == 8  # one bar per bin and tier
    assert len(ax.get_lines()) == 2  # one dashed line per partition's boundary
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sorted(labels) == [
        "local tier (broker)",
        "remote tier (object storage)",
        "tier boundary (first local record per partition)",
    ]


def test_the_tier_table_shows_integers_and_a_dash_for_no_offset() -> None:
    """Issue 25 item 3: pandas showed a remote range a partition lacks as NaN, and the
    other partitions' offsets as floats (13428.0)."""
    table = tier_table(
        [
            PartitionTiers(0, 0, 0, 13428, 13000, 20000),
            PartitionTiers(1, 0, None, None, 0, 7),
        ]
    )
    assert list(table.index) == [0, 1]
    assert table.loc[0, "remote_end"] == 13428 and isinstance(table.loc[0, "remote_end"], int)
    assert table.loc[1, "remote_start"] == NO_OFFSET == "\u2014"
    shown = table.to_string()
    assert "13428" in shown and "13428.0" not in shown and "NaN" not in shown
    assert "\u2014" in table.to_html()
