"""Apache Kafka's own command-line tools (``org.apache.kafka:kafka-tools``), fetched and run.

Fetch: as ``bench/kafka_ref.py`` fetches the broker (its helpers, its Maven local repository
``bench/.work/m2``), a generated pom depending on ``kafka-tools`` of the version that module
resolves (the newest broker version cached there, else the newest 4.x on Central) goes
through ``mvn dependency:copy-dependencies`` into ``bench/.work/kafka-tools-<version>/libs``;
a ``.complete`` marker makes later runs reuse the jars without running mvn at all.

Run: ``java -cp '<libs>/*' <class> ...`` as Kafka's ``kafka-run-class.sh`` does for a tool
(``-Xmx256M``), bounded by a timeout, output captured. ``python -m
tests.integration.kafka_tools fetch`` fetches and reports what it cost (``make kafka-tools``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:  # bench/ is scripts, not a package; kafka_ref imports procs
    sys.path.insert(0, str(BENCH))

import kafka_ref  # noqa: E402
from kafka_ref import KafkaDist, KafkaUnavailable  # noqa: E402

WORK = BENCH / ".work"
ARTIFACT = "kafka-tools"

# The classes behind bin/kafka-topics.sh, kafka-reassign-partitions.sh,
# kafka-leader-election.sh and kafka-dump-log.sh in Kafka 4.x (checked against the
# kafka-tools jar).
TOPICS = "org.apache.kafka.tools.TopicCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
# bin/kafka-dump-log.sh (moved from core's kafka.tools to kafka-tools in 4.x).
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
# bin/kafka-consumer-groups.sh.
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
# bin/kafka-configs.sh.
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
# Transactions: bin/kafka-transactions.sh, bin/kafka-console-consumer.sh, and the
# exactly-once copier Kafka's system tests run (tests/kafkatest/services/
# transactional_message_copier.py); its options take --broker-list, not --bootstrap-server.
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
MESSAGE_COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"

# kafka-run-class.sh's heap for tools; the rest makes a short-lived JVM start faster.
JVM_FLAGS = ["-Xmx256M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
# Kafka's config/tools-log4j2.yaml (WARN and up, to stderr), as properties: the tools'
# dependencies have no YAML parser for log4j.
LOG4J2_PROPERTIES = """\
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
"""


def _dist_dir(work: Path, version: str) -> Path:
    return work / f"kafka-tools-{version}"


def cached_tools(work: Path = WORK, version: str = "auto") -> KafkaDist | None:
    """The tools of ``version`` if already fetched; "auto" is the newest broker version
    kafka_ref has cached, else the newest tools version cached here."""
    work = work.resolve()
    if version == "auto":
        brokers = kafka_ref._cached_versions(work)
        tools = sorted(
            (
                p.parent.name.removeprefix("kafka-tools-")
                for p in work.glob("kafka-tools-*/.complete")
            ),
            key=kafka_ref._version_key,
            reverse=True,
        )
        if not brokers and not tools:
            return None
        version = brokers[0] if brokers else tools[0]
    dist = _dist_dir(work, version)
    libs = dist / "libs"
    if not (dist / ".complete").exists() or not libs.is_dir():
        return None
    return KafkaDist(version, libs, True, 0.0, 0.0, len(list(libs.glob("*.jar"))))


def _copy_jars(work: Path, version: str) -> Path:
    """Resolve kafka-tools' runtime dependencies and copy every jar into ``libs``."""
    dist = _dist_dir(work, version)
    libs = dist / "libs"
    if libs.exists():  # a fetch interrupted before its marker: start over
        shutil.rmtree(libs)
    deps = [(kafka_ref.GROUP, ARTIFACT, version)]
    # kafka_ref's pom folder and local repository are shared: the broker's jars are reused,
    # and a fetch running at the same time as a bench's would overwrite its pom.
    goals = ["dependency:copy-dependencies", f"-DoutputDirectory={libs}", "-DincludeScope=runtime"]
    kafka_ref._mvn(work, kafka_ref._pom(deps), goals)
    # The tools log through slf4j 1.x; without log4j's bridge (Kafka's distribution ships
    # it) slf4j falls back to a no-op logger and says so on every run.
    log4j = sorted(libs.glob("log4j-core-*.jar"))
    if log4j:
        bridge = (*kafka_ref.SLF4J_BRIDGE, log4j[-1].stem.removeprefix("log4j-core-"))
        kafka_ref._mvn(work, kafka_ref._pom([bridge], exclude_transitive=True), goals)
    (dist / ".complete").write_text(version + "\n")
    return libs


