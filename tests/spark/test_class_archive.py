"""tierlog.spark.class_archive: which options a session's JVM gets, the key that binds an
archive to its JDK and Spark, a training run that fails leaving nothing behind, and (with a
real JVM) a session mapping the archive ``make`` built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tierlog.spark import class_archive

OPTIONS = class_archive.DRIVER_JAVA_OPTIONS


@pytest.fixture
def archive_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(class_archive.ENV_DIR, str(tmp_path))
    monkeypatch.delenv(class_archive.ENV_OFF, raising=False)
    return tmp_path


def fake_archive() -> Path:
    """A file where an archive for this JDK and Spark goes (never mapped here)."""
    key = class_archive.archive_key()
    assert key is not None
    path = class_archive.new_archive_path(key)
    path.write_bytes(b"archive")
    return path


def test_no_archive_adds_no_options(archive_dir: Path) -> None:
    settings: dict[str, object] = {OPTIONS: "-Xss4m"}
    class_archive.add_java_options(settings)
    assert settings == {OPTIONS: "-Xss4m"}


def test_an_archive_for_this_jvm_and_spark_is_mapped_quietly(archive_dir: Path) -> None:
    path = fake_archive()
    assert path.parent == archive_dir
    settings: dict[str, object] = {OPTIONS: "-Xss4m"}
    class_archive.add_java_options(settings)
    assert settings[OPTIONS] == f"-Xss4m -XX:SharedArchiveFile={path} -Xlog:cds=off,cds+dynamic=off"


@pytest.mark.parametrize(
    "given", ["-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa", "-XX:ArchiveClassesAtExit=/x"]
)
def test_a_sharing_option_the_user_gave_wins(archive_dir: Path, given: str) -> None:
    fake_archive()
    assert class_archive.java_options({OPTIONS: given}) == ""


def test_the_environment_turns_it_off(archive_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_archive()
    monkeypatch.setenv(class_archive.ENV_OFF, "0")
    assert class_archive.java_options({}) == ""


def test_an_archive_goes_with_the_environment_or_to_the_cache_when_it_cannot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(class_archive.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    path = class_archive.new_archive_path("k")
    assert path == tmp_path / "venv" / "share" / "tierlog" / "spark-class-archive" / "spark-k.jsa"
    (tmp_path / "file").write_text("")  # an environment under a file cannot be written
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "file" / "venv"))
    path = class_archive.new_archive_path("k")
    assert path == tmp_path / "cache" / "tierlog" / "spark-class-archive" / "spark-k.jsa"
    path.write_bytes(b"archive")
    assert class_archive.archive_path("k") == path  # found where it was written


def test_another_jdk_needs_another_archive(tmp_path: Path) -> None:
    """The key follows the JDK's build: its release file and its libjvm."""
    home = tmp_path / "jdk"
    (home / "lib" / "server").mkdir(parents=True)
    (home / "release").write_text('JAVA_VERSION="17.0.15"\n')
    (home / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    first = class_archive.archive_key(home)
    (home / "release").write_text('JAVA_VERSION="17.0.16"\n')
    second = class_archive.archive_key(home)
    (home / "lib" / "server" / "libjvm.so").write_bytes(b"a rebuilt jvm")
    third = class_archive.archive_key(home)
    assert first is not None and len({first, second, third}) == 3


def test_a_failed_training_run_leaves_no_archive_and_no_temporary(
    archive_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JDK whose java exits at once: Spark's launcher fails, the child exits non-zero."""
    home = tmp_path / "broken-jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\necho 'no JVM here' >&2\nexit 1\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(class_archive.ArchiveError, match="wrote no archive"):
        class_archive.build()
    assert [p.name for p in archive_dir.iterdir() if p.name != "broken-jdk"] == []


def test_the_cli_says_in_one_line_that_sessions_start_without_one(
    archive_dir: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-jdk-here")}
    (tmp_path / "no-jdk-here" / "bin").mkdir(parents=True)
    result = subprocess.run(
        [sys.executable, "-m", "tierlog.spark.class_archive"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr  # only speed is lost: set-up goes on
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tierlog: no Spark class archive"), lines


# A session in a child process (this test process may hold the shared one): the JVM's pid,
# whether the archive is mapped into it, and whether the JVM was reaped once it exited.
SESSION_PROBE = """
import json, sys, time
from pyspark import SparkContext
from tierlog.spark import session
spark = session("class-archive-probe", master="local[1]", delta=False,
                conf={"spark.ui.enabled": "false"})
proc = SparkContext._gateway.proc
maps = open(f"/proc/{proc.pid}/maps").read()
count = spark.range(10).count()
spark.stop()
proc.stdin.close()  # the gateway JVM exits when its stdin closes
deadline = time.monotonic() + 60
while proc.returncode is None and time.monotonic() < deadline:
    time.sleep(0.1)  # reaped by session()'s stderr thread, not by this loop
print(json.dumps({"mapped": sys.argv[1] in maps, "count": count,
                  "reaped": proc.returncode is not None}))
"""


@pytest.mark.timeout(900)
def test_a_session_maps_the_archive_make_built() -> None:
    """The archive ``make`` builds (built here when missing: about 30 s) is mapped by the
    driver JVM of a later session; the JVM is reaped when it exits."""
    path = class_archive.build()
    assert path.stat().st_size > 1_000_000
    assert not list(path.parent.glob(f"{path.name}.*.tmp"))
    env = {k: v for k, v in os.environ.items() if k != class_archive.ENV_OFF}
    result = subprocess.run(
        [sys.executable, "-c", SESSION_PROBE, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "shared archive" not in result.stderr  # the JVM accepted it without a word
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe == {"mapped": True, "count": 10, "reaped": True}
