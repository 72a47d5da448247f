"""README.md runs as written: after the demo, every ```sh and ```python block in order, in a
directory laid out like a fresh clone after ``make demo`` (tests/readme.py says how the
README marks long-running commands, their Ctrl-C, and the few blocks no test can run).

The demo is smaller than ``make demo``'s (tests/demo_data.py); everything after it is the
README's own text. The whole run takes a few minutes on a small machine, most of it Spark.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import readme
from tests.background import Background
from tests.demo_data import REPO, clone_after_demo, demo_data, tierlog_env

# The README's brokers listen on 127.0.0.1:9092 (tests/conftest.py: one process runs these).
pytestmark = pytest.mark.fixed_ports

# Blocks the README marks `readme-test: skip` (make demo/make test, S3, the benchmarks).
# A new one is a decision to make here, not something to slip in.
EXPECTED_SKIPS = 3
# The slowest block is a pipeline or notebook run: Spark's start-up and a job. A hang guard
# sized for the full suite's end, when four processes each run Spark beside it (load 16).
COMMAND_TIMEOUT_S = 600.0


def run(step: readme.Step, cwd: Path) -> None:
    """Run one block, command by command for shell blocks (a failure in the middle of a
    block must not pass because a later command succeeds).

    Raises:
        AssertionError: naming the README line, the command, its status and output.
    """
    if step.language == "python":
        python = cwd / ".venv" / "bin" / "python"
        # -c, as at a prompt or in a notebook: the working directory is on sys.path.
        invocations = [([str(python if python.exists() else sys.executable), "-c", step.text], "")]
    else:
        invocations = [(["bash", "-o", "pipefail", "-c", c], c) for c in step.commands()]
    for args, command in invocations:
        try:
            result = subprocess.run(
                args,
                cwd=cwd,
                env=tierlog_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(
                f"README.md line {step.line}: `{command or 'python block'}` did not finish in "
                f"{COMMAND_TIMEOUT_S:.0f} s"
            ) from exc
        assert result.returncode == 0, (
            f"README.md line {step.line}: `{command or step.text}` exited {result.returncode}:\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )


def follow(steps: list[readme.Step], cwd: Path, logs: Path) -> None:
    """Do the steps in order in ``cwd``: run blocks, start background commands and wait
    until they are ready, Ctrl-C them at each ``stop``. Skipped steps are left out.

    Raises:
        AssertionError: a step failed, or a background command was never stopped.
    """
    logs.mkdir(parents=True, exist_ok=True)
    running: list[Background] = []
    try:
        for step in steps:
            if step.kind == "run":
                run(step, cwd)
            elif step.kind == "background":
                log = logs / f"line-{step.line}.log"
                running.append(Background(step.commands()[0], cwd, tierlog_env(), step.ready, log))
                running[-1].wait_ready()
            elif step.kind == "stop":
                while running:
                    process = running.pop(0)
                    status = process.interrupt()
                    assert status == 0, (
                        f"`{process.command}` exited {status} on Ctrl-C:\n"
                        f"{process.output()[-3000:]}"
                    )
        assert not running, (
            "still running at the end of the README (no `readme-test: stop` after them): "
            f"{[process.command for process in running]}"
        )
    finally:
        for process in running:
            process.kill()


@pytest.mark.timeout(1800)  # a hang guard: about 4 min on an idle 2-core machine
def test_the_readme_runs_as_written_after_the_demo(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    steps = readme.read(REPO / "README.md")
    skipped = [(step.line, step.reason) for step in steps if step.kind == "skip"]
    assert len(skipped) == EXPECTED_SKIPS, skipped
    clone = clone_after_demo(tmp_path / "clone", demo_data(tmp_path_factory))
    follow(steps, clone, tmp_path / "logs")
    # What the steps leave behind, so that a block that silently did nothing shows.
    assert (clone / "data" / "delta" / "bronze" / "activity" / "_delta_log").is_dir()
    assert list((clone / "runs").glob("explore_events-*.ipynb"))
    assert (clone / "data" / "broker" / "clicks-0").is_dir()  # configs/server.properties


# --- the follower itself: it fails when the README is wrong ---------------------------------


def test_a_failing_command_fails_even_when_a_later_one_succeeds(tmp_path: Path) -> None:
    steps = readme.parse("```sh\ntrue\nfalse   # broken\ntrue\n```\n")
    with pytest.raises(AssertionError, match=r"line 1: `false   # broken` exited 1"):
        follow(steps, tmp_path, tmp_path / "logs")


def test_a_failing_python_block_fails(tmp_path: Path) -> None:
    steps = readme.parse("text\n\n```python\nimport no_such_module_here\n```\n")
    with pytest.raises(AssertionError, match="ModuleNotFoundError"):
        follow(steps, tmp_path, tmp_path / "logs")


def test_a_background_command_is_stopped_by_ctrl_c_and_must_be(tmp_path: Path) -> None:
    server = (
        '<!-- readme-test: background ready="serving" -->\n'
        "```sh\n"
        f"{sys.executable} -c \"import time; print('serving', flush=True); time.sleep(60)\"\n"
        "```\n"
    )
    # Python's default Ctrl-C is a KeyboardInterrupt traceback: not a clean stop.
    with pytest.raises(AssertionError, match=r"exited -?\d+ on Ctrl-C"):
        follow(readme.parse(server + "<!-- readme-test: stop -->\n"), tmp_path, tmp_path / "l")
    with pytest.raises(AssertionError, match="no `readme-test: stop` after them"):
        follow(readme.parse(server), tmp_path, tmp_path / "l")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("<!-- readme-test: skp: typo -->\n```sh\nls\n```\n", "unknown directive"),
        ("<!-- readme-test: skip: why -->\n\nprose\n```sh\nls\n```\n", "not followed by a block"),
        ("```bash\nls\n```\n", "tag commands ```sh or ```python"),
        ("```\nls\n```\n", "tag commands ```sh or ```python"),
        ('<!-- readme-test: background ready="x" -->\n```sh\na\nb\n```\n', "one shell command"),
        ("```sh\nls\n", "never ends"),
    ],
)
def test_markers_and_blocks_it_does_not_understand_are_errors(text: str, error: str) -> None:
    with pytest.raises(readme.ReadmeError, match=error):
        readme.parse(text)


def test_skipped_blocks_are_counted_not_run(tmp_path: Path) -> None:
    steps = readme.parse(
        "<!-- readme-test: skip: needs a cloud\n   account -->\n```sh\nfalse\n```\n"
    )
    assert [(step.kind, step.reason) for step in steps] == [("skip", "needs a cloud account")]
    follow(steps, tmp_path, tmp_path / "logs")  # `false` is not run


def test_a_block_indented_in_a_list_is_run_too() -> None:
    steps = readme.parse("- a list item:\n\n  ```sh\n  false\n  ```\n")
    assert [(step.kind, step.commands()) for step in steps] == [("run", ["false"])]
