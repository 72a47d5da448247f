"""The reference broker: Apache Kafka 4.x fetched from Maven Central with mvn, run in KRaft mode.

Fetch: a generated ``bench/.work/kafka-pom/pom.xml`` depends on ``org.apache.kafka:kafka_2.13``
(the broker, which pulls kafka-server, -metadata, -raft, -storage, the coordinators and
kafka-clients) plus ``org.apache.logging.log4j:log4j-slf4j-impl`` (so the broker's slf4j
logging reaches log4j2 instead of a no-op logger); ``mvn dependency:copy-dependencies`` puts
every jar in ``bench/.work/kafka-<version>/libs``. Maven's local repository is
``bench/.work/m2`` so the download stays in the git-ignored folder and can be measured. A
``.complete`` marker makes later runs reuse the jars without running mvn at all.

Version ``auto`` means: the newest version already cached, else the newest 4.x on Central
whose whole dependency set resolves (a release can appear before all its artifacts have;
we then step down with a version range below it).

Start: ``kafka.tools.StorageTool format --standalone`` then ``kafka.Kafka server.properties``
as a combined broker+controller (node 1) on two free loopback ports, with the JVM flags of
Kafka's ``kafka-server-start.sh`` (``-Xmx1G -Xms1G``, G1).
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from procs import ManagedProcess, free_port, start_process

GROUP = "org.apache.kafka"
ARTIFACT = "kafka_2.13"
# log4j-core arrives transitively; the slf4j 1.x -> log4j2 bridge must match its version.
SLF4J_BRIDGE = ("org.apache.logging.log4j", "log4j-slf4j-impl")
FIRST_4X = "4.0.0"
NEXT_MAJOR = "5.0.0"
MVN_TIMEOUT = 900.0  # a cold fetch is ~50 MB; generous for a slow mirror
JVM_FLAGS = [
    "-Xmx1G",
    "-Xms1G",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
LOG4J2_YAML = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
      # The cleaner's per-pass report (bench/compaction.py reads it). In 4.4 the cleaner is
      # a Java class whose report comes from its nested thread class's logger; in the
      # Scala versions it was kafka.log.LogCleaner. A few lines per pass, at most.
      - name: org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread
        level: INFO
      - name: kafka.log.LogCleaner
        level: INFO
"""


class KafkaUnavailable(RuntimeError):
    """Kafka cannot be fetched or started here; the message says why."""


@dataclass
class KafkaDist:
    """Jars of one Kafka version and what fetching them cost (zero when cached)."""

    version: str
    libs: Path
    cached: bool
    download_mib: float
    fetch_seconds: float
    jar_count: int


