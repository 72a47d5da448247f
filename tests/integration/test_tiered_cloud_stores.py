"""The remote tier on Google Cloud Storage and Azure Blob Storage, through the same fsspec
code as S3 (gcsfs, adlfs), against each store's own emulator (fake-gcs-server, Azurite:
``tests/integration/cloud_emulators``): a broker offloads, its local segments go, and every
record reads back through the broker and through the Spark source; a manifest version is
created only once (each store's conditional PUT)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.harness import BrokerProcess
from tests.integration.cloud_emulators import EMULATORS, CloudStore, filesystem
from tests.integration.tiered_s3 import (
    FAST,
    consume,
    create_topic,
    produce,
    spark_tiers,
    wait_until,
)
from tierlog.remote import manifest as mf
from tierlog.remote.api import ManifestConflictError
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.manifest import committed_segments, end_offset

pytestmark = pytest.mark.timeout(600)

RECORDS = 600
TOPIC, TOPIC_ID = "t", uuid.UUID("6f1c9f5e-0d1b-4c35-9a3f-1d2e3f405162")


@pytest.fixture(scope="module", params=sorted(EMULATORS))
def cloud(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CloudStore]:
    with EMULATORS[request.param](tmp_path_factory.mktemp(request.param)) as store:
        yield store


def offload(
    tmp_path: Path, cloud: CloudStore, brokers: list[BrokerProcess]
) -> tuple[BrokerProcess, str, str]:
    """A broker whose remote tier is on ``cloud``, a topic produced until segments are on the
    store only: (broker, topic, remote URL)."""
    prefix = f"tiered-{uuid.uuid4().hex[:6]}"
    topic = f"cloud-{uuid.uuid4().hex[:6]}"
    broker = BrokerProcess(tmp_path / "data", {**FAST, **cloud.broker_settings(prefix)}).start()
    brokers.append(broker)
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, RECORDS)
    store = FsspecRemoteStore(cloud.url(prefix), cloud.options)

    def offloaded() -> bool:
        committed = committed_segments(store.read_manifest(topic, 0))
        logs = sorted((tmp_path / "data" / f"{topic}-0").glob("*.log"))
        return len(committed) >= 3 and int(logs[0].stem) > committed[0].end_offset

    wait_until(offloaded, 300, f"offloaded to {cloud.name}")
    return broker, topic, cloud.url(prefix)


def test_offload_reads_back_through_the_broker(
    tmp_path: Path, cloud: CloudStore, brokers: list[BrokerProcess]
) -> None:
    broker, topic, url = offload(tmp_path, cloud, brokers)
    store = FsspecRemoteStore(url, cloud.options)
    manifest = store.read_manifest(topic, 0)
    local_start = int(sorted((tmp_path / "data" / f"{topic}-0").glob("*.log"))[0].stem)
    assert local_start > 0 and end_offset(manifest) >= local_start
    # One object per segment, where the manifest says.
    objects = filesystem(cloud).ls(
        f"{cloud.container}/{url.rsplit('/', 1)[1]}/{topic}-0", detail=False
    )
    segments = [o for o in objects if o.endswith(".segment")]
    assert len(segments) >= len(committed_segments(manifest)) >= 3
    # Offsets below the local log start come from the store.
    assert consume(broker.bootstrap, topic, 0, RECORDS, timeout=120) == list(range(RECORDS))
    assert broker.stop() == 0


def test_a_manifest_version_is_created_once(
    cloud: CloudStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writer A reads and checks; B commits before A's PUT; A's conditional PUT of the same
    version fails: the version's creation is the compare-and-set, on each store."""
    url = cloud.url(f"manifests-{uuid.uuid4().hex[:6]}")
    a, b = FsspecRemoteStore(url, cloud.options), FsspecRemoteStore(url, cloud.options)
    assert a.manifests.conditional_writes
    base = a.commit(TOPIC, 0, mf.empty(TOPIC, 0, TOPIC_ID), 0)
    real_create = a.manifests._create

    def b_commits_then_create(*args: Any) -> Any:
        b.commit(TOPIC, 0, mf.with_log_start_offset(base, 7), base.version)
        return real_create(*args)

    monkeypatch.setattr(a.manifests, "_create", b_commits_then_create)
    with pytest.raises(ManifestConflictError, match="created by another writer"):
        a.commit(TOPIC, 0, mf.with_log_start_offset(base, 3), base.version)
    monkeypatch.undo()
    assert a.read_manifest(TOPIC, 0).log_start_offset == 7


def test_the_spark_source_reads_both_tiers_from_the_store(
    tmp_path: Path, cloud: CloudStore, brokers: list[BrokerProcess], spark: Any
) -> None:
    broker, topic, url = offload(tmp_path, cloud, brokers)
    rows = spark_tiers(spark, broker.bootstrap, topic, url, cloud.options)
    assert sorted(offset for offset, _ in rows) == list(range(RECORDS))
    tiers = dict(rows)
    assert tiers[0] == "remote" and tiers[RECORDS - 1] != "remote"
    assert broker.stop() == 0
