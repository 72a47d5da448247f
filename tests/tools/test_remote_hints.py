"""``tierlog remote ls`` where there is no remote tier says where to look instead."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.cli import TIERLOG, one_line_failure

HINT = (
    "point at the broker's remote tier with --remote-url URL or --config server.properties "
    "(the demo's: --remote-url data/demo/logs/remote; run `make demo` first)"
)


def ls(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TIERLOG, "remote", "ls", "activity", *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_no_remote_tier_at_the_default_place(tmp_path: Path) -> None:
    line = one_line_failure(ls(tmp_path))
    assert line == (
        f"tierlog: {(tmp_path / 'data' / 'remote').as_uri()}: no such remote directory; {HINT}"
    )


def test_a_remote_tier_without_the_topic(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    line = one_line_failure(ls(tmp_path, "--remote-url", "empty"))
    assert line == (
        "tierlog: no remote partition of topic 'activity' under empty (nothing of it "
        f"offloaded yet, or another remote tier); {HINT}"
    )
