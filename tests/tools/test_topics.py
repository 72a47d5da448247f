"""``tierlog topics`` against a real broker."""

from __future__ import annotations

import re

from tests.tools.cli import Cli


def partition_lines(describe_output: str, topic: str) -> list[str]:
    return [line for line in describe_output.splitlines() if line.startswith(f"\tTopic: {topic}\t")]


def configs_of(describe_output: str, topic: str) -> str:
    match = re.search(rf"^Topic: {topic}\t.*\tConfigs: (.*)$", describe_output, re.M)
    assert match, describe_output
    return match.group(1)


def test_create_list_describe_alter_delete(cli: Cli) -> None:
    out = cli.ok(
        "topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=86400000"
    )
    assert out.strip() == "Created topic orders."
    cli.ok("topics", "create", "audit", "--replication-factor", "1")
    assert {"orders", "audit"} <= set(cli.ok("topics", "list").split())

    described = cli.ok("topics", "describe", "orders")
    assert "PartitionCount: 3\tReplicationFactor: 1" in described
    assert configs_of(described, "orders") == "retention.ms=86400000"
    rows = partition_lines(described, "orders")
    assert re.findall(r"\tPartition: (\d+)\t", "\n".join(rows)) == ["0", "1", "2"]
    assert all(re.search(r"\tLeader: \d+\tReplicas: \d+\tIsr: \d+\tOffline: $", r) for r in rows), (
        rows
    )

    out = cli.ok(
        "topics", "alter", "orders", "--partitions", "5",
        "--config", "cleanup.policy=compact", "--delete-config", "retention.ms",
    )  # fmt: skip
    assert "partitions 3 -> 5" in out
    described = cli.ok("topics", "describe")  # every topic
    assert len(partition_lines(described, "orders")) == 5
    assert configs_of(described, "orders") == "cleanup.policy=compact"
    assert len(partition_lines(described, "audit")) == 1  # the broker's num.partitions

    assert cli.ok("topics", "delete", "orders", "audit").split("\n")[:2] == [
        "Deleted topic orders.",
        "Deleted topic audit.",
    ]
    assert not {"orders", "audit"} & set(cli.ok("topics", "list").split())


def test_refusals_are_one_line_errors(cli: Cli) -> None:
    cli.ok("topics", "create", "kept", "--partitions", "2")
    assert "already exists" in cli.fails("topics", "create", "kept")
    assert "Topic 'ghost' does not exist" in cli.fails("topics", "describe", "ghost")
    # Known topics are still described; the unknown one makes the exit code 1.
    result = cli.run("topics", "describe", "kept", "ghost")
    assert result.returncode == 1
    assert "Topic: kept\t" in result.stdout and "Topic 'ghost' does not exist" in result.stderr
    assert "Topic 'ghost' does not exist" in cli.fails(
        "topics", "alter", "ghost", "--partitions", "3"
    )
    assert "Topic 'ghost' does not exist" in cli.fails("topics", "delete", "ghost")
    assert "can only increase" in cli.fails("topics", "alter", "kept", "--partitions", "2")
    assert "nothing to alter" in cli.fails("topics", "alter", "kept")
    assert "unknown" in cli.fails("topics", "alter", "kept", "--config", "no.such.key=1").lower()
    assert "key=value" in cli.fails("topics", "create", "other", "--config", "novalue")
    # Looking a topic up never auto-creates it.
    assert "ghost" not in cli.ok("topics", "list").split()
