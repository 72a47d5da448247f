"""tierlog for the executors of a Spark cluster: the package the driver runs, zipped, for
``spark.submit.pyFiles`` (``session()`` adds it when the master is not local).

Executors on other hosts run their own Python, where tierlog may be missing or another
version. Spark puts a ``pyFiles`` zip first on each executor's ``sys.path``, so they run the
driver's tierlog. The libraries tierlog needs (pyarrow, confluent-kafka, ...) still have to
be in the executors' Python, as for any PySpark job: installed on each host, or Spark's own
way, a packed virtualenv through ``spark.archives`` (README: Spark beyond one host).

The zip is made once per content: its name carries a digest of the package's files (path,
size, modification time), and a session finding it made already uses it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import tierlog

PYFILES_CONF = "spark.submit.pyFiles"


def package_zip(directory: Path | None = None) -> Path:
    """The zip of the tierlog package this process imports (under ``directory``, default
    a ``tierlog-spark`` folder in the temp directory), made if it is not there."""
    root = Path(tierlog.__file__).resolve().parent
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.relative_to(root).parts
    )
    digest = hashlib.sha256()
    for path in files:
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    where = directory or Path(tempfile.gettempdir()) / "tierlog-spark"
    where.mkdir(parents=True, exist_ok=True)
    target = where / f"tierlog-{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        return target
    partial = where / f".{target.name}.{os.getpid()}.tmp"
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(root.parent).as_posix())
    os.replace(partial, target)  # another session making the same zip gets one whole file
    return target


def with_package(settings: dict[str, str], directory: Path | None = None) -> dict[str, str]:
    """``settings`` with the package's zip added to ``spark.submit.pyFiles`` (after any
    files already there)."""
    shipped = str(package_zip(directory))
    existing = settings.get(PYFILES_CONF, "")
    return {**settings, PYFILES_CONF: f"{existing},{shipped}" if existing else shipped}
