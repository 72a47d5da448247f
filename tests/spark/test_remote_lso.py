"""The remote tier's own last stable offset (``tierlog.spark.remote_lso``) and the read_committed
bounds ``Discovery`` plans remote-only reads with: a real ``Log`` offloaded by the real
remote log manager to file://, with a transaction whose marker stays local."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.remote.conftest import PARTITION, TOPIC, TOPIC_ID
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.remote import manifest as mf
from tierlog.remote.api import IndexKind
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.spark.discovery import Discovery, SourceError
from tierlog.spark.options import parse
from tierlog.spark.remote_lso import remote_last_stable_offset

T0 = 1_700_000_000_000
PID = 7000
TP = (TOPIC, PARTITION)


@dataclass
class Tiered:
    """A log and its remote tier; ``offload()`` runs one remote log manager cycle."""

    log: Log
    store: FsspecRemoteStore
    manager: RemoteLogManager
    url: str
    sequence: int = 0

    def plain(self, n: int) -> None:
        records = [Record(b"k", b"plain", timestamp=T0) for _ in range(n)]
        self.log.append_as_follower(build_batch(records, base_offset=self.log.log_end_offset))

    def txn(self, n: int) -> None:
        records = [Record(b"k", b"txn", timestamp=T0) for _ in range(n)]
        batch = build_batch(
            records, base_offset=self.log.log_end_offset, producer_id=PID, producer_epoch=0,
            base_sequence=self.sequence, transactional=True,
        )  # fmt: skip
        self.sequence += n
        self.log.append_as_follower(batch)

    def marker(self, kind: ControlType) -> None:
        offset = self.log.log_end_offset
        batch = build_control_batch(
            kind, producer_id=PID, producer_epoch=0, base_offset=offset, timestamp=T0
        )
        self.log.append_as_follower(batch)

    def offload(self) -> mf.Manifest:
        asyncio.run(self.manager.run_cycle())
        return self.store.read_manifest(TOPIC, PARTITION)

    def bounds(self, isolation: str) -> tuple[int, int]:
        options = parse(
            {"subscribe": TOPIC, "tierlog.tiers": "remote", "remote.log.storage.url": self.url,
             "kafka.isolation.level": isolation}
        )  # fmt: skip
        with Discovery(options) as discovery:
            partitions = discovery.partitions()
            earliest, latest = discovery.earliest_latest(
                partitions, discovery.manifests(partitions)
            )
        return earliest[TP], latest[TP]


@pytest.fixture
def tiered(tmp_path: Path) -> Iterator[Tiered]:
    config = LogConfig.from_props({"remote.storage.enable": True})
    log = Log(tmp_path / "data" / f"{TOPIC}-{PARTITION}", config)
    url = f"file://{tmp_path / 'remote'}"
    manager = RemoteLogManager(FsspecRemoteStore(url), tmp_path / "cache", 0)
    manager.track(TOPIC, PARTITION, TOPIC_ID, log, lambda: 0, lambda: log.log_end_offset)
    try:
        yield Tiered(log, FsspecRemoteStore(url), manager, url)
    finally:
        manager.close()
        log.close()


def aborted_with_a_local_marker(t: Tiered) -> mf.Manifest:
    """Plain 0-4, a transaction 5-7 | 8-10 with plain 11-12, its ABORT at 13 in the active
    segment: offsets 0-12 are offloaded (below the LSO once the marker is written)."""
    t.plain(5)
    t.txn(3)
    t.log.roll()
    t.txn(3)
    t.plain(2)
    t.log.roll()
    t.marker(ControlType.ABORT)
    manifest = t.offload()
    assert mf.end_offset(manifest) == 13, "the transaction's records are remote, its marker not"
    return manifest


def test_read_committed_ends_where_the_transaction_open_at_the_remote_end_began(
    tiered: Tiered,
) -> None:
    manifest = aborted_with_a_local_marker(tiered)
    assert remote_last_stable_offset(tiered.store, manifest, 0) == 5
    assert tiered.bounds("read_committed") == (0, 5)
    assert tiered.bounds("read_uncommitted") == (0, 13)
    # Its marker's segment offloaded: nothing is open at the remote end any more.
    tiered.log.roll()
    manifest = tiered.offload()
    assert mf.end_offset(manifest) == 14
    assert remote_last_stable_offset(tiered.store, manifest, 0) == 14
    assert tiered.bounds("read_committed") == (0, 14)


def test_a_committed_transaction_counts_only_once_its_marker_is_remote(tiered: Tiered) -> None:
    tiered.plain(2)
    tiered.txn(4)  # 2-5
    tiered.log.roll()
    tiered.marker(ControlType.COMMIT)  # 6, local
    assert mf.end_offset(tiered.offload()) == 6
    assert tiered.bounds("read_committed") == (0, 2)
    tiered.plain(1)
    tiered.log.roll()
    assert mf.end_offset(tiered.offload()) == 8
    assert tiered.bounds("read_committed") == (0, 8)


def test_segments_without_a_producer_snapshot_are_passed_over(
    tiered: Tiered, caplog: pytest.LogCaptureFixture
) -> None:
    """Which transactions a snapshot-less last segment leaves open is unknown: the bound is
    the latest snapshot's (earlier than needed, never later), or the floor with none."""
    aborted_with_a_local_marker(tiered)
    tiered.log.roll()
    manifest = tiered.offload()  # segments 0-7, 8-12, 13 (the ABORT marker)

    def without_snapshots(n: int) -> mf.Manifest:
        segments = list(manifest.segments)
        segments[-n:] = [dataclasses.replace(s, has_aux_state=False) for s in segments[-n:]]
        return dataclasses.replace(manifest, segments=tuple(segments))

    with caplog.at_level(logging.WARNING, logger="tierlog.spark.remote_lso"):
        # The marker's segment says nothing: the state at 13 (transaction open from 5).
        assert remote_last_stable_offset(tiered.store, without_snapshots(1), 0) == 5
        assert "no producer snapshot" in caplog.text
        # Only the first segment's state, at 8: the transaction is open from 5 there too.
        assert remote_last_stable_offset(tiered.store, without_snapshots(2), 0) == 5
        assert remote_last_stable_offset(tiered.store, without_snapshots(3), 3) == 3


def test_a_corrupt_remote_snapshot_fails_the_read_committed_plan(tiered: Tiered) -> None:
    manifest = aborted_with_a_local_marker(tiered)
    last = mf.committed_segments(manifest)[-1]
    path = tiered.store.object_path(last, IndexKind.PRODUCER_SNAPSHOT.value)
    tiered.store.fs.pipe_file(path, b"not a snapshot")
    with pytest.raises(SourceError, match=r"orders-3: .*snapshot"):
        tiered.bounds("read_committed")
    assert tiered.bounds("read_uncommitted") == (0, 13)  # needs no snapshot
