"""A real HDFS for the tests: Hadoop's own ``MiniDFSCluster`` (one NameNode, one DataNode),
from Hadoop's jars on Maven Central, reached through fsspec's ``webhdfs://``.

Fetch: a generated pom depending on ``org.apache.hadoop:hadoop-minicluster`` goes through
``mvn dependency:copy-dependencies`` into ``bench/.work/minihdfs-<version>/libs`` (with
Mockito, which ``MiniDFSCluster`` loads, and jackson-core pinned to the version Hadoop's
jackson-databind needs: Maven's nearest-wins picks an older one). ``MiniHdfs.java`` below
is compiled there with ``javac``; a ``.complete`` marker makes later runs reuse all of it.
``python -m tests.integration.minihdfs fetch`` does it and reports the cost (``make hdfs``).

Run: ``java -cp classes:libs/* MiniHdfs <dir>`` binds every port to 127.0.0.1 (ports the
kernel picks), prints ``WEBHDFS <port>`` once the cluster is up, and shuts down when its
standard input closes. Java 17 needs ``--add-opens`` for Jersey 1 (WebHDFS's REST layer).
The first WebHDFS write takes ~20 s (Jersey and the DataNode's HTTP side warm up), so
``MiniHdfs.start`` makes one before it hands the URL out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HADOOP_VERSION = "3.4.1"
WORK = Path(__file__).resolve().parents[2] / "bench" / ".work" / f"minihdfs-{HADOOP_VERSION}"
START_TIMEOUT_S = 180.0
USER = "tierlog"

POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>tierlog.tests</groupId>
  <artifactId>minihdfs</artifactId>
  <version>1</version>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>com.fasterxml.jackson.core</groupId>
        <artifactId>jackson-core</artifactId>
        <version>2.12.7</version>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>org.mockito</groupId>
      <artifactId>mockito-core</artifactId>
      <version>4.11.0</version>
    </dependency>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-minicluster</artifactId>
      <version>{HADOOP_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""

JAVA_MAIN = """\
import java.io.File;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/** One NameNode and one DataNode on 127.0.0.1; prints the WebHDFS port; stops on EOF. */
public class MiniHdfs {
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        conf.set("hdfs.minidfs.basedir", args[0]);
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
        conf.set("dfs.datanode.address", "127.0.0.1:0");
        conf.set("dfs.datanode.http.address", "127.0.0.1:0");
        conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        conf.setBoolean("dfs.permissions.enabled", false);
        conf.setInt("dfs.replication", 1);
        conf.setBoolean("dfs.webhdfs.enabled", true);
        // Closing a file polls the NameNode from 400 ms on by default: 1.5 s a write.
        conf.setInt("dfs.client.block.write.locateFollowingBlock.initial.delay.ms", 20);
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf, new File(args[0]))
            .numDataNodes(1).nameNodePort(0).nameNodeHttpPort(0).build();
        cluster.waitActive();
        System.out.println("WEBHDFS " + cluster.getNameNode().getHttpAddress().getPort());
        System.out.flush();
        while (System.in.read() >= 0) { }
        cluster.shutdown();
    }
}
"""

LOG4J = "log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n" \
    "log4j.appender.stderr.Target=System.err\n" \
    "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n" \
    "log4j.appender.stderr.layout.ConversionPattern=%d %p %c: %m%n\n"  # fmt: skip

JVM_FLAGS = [
    "-Xmx512M",
    "-XX:+UseSerialGC",
    *(
        f"--add-opens=java.base/{package}=ALL-UNNAMED"
        for package in ("java.lang", "java.util", "java.nio", "sun.nio.ch")
    ),
]


class HdfsUnavailable(RuntimeError):
    """Java, javac or mvn is missing, or the jars could not be fetched."""


def fetched(work: Path = WORK) -> Path:
    """The directory with ``libs/`` and ``classes/``, fetching and compiling once.

    Raises:
        HdfsUnavailable: with the tool's output.
    """
    if (work / ".complete").exists():
        return work
    for tool in ("java", "javac", "mvn"):
        if shutil.which(tool) is None:
            raise HdfsUnavailable(f"{tool} is not installed (make hdfs installs it)")
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(POM)
    _run(
        ["mvn", "-B", "-q", "dependency:copy-dependencies", "-DoutputDirectory=libs",
         "-DincludeScope=runtime"],
        work,
    )  # fmt: skip
    classes = work / "classes"
    classes.mkdir(exist_ok=True)
    (work / "MiniHdfs.java").write_text(JAVA_MAIN)
    (classes / "log4j.properties").write_text(LOG4J)
    _run(["javac", "-cp", str(work / "libs" / "*"), "-d", str(classes), "MiniHdfs.java"], work)
    (work / ".complete").touch()
    return work


def _run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=1500)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-20:]
        raise HdfsUnavailable(f"{' '.join(command[:2])} failed:\n" + "\n".join(tail))


class MiniHdfs:
    """A running MiniDFSCluster; ``url(path)`` is a ``webhdfs://`` URL on it."""

    def __init__(self, proc: subprocess.Popen[str], port: int, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.log = log

    def url(self, path: str) -> str:
        return f"webhdfs://127.0.0.1:{self.port}/{path.lstrip('/')}"

    @property
    def storage_options(self) -> dict[str, str]:
        return {"user": USER}

    def filesystem(self) -> object:
        import fsspec

        return fsspec.filesystem("webhdfs", host="127.0.0.1", port=self.port, user=USER)

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # EOF: the cluster shuts down
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@contextmanager
def running(directory: Path, work: Path = WORK) -> Iterator[MiniHdfs]:
    """A MiniDFSCluster with its data in ``directory``, warmed up, stopped on exit."""
    work = fetched(work)
    log = directory / "minihdfs.log"
    directory.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as err:
        proc = subprocess.Popen(
            ["java", *JVM_FLAGS, "-cp", f"{work / 'classes'}:{work / 'libs' / '*'}",
             "MiniHdfs", str(directory / "cluster")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
    cluster: MiniHdfs | None = None
    try:
        port = _wait_for_port(proc, log)
        cluster = MiniHdfs(proc, port, log)
        fs = cluster.filesystem()
        fs.pipe_file("/warm-up", b"x")  # type: ignore[attr-defined]
        fs.rm("/warm-up")  # type: ignore[attr-defined]
        yield cluster
    finally:
        if cluster is not None:
            cluster.stop()
        elif proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _wait_for_port(proc: subprocess.Popen[str], log: Path) -> int:
    """The port the cluster prints, read on a thread so the wait is bounded."""
    found: list[int] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("WEBHDFS "):
                found.append(int(line.split()[1]))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    if not found:
        proc.kill()
        tail = log.read_text(errors="replace")[-3000:]
        raise HdfsUnavailable(f"MiniDFSCluster did not start in {START_TIMEOUT_S:.0f} s:\n{tail}")
    return found[0]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.minihdfs")
    parser.add_argument("action", choices=["fetch"])
    parser.parse_args()
    started = time.monotonic()
    try:
        work = fetched()
    except HdfsUnavailable as exc:
        print(f"minihdfs: {exc}", file=sys.stderr)
        return 1
    size = sum(f.stat().st_size for f in (work / "libs").iterdir())
    print(
        f"MiniDFSCluster {HADOOP_VERSION}: {len(os.listdir(work / 'libs'))} jars, "
        f"{size / 2**20:.0f} MiB in {work} ({time.monotonic() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
