"""``tierlog groups`` against a real broker, with groups made by the console consumer."""

from __future__ import annotations

import time

from confluent_kafka import Consumer

from tests.tools.cli import Cli


def offsets_table(describe_output: str) -> dict[tuple[str, int], dict[str, str]]:
    """``(topic, partition) -> {column: value}`` from ``groups describe``."""
    lines = describe_output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("GROUP "))
    headers = lines[start].split()
    rows = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        row = dict(zip(headers, line.split(), strict=True))
        rows[(row["TOPIC"], int(row["PARTITION"]))] = row
    return rows


def total(rows: dict[tuple[str, int], dict[str, str]], column: str) -> int:
    return sum(int(r[column]) for r in rows.values())


def test_group_commits_lag_and_reset_to_earliest(cli: Cli) -> None:
    cli.ok("topics", "create", "clicks", "--partitions", "2")
    # Explicit partitions: unkeyed messages would go wherever the sticky partitioner
    # puts them, and a partition without a committed offset is not listed.
    cli.ok("produce", "clicks", "--partition", "0", stdin="".join(f"c{i}\n" for i in range(5)))
    cli.ok("produce", "clicks", "--partition", "1", stdin="".join(f"c{i}\n" for i in range(5, 10)))
    # Only what was printed is committed, though the consumer fetched more.
    first = cli.ok(
        "consume", "clicks", "--group", "dash", "--from-beginning", "--max-messages", "6",
        "--timeout-ms", "10000",
    )  # fmt: skip
    assert total(offsets_table(cli.ok("groups", "describe", "dash")), "LAG") == 4
    rest = cli.ok(
        "consume", "clicks", "--group", "dash", "--max-messages", "4", "--timeout-ms", "10000"
    )
    assert sorted(first.split() + rest.split()) == sorted(f"c{i}" for i in range(10))
    assert "dash" in cli.ok("groups", "list").split()

    described = cli.ok("groups", "describe", "dash")
    assert "State: Empty" in described and "has no active members" in described
    rows = offsets_table(described)
    assert total(rows, "CURRENT-OFFSET") == 10 and total(rows, "LAG") == 0

    cli.ok("produce", "clicks", "--partition", "0", stdin="n1\nn2\n")
    cli.ok("produce", "clicks", "--partition", "1", stdin="n3\nn4\n")
    rows = offsets_table(cli.ok("groups", "describe", "dash"))
    assert total(rows, "LOG-END-OFFSET") == 14 and total(rows, "LAG") == 4

    # A dry run prints the plan and commits nothing.
    plan = cli.run("groups", "reset-offsets", "dash", "--topic", "clicks", "--to-earliest")
    assert plan.returncode == 0 and "Dry run" in plan.stderr
    assert [line.split()[-1] for line in plan.stdout.splitlines()[1:]] == ["0", "0"]
    assert total(offsets_table(cli.ok("groups", "describe", "dash")), "LAG") == 4

    cli.ok("groups", "reset-offsets", "dash", "--topic", "clicks", "--to-earliest", "--execute")
    rows = offsets_table(cli.ok("groups", "describe", "dash"))
    assert total(rows, "CURRENT-OFFSET") == 0 and total(rows, "LAG") == 14
    out = cli.ok(
        "consume", "clicks", "--group", "dash", "--max-messages", "14", "--timeout-ms", "10000"
    )
    assert sorted(out.split()) == sorted([f"c{i}" for i in range(10)] + ["n1", "n2", "n3", "n4"])
    assert total(offsets_table(cli.ok("groups", "describe", "dash")), "LAG") == 0

    assert cli.ok("groups", "delete", "dash").strip() == "Deleted consumer group 'dash'."
    assert "dash" not in cli.ok("groups", "list").split()
    assert "does not exist" in cli.fails("groups", "describe", "dash")


def test_active_group_is_described_and_protected(cli: Cli) -> None:
    cli.ok("topics", "create", "jobs", "--partitions", "3")
    consumer = Consumer(
        {
            "bootstrap.servers": cli.bootstrap,
            "group.id": "workers",
            "client.id": "worker-one",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["jobs"])
        deadline = time.monotonic() + 15
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert len(consumer.assignment()) == 3

        described = cli.ok("groups", "describe", "workers")
        assert "State: Stable  Members: 1" in described
        rows = offsets_table(described)
        assert sorted(rows) == [("jobs", 0), ("jobs", 1), ("jobs", 2)]
        assert {r["CLIENT-ID"] for r in rows.values()} == {"worker-one"}
        assert {r["CURRENT-OFFSET"] for r in rows.values()} == {"-"}  # nothing committed yet
        assert "jobs(0,1,2)" in described.splitlines()[-1]

        refused = cli.fails("groups", "reset-offsets", "workers", "--topic", "jobs", "--to-latest")
        assert "can only be reset if the group 'workers' is inactive" in refused
        assert "active members" in cli.fails("groups", "delete", "workers")
    finally:
        consumer.close()
    cli.ok("groups", "reset-offsets", "workers", "--topic", "jobs", "--to-latest", "--execute")
    assert "workers" in cli.ok("groups", "list").split()


def test_reset_modes(cli: Cli) -> None:
    cli.ok("topics", "create", "metrics", "--partitions", "2")
    cli.ok("produce", "metrics", "--partition", "0", stdin="".join(f"{i}\n" for i in range(10)))
    cli.ok("produce", "metrics", "--partition", "1", stdin="".join(f"{i}\n" for i in range(4)))

    def reset(*how: str) -> dict[int, int]:
        out = cli.ok("groups", "reset-offsets", "ops", *how, "--execute")
        return {int(line.split()[2]): int(line.split()[3]) for line in out.splitlines()[1:]}

    assert reset("--topic", "metrics", "--to-offset", "6") == {0: 6, 1: 4}  # clamped to the end
    assert reset("--topic", "metrics", "--shift-by", "-5") == {0: 1, 1: 0}  # clamped to start
    assert reset("--topic", "metrics:1", "--to-latest") == {1: 4}
    assert reset("--all-topics", "--shift-by", "2") == {0: 3, 1: 4}
    assert reset("--topic", "metrics", "--to-datetime", "2000-01-01T00:00:00Z") == {0: 0, 1: 0}
    assert reset("--topic", "metrics", "--to-datetime", "2999-01-01T00:00:00+00:00") == {
        0: 10,
        1: 4,
    }
    rows = offsets_table(cli.ok("groups", "describe", "ops"))
    assert {p: r["CURRENT-OFFSET"] for (_, p), r in rows.items()} == {0: "10", 1: "4"}

    assert "not an ISO-8601" in cli.fails(
        "groups", "reset-offsets", "ops", "--topic", "metrics", "--to-datetime", "yesterday"
    )
    assert "no committed offset" in cli.fails(
        "groups", "reset-offsets", "fresh", "--topic", "metrics", "--shift-by", "1"
    )
    assert "Topic 'ghost' does not exist" in cli.fails(
        "groups", "reset-offsets", "ops", "--topic", "ghost", "--to-earliest"
    )
