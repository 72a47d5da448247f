"""FsspecRemoteStore on memory:// and file://: segment objects, manifests, errors."""

from __future__ import annotations

import dataclasses
import errno
import inspect
import logging
import os
import pickle
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Generic, Protocol

import pytest

from tests.remote.conftest import PARTITION, TOPIC, TOPIC_ID, paths, remote_segment
from tierlog.local.log import Log
from tierlog.remote import fsspec_manifests, fsspec_uploads
from tierlog.remote import manifest as mf
from tierlog.remote._errors import is_unavailable, translate
from tierlog.remote.api import (
    CorruptManifestError,
    FencedLeaderEpochError,
    IndexKind,
    ManifestConflictError,
    RemoteMetadata,
    RemoteResourceNotFoundError,
    RemoteStorage,
    RemoteStorageError,
    RemoteStorageUnavailableError,
    RemoteStore,
    SegmentPart,
    SegmentState,
)
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.registry import open_store
from tierlog.remote.segment_reader import RemoteSegmentReader


@pytest.fixture(params=["memory", "file"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        root = f"memory://tierlog-test-{uuid.uuid4().hex}"
        yield root
        import fsspec

        fs = fsspec.filesystem("memory")
        if fs.exists(root):
            fs.rm(root, recursive=True)
    else:
        yield f"file://{tmp_path}/remote"


@pytest.fixture(params=["single", "separate"])
def store(request: pytest.FixtureRequest, store_url: str) -> FsspecRemoteStore:
    """Segments laid out as one object each (the default) or one object per part (as
    uploaded before issue 24; still read)."""
    return FsspecRemoteStore(store_url, retries=0, single_object=request.param == "single")


def _members(protocol: type) -> dict[str, object]:
    """A Protocol's methods (name -> function) and attributes and properties (-> None)."""
    members: dict[str, object] = {}
    for base in reversed(protocol.__mro__):
        if base in (object, Protocol, Generic) or not getattr(base, "_is_protocol", False):
            continue
        members.update({n: None for n in getattr(base, "__annotations__", {})})
        members.update({n: None for n, v in vars(base).items() if isinstance(v, property)})
        members.update({n: v for n, v in vars(base).items() if inspect.isfunction(v)})
    return {n: v for n, v in members.items() if not n.startswith("_")}


@pytest.mark.parametrize("protocol", [RemoteStorage, RemoteMetadata, RemoteStore])
def test_implements_both_interfaces(store: FsspecRemoteStore, protocol: type) -> None:
    # isinstance against a runtime-checkable Protocol only compares names: compare each
    # method's parameters (names, kinds, defaults) too, and that attributes are there.
    members = _members(protocol)
    assert {"fetch_range", "read_manifest"} & set(members), "no members found"
    for name, declared in members.items():
        assert hasattr(store, name), name
        if declared is None:
            continue
        wanted = inspect.signature(declared).parameters
        got = inspect.signature(getattr(type(store), name)).parameters
        assert [(p.name, p.kind, p.default) for p in got.values()] == [
            (p.name, p.kind, p.default) for p in wanted.values()
        ], name
    assert isinstance(store, protocol)


def test_is_what_open_store_gives_and_types_as_the_interface(store_url: str) -> None:
    """The registry opens fsspec URLs with this store; mypy checks it against the
    interface here (an ``isinstance`` against a Protocol only compares method names)."""
    store: RemoteStore = open_store(store_url)
    assert type(store) is FsspecRemoteStore
    assert store.url == store_url
    checked: RemoteStore = FsspecRemoteStore(store_url)  # a type error if it drifted
    assert checked.url == store_url


# -- segment objects --------------------------------------------------------------------------


def test_copy_then_fetch_returns_the_local_bytes(store: FsspecRemoteStore, closed_log: Log) -> None:
    for local in closed_log.segments[:-1]:
        segment = store.copy_segment(remote_segment(local, closed_log), *paths(local))
        data = local.path.read_bytes()
        assert store.fetch_range(segment, 0, None) == data
        assert store.fetch_range(segment, 100, 700) == data[100:700]
        assert store.fetch_range(segment, len(data) - 5, len(data) + 100) == data[-5:]
        assert store.fetch_range(segment, len(data), None) == b""
        assert store.fetch_range(segment, 10, 10) == b""
        assert store.fetch_index(segment, IndexKind.OFFSET) == local.offset_index.path.read_bytes()
        assert store.fetch_index(segment, IndexKind.TIME) == local.time_index.path.read_bytes()
    with pytest.raises(ValueError):
        store.fetch_range(segment, 10, 5)


def test_object_layout(store: FsspecRemoteStore, closed_log: Log) -> None:
    local = closed_log.segments[1]
    segment = remote_segment(local, closed_log, segment_id="0c7a-4f1e")
    segment = store.copy_segment(segment, *paths(local))
    stem = f"{local.base_offset:020d}-0c7a-4f1e"
    if store.single_object:
        # One object: the log, then its indexes, at the offsets the parts record.
        assert store.list_objects(TOPIC, PARTITION) == [f"{stem}.segment"]
        sizes = [p.stat().st_size for p in paths(local)]
        assert [(p.kind, p.offset, p.size) for p in segment.parts] == [
            ("log", 0, sizes[0]),
            ("index", sizes[0], sizes[1]),
            ("timeindex", sizes[0] + sizes[1], sizes[2]),
        ]
        assert store.object_path(segment, "index").endswith(f"/{TOPIC}-{PARTITION}/{stem}.segment")
    else:
        assert store.list_objects(TOPIC, PARTITION) == sorted(
            [f"{stem}.index", f"{stem}.log", f"{stem}.timeindex"]
        )
        assert store.object_path(segment, "log").endswith(f"/{TOPIC}-{PARTITION}/{stem}.log")
    assert store.manifest_url(TOPIC, PARTITION).endswith(f"/{TOPIC}-{PARTITION}/manifest.json")
    store.commit(TOPIC, PARTITION, mf.with_segment(mf.empty(TOPIC, PARTITION), segment), 0)
    # A version object per commit, and the pointer naming it (tierlog.remote.manifest).
    assert {"manifest.json", "manifest-00000000000000000001.json"} <= set(
        store.list_objects(TOPIC, PARTITION)
    )


def test_copy_is_idempotent_and_checks_the_size(store: FsspecRemoteStore, closed_log: Log) -> None:
    local = closed_log.segments[0]
    segment = remote_segment(local, closed_log)
    store.copy_segment(segment, *paths(local))
    segment = store.copy_segment(segment, *paths(local))  # a retry overwrites the same names
    assert store.fetch_range(segment, 0, None) == local.path.read_bytes()
    assert len(store.list_objects(TOPIC, PARTITION)) == (1 if store.single_object else 3)
    with pytest.raises(ValueError, match="holds"):
        store.copy_segment(dataclasses.replace(segment, size_bytes=1), *paths(local))


def test_upload_streams_in_chunks_through_the_throttle(store_url: str, closed_log: Log) -> None:
    seen: list[int] = []
    store = FsspecRemoteStore(store_url, copy_chunk_bytes=1000, throttle=seen.append)
    local = closed_log.segments[0]
    store.copy_segment(remote_segment(local, closed_log), *paths(local))
    total = sum(p.stat().st_size for p in paths(local))
    assert sum(seen) == total and max(seen) == 1000


def test_interrupted_upload_leaves_nothing_committed_and_retry_succeeds(
    store_url: str, closed_log: Log
) -> None:
    def failing(n: int) -> None:
        raise OSError(errno.ENOSPC, "disk full while reading")

    broken = FsspecRemoteStore(store_url, copy_chunk_bytes=1000, throttle=failing, retries=0)
    local = closed_log.segments[0]
    segment = remote_segment(local, closed_log)
    with pytest.raises(RemoteStorageError, match="disk full") as info:
        broken.copy_segment(segment, *paths(local))
    assert not info.value.retriable
    assert broken.read_manifest(TOPIC, PARTITION).segments == ()
    store = FsspecRemoteStore(store_url)
    segment = store.copy_segment(segment, *paths(local))
    assert store.fetch_range(segment, 0, None) == local.path.read_bytes()


def test_delete_is_idempotent(store: FsspecRemoteStore, closed_log: Log) -> None:
    first, second = closed_log.segments[0], closed_log.segments[1]
    doomed = store.copy_segment(remote_segment(first, closed_log), *paths(first))
    keep = store.copy_segment(remote_segment(second, closed_log), *paths(second))
    store.delete_segment(doomed)
    store.delete_segment(doomed)  # retried: missing objects are fine
    assert all(keep.segment_id in name for name in store.list_objects(TOPIC, PARTITION))
    with pytest.raises(RemoteResourceNotFoundError) as info:
        store.fetch_range(doomed, 0, 10)
    assert doomed.segment_id in str(info.value)
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_index(doomed, IndexKind.TIME)


def test_list_objects_of_an_unknown_partition_is_empty(store: FsspecRemoteStore) -> None:
    assert store.list_objects("nothing-here", 0) == []


# -- manifests --------------------------------------------------------------------------------


def _manifest_with(log: Log, epoch: int = 1) -> mf.Manifest:
    m = mf.empty(TOPIC, PARTITION, TOPIC_ID)
    for local in log.segments[:2]:
        m = mf.with_segment(m, remote_segment(local, log, state=SegmentState.COPY_FINISHED))
    return dataclasses.replace(m, leader_epoch=epoch)


def test_manifest_commit_and_read(store: FsspecRemoteStore, closed_log: Log) -> None:
    empty = store.read_manifest(TOPIC, PARTITION)
    assert empty == mf.empty(TOPIC, PARTITION)
    wanted = _manifest_with(closed_log)
    stored = store.commit(TOPIC, PARTITION, wanted, expected_version=0)
    assert stored.version == 1
    assert store.read_manifest(TOPIC, PARTITION) == stored
    assert mf.MANIFEST_NAME in store.list_objects(TOPIC, PARTITION)
    later = store.commit(TOPIC, PARTITION, mf.with_log_start_offset(stored, 5), 1)
    assert later.version == 2
    assert store.read_manifest(TOPIC, PARTITION).log_start_offset == 5


def test_commit_is_compare_and_set(store: FsspecRemoteStore, closed_log: Log) -> None:
    m = store.commit(TOPIC, PARTITION, _manifest_with(closed_log), 0)
    with pytest.raises(ManifestConflictError) as info:
        store.commit(TOPIC, PARTITION, mf.with_log_start_offset(m, 9), expected_version=0)
    assert (info.value.expected_version, info.value.actual_version) == (0, 1)
    assert not info.value.retriable
    assert store.read_manifest(TOPIC, PARTITION) == m


def test_commit_whose_response_was_lost_succeeds_on_retry(
    store_url: str, closed_log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FsspecRemoteStore(store_url, retries=1, sleep=lambda s: None)
    real = store.manifests._point

    def lost_response(*args: Any) -> None:
        real(*args)
        raise ConnectionResetError(104, "connection reset after the write")

    monkeypatch.setattr(store.manifests, "_point", lost_response)
    wanted = _manifest_with(closed_log)
    stored = store.commit(TOPIC, PARTITION, wanted, 0)
    assert stored.version == 1
    assert store.read_manifest(TOPIC, PARTITION) == stored
    # Another writer asking for the very same change from version 0 still conflicts.
    monkeypatch.undo()
    with pytest.raises(ManifestConflictError):
        store.commit(TOPIC, PARTITION, wanted, 0)


def test_commit_is_fenced_by_leader_epoch(store: FsspecRemoteStore, closed_log: Log) -> None:
    m = store.commit(TOPIC, PARTITION, _manifest_with(closed_log, epoch=5), 0)
    stale = dataclasses.replace(mf.with_log_start_offset(m, 3), leader_epoch=4)
    with pytest.raises(FencedLeaderEpochError) as info:
        store.commit(TOPIC, PARTITION, stale, expected_version=1)
    assert (info.value.stored_epoch, info.value.writer_epoch) == (5, 4)
    # The new leader (a higher epoch) may write, and from then on fences epoch 5.
    newer = store.commit(TOPIC, PARTITION, dataclasses.replace(m, leader_epoch=6), 1)
    with pytest.raises(FencedLeaderEpochError):
        store.commit(TOPIC, PARTITION, dataclasses.replace(m, leader_epoch=5), 2)
    assert store.read_manifest(TOPIC, PARTITION) == newer


def test_commit_refuses_another_topic_id(store: FsspecRemoteStore, closed_log: Log) -> None:
    m = store.commit(TOPIC, PARTITION, _manifest_with(closed_log), 0)
    recreated = dataclasses.replace(mf.empty(TOPIC, PARTITION, uuid.uuid4()), leader_epoch=1)
    with pytest.raises(ManifestConflictError, match="recreated topic"):
        store.commit(TOPIC, PARTITION, recreated, m.version)


def test_corrupt_manifest_names_its_url(store: FsspecRemoteStore) -> None:
    path = store.manifests.pointer_path(TOPIC, PARTITION)
    store.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    store.fs.pipe_file(path, b'{"format": "tierlog-remote-manifest", "format_version": 1')
    url = store.url_of(path)
    with pytest.raises(CorruptManifestError) as info:
        store.read_manifest(TOPIC, PARTITION)
    assert str(info.value).startswith(f"{url}: corrupt remote manifest: not valid UTF-8 JSON")
    assert url.endswith(f"{TOPIC}-{PARTITION}/manifest.json") and "://" in url
    with pytest.raises(CorruptManifestError):
        store.commit(TOPIC, PARTITION, mf.empty(TOPIC, PARTITION), 0)


def test_manifest_of_another_partition_is_corrupt(store: FsspecRemoteStore) -> None:
    store.commit(TOPIC, PARTITION, mf.empty(TOPIC, PARTITION), 0)
    data = store.fs.cat_file(store.manifests.version_path(TOPIC, PARTITION, 1))
    other = store.manifests.pointer_path(TOPIC, PARTITION + 1)
    store.fs.makedirs(other.rsplit("/", 1)[0], exist_ok=True)
    store.fs.pipe_file(other, data)  # a whole manifest, as written before versions
    with pytest.raises(CorruptManifestError, match=f"describes {TOPIC}-{PARTITION},"):
        store.read_manifest(TOPIC, PARTITION + 1)


def test_concurrent_writers_on_file_never_lose_an_update(tmp_path: Path) -> None:
    """Separate store instances (no shared in-process lock) incrementing through CAS:
    the file lock makes read-check-write atomic, so every increment survives."""
    url = f"file://{tmp_path}/remote"
    writers, increments = 4, 15

    failures: list[BaseException] = []

    def writer() -> None:
        store = FsspecRemoteStore(url, retries=0)
        done = 0
        try:
            while done < increments:
                current = store.read_manifest(TOPIC, PARTITION)
                bumped = mf.with_log_start_offset(current, current.log_start_offset + 1)
                try:
                    store.commit(TOPIC, PARTITION, bumped, current.version)
                except ManifestConflictError:
                    continue
                done += 1
        except BaseException as exc:  # a thread's exception would only be printed
            failures.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    for thread in threads:
        thread.start()
    # No join timeout: a loaded machine may take minutes; the test's own timeout bounds it.
    for thread in threads:
        thread.join()
    assert failures == []
    final = FsspecRemoteStore(url).read_manifest(TOPIC, PARTITION)
    assert final.log_start_offset == final.version == writers * increments
    leftovers = sorted(p.name for p in (tmp_path / "remote" / f"{TOPIC}-{PARTITION}").iterdir())
    # No temp files left behind; old versions pruned in batches (KEEP_VERSIONS behind).
    assert leftovers[-1] == "manifest.json"
    assert all(".tmp" not in name for name in leftovers)
    assert len(leftovers) <= 2 * mf.KEEP_VERSIONS + 2


def test_a_version_pruned_while_the_pointer_is_repaired_is_a_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer finds its next version taken and repairs the pointer, while another
    writer's prune (outside the commit lock) removes that version: a conflict, as any lost
    race, never "not found" (seen once in a full run of the test above)."""
    url = f"file://{tmp_path}/remote"
    a, b = FsspecRemoteStore(url, retries=0), FsspecRemoteStore(url, retries=0)
    base = a.commit(TOPIC, PARTITION, mf.empty(TOPIC, PARTITION, TOPIC_ID), 0)
    b.commit(TOPIC, PARTITION, mf.with_log_start_offset(base, 7), base.version)
    real_create = a.manifests._create

    def create_then_pruned(path: str, data: bytes) -> None:
        try:
            real_create(path, data)
        except FileExistsError:
            Path(a.manifests.root.local_path(path)).unlink()  # the other writer's prune
            raise

    monkeypatch.setattr(a.manifests, "_create", create_then_pruned)
    with pytest.raises(ManifestConflictError, match="created by another writer"):
        a.commit(TOPIC, PARTITION, mf.with_log_start_offset(base, 3), base.version)


def test_a_writer_stale_past_the_pruned_versions_cannot_move_the_pointer_back(
    tmp_path: Path,
) -> None:
    """A zombie built on its own last commit, after others committed and pruned past it:
    creating the next version succeeds (the slot was pruned), but the commit is refused,
    the re-created version removed, and the pointer left where the log is."""
    url = f"file://{tmp_path}/remote"
    zombie, leader = FsspecRemoteStore(url, retries=0), FsspecRemoteStore(url, retries=0)
    first = zombie.read_manifest(TOPIC, PARTITION)
    stale = zombie.commit(TOPIC, PARTITION, mf.with_log_start_offset(first, 1), first.version)
    current = leader.read_manifest(TOPIC, PARTITION)
    for _ in range(3 * mf.KEEP_VERSIONS):
        current = leader.commit(
            TOPIC,
            PARTITION,
            mf.with_log_start_offset(current, current.log_start_offset + 1),
            current.version,
        )
    directory = tmp_path / "remote" / f"{TOPIC}-{PARTITION}"
    slot = [p for p in directory.iterdir() if f"-{stale.version + 1}." in p.name]
    assert slot == []  # pruned, so creating it again would succeed

    with pytest.raises(ManifestConflictError) as refused:
        zombie.commit(TOPIC, PARTITION, mf.with_log_start_offset(stale, 99), stale.version)
    assert refused.value.actual_version == current.version
    assert [p for p in directory.iterdir() if f"-{stale.version + 1}." in p.name] == []
    assert leader.read_manifest(TOPIC, PARTITION) == current


# -- errors, retries, pickling ----------------------------------------------------------------


class _Flaky:
    """Stands in for an fs method: raises ``errors`` in turn, then calls through."""

    def __init__(self, real: Any, errors: list[BaseException]) -> None:
        self.real, self.errors, self.calls = real, errors, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.real(*args, **kwargs)


def test_retriable_failures_are_retried_with_backoff(
    store_url: str, closed_log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps: list[float] = []
    store = FsspecRemoteStore(store_url, retries=3, backoff_ms=100, sleep=sleeps.append)
    local = closed_log.segments[0]
    segment = store.copy_segment(remote_segment(local, closed_log), *paths(local))
    flaky = _Flaky(store.fs.cat_file, [ConnectionRefusedError(111, "refused"), TimeoutError()])
    monkeypatch.setattr(store.fs, "cat_file", flaky)
    assert store.fetch_range(segment, 0, 10) == local.path.read_bytes()[:10]
    assert flaky.calls == 3 and sleeps == [0.1, 0.2]


def test_unavailable_after_retries_is_retriable_and_names_the_object(
    store_url: str, closed_log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeps: list[float] = []
    store = FsspecRemoteStore(store_url, retries=2, backoff_ms=10, sleep=sleeps.append)
    segment = remote_segment(closed_log.segments[0], closed_log)
    refused: list[BaseException] = [ConnectionRefusedError(111, "refused") for _ in range(5)]
    monkeypatch.setattr(store.fs, "cat_file", _Flaky(store.fs.cat_file, refused))
    with pytest.raises(RemoteStorageUnavailableError) as info:
        store.fetch_range(segment, 0, 10)
    assert info.value.retriable
    assert segment.segment_id in str(info.value)
    assert len(sleeps) == 2


def test_non_retriable_failures_are_not_retried(
    store_url: str, closed_log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FsspecRemoteStore(store_url, retries=5, sleep=lambda s: None)
    segment = remote_segment(closed_log.segments[0], closed_log)
    flaky = _Flaky(store.fs.cat_file, [PermissionError(13, "denied")])
    monkeypatch.setattr(store.fs, "cat_file", flaky)
    with pytest.raises(RemoteStorageError) as info:
        store.fetch_range(segment, 0, 10)
    assert not info.value.retriable and flaky.calls == 1


def test_error_translation() -> None:
    from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

    assert is_unavailable(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    assert is_unavailable(ReadTimeoutError(endpoint_url="http://127.0.0.1:1"))
    assert is_unavailable(OSError(errno.EBUSY, "SlowDown"))
    wrapped = OSError(errno.EIO, "wrapped")
    wrapped.__cause__ = ConnectionResetError()
    assert is_unavailable(wrapped)
    assert not is_unavailable(PermissionError(13, "denied"))
    assert not is_unavailable(ValueError("x"))
    assert isinstance(translate(FileNotFoundError("x"), "read"), RemoteResourceNotFoundError)
    assert translate(ConnectionError(), "read s3://b/k").retriable
    assert str(translate(ConnectionError(), "read s3://b/k")).startswith("read s3://b/k: ")


def test_missing_protocol_package_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import fsspec  # noqa: F401 -- loads fsspec.registry

    monkeypatch.delitem(sys.modules["fsspec.registry"]._registry, "s3", raising=False)
    monkeypatch.setitem(sys.modules, "s3fs", None)  # makes `import s3fs` fail
    with pytest.raises(RemoteStorageError, match="pip install s3fs"):
        FsspecRemoteStore("s3://bucket/prefix")


def test_unknown_protocol_is_reported() -> None:
    with pytest.raises(RemoteStorageError, match="nosuchfs"):
        FsspecRemoteStore("nosuchfs://x/y")
    with pytest.raises(ValueError, match="conditional_writes"):
        FsspecRemoteStore("memory://x", conditional_writes=True)


def test_pickled_store_rebuilds_its_filesystem(store_url: str, closed_log: Log) -> None:
    store = FsspecRemoteStore(store_url, throttle=lambda n: None)
    local = closed_log.segments[0]
    segment = store.copy_segment(remote_segment(local, closed_log), *paths(local))
    store.commit(TOPIC, PARTITION, mf.with_segment(mf.empty(TOPIC, PARTITION), segment), 0)
    copy = pickle.loads(pickle.dumps(store))
    assert copy.root._fs is None and copy.throttle is None
    assert copy.fetch_range(segment, 0, None) == local.path.read_bytes()
    assert copy.read_manifest(TOPIC, PARTITION).segments == (segment,)


def test_filesystem_is_recreated_after_fork(store: FsspecRemoteStore) -> None:
    fs = store.fs
    assert store.fs is fs  # cached
    store.root._pid = -2  # as a forked child sees it
    assert store.fs is not None and store.root._pid > 0


def test_upload_is_retried_from_the_start(
    store_url: str, closed_log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    if store_url.startswith("file:"):
        # file:// objects are written with os.write, not fsspec's writer: break that.
        real_write = os.write
        broken = [0]

        def write(fd: int, data: Any) -> int:
            if len(data) == 500 and not broken[0]:
                broken[0] += 1
                raise ConnectionResetError(104, "reset")
            return real_write(fd, data)

        monkeypatch.setattr(fsspec_uploads.os, "write", write)
        store = FsspecRemoteStore(store_url, retries=2, copy_chunk_bytes=500, sleep=lambda s: None)
        local = closed_log.segments[0]
        segment = store.copy_segment(remote_segment(local, closed_log), *paths(local))
        assert broken == [1]
        monkeypatch.undo()
        assert store.fetch_range(segment, 0, None) == local.path.read_bytes()
        return
    store = FsspecRemoteStore(store_url, retries=2, copy_chunk_bytes=500, sleep=lambda s: None)
    local = closed_log.segments[0]
    segment = remote_segment(local, closed_log)
    real_open = store.fs.open
    failures = [0]

    class BreaksAfterOneChunk:
        """A remote file whose second write loses the connection (first upload only)."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.writes = inner, 0

        def write(self, data: bytes) -> int:
            self.writes += 1
            if self.writes == 2 and failures[0] == 0:
                failures[0] += 1
                raise ConnectionResetError(104, "reset")
            return int(self.inner.write(data))

        def discard(self) -> None:
            raise AttributeError  # behaves like a file that cannot discard

        def close(self) -> None:
            self.inner.close()

    monkeypatch.setattr(store.fs, "open", lambda *a, **k: BreaksAfterOneChunk(real_open(*a, **k)))
    segment = store.copy_segment(segment, *paths(local))
    assert failures == [1]
    monkeypatch.undo()  # local reads go through fs.open too
    assert store.fetch_range(segment, 0, None) == local.path.read_bytes()


def test_missing_local_file_is_a_local_error(store: FsspecRemoteStore, closed_log: Log) -> None:
    local = closed_log.segments[0]
    log_path, index_path, _ = paths(local)
    with pytest.raises(FileNotFoundError):
        store.copy_segment(
            remote_segment(local, closed_log), log_path, index_path, Path("/nonexistent")
        )


def test_retrying_stops_at_the_deadline(
    store_url: str, closed_log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tierlog.util.clock import ManualClock

    clock = ManualClock()
    store = FsspecRemoteStore(
        store_url,
        clock=clock,
        retries=100,
        backoff_ms=1000,
        max_backoff_ms=1000,
        retry_timeout_ms=3500,
        sleep=lambda seconds: clock.advance(int(seconds * 1000)),
    )
    segment = remote_segment(closed_log.segments[0], closed_log)
    refused: list[BaseException] = [ConnectionRefusedError(111, "x") for _ in range(100)]
    flaky = _Flaky(store.fs.cat_file, refused)
    monkeypatch.setattr(store.fs, "cat_file", flaky)
    with pytest.raises(RemoteStorageUnavailableError):
        store.fetch_range(segment, 0, 10)
    assert flaky.calls == 5  # at 0, 1, 2, 3 s, and 4 s is past the 3.5 s deadline


# -- manifest versions and the pointer (issue 20, item 13) -------------------------------------


def test_a_half_written_pointer_is_read_again_then_the_newest_version_listed(
    store_url: str, closed_log: Log, caplog: pytest.LogCaptureFixture
) -> None:
    """What HDFS shows of a pointer overwritten in place (a prefix), or one a crash left so:
    the reader reads it again, then takes the newest version in the directory."""
    store = FsspecRemoteStore(store_url, retries=0, sleep=lambda s: None)
    first = store.commit(TOPIC, PARTITION, _manifest_with(closed_log), 0)
    second = store.commit(TOPIC, PARTITION, mf.with_log_start_offset(first, 5), 1)
    path = store.manifest_path(TOPIC, PARTITION)
    whole = bytes(store.fs.cat_file(path))
    store.fs.pipe_file(path, whole[: len(whole) // 2])
    with caplog.at_level(logging.WARNING):
        assert store.read_manifest(TOPIC, PARTITION) == second
    assert store.manifests.torn_reads == fsspec_manifests.TORN_READ_RETRIES - 1
    assert "read the newest version listed instead (2)" in caplog.text
    # The next commit writes a whole pointer again.
    third = store.commit(TOPIC, PARTITION, mf.with_log_start_offset(second, 9), 2)
    assert store.fs.cat_file(path) != whole[: len(whole) // 2]
    assert FsspecRemoteStore(store_url).read_manifest(TOPIC, PARTITION) == third


def test_a_damaged_version_is_an_error_never_an_older_version(
    store_url: str, closed_log: Log
) -> None:
    store = FsspecRemoteStore(store_url, retries=0, sleep=lambda s: None)
    first = store.commit(TOPIC, PARTITION, _manifest_with(closed_log), 0)
    store.commit(TOPIC, PARTITION, mf.with_log_start_offset(first, 5), 1)
    version = store.manifests.version_path(TOPIC, PARTITION, 2)
    data = bytearray(store.fs.cat_file(version))
    data[10] ^= 1  # still JSON, but not what the pointer's CRC-32C says
    store.fs.pipe_file(version, bytes(data))
    # Named by its URL; never answered with version 1, which would hide a commit.
    with pytest.raises(CorruptManifestError, match=r"manifest-00000000000000000002\.json: corrupt"):
        store.read_manifest(TOPIC, PARTITION)


def test_a_pointer_left_behind_by_a_dead_writer_is_repaired_by_the_next_commit(
    store_url: str, closed_log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer died after creating version 2, before moving the pointer: readers see
    version 1 (a committed state), the orphan scan sees a newer version and waits, and the
    next commit finds version 2 taken, moves the pointer there and reports a conflict, so
    the writer re-reads and goes on from version 2."""
    store = FsspecRemoteStore(store_url, retries=0, sleep=lambda s: None)
    first = store.commit(TOPIC, PARTITION, _manifest_with(closed_log), 0)

    def dies(*args: Any) -> None:
        raise RuntimeError("killed between the version and the pointer")

    monkeypatch.setattr(store.manifests, "_point", dies)
    with pytest.raises(RemoteStorageError):
        store.commit(TOPIC, PARTITION, mf.with_log_start_offset(first, 5), 1)
    monkeypatch.undo()
    assert store.read_manifest(TOPIC, PARTITION) == first
    names = store.list_objects(TOPIC, PARTITION)
    assert mf.newer_versions(first, names) == [2]
    with pytest.raises(ManifestConflictError) as conflict:
        store.commit(TOPIC, PARTITION, mf.with_log_start_offset(first, 7), 1)
    assert conflict.value.actual_version == 2
    current = store.read_manifest(TOPIC, PARTITION)
    assert (current.version, current.log_start_offset) == (2, 5)
    assert store.commit(TOPIC, PARTITION, mf.with_log_start_offset(current, 7), 2).version == 3


def test_old_versions_are_pruned_in_batches(store_url: str) -> None:
    store = FsspecRemoteStore(store_url, retries=0)
    m = mf.empty(TOPIC, PARTITION, TOPIC_ID)
    for n in range(3 * mf.KEEP_VERSIONS):
        m = store.commit(TOPIC, PARTITION, mf.with_log_start_offset(m, n + 1), m.version)
    versions = sorted(
        v for v in map(mf.parse_version_object_name, store.list_objects(TOPIC, PARTITION)) if v
    )
    assert versions[-1] == m.version == 3 * mf.KEEP_VERSIONS
    assert versions[0] >= m.version - 2 * mf.KEEP_VERSIONS
    assert versions == list(range(versions[0], m.version + 1))  # no hole among those kept


def test_a_segment_laid_out_as_one_object_reads_through_its_parts(
    store: FsspecRemoteStore, closed_log: Log
) -> None:
    """Issue 24's next layout (one object per segment: the log, then its indexes, offsets
    in the manifest) is read by today's readers: they follow the recorded parts."""
    local = closed_log.segments[2]
    segment = remote_segment(local, closed_log, state=SegmentState.COPY_FINISHED)
    name = f"{segment.base_offset:020d}-{segment.segment_id}.segment"
    blobs = [local.path.read_bytes(), *(Path(p).read_bytes() for p in paths(local)[1:])]
    parts, offset = [], 0
    for kind, blob in zip(("log", "index", "timeindex"), blobs, strict=True):
        parts.append(SegmentPart(kind, name, offset, len(blob), mf.part_crc(blob)))
        offset += len(blob)
    one = dataclasses.replace(segment, parts=tuple(parts))
    path = f"{store.partition_path(TOPIC, PARTITION)}/{name}"
    store.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    store.fs.pipe_file(path, b"".join(blobs))
    store.commit(TOPIC, PARTITION, mf.with_segment(mf.empty(TOPIC, PARTITION), one), 0)
    read = store.read_manifest(TOPIC, PARTITION)
    back = read.segments[0]
    assert back == one and read.format_version == 2
    assert store.fetch_range(back, 0, None) == blobs[0]
    assert store.fetch_range(back, 100, 300) == blobs[0][100:300]
    assert store.fetch_index(back, IndexKind.OFFSET) == blobs[1]
    assert store.fetch_index(back, IndexKind.TIME) == blobs[2]
    reader = RemoteSegmentReader(store, back)
    assert reader.read(back.base_offset, 1 << 20) == blobs[0]
    assert store.object_url(back, "index").endswith(f"/{name}")
    store.delete_segment(back)
    assert name not in store.list_objects(TOPIC, PARTITION)


def test_a_failed_upload_to_file_leaves_no_object_under_its_name(
    tmp_path: Path, closed_log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The object is written under a temporary name and renamed when whole (issue 24):
    an upload that dies half-way shows nothing under the object's name."""
    store = FsspecRemoteStore(f"file://{tmp_path}/remote", retries=0, copy_chunk_bytes=500)
    real_write = os.write
    written: list[int] = []

    def dies_after_one_chunk(fd: int, data: Any) -> int:
        if written:
            raise OSError(errno.EIO, "the disk went away")
        written.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(fsspec_uploads.os, "write", dies_after_one_chunk)
    local = closed_log.segments[0]
    with pytest.raises(RemoteStorageError):
        store.copy_segment(remote_segment(local, closed_log), *paths(local))
    monkeypatch.undo()
    assert written == [500]  # it did start writing
    assert store.list_objects(TOPIC, PARTITION) == []  # no object, not even the temp file
