"""``kafka.isolation.level=read_committed`` on a tiered topic read straight from S3 (moto's
server): a log with interleaved transactions, some aborted across segment boundaries, is
offloaded by the real remote log manager, and Spark returns exactly the committed records
(read_uncommitted: every data record; transaction markers never)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.remote.conftest import PARTITION, TOPIC, TOPIC_ID, S3Bucket, s3_bucket, s3_server  # noqa: F401
from tests.txn_data import append_transactions
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.remote import manifest as mf
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.remote_log_manager import RemoteLogManager


def test_read_committed_returns_exactly_the_committed_records_of_remote_segments(
    spark: Any,
    s3_bucket: S3Bucket,  # noqa: F811
    tmp_path: Path,
) -> None:
    config = LogConfig.from_props({"segment.bytes": 2048, "remote.storage.enable": True})
    log = Log(tmp_path / "data" / f"{TOPIC}-{PARTITION}", config)
    store = FsspecRemoteStore(s3_bucket.url, s3_bucket.options(), retries=0)
    manager = RemoteLogManager(store, tmp_path / "cache", 0)
    try:
        written = append_transactions(log)
        assert written.aborted_offsets and written.committed != written.all_values
        log.roll()  # every marker in a closed segment: the whole log goes remote
        manager.track(TOPIC, PARTITION, TOPIC_ID, log, lambda: 0, lambda: log.log_end_offset)
        asyncio.run(manager.run_cycle())
        committed = mf.committed_segments(store.read_manifest(TOPIC, PARTITION))
        assert committed[-1].next_offset == log.log_end_offset
        assert sum(s.has_txn_index for s in committed) >= 3
    finally:
        manager.close()
        log.close()
    options = {
        "subscribe": TOPIC,
        "tierlog.tiers": "remote",
        "remote.log.storage.url": s3_bucket.url,
        "remote.log.storage.options.endpoint_url": s3_bucket.endpoint_url,
        "remote.log.storage.options.key": "testing",
        "remote.log.storage.options.secret": "testing",
        "remote.log.storage.options.client_kwargs.region_name": "us-east-1",
    }

    def rows(**extra: str) -> list[tuple[int, bytes]]:
        df = spark.read.format("tierlog").options(**options, **extra).load()
        return sorted((r["offset"], bytes(r["value"])) for r in df.collect())

    assert rows(**{"kafka.isolation.level": "read_committed"}) == written.committed
    assert rows() == written.all_values
