"""The driver JVM's class archive: Spark's classes loaded and verified once, by a training
run, then mapped from one file by every later session (the JVM's class-data sharing,
``-XX:SharedArchiveFile``).

Why: a new Spark session spends most of its start loading and verifying classes from
Spark's jars, and every first use of a feature (the first job, the first Delta commit, the
first Python data source) loads more. On a quiet 2-core machine the archive took a
session's start from 5.3-5.8 s to 3.5-3.7 s and the demo's first ingest from 10.5 s to
8.5 s (BENCHMARKS.md, "Time to first result"). Each notebook starts its own JVM, so each pays
that again without it.

How: ``python -m tierlog.spark.class_archive`` (``make`` runs it during set-up) starts a
session whose JVM was given ``-XX:ArchiveClassesAtExit``, runs a small Delta and Python
data source workload in it, and stops it; the JVM writes the classes it loaded as it exits.
``session()`` then passes ``-XX:SharedArchiveFile`` (``java_options``) whenever an archive
for this JVM and this Spark exists.

Two rules keep it safe:
- An archive is bound to the JVM's build and the class path it was made with. Its file name
  carries a key of both (``archive_key``), so an upgraded JDK or pyspark looks for a new
  one; a JVM that still finds a mismatch ignores the archive. It would say so on stderr in
  a line nobody can act on (every notebook's report would show it), so ``java_options``
  turns the JVM's ``cds`` log off.
- A truncated archive crashes the JVM that maps it (SIGBUS, seen with JDK 17). So the
  training JVM writes under a temporary name, and only a complete file of a JVM that
  exited cleanly is renamed into place (an atomic rename: a JVM mapping the old file keeps
  it).

Nothing here is needed for correctness: without an archive, sessions start as before.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# Options that mean the user chose how this JVM shares classes: then nothing is added.
USER_CHOSE_SHARING = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare")
# The JVM's class-data-sharing log: its only output with an archive is the "Unable to use
# shared archive" warning of a mismatch, which the JVM handles by running without it.
QUIET_SHARING = "-Xlog:cds=off,cds+dynamic=off"
ENV_DIR = "TIERLOG_SPARK_CLASS_ARCHIVE_DIR"
ENV_OFF = "TIERLOG_SPARK_CLASS_ARCHIVE"  # "0": never use an archive
TRAINING_TIMEOUT_S = 900.0  # the run takes ~30 s on a quiet 2-core machine


class ArchiveError(RuntimeError):
    """The training run failed; no archive was written."""


def archive_dirs() -> list[Path]:
    """Where archives are looked for, in order: ``$TIERLOG_SPARK_CLASS_ARCHIVE_DIR`` alone
    when set; else this environment's ``share/tierlog/spark-class-archive`` (a venv's
    archive goes with the venv: its class path names the venv's jars, so no other venv
    could use it), then ``$XDG_CACHE_HOME/tierlog/spark-class-archive`` (``~/.cache``)
    for an environment that cannot be written to."""
    given = os.environ.get(ENV_DIR)
    if given:
        return [Path(given)]
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return [
        Path(sys.prefix) / "share" / "tierlog" / "spark-class-archive",
        Path(cache) / "tierlog" / "spark-class-archive",
    ]


def java_home() -> Path | None:
    """The JDK that pyspark's launcher runs: ``$JAVA_HOME``, else ``java`` on ``PATH``."""
    given = os.environ.get("JAVA_HOME")
    if given:
        return Path(given).resolve()
    java = shutil.which("java")
    if java is None:
        return None
    return Path(java).resolve().parent.parent  # <home>/bin/java


def archive_key(home: Path | None = None) -> str | None:
    """A digest of what an archive is bound to: the JDK's build (its ``release`` file and
    its ``libjvm.so``'s size and time) and Spark's class path (pyspark's version and jars
    directory). None when there is no JDK to key on."""
    home = home if home is not None else java_home()
    if home is None:
        return None
    parts = [str(home)]
    release = home / "release"
    parts.append(release.read_text(errors="replace") if release.is_file() else "")
    for libjvm in sorted(home.glob("lib/*/libjvm.so")):
        stat = libjvm.stat()
        parts.append(f"{libjvm}:{stat.st_size}:{stat.st_mtime_ns}")
    try:
        import pyspark
    except ImportError:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    parts.append(f"{pyspark.__version__}:{jars}")
    parts.append(os.environ.get("SPARK_CONF_DIR", ""))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path(key: str | None = None) -> Path | None:
    """This JVM's and this Spark's archive, if one exists."""
    key = key if key is not None else archive_key()
    if key is None:
        return None
    for directory in archive_dirs():
        path = directory / f"spark-{key}.jsa"
        if path.is_file():
            return path
    return None