def fetch_tools(work: Path = WORK, version: str = "auto") -> KafkaDist:
    """Jars of kafka-tools ``version``; "auto" is the broker version kafka_ref resolves
    (newest cached, else the newest 4.x kafka_2.13 on Central).

    Raises:
        KafkaUnavailable: java or mvn missing, Central unreachable, or nothing resolves.
    """
    found = cached_tools(work, version)
    if found is not None:
        return found
    if shutil.which("java") is None:
        raise KafkaUnavailable("java is not on PATH")
    work = work.resolve()  # mvn runs in kafka-pom/, so every path it gets must be absolute
    work.mkdir(parents=True, exist_ok=True)
    begin = time.monotonic()
    before = kafka_ref._dir_mib(work / "m2")
    if version == "auto":
        cached = kafka_ref._cached_versions(work)
        version = cached[0] if cached else kafka_ref._newest_below(work, kafka_ref.NEXT_MAJOR)
        found = cached_tools(work, version)
        if found is not None:
            return found
    libs = _copy_jars(work, version)
    return KafkaDist(
        version,
        libs,
        False,
        round(kafka_ref._dir_mib(work / "m2") - before, 1),
        round(time.monotonic() - begin, 1),
        len(list(libs.glob("*.jar"))),
    )


def tools_or_fail() -> KafkaDist:
    """``fetch_tools()`` for a test fixture: a missing java, mvn or Central fails the test
    with what to run, never skips it."""
    import pytest

    try:
        return fetch_tools()
    except KafkaUnavailable as exc:
        pytest.fail(f"Kafka's tools are unavailable ({exc}): run `make kafka-tools`", False)


@dataclass
class ToolRun:
    """One finished tool invocation; ``output`` is stdout then stderr, for messages."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return f"$ {' '.join(self.argv[-12:])}\n{self.stdout}{self.stderr}"


def run_tool(dist: KafkaDist, main_class: str, args: list[str], timeout: float = 45.0) -> ToolRun:
    """Run one tool to completion (killed after ``timeout`` seconds: a tool waiting on a
    broker that never answers must not hang a test)."""
    log_config = dist.libs.parent / "tools-log4j2.properties"
    if not log_config.exists():
        log_config.write_text(LOG4J2_PROPERTIES)
    argv = [
        "java",
        *JVM_FLAGS,
        f"-Dlog4j2.configurationFile={log_config}",
        "-cp",
        f"{dist.libs}/*",
        main_class,
        *args,
    ]
    begin = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:  # subprocess.run killed and reaped it
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return ToolRun(argv, -9, out, err + f"\n[killed after {timeout:.0f} s]", timeout)
    return ToolRun(argv, done.returncode, done.stdout, done.stderr, time.monotonic() - begin)


def main(argv: list[str] | None = None) -> int:
    """Fetch the tools, and the broker and MirrorMaker 2 jars the integration tests run, so
    no test downloads under its hang guard (a fresh clone's first fetch takes minutes)."""
    import mirror_maker  # bench/, on the path above

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["fetch"])
    parser.add_argument("--version", default="auto", help="Kafka version (default: auto)")
    args = parser.parse_args(argv)
    fetches: list[tuple[str, Callable[[], KafkaDist]]] = [
        ("kafka-tools", lambda: fetch_tools(WORK, args.version)),
        ("kafka", lambda: kafka_ref.fetch_kafka(WORK, args.version)),
        ("mirror-maker", lambda: mirror_maker.fetch_mirror_maker(WORK)),
    ]
    for name, fetch in fetches:
        try:
            dist = fetch()
        except KafkaUnavailable as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return 1
        how = (
            "cached"
            if dist.cached
            else f"fetched in {dist.fetch_seconds:.1f} s, {dist.download_mib:.1f} MiB downloaded"
        )
        size = kafka_ref._dir_mib(dist.libs)
        print(
            f"{name} {dist.version}: {dist.jar_count} jars ({size:.1f} MiB) in {dist.libs} ({how})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
