"""JVM jars the Spark side needs, fetched from Maven Central with ``mvn`` once and then
found in the local Maven repository.

Only the named jars are fetched (``-Dtransitive=false``): pyspark already ships Spark's
own dependencies, and a transitive resolution pulls POM-only artifacts that break
``spark.jars``. Run ``python -m tierlog.spark.jars`` to fetch everything ahead of time
(``make`` does it during set-up).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# Delta 4.4 is built for Spark 4.2 (pyproject pins pyspark==4.2.0, delta-spark==4.4.0).
DELTA = ("io.delta:delta-spark_4.2_2.13:4.4.0", "io.delta:delta-storage:4.4.0")
# Spark's own Kafka source, the benchmark's baseline, with what its POM needs at run time.
# spark-token-provider-kafka-0-10 4.2.0 is not on Maven Central; the 4.0.0 jar has the
# same classes (KafkaConfigUpdater, KafkaTokenUtil) and works with the 4.2.0 source.
KAFKA_SOURCE = (
    "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
    "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.0.0",
    "org.apache.kafka:kafka-clients:3.9.2",
    "org.apache.commons:commons-pool2:2.13.1",
)


class JarError(RuntimeError):
    """A jar is missing and mvn could not fetch it."""


def local_repository() -> Path:
    """Maven's local repository (``MAVEN_REPO_LOCAL`` overrides ``~/.m2/repository``)."""
    return Path(os.environ.get("MAVEN_REPO_LOCAL", Path.home() / ".m2" / "repository"))


def jar_path(coordinate: str) -> Path:
    group, artifact, version = coordinate.split(":")
    return (
        local_repository() / group.replace(".", "/") / artifact / version
        / f"{artifact}-{version}.jar"
    )  # fmt: skip


def resolve(coordinates: tuple[str, ...] | list[str]) -> list[Path]:
    """Paths of the jars, fetching the missing ones with ``mvn dependency:get``.

    Raises:
        JarError: mvn is not installed or could not fetch one (the message has its output).
    """
    paths = []
    for coordinate in coordinates:
        path = jar_path(coordinate)
        if not path.is_file():
            _fetch(coordinate)
        if not path.is_file():
            raise JarError(f"{coordinate}: mvn finished but {path} is missing")
        paths.append(path)
    return paths


def _fetch(coordinate: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarError(
            f"{coordinate} is not in {local_repository()} and mvn is not installed "
            "(apt-get install maven)"
        )
    command = [
        mvn, "-B", "-q", "dependency:get", "-Dtransitive=false", f"-Dartifact={coordinate}",
        f"-Dmaven.repo.local={local_repository()}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise JarError(f"mvn could not fetch {coordinate}:\n" + "\n".join(tail))


def main() -> int:
    """Fetch the Delta jars (and with ``--kafka-source`` the Kafka source's) now."""
    wanted = list(DELTA) + (list(KAFKA_SOURCE) if "--kafka-source" in sys.argv[1:] else [])
    try:
        for path in resolve(wanted):
            print(path)
    except JarError as exc:
        print(f"tierlog: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
