"""MirrorMaker 2 (Kafka's ``connect-mirror``, the engine behind ``connect-mirror-maker.sh``)
fetched from Maven Central with mvn and run in its dedicated mode, for the mirroring tests
(tests/integration/test_mirror_maker.py) and the mirroring benchmark (bench/mirror.py).

Fetch: as ``kafka_ref`` fetches the broker (its helpers, its Maven repository
``bench/.work/m2``): the newest ``org.apache.kafka:connect-mirror`` 4.x on Central (Kafka
publishes it a little after the broker: 4.3.1 while the broker was at 4.4.0) with its
runtime dependencies and the slf4j-to-log4j2 bridge, copied into
``bench/.work/mirror-maker-<version>/libs``; a ``.complete`` marker makes later runs reuse
them.

Run: ``java -cp '<libs>/*' org.apache.kafka.connect.mirror.MirrorMaker mm2.properties``, as
``connect-mirror-maker.sh`` does, with the properties ``mm2_properties`` writes: one
``source->target`` flow, Kafka's defaults otherwise, every internal topic at replication
factor 1 (the test clusters are single brokers), and ACL sync off until tierlog answers
DescribeAcls (security, issue 22).
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import kafka_ref
from kafka_ref import GROUP, KafkaDist, KafkaUnavailable
from procs import ManagedProcess, start_process

ARTIFACT = "connect-mirror"
MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
JVM_FLAGS = ["-Xmx512M", "-XX:+UseSerialGC"]
# The log4j2 that Kafka 4.4's tools resolve (tests/integration/kafka_tools.py).
LOG4J_VERSION = "2.25.5"
LOG4J2_PROPERTIES = """\
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.mirror.name = org.apache.kafka.connect.mirror
logger.mirror.level = INFO
"""


def _dist_dir(work: Path, version: str) -> Path:
    return work / f"mirror-maker-{version}"


def cached_mirror_maker(work: Path) -> KafkaDist | None:
    found = sorted(
        (p.parent for p in work.resolve().glob("mirror-maker-4.*/.complete")),
        key=lambda d: kafka_ref._version_key(d.name),
        reverse=True,
    )
    if not found:
        return None
    libs = found[0] / "libs"
    version = found[0].name.removeprefix("mirror-maker-")
    return KafkaDist(version, libs, True, 0.0, 0.0, len(list(libs.glob("*.jar"))))


def _newest(work: Path) -> str:
    out = kafka_ref._mvn(
        work,
        kafka_ref._pom(
            [(GROUP, ARTIFACT, f"[{kafka_ref.FIRST_4X},{kafka_ref.NEXT_MAJOR})")],
            exclude_transitive=True,
        ),
        ["dependency:list"],
    )
    found = re.search(rf"{GROUP}:{ARTIFACT}:jar:([0-9][^:\s]*)", out)
    if found is None:
        raise KafkaUnavailable(f"no {ARTIFACT} 4.x on Central")
    return found.group(1)


def fetch_mirror_maker(work: Path) -> KafkaDist:
    """The jars of the newest MirrorMaker 2 4.x (cached ones first).

    Raises:
        KafkaUnavailable: java or mvn missing, Central unreachable, or nothing resolves.
    """
    found = cached_mirror_maker(work)
    if found is not None:
        return found
    if shutil.which("java") is None:
        raise KafkaUnavailable("java is not on PATH")
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    begin = time.monotonic()
    before = kafka_ref._dir_mib(work / "m2")
    version = _newest(work)
    dist = _dist_dir(work, version)
    libs = dist / "libs"
    if libs.exists():
        shutil.rmtree(libs)
    goals = ["dependency:copy-dependencies", f"-DoutputDirectory={libs}", "-DincludeScope=runtime"]
    kafka_ref._mvn(work, kafka_ref._pom([(GROUP, ARTIFACT, version)]), goals)
    # connect-mirror logs through slf4j 1.x and brings no backend (Kafka's distribution
    # adds log4j2): without one, MirrorMaker says nothing at all.
    logging = [
        ("org.apache.logging.log4j", "log4j-api", LOG4J_VERSION),
        ("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
        (*kafka_ref.SLF4J_BRIDGE, LOG4J_VERSION),
    ]
    kafka_ref._mvn(work, kafka_ref._pom(logging, exclude_transitive=True), goals)
    (dist / ".complete").write_text(version + "\n")
    return KafkaDist(
        version,
        libs,
        False,
        round(kafka_ref._dir_mib(work / "m2") - before, 1),
        round(time.monotonic() - begin, 1),
        len(list(libs.glob("*.jar"))),
    )


def mm2_properties(
    source: str,
    target: str,
    *,
    topics: str = ".*",
    groups: str = ".*",
    extra: dict[str, str] | None = None,
) -> str:
    """Dedicated-mode properties mirroring ``source`` into ``target`` (bootstrap servers):
    remote topics named ``source.<topic>`` (DefaultReplicationPolicy), topic configs and
    consumer group offsets synced every second or few (tests wait for them)."""
    settings = {
        "clusters": "source, target",
        "source.bootstrap.servers": source,
        "target.bootstrap.servers": target,
        "source->target.enabled": "true",
        "target->source.enabled": "false",
        "source->target.topics": topics,
        "source->target.groups": groups,
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "sync.topic.configs.enabled": "true",
        "sync.topic.configs.interval.seconds": "2",
        # Off unless asked (``extra``): a cluster without an authorizer answers DescribeAcls
        # SECURITY_DISABLED, which MirrorMaker 2 logs as an ERROR every interval.
        "sync.topic.acls.enabled": "false",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2",
        # Offset syncs for every record batch, so any committed offset translates exactly.
        "offset.lag.max": "0",
        **(extra or {}),
    }
    return "".join(f"{key} = {value}\n" for key, value in settings.items())


def start_mirror_maker(dist: KafkaDist, run_dir: Path, properties: str) -> ManagedProcess:
    """MirrorMaker 2 in dedicated mode; the caller stops it (``ManagedProcess.stop``)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = run_dir / "mm2.properties"
    config.write_text(properties)
    log4j = run_dir / "log4j2.properties"
    log4j.write_text(LOG4J2_PROPERTIES)
    argv = [
        "java",
        *JVM_FLAGS,
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{dist.libs}/*",
        MAIN_CLASS,
        str(config),
    ]
    return start_process("mirror-maker", argv, run_dir / "mirror-maker.log")