def _pom(deps: list[tuple[str, str, str]], exclude_transitive: bool = False) -> str:
    """A minimal pom whose only purpose is to name ``deps`` (group, artifact, version)."""
    exclusions = (
        "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId>"
        "</exclusion></exclusions>"
        if exclude_transitive
        else ""
    )
    body = "".join(
        f"""
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>{exclusions}
    </dependency>"""
        for group, artifact, version in deps
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>tierlog.bench</groupId>
  <artifactId>kafka-ref</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>{body}
  </dependencies>
</project>
"""


def _mvn(work: Path, pom: str, goals: list[str]) -> str:
    """Run mvn in batch mode on ``pom`` with the bench's own local repository."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailable("mvn is not on PATH")
    pom_dir = work / "kafka-pom"
    pom_dir.mkdir(parents=True, exist_ok=True)
    (pom_dir / "pom.xml").write_text(pom)
    argv = [mvn, "-B", f"-Dmaven.repo.local={work / 'm2'}", *goals]
    try:
        done = subprocess.run(
            argv, cwd=pom_dir, capture_output=True, text=True, timeout=MVN_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise KafkaUnavailable(f"mvn {' '.join(goals)} took over {MVN_TIMEOUT:.0f} s") from exc
    if done.returncode != 0:
        errors = [line.removeprefix("[ERROR] ") for line in done.stdout.splitlines()]
        first = next((e for e in errors if e.startswith("Failed")), done.stdout[-300:])
        raise KafkaUnavailable(f"mvn {' '.join(goals)} failed: {first.strip()}")
    return done.stdout


def _newest_below(work: Path, upper: str) -> str:
    """The newest kafka_2.13 in [4.0.0, upper) on Central (its jar only, no dependencies)."""
    out = _mvn(
        work,
        _pom([(GROUP, ARTIFACT, f"[{FIRST_4X},{upper})")], exclude_transitive=True),
        ["dependency:list"],
    )
    found = re.search(rf"{GROUP}:{ARTIFACT}:jar:([0-9][^:\s]*)", out)
    if found is None:
        raise KafkaUnavailable(f"no {ARTIFACT} version in [{FIRST_4X},{upper}) on Central")
    return found.group(1)


def _dir_mib(path: Path) -> float:
    if not path.exists():
        return 0.0
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / (1 << 20)


def _copy_jars(work: Path, version: str) -> Path:
    """Resolve the broker's dependency tree and copy every runtime jar into ``libs``."""
    dist = work / f"kafka-{version}"
    libs = dist / "libs"
    if libs.exists():
        shutil.rmtree(libs)
    deps = [(GROUP, ARTIFACT, version)]
    listing = _mvn(work, _pom(deps), ["dependency:list"])
    log4j = re.search(r"org\.apache\.logging\.log4j:log4j-core:jar:([^:\s]+)", listing)
    if log4j is not None:
        deps.append((*SLF4J_BRIDGE, log4j.group(1)))
    goals = ["dependency:copy-dependencies", f"-DoutputDirectory={libs}", "-DincludeScope=runtime"]
    _mvn(work, _pom(deps), goals)
    (dist / ".complete").write_text(version + "\n")
    return libs


def _cached_versions(work: Path) -> list[str]:
    found = [
        p.parent.name.removeprefix("kafka-")
        for p in work.glob("kafka-4.*/.complete")
        if (p.parent / "libs").is_dir()
    ]
    return sorted(found, key=_version_key, reverse=True)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def fetch_kafka(work: Path, version: str = "auto", max_tries: int = 3) -> KafkaDist:
    """Jars for ``version`` ("auto" = newest cached or newest resolvable 4.x).

    Raises:
        KafkaUnavailable: java or mvn missing, Central unreachable, or nothing resolves.
    """
    if shutil.which("java") is None:
        raise KafkaUnavailable("java is not on PATH")
    work = work.resolve()  # mvn runs in kafka-pom/, so every path it gets must be absolute
    work.mkdir(parents=True, exist_ok=True)
    cached = _cached_versions(work)
    if version == "auto" and cached:
        version = cached[0]
    libs = work / f"kafka-{version}" / "libs"
    if version in cached:
        return KafkaDist(version, libs, True, 0.0, 0.0, len(list(libs.glob("*.jar"))))

    begin = time.monotonic()
    before = _dir_mib(work / "m2")
    if version == "auto":
        upper, problems = NEXT_MAJOR, []
        for _ in range(max_tries):
            candidate = _newest_below(work, upper)
            try:
                libs = _copy_jars(work, candidate)
                version = candidate
                break
            except KafkaUnavailable as exc:
                problems.append(f"{candidate}: {exc}")
                upper = candidate
        else:
            raise KafkaUnavailable("no 4.x version resolved: " + "; ".join(problems))
    else:
        libs = _copy_jars(work, version)
    return KafkaDist(
        version,
        libs,
        False,
        round(_dir_mib(work / "m2") - before, 1),
        round(time.monotonic() - begin, 1),
        len(list(libs.glob("*.jar"))),
    )


def _server_properties(
    data: Path,
    listeners: Mapping[str, int],
    controller_port: int,
    extra: dict[str, str] | None = None,
) -> str:
    served = ",".join(f"{name}://127.0.0.1:{port}" for name, port in listeners.items())
    protocols = ",".join(f"{name}:{name}" for name in listeners)
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}",
            f"listeners={served},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners={served}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            f"listener.security.protocol.map={protocols},CONTROLLER:PLAINTEXT",
            f"log.dirs={data}",
            "num.partitions=1",
            "auto.create.topics.enable=true",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "log.segment.delete.delay.ms=1000",  # free deleted topics' disk space quickly
            *(f"{key}={value}" for key, value in (extra or {}).items()),
            "",
        ]
    )


def _cluster_id() -> str:
    """A random cluster id as Kafka's ``Uuid.randomUuid`` makes them: base64url without
    padding, never starting with "-" (kafka-storage's argument parser would take one that
    does for an option: "argument --cluster-id/-t: expected one argument", 1 run in 64)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def start_kafka(
    dist: KafkaDist,
    run_dir: Path,
    extra: dict[str, str] | None = None,
    *,
    listeners: Mapping[str, int] | None = None,
    format_args: Sequence[str] = (),
) -> tuple[ManagedProcess, str]:
    """Format a fresh log dir and start the broker; returns the process and its bootstrap
    (the PLAINTEXT listener). ``extra`` adds (or overrides) server.properties keys.

    ``listeners`` names each listener and its port (each listener's name is its security
    protocol, e.g. ``{"PLAINTEXT": 9092, "SASL_SSL": 9094}``; PLAINTEXT must be one, for
    the bootstrap); without it, PLAINTEXT alone on a free port. ``format_args`` go to
    ``kafka-storage format``, e.g. ``--add-scram`` for SCRAM users (KRaft keeps them in its
    metadata log, so they exist before the broker serves).

    The caller waits for readiness (``procs.wait_ready``) and stops it.

    Raises:
        KafkaUnavailable: storage formatting failed.
    """
    listeners = dict(listeners or {"PLAINTEXT": free_port()})
    controller_port = free_port()
    while controller_port in listeners.values():
        controller_port = free_port()
    run_dir.mkdir(parents=True, exist_ok=True)
    props = run_dir / "server.properties"
    props.write_text(_server_properties(run_dir / "data", listeners, controller_port, extra))
    log4j = run_dir / "log4j2.yaml"
    log4j.write_text(LOG4J2_YAML)
    classpath = f"{dist.libs}/*"
    cluster_id = _cluster_id()
    java = ["java", f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath]
    fmt = [*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)]
    fmt += format_args
    try:
        done = subprocess.run(
            [*fmt, "--standalone"], capture_output=True, text=True, timeout=120, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise KafkaUnavailable("kafka-storage format took over 120 s") from exc
    if done.returncode != 0:
        raise KafkaUnavailable(f"kafka-storage format failed: {done.stderr.strip()[-500:]}")
    argv = [*java[:1], *JVM_FLAGS, *java[1:], "kafka.Kafka", str(props)]
    proc = start_process("kafka", argv, run_dir / "kafka.log")
    return proc, f"127.0.0.1:{listeners['PLAINTEXT']}"
