"""A pipeline whose inputs are not there says so in one line before Spark starts: the
shipped configs read the demo's data, so "run `make demo` first"."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.cli import one_line_failure, run


def test_replay_of_a_remote_tier_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "data" / "demo" / "logs" / "remote"
    result = run(
        sys.executable, "-m", "pipelines.replay", "--config", "configs/replay.toml",
        "--set", f"remote_url={missing}",
    )  # fmt: skip
    line = one_line_failure(result, "python -m pipelines.replay")
    assert line == (
        f"python -m pipelines.replay: no remote tier at {missing} (no such directory); the "
        "shipped configs read the demo's data: run `make demo` first, or --set remote_url=URL"
    )