def new_archive_path(key: str) -> Path:
    """Where ``build`` writes: the first of ``archive_dirs`` it can create and write."""
    directories = archive_dirs()
    for directory in directories:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(directory, os.W_OK):
            return directory / f"spark-{key}.jsa"
    raise ArchiveError(f"none of {', '.join(map(str, directories))} can be written")


def java_options(settings: Mapping[str, Any]) -> str:
    """The driver JVM options that map this machine's archive, or "" when there is none,
    ``$TIERLOG_SPARK_CLASS_ARCHIVE`` is ``0``, or ``settings``' own driver options already
    say how the JVM shares classes."""
    if os.environ.get(ENV_OFF) == "0":
        return ""
    given = str(settings.get(DRIVER_JAVA_OPTIONS, ""))
    if any(option in given for option in USER_CHOSE_SHARING):
        return ""
    path = archive_path()
    if path is None:
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET_SHARING}"


def add_java_options(settings: dict[str, Any]) -> None:
    """``java_options`` appended to ``settings``' driver JVM options."""
    options = java_options(settings)
    if options:
        given = str(settings.get(DRIVER_JAVA_OPTIONS, "")).strip()
        settings[DRIVER_JAVA_OPTIONS] = f"{given} {options}".strip()


def build(*, force: bool = False) -> Path:
    """Make this machine's archive (``main``): a training run in a child process, whose
    JVM writes a temporary file as it exits, renamed into place when complete.

    Returns the archive's path (at once when it exists, unless ``force``).

    Raises:
        ArchiveError: no JDK or pyspark, nowhere to write, or the training run failed
            (the message ends with its last lines).
    """
    key = archive_key()
    if key is None:
        raise ArchiveError("no java and pyspark to make a Spark class archive for")
    existing = archive_path(key)
    if existing is not None and not force:
        return existing
    path = new_archive_path(key)
    _remove_stale_temporaries(path.parent)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    command = [sys.executable, "-m", "tierlog.spark.class_archive_training", str(temporary)]
    try:
        with tempfile.TemporaryFile() as output:
            result = subprocess.run(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                timeout=TRAINING_TIMEOUT_S,
                check=False,
            )
            output.seek(0)
            text = output.read().decode(errors="replace")
        if result.returncode != 0 or not temporary.is_file() or temporary.stat().st_size == 0:
            tail = text.strip().splitlines()[-5:]
            raise ArchiveError(
                f"the training run exited with {result.returncode} and wrote no archive: "
                + " | ".join(tail)
            )
        os.replace(temporary, path)
    except subprocess.TimeoutExpired as exc:
        raise ArchiveError(f"the training run took over {TRAINING_TIMEOUT_S:.0f} s") from exc
    finally:
        temporary.unlink(missing_ok=True)
    return path


def _remove_stale_temporaries(directory: Path) -> None:
    """Temporary files of training runs that died: an hour old is long dead (a run takes
    under a minute)."""
    for leftover in directory.glob("*.tmp"):
        try:
            if time.time() - leftover.stat().st_mtime > 3600:
                leftover.unlink()
        except FileNotFoundError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tierlog.spark.class_archive",
        description="Make the Spark driver JVM's class archive that session() maps.",
    )
    parser.add_argument("--force", action="store_true", help="make it again even if it exists")
    args = parser.parse_args(argv)
    try:
        path = build(force=args.force)
    except ArchiveError as exc:
        # Only start-up speed is lost: say so in one line, and let set-up go on.
        print(
            f"tierlog: no Spark class archive ({exc}); sessions start without one",
            file=sys.stderr,
        )
        return 0
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
