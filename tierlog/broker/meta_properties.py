"""``meta.properties`` in each log dir: which cluster and broker the data belongs to.

Kafka's format (ZooKeeper mode)::

    version=0
    broker.id=0
    cluster.id=<22-character base64 uuid>

A log dir written by another broker or cluster refuses to start (Kafka's
InconsistentBrokerIdException / InconsistentClusterIdException) instead of mixing data.
"""

from __future__ import annotations

import os
from pathlib import Path

from tierlog.util.properties import load_properties

FILE_NAME = "meta.properties"


class InconsistentMetaError(Exception):
    pass


def check_or_write(log_dir: Path, broker_id: int, cluster_id: str) -> None:
    path = Path(log_dir) / FILE_NAME
    if path.exists():
        props = load_properties(path)
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
