"""``tierlog demo --data-dir``: it deletes only what it created, never what a running broker
uses, and prints its phases with the time elapsed (tierlog.tools.demo_dir, demo.Phases)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.broker.harness import BrokerProcess
from tests.cli import TIERLOG, one_line_failure, run
from tierlog.tools.demo_dir import MARKER, prepare
from tierlog.util.cli_errors import CliError


def users_dir(tmp_path: Path) -> Path:
    data = tmp_path / "mine"
    data.mkdir()
    (data / "thesis.tex").write_text("years of work\n")
    return data


@pytest.mark.parametrize("only", [[], ["--broker-only"]])
def test_a_directory_the_demo_did_not_create_is_refused(tmp_path: Path, only: list[str]) -> None:
    data = users_dir(tmp_path)
    line = one_line_failure(run(TIERLOG, "demo", *only, "--data-dir", str(data)), code=2)
    assert f"{data} is not empty and was not created by `tierlog demo`" in line
    assert "pass --force" in line
    assert (data / "thesis.tex").read_text() == "years of work\n"


def test_force_empties_it_and_the_phases_show_with_elapsed_time(tmp_path: Path) -> None:
    data = users_dir(tmp_path)
    result = run(
        TIERLOG, "demo", "--broker-only", "--events", "60000", "--data-dir", str(data), "--force",
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert not (data / "thesis.tex").exists()
    assert (data / MARKER).is_file() and (data / "logs").is_dir()
    phases = re.findall(r"^\[ *(\d+\.\d) s\] (.*)$", result.stdout, re.MULTILINE)
    texts = [text for _, text in phases]
    assert texts[0].startswith("broker started on 127.0.0.1:"), result.stdout
    assert any(t.startswith("produced 60,000 events") for t in texts), result.stdout
    assert any("offloaded to the remote tier" in t for t in texts), result.stdout
    assert any(t.startswith("consumed 60,000 events") for t in texts), result.stdout
    elapsed = [float(seconds) for seconds, _ in phases]
    assert elapsed == sorted(elapsed)


def test_a_directory_a_running_broker_uses_is_refused_even_with_force(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    prepare(data)  # a demo's directory...
    broker = BrokerProcess(data / "logs").start()  # ...that a broker now serves
    try:
        for extra in ([], ["--force"]):
            result = run(TIERLOG, "demo", "--data-dir", str(data), *extra)
            line = one_line_failure(result)
            assert f"{data} is in use by a running broker" in line, line
            assert "stop that broker first" in line
            assert (data / "logs" / "meta.properties").is_file()
    finally:
        broker.stop()
    prepare(data)  # stopped: the demo may have it again
    assert [p.name for p in data.iterdir()] == [MARKER]


def test_prepare_keeps_to_the_demos_own_directories(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    prepare(empty)  # an empty directory is anyone's
    legacy = tmp_path / "legacy"  # a demo's, from before the marker
    (legacy / "logs").mkdir(parents=True)
    (legacy / "delta").mkdir()
    prepare(legacy)
    assert [p.name for p in legacy.iterdir()] == [MARKER]
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(CliError, match="is not a directory"):
        prepare(a_file, force=True)
