"""``tierlog produce`` and ``tierlog consume`` against a real broker."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.broker.harness import BrokerProcess
from tests.tools.cli import Cli

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
def test_keyed_lines_round_trip_with_every_codec(
    cli: Cli, broker: BrokerProcess, codec: str
) -> None:
    cli.ok("topics", "create", "events", "--partitions", "3")
    lines = [f"user-{i % 7}|payload {i} with|bars" for i in range(40)]
    result = cli.run(
        "produce", "events", "--key-separator", "|", "--compression", codec,
        stdin="\n".join(lines) + "\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Produced 40 message(s) to events" in result.stderr
    out = cli.ok(
        "consume", "events", "--from-beginning", "--max-messages", "40", "--print-key",
        "--timeout-ms", "10000",
    )  # fmt: skip
    # Keys and values come back split at the first separator only, printed KEY<TAB>VALUE.
    assert sorted(out.splitlines()) == sorted(line.replace("|", "\t", 1) for line in lines)
    # Each key went to one partition, so per-key order is kept.
    for key in {line.split("|")[0] for line in lines}:
        got = [line for line in out.splitlines() if line.startswith(key + "\t")]
        assert got == [line.replace("|", "\t", 1) for line in lines if line.startswith(key + "|")]
    # The batches on disk really are compressed with the codec asked for.
    segments = [str(p) for p in broker.data_dir.glob("events-*")]
    dumped = subprocess.run(
        [sys.executable, "-m", "tierlog.cli", "dump-log", *segments],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert f"compresscodec: {codec}" in dumped.stdout, dumped.stdout[:2000]


def test_offset_and_partition_select_where_reading_starts(cli: Cli) -> None:
    cli.ok("topics", "create", "ledger", "--partitions", "2")
    cli.ok("produce", "ledger", "--partition", "1", stdin="".join(f"p1-{i}\n" for i in range(10)))
    cli.ok("produce", "ledger", "--partition", "0", "--acks", "1", stdin="p0-0\np0-1\np0-2\n")

    out = cli.ok("consume", "ledger", "--partition", "1", "--offset", "4", "--max-messages", "6")
    assert out.splitlines() == [f"p1-{i}" for i in range(4, 10)]
    out = cli.ok(
        "consume", "ledger", "--partition", "1", "--offset", "8", "--print-offset",
        "--timeout-ms", "1500",
    )  # fmt: skip
    assert out.splitlines() == ["Partition:1\tOffset:8\tp1-8", "Partition:1\tOffset:9\tp1-9"]
    # --offset without --partition starts every partition there.
    out = cli.ok("consume", "ledger", "--offset", "2", "--max-messages", "9")
    assert sorted(out.splitlines()) == sorted(["p0-2"] + [f"p1-{i}" for i in range(2, 10)])
    # Without --from-beginning or --offset, reading starts at the end: nothing old arrives.
    result = cli.run("consume", "ledger", "--timeout-ms", "700")
    assert result.returncode == 0 and result.stdout == ""
    assert "Processed a total of 0 messages" in result.stderr


def test_failed_lines_and_bad_targets_exit_non_zero(cli: Cli) -> None:
    cli.ok("topics", "create", "strict")
    stderr = cli.fails(
        "produce", "strict", "--key-separator", ":", stdin="a:1\nno-separator\nb:2\n"
    )
    assert (
        "line 2: no key separator" in stderr
        and "Produced 2 message(s) to strict; 1 failed" in stderr
    )
    assert "no partition 3" in cli.fails("produce", "strict", "--partition", "3", stdin="x\n")
    assert "no partition 3" in cli.fails(
        "consume", "strict", "--partition", "3", "--timeout-ms", "500"
    )
    assert "Topic 'ghost' does not exist" in cli.fails("consume", "ghost", "--timeout-ms", "500")
    assert "cannot be used with a consumer group" in cli.fails(
        "consume", "strict", "--group", "g", "--partition", "0", "--timeout-ms", "500"
    )
    # Only the two good lines were written.
    assert cli.ok("consume", "strict", "--from-beginning", "--timeout-ms", "1500").split() == [
        "1",
        "2",
    ]
