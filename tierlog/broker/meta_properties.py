"""``meta.properties`` in each log dir: which cluster and broker the data belongs to.

Kafka's format (ZooKeeper mode)::

    version=0
    broker.id=0
    cluster.id=<22-character base64 uuid>

A log dir written by another broker or cluster refuses to start (Kafka's
InconsistentBrokerIdException / InconsistentClusterIdException) instead of mixing data. A
file that cannot be read as the above (bytes that are not text, a missing or non-numeric
``broker.id``, no ``cluster.id``) refuses too, with one message naming the file, what is
wrong and the way out (``MetaPropertiesError``, a ValueError so the command line prints it
as one line): the broker cannot tell whose data the directory holds.
"""

from __future__ import annotations

import os
from pathlib import Path

from tierlog.util.properties import PropertiesError, load_properties

FILE_NAME = "meta.properties"


class InconsistentMetaError(Exception):
    pass


class MetaPropertiesError(ValueError):
    """``meta.properties`` exists but is not one; the message names the file, the problem
    and the way out."""


def read(path: Path) -> dict[str, str]:
    """The properties of ``path``, checked for Kafka's three keys.

    Raises:
        MetaPropertiesError: unreadable bytes, or a key missing or malformed.
    """
    way_out = (
        f"if the directory's data is this cluster's, move {path.name} away and the broker "
        "writes a new one; otherwise give the broker an empty log.dirs"
    )
    try:
        props = load_properties(path)
    except (UnicodeDecodeError, PropertiesError) as exc:
        problem = "not text" if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise MetaPropertiesError(f"{path}: unreadable ({problem}); {way_out}") from None
    problems = []
    if props.get("version") not in ("0", "1"):
        problems.append(f"version is {props.get('version')!r}, expected 0")
    if not props.get("broker.id", "").lstrip("-").isdigit():
        problems.append(f"broker.id is {props.get('broker.id')!r}, expected an integer")
    if not props.get("cluster.id"):
        problems.append("cluster.id is missing")
    if problems:
        raise MetaPropertiesError(f"{path}: garbled ({'; '.join(problems)}); {way_out}")
    return props


def check_or_write(log_dir: Path, broker_id: int, cluster_id: str) -> None:
    path = Path(log_dir) / FILE_NAME
    if path.exists():
        props = read(path)
        if props.get("broker.id") != str(broker_id):
            raise InconsistentMetaError(
                f"{path}: broker.id {props.get('broker.id')} does not match configured "
                f"broker.id {broker_id}"
            )
        if props.get("cluster.id") != cluster_id:
            raise InconsistentMetaError(
                f"{path}: cluster.id {props.get('cluster.id')} does not match {cluster_id}"
            )
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(FILE_NAME + ".tmp")
    tmp.write_text(f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n")
    os.replace(tmp, path)
