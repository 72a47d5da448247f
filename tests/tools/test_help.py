"""``tierlog --help`` is written for a user: what tierlog is first; ``demo --help`` says what
every option does and its default."""

from __future__ import annotations

from tests.cli import TIERLOG, run


def test_help_opens_with_what_tierlog_is() -> None:
    result = run(TIERLOG, "--help")
    assert result.returncode == 0, result.stderr
    after_usage = result.stdout.split("\n\n", 1)[1]
    assert after_usage.startswith("tierlog is a Kafka-compatible commit log"), result.stdout
    assert "``" not in result.stdout  # no developer docstring
    assert "tierlog demo" in after_usage and "examples:" in result.stdout


def test_demo_help_describes_its_options_and_defaults() -> None:
    result = run(TIERLOG, "demo", "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())  # argparse wraps lines
    for expected in (
        "--data-dir DIR where the broker's logs, the remote tier and the Delta tables go",
        "(default: ./data/demo)",
        "--force empty --data-dir even if the demo did not create it",
        "(default: 100,000; 200,000 with --broker-only)",
        "(default: notebooks)",
        "(default: runs)",
        "--broker-only only the broker part",
        "Prints each phase with the time elapsed",
    ):
        assert expected in text, (expected, result.stdout)
