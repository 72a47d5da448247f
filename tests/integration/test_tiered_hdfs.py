"""The remote tier on a real HDFS: Hadoop's MiniDFSCluster (``tests/integration/minihdfs``)
through fsspec's ``webhdfs://`` (issue 24's harness, issue 20 item 13's torn manifests).

WebHDFS creates a file empty and appends to it, so a file overwritten in place is readable
half-written: with one ``manifest.json`` rewritten per commit, 1.4% of manifest reads
during offload failed. Here a broker offloads to HDFS while reader threads read the
manifest as the broker, Spark planning and the tools do, as fast as they can: none may
see a torn manifest or a manifest going back in time. Everything offloaded is then read
back through the broker and through the Spark source.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.harness import BrokerProcess
from tests.integration.minihdfs import MiniHdfs, running
from tests.integration.tiered_s3 import (
    FAST,
    consume,
    create_topic,
    produce,
    spark_tiers,
    wait_until,
)
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.manifest import committed_segments, end_offset
from tierlog.remote.registry import open_store

pytestmark = pytest.mark.timeout(900)  # a JVM cluster's start, then offload over HTTP

RECORDS = 600


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniHdfs]:
    with running(tmp_path_factory.mktemp("hdfs")) as cluster:
        yield cluster


class ManifestReaders:
    """Threads reading the manifest in a loop, each with a store of its own as Spark
    planning and the tools open them, recording every failure and every version going
    backwards (and how often a pointer was read half-written and read again)."""

    def __init__(self, url: str, options: dict[str, Any], topic: str, threads: int) -> None:
        self.url, self.options, self.topic = url, options, topic
        self.reads = 0
        self.failures: list[str] = []
        self.backwards: list[tuple[int, int]] = []
        self.torn_pointer_reads = 0  # pointers read half-written, read again
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self) -> None:
        store = FsspecRemoteStore(self.url, self.options)
        last = 0
        while not self._stop.is_set():
            try:
                manifest = store.read_manifest(self.topic, 0)
            except Exception as exc:
                with self._lock:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                continue
            with self._lock:
                self.reads += 1
                if manifest.version < last:
                    self.backwards.append((last, manifest.version))
            last = manifest.version
        with self._lock:
            self.torn_pointer_reads += store.manifests.torn_reads

    def __enter__(self) -> ManifestReaders:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def test_offload_to_hdfs_reads_back_whole_and_no_manifest_read_is_torn(
    tmp_path: Path, hdfs: MiniHdfs, brokers: list[BrokerProcess], spark: Any
) -> None:
    topic = f"hdfs-{uuid.uuid4().hex[:6]}"
    url = hdfs.url("/tierlog")
    broker = BrokerProcess(
        tmp_path / "data",
        {
            **FAST,
            "remote.log.storage.url": url,
            "remote.log.storage.options.user": "tierlog",
        },
    ).start()
    brokers.append(broker)
    create_topic(broker.bootstrap, topic)
    store = open_store(url, hdfs.storage_options)
    with ManifestReaders(url, hdfs.storage_options, topic, threads=4) as readers:
        produce(broker.bootstrap, topic, 0, RECORDS)

        def offloaded() -> bool:
            # Segments committed to HDFS and trimmed locally: their offsets are on HDFS only.
            committed = committed_segments(store.read_manifest(topic, 0))
            logs = sorted((tmp_path / "data" / f"{topic}-0").glob("*.log"))
            return len(committed) >= 3 and int(logs[0].stem) > committed[0].end_offset

        wait_until(offloaded, 600, "offloaded to HDFS")
        time.sleep(0.5)  # readers keep going across the last commits
    manifest = store.read_manifest(topic, 0)
    commits = manifest.version
    print(
        f"\nHDFS: {commits} commits, {readers.reads} manifest reads during offload, "
        f"{len(readers.failures)} failed, {len(readers.backwards)} went back, "
        f"{readers.torn_pointer_reads} half-written pointers read again"
    )
    assert readers.reads > 5 * commits > 0
    assert readers.failures == []
    assert readers.backwards == []
    # Everything the manifest names is on HDFS, checked against its recorded CRC-32C.
    remote_end = end_offset(manifest)
    local_start = int(sorted((tmp_path / "data" / f"{topic}-0").glob("*.log"))[0].stem)
    assert local_start > 0 and remote_end >= local_start

    # Through the broker: offsets below the local log start come from HDFS.
    assert consume(broker.bootstrap, topic, 0, RECORDS, timeout=120) == list(range(RECORDS))

    # Through the Spark source: the remote segments straight from HDFS, the rest from
    # the leader.
    rows = spark_tiers(spark, broker.bootstrap, topic, url, {"user": "tierlog"})
    assert sorted(offset for offset, _ in rows) == list(range(RECORDS))
    tiers = dict(rows)
    assert tiers[0] == "remote" and tiers[RECORDS - 1] != "remote"
    assert broker.stop() == 0
