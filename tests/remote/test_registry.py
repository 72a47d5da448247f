"""``open_store``: stores chosen by URL scheme, and a second store that needs no change
outside its own module (``tests/remote/dict_store.py``) serving the remote log manager,
the Spark source's readers, changelog rebuilds and the tools (issue 21, item 6)."""

from __future__ import annotations

import asyncio
import io
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.remote.conftest import PARTITION, TOPIC, TOPIC_ID
from tests.remote.dict_store import SCHEME, DictStore
from tierlog.compaction.changelog_sources import StoreTier
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.remote import manifest as mf
from tierlog.remote import registry
from tierlog.remote.api import CorruptRemoteDataError, RemoteStorageError
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.spark.planning import RemoteSplit
from tierlog.spark.split_readers import read_remote
from tierlog.tools.remote_tools import RemoteLocation, remote_ls
from tierlog.util.clock import ManualClock

from .conftest import batch


@pytest.fixture
def dict_scheme() -> Iterator[str]:
    registry.register_store(SCHEME, "tests.remote.dict_store.DictStore")
    try:
        yield f"{SCHEME}://{uuid.uuid4().hex}"
    finally:
        registry.unregister_store(SCHEME)


def test_a_scheme_without_a_store_of_its_own_goes_to_fsspec(tmp_path: Path) -> None:
    store = registry.open_store(tmp_path.as_uri())
    assert type(store) is FsspecRemoteStore and store.url == tmp_path.as_uri()
    assert (
        registry.check_url("nosuch://bucket/x")
        == "'nosuch://bucket/x': unknown storage scheme 'nosuch'"
    )
    assert "is not a URL" in (registry.check_url("s3:/bucket") or "")
    assert registry.check_url(tmp_path.as_uri()) is None


def test_a_registered_scheme_opens_its_store(dict_scheme: str) -> None:
    throttled: list[int] = []
    store = registry.open_store(dict_scheme, {}, throttle=throttled.append)
    assert type(store) is DictStore and store.url == dict_scheme
    assert SCHEME in registry.registered_schemes()
    assert registry.check_url(dict_scheme) is None
    with pytest.raises(ValueError, match="registered already"):
        registry.register_store(SCHEME, "elsewhere.Store")


def test_a_store_whose_package_is_missing_names_what_to_install() -> None:
    registry.register_store("gone", "no_such_package.store.Store", "no-such-package")
    try:
        with pytest.raises(RemoteStorageError, match="install no-such-package"):
            registry.open_store("gone://x")
        assert "gone:// is not available" in (registry.check_url("gone://x") or "")
    finally:
        registry.unregister_store("gone")


def test_both_stores_type_check_as_the_interface(tmp_path: Path) -> None:
    """mypy, not ``isinstance`` (which only compares method names against a Protocol):
    each store class is a ``StoreFactory`` and what it builds a ``RemoteStore``."""
    from mypy import api

    snippet = tmp_path / "stores_conform.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from tests.remote.dict_store import DictStore
            from tierlog.remote.api import RemoteStore, StoreFactory
            from tierlog.remote.fsspec_storage import FsspecRemoteStore

            factories: list[StoreFactory] = [FsspecRemoteStore, DictStore]
            a: RemoteStore = FsspecRemoteStore("memory://x")
            b: RemoteStore = DictStore("dictstore://x")
            """
        )
    )
    out, err, status = api.run([str(snippet), "--no-incremental", "--follow-imports=silent"])
    assert status == 0, out + err


def _tiered_log(tmp_path: Path, clock: ManualClock) -> Log:
    config = LogConfig.from_props(
        {"segment.bytes": 2048, "remote.storage.enable": True, "retention.ms": -1}
    )
    log = Log(tmp_path / "data" / f"{TOPIC}-{PARTITION}", config, clock=clock)
    for n in range(60):
        log.append(batch(4, 1_700_000_000_000 + n), leader_epoch=0)
    return log


def test_the_second_store_serves_every_caller_unchanged(
    dict_scheme: str, tmp_path: Path, clock: ManualClock
) -> None:
    log = _tiered_log(tmp_path, clock)
    store = registry.open_store(dict_scheme)
    # No read-ahead: it would race the damage done below into the cache, as fetched.
    manager = RemoteLogManager(store, tmp_path / "cache", 0, clock=clock, read_ahead_chunks=0)
    try:
        state = manager.track(
            TOPIC, PARTITION, TOPIC_ID, log, lambda: 0, lambda: log.log_end_offset
        )
        asyncio.run(manager.run_cycle())
        committed = mf.committed_segments(store.read_manifest(TOPIC, PARTITION))
        closed = log.segments[:-1]
        assert [s.base_offset for s in committed] == [s.base_offset for s in closed]
        assert all(part.crc32c is not None for part in committed[0].parts)

        # The broker's read path: checked batches, as the local segment holds them.
        first = committed[1]
        got = asyncio.run(manager.read(state, first.base_offset, 1 << 20))
        assert got is not None and got == closed[1].path.read_bytes()

        # Spark's direct read of a split.
        split = RemoteSplit(TOPIC, PARTITION, first.base_offset, first.end_offset + 1, first)
        rows = sum(b.num_rows for b in read_remote(split, store))
        assert rows == first.end_offset + 1 - first.base_offset

        # Changelog rebuilds and the tools find the partition and its manifest.
        assert StoreTier(store, TOPIC).partitions() == [PARTITION]
        out, err = io.StringIO(), io.StringIO()
        assert remote_ls(RemoteLocation(dict_scheme), TOPIC, None, out, err) == 0
        assert first.segment_id in out.getvalue()

        # Damage in the second store is caught the same way, naming its object (a
        # segment not read yet: what was read is in the broker's chunk cache, as fetched).
        assert isinstance(store, DictStore)
        first = committed[2]
        key = f"{TOPIC}-{PARTITION}/{mf.object_name(first.base_offset, first.segment_id, 'log')}"
        data = bytearray(store.objects[key])
        data[80] ^= 1
        store.objects[key] = bytes(data)
        manager.reads.fetch_errors = 0
        with pytest.raises(CorruptRemoteDataError) as raised:
            asyncio.run(manager.read(state, first.base_offset, 1 << 20))
        assert raised.value.object_url == f"{dict_scheme}/{key}"
        assert manager.corrupt_ranges == 1
    finally:
        manager.close()
        log.close()
