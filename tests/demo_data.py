"""What a clone looks like after ``make demo``, for the tests that go on from there (the
README's steps, the shipped schedule): the demo's data made once per test session, and
directories laid out like the clone with a copy of that data in ``data/demo``.

The demo is ``tierlog demo`` itself, with fewer events than ``make demo``'s 100,000: still
enough that every partition of ``activity`` has segments in the remote tier.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEMO_EVENTS = 60_000
# The demo takes about a minute on a small machine (its notebook's Spark start-up), and
# more than five on a 2-core machine shared with several test runs; this only stops a hang.
DEMO_TIMEOUT_S = 900.0


def tierlog_env() -> dict[str, str]:
    """The environment of a user's shell: none of the test run's TIERLOG_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERLOG_")}
    return {**env, "PYTHONUNBUFFERED": "1"}


def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished demo's data dir, made on first use in this test session and reused."""
    root = tmp_path_factory.getbasetemp() / "demo-data"
    data_dir = root / "data" / "demo"
    done = root / "finished"
    if done.exists():
        return data_dir
    root.mkdir(exist_ok=True)
    result = subprocess.run(
        [
            str(Path(sys.prefix) / "bin" / "tierlog"),
            "demo",
            "--data-dir",
            str(data_dir),
            "--events",
            str(DEMO_EVENTS),
            "--notebooks-dir",
            str(REPO / "notebooks"),
            "--runs-dir",
            str(root / "runs"),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
        env=tierlog_env(),
    )
    assert result.returncode == 0, f"tierlog demo failed:\n{result.stdout}\n{result.stderr}"
    done.write_text(result.stdout)
    return data_dir


def tracked_top_level() -> set[str]:
    """The repo's top-level files and directories that git tracks: what a clone holds,
    without this working tree's own data, runs, caches or spark-warehouse."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    return {path.split("/", 1)[0] for path in listed.split("\0") if path}


def clone_after_demo(directory: Path, demo: Path) -> Path:
    """``directory`` laid out as a clone after ``make demo``: the repo's files linked, the
    venv running the tests as ``.venv``, the demo's data copied into ``data/demo``.

    Returns:
        ``directory``.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for name in tracked_top_level():
        (directory / name).symlink_to(REPO / name)
    (directory / ".venv").symlink_to(sys.prefix)  # the venv running the tests
    shutil.copytree(demo, directory / "data" / "demo", ignore=shutil.ignore_patterns(".lock"))
    return directory
