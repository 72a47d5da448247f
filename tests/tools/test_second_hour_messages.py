"""The small answers a user meets after the demo (issue 25, item 10): a subcommand group
named by its choices, a "did you mean" for a mistyped broker key, a missing config file in
one line, an empty cluster's `topics list` saying so, and `notebook run` naming its HTML
copy. Real processes, as a user runs them."""

from __future__ import annotations

from pathlib import Path

from tests.cli import REPO, TIERLOG, one_line_failure, run
from tests.tools.cli import Cli
from tierlog.broker.config import BrokerConfig
from tierlog.util.configdef import ConfigError


def test_a_subcommand_group_alone_names_its_choices() -> None:
    result = run(TIERLOG, "broker")
    assert result.returncode == 2
    assert "the following arguments are required: {start}" in result.stderr
    assert "broker_command" not in result.stderr
    result = run(TIERLOG, "cluster")
    assert "required: {start,status" in result.stderr and "cluster_command" not in result.stderr


def test_an_unknown_broker_key_suggests_the_close_one(tmp_path: Path) -> None:
    try:
        BrokerConfig({"log.retention.hour": "24"})
    except ConfigError as exc:
        assert exc.key == "log.retention.hour"
        assert "did you mean 'log.retention.hours'?" in str(exc)
    else:
        raise AssertionError("an unknown key was accepted")
    # Nothing close: no guess.
    try:
        BrokerConfig({"colour": "blue"})
    except ConfigError as exc:
        assert "did you mean" not in str(exc)
    result = run(
        TIERLOG,
        "broker",
        "start",
        "--override",
        f"log.dirs={tmp_path}",
        "--override",
        "num.partition=3",
    )
    line = one_line_failure(result, code=2)
    assert "num.partition" in line and "did you mean 'num.partitions'?" in line


def test_a_missing_config_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "server.properties"
    line = one_line_failure(run(TIERLOG, "broker", "start", "--config", str(missing)), code=2)
    assert f"config file {missing} does not exist (--config)" in line
    assert "Errno" not in line
    line = one_line_failure(run(TIERLOG, "broker", "start", "--config", str(tmp_path)), code=2)
    assert "is a directory" in line


def test_topics_list_on_an_empty_cluster_says_so(cli: Cli) -> None:
    result = run(TIERLOG, "topics", "list", "--bootstrap-server", cli.bootstrap)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # scripts reading names get none
    assert "no topics yet" in result.stderr
    cli.ok("topics", "create", "one")
    result = run(TIERLOG, "topics", "list", "--bootstrap-server", cli.bootstrap)
    assert result.stdout.split() == ["one"] and "no topics" not in result.stderr


def test_notebook_run_names_its_html_copy(tmp_path: Path) -> None:
    data = REPO / "tests" / "jobs" / "data"
    result = run(
        TIERLOG,
        "notebook",
        "run",
        str(data / "summary.ipynb"),
        "--runs-dir",
        str(tmp_path / "runs"),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    output = Path(result.stdout.strip())
    html = output.with_suffix(".html")
    assert (REPO / html).is_file() or html.is_file()
    assert f"HTML copy {html}" in result.stderr, result.stderr


def test_the_readme_broker_keeps_its_own_directory() -> None:
    config = BrokerConfig.load(REPO / "configs" / "server.properties")
    assert [str(d) for d in config.log_dirs] == ["data/broker"]
