"""tierlog.jobs.runner: real papermill, a real kernel, the real ``tierlog`` command."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import nbformat
import pytest

from tests.jobs.conftest import DATA, report, stream_text, tierlog
from tierlog.jobs import runner


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("7", 7),
        ("-3", -3),
        ("0.25", 0.25),
        ("1e3", 1000.0),
        ("True", True),
        ("true", True),
        ("False", False),
        ("false", False),
        ("None", None),
        ("none", None),
        ("localhost:9092", "localhost:9092"),
        ("", ""),
        ("TRUE", "TRUE"),
    ],
)
def test_parameters_are_typed_as_papermill_types_them(text: str, value: object) -> None:
    parsed = runner.parse_parameter(text)
    assert parsed == value and type(parsed) is type(value)


def test_a_notebook_is_found_by_name_with_or_without_suffix_or_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert runner.resolve_notebook("report", DATA) == DATA / "report.ipynb"
    assert runner.resolve_notebook("report.ipynb", DATA) == DATA / "report.ipynb"
    assert runner.resolve_notebook(str(DATA / "fails"), tmp_path) == DATA / "fails.ipynb"
    monkeypatch.chdir(DATA.parent)
    found = runner.resolve_notebook("./data/fails.ipynb", tmp_path)
    assert found == Path("data/fails.ipynb")


def test_a_missing_notebook_names_the_dir_and_what_is_there(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no notebook 'nope' in .*data; available: "):
        runner.resolve_notebook("nope", DATA)
    with pytest.raises(FileNotFoundError, match=r"wait_for_release"):
        runner.resolve_notebook("nope", DATA)
    with pytest.raises(FileNotFoundError, match="has no notebooks"):
        runner.resolve_notebook("nope", tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="no notebook at"):
        runner.resolve_notebook(str(tmp_path / "nope.ipynb"), DATA)


def test_the_output_name_is_never_reused(tmp_path: Path) -> None:
    started = datetime(2024, 5, 1, 12, 30, 5, tzinfo=UTC)
    first = runner.reserve_output(tmp_path / "runs", "job", started)
    second = runner.reserve_output(tmp_path / "runs", "job", started)
    third = runner.reserve_output(tmp_path / "runs", "job", started)
    assert [p.name for p in (first, second, third)] == [
        "job-20240501T123005Z.ipynb",
        "job-20240501T123005Z-1.ipynb",
        "job-20240501T123005Z-2.ipynb",
    ]


def test_dirs_come_from_the_flag_then_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(runner.NOTEBOOKS_DIR_ENV, raising=False)
    monkeypatch.setenv(runner.RUNS_DIR_ENV, "/srv/runs")
    assert runner.notebooks_dir() == Path("notebooks")
    assert runner.runs_dir() == Path("/srv/runs")
    assert runner.runs_dir("here") == Path("here")


def test_a_run_injects_parameters_runs_on_this_python_in_cwd_and_keeps_old_outputs(
    tmp_path: Path,
) -> None:
    started = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    runs = tmp_path / "runs"
    taken = runs / "report-20240501T120000Z.ipynb"
    runs.mkdir()
    taken.write_text("an earlier run")
    work = tmp_path / "work"
    work.mkdir()

    run = runner.run_notebook(
        "report",
        {"greeting": "hi", "count": 3, "flag": True, "nothing": None},
        notebooks_dir=DATA,
        runs_dir=runs,
        cwd=work,
        clock=lambda: started,
    )

    assert run.ok and run.error is None, run.error
    assert run.output == (runs / "report-20240501T120000Z-1.ipynb").resolve()
    assert taken.read_text() == "an earlier run"
    assert run.notebook == (DATA / "report.ipynb").resolve()
    assert run.started == started and run.duration_s > 0
    values = report(run.output)
    assert {k: values[k] for k in ("greeting", "count", "ratio", "flag", "nothing")} == {
        "greeting": "hi",
        "count": 3,
        "ratio": 0.5,
        "flag": True,
        "nothing": None,
    }
    assert values["prefix"] == sys.prefix
    assert values["cwd"] == str(work.resolve())
    executed = json.loads(run.output.read_text())
    assert executed["metadata"]["papermill"]["parameters"]["greeting"] == "hi"
    assert executed["metadata"]["kernelspec"]["name"] == "python3"


def test_progress_names_each_code_cell_as_it_starts(tmp_path: Path) -> None:
    lines: list[str] = []
    run = runner.run_notebook(
        "report",
        {"greeting": "hi"},
        notebooks_dir=DATA,
        runs_dir=tmp_path / "runs",
        cwd=tmp_path,
        progress=lines.append,
    )
    assert run.ok, run.error
    # papermill's injected cell counts: it runs. Its comment line is passed over.
    assert lines == [
        'cell 1 of 3: greeting = "hello"',
        'cell 2 of 3: greeting = "hi"',
        "cell 3 of 3: import json",
    ]


def test_progress_lines_name_the_section_and_a_line_that_says_something() -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A notebook\n\nIntro."),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_markdown_cell("## Ingest\nReads the topic."),
        nbformat.v4.new_code_cell("# a comment\n(\n    spark.read.format('tierlog')\n)"),
        nbformat.v4.new_code_cell("   "),  # empty: nbclient skips it, so it is not counted
        nbformat.v4.new_code_cell("y = " + "1 + " * 30 + "1"),
    ]
    lines: list[str] = []
    progress = runner.CellProgress(lines.append)
    progress.notebook_start(notebook=nb)
    for index in (1, 3, 5):
        progress.cell_execute(cell=nb.cells[index], cell_index=index)
    assert lines[:2] == [
        "cell 1 of 3: x = 1",  # the notebook's title is no section
        "cell 2 of 3 (Ingest): spark.read.format('tierlog')",
    ]
    long_line = lines[2].removeprefix("cell 3 of 3 (Ingest): ")
    assert long_line.startswith("y = 1 + 1") and long_line.endswith("...")
    assert len(long_line) == 60


def test_cli_prints_progress_on_stderr_and_only_the_path_on_stdout(tmp_path: Path) -> None:
    env = {"TIERLOG_NOTEBOOKS_DIR": str(DATA)}
    result = tierlog("notebook", "run", "report", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("runs/report-")
    assert len(result.stdout.splitlines()) == 1
    stderr = result.stderr.splitlines()
    assert re.fullmatch(r"\[ *\d+\.\d s\] cell 1 of 2: greeting = \"hello\"", stderr[0]), stderr
    assert re.fullmatch(r"\[ *\d+\.\d s\] cell 2 of 2: import json", stderr[1]), stderr
    assert re.fullmatch(
        r"\[ *\d+\.\d s\] notebook report finished in \d+\.\d s; HTML copy runs/report-\S+\.html",
        stderr[-1],
    ), stderr[-1]

    quiet = tierlog("notebook", "run", "report", "--quiet", cwd=tmp_path, env=env)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_a_cell_over_the_timeout_fails_the_run_and_keeps_the_output(tmp_path: Path) -> None:
    run = runner.run_notebook(
        "wait_for_release",
        {"started_path": str(tmp_path / "started"), "release_path": str(tmp_path / "never")},
        notebooks_dir=DATA,
        runs_dir=tmp_path / "runs",
        timeout_s=1,
    )
    assert not run.ok
    assert run.error is not None and "1 s timeout" in run.error
    assert (tmp_path / "started").exists()  # the cell did start
    assert run.output.exists() and "KeyboardInterrupt" in run.output.read_text()


def test_cli_runs_a_notebook_with_typed_and_raw_parameters(tmp_path: Path) -> None:
    # A python3 kernel spec that is not this Python comes first on the Jupyter path; the
    # run must not use it.
    bogus = tmp_path / "jupyter" / "kernels" / "python3"
    bogus.mkdir(parents=True)
    (bogus / "kernel.json").write_text(
        json.dumps({"argv": ["/bin/false", "{connection_file}"], "display_name": "wrong"})
    )
    result = tierlog(
        "notebook",
        "run",
        "report.ipynb",
        "-p",
        "count",
        "42",
        "-p",
        "ratio",
        "2.5",
        "-p",
        "flag",
        "true",
        "-p",
        "nothing",
        "none",
        "-r",
        "label",
        "007",
        "--notebooks-dir",
        str(DATA),
        cwd=tmp_path,
        env={"JUPYTER_PATH": str(tmp_path / "jupyter"), "TIERLOG_RUNS_DIR": "out"},
    )
    assert result.returncode == 0, result.stderr
    output = tmp_path / result.stdout.strip()
    assert output.parent == tmp_path / "out" and output.name.startswith("report-")
    values = report(output)
    assert (values["count"], values["ratio"], values["flag"]) == (42, 2.5, True)
    assert (values["nothing"], values["label"]) == (None, "007")
    assert values["prefix"] == sys.prefix
    assert values["cwd"] == str(tmp_path.resolve())


def test_cli_failing_cell_exits_1_names_the_cell_and_keeps_the_output(tmp_path: Path) -> None:
    env = {"TIERLOG_NOTEBOOKS_DIR": str(DATA)}
    result = tierlog("notebook", "run", "fails", "-p", "message", "no luck", cwd=tmp_path, env=env)
    assert result.returncode == 1, (result.stdout, result.stderr)
    output = tmp_path / result.stdout.strip()
    assert "Traceback" not in result.stderr
    assert (
        f"tierlog: notebook fails: In [4] raised RuntimeError: no luck; output kept at "
        f"{result.stdout.strip()}"
    ) in result.stderr
    text = stream_text(output)
    assert "before the failure" in text and "after the failure" not in text
    executed = json.loads(output.read_text())
    assert executed["metadata"]["papermill"]["exception"] is True


def test_cli_missing_notebook_exits_2_without_running_anything(tmp_path: Path) -> None:
    result = tierlog("notebook", "run", "nope", "--notebooks-dir", str(DATA), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("tierlog: no notebook 'nope' in ")
    assert "available: fails, report, summary, wait_for_release" in result.stderr
    assert not (tmp_path / "runs").exists()
