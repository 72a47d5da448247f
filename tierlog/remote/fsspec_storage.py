"""``FsspecRemoteStore``: both remote-tier interfaces on any fsspec URL.

Owns the objects under one remote root (``file://``, ``memory://``, ``s3://bucket/prefix``,
``hdfs://``...): segment uploads and reads (``RemoteStorage``) and the per-partition
manifests (``RemoteMetadata``). The object layout and the manifest format are documented in
``tierlog.remote.manifest``; segment objects are the local files uploaded as-is.

Manifest compare-and-set, by backend:

* ``file://``: an ``flock`` on the partition directory around read-check-write, and the
  write goes to a temp name renamed over ``manifest.json`` (atomic, fsynced). A true CAS
  between processes of one host (not over NFS).
* ``s3://``: conditional PUTs (``If-None-Match: *`` for the first write, ``If-Match: <ETag
  read>`` after), which AWS S3, MinIO and moto honour: a true CAS. Pass
  ``conditional_writes=False`` for S3-compatible stores that reject those headers.
* anything else (and S3 without conditional writes): read, check, plain overwrite, which
  is atomic per object but not conditional. Two writers racing between the read and the
  write could both succeed; tierlog relies on Kafka's rule that only the partition leader
  writes, fenced by leader epoch (KIP-405), so this needs a deposed leader still writing
  after its successor has read. Within one process a lock per partition serialises commits.

Thread-safe: the filesystem instance is created once under a lock, commits take a lock per
partition, everything else is a stateless call into fsspec. Picklable (Spark executors
rebuild it from the URL and options): the filesystem, locks and throttle are dropped and
recreated lazily, also after a fork.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import io
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from tierlog.remote._errors import missing_package, precondition_failed, translate
from tierlog.remote.api import (
    CorruptManifestError,
    FencedLeaderEpochError,
    IndexKind,
    ManifestConflictError,
    RemoteSegment,
    RemoteStorageError,
)
from tierlog.remote.manifest import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    TXN_INDEX_KIND,
    ZERO_UUID,
    Manifest,
    aux_object_names,
    decode,
    empty,
    encode,
    object_name,
    partition_dir,
)
from tierlog.util.clock import Clock, SystemClock

log = logging.getLogger(__name__)

T = TypeVar("T")

# 8 MiB: above S3's 5 MiB multipart minimum, small enough to throttle smoothly.
DEFAULT_COPY_CHUNK_BYTES = 8 << 20


class FsspecRemoteStore:
    """``RemoteStorage`` and ``RemoteMetadata`` on the fsspec URL ``url``.

    Args:
        url: the remote root, e.g. ``file:///data/remote`` or ``s3://bucket/prefix``.
        storage_options: passed to the fsspec filesystem (``remote.log.storage.options.*``:
            ``endpoint_url``, ``key``, ``secret``, ``client_kwargs``, ``config_kwargs``...).
        clock: bounds the time spent retrying (monotonic).
        retries: retries of a call failing with a retriable error (the backend may retry
            inside each attempt too: s3fs/botocore do).
        backoff_ms, max_backoff_ms: first retry delay, doubled per retry up to the max
            (Kafka's retry.backoff.ms / retry.backoff.max.ms defaults: 100 ms, 1 s).
        retry_timeout_ms: no retry starts after this long since the call began.
        sleep: waits between retries (tests pass a fake).
        copy_chunk_bytes: read/write size when streaming a segment up.
        throttle: called with each chunk's size before it is written, to rate-limit
            uploads (remote.log.manager.copy.max.bytes.per.second); not pickled.
        conditional_writes: use S3's conditional PUTs for the manifest; None = on for s3.

    Raises:
        RemoteStorageError: the URL's protocol is unknown or its package is not installed
            (the message has the ``pip install`` command).
    """

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        retries: int = 3,
        backoff_ms: int = 100,
        max_backoff_ms: int = 1000,
        retry_timeout_ms: int = 30_000,
        sleep: Callable[[float], None] = time.sleep,
        copy_chunk_bytes: int = DEFAULT_COPY_CHUNK_BYTES,
        throttle: Callable[[int], None] | None = None,
        conditional_writes: bool | None = None,
    ) -> None:
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.clock = clock or SystemClock()
        self.retries = retries
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.retry_timeout_ms = retry_timeout_ms
        self.sleep = sleep
        self.copy_chunk_bytes = copy_chunk_bytes
        self.throttle = throttle
        self.protocol = _protocol_of(url)
        if conditional_writes is None:
            conditional_writes = self.protocol in ("s3", "s3a")
        elif conditional_writes and self.protocol not in ("s3", "s3a"):
            raise ValueError(f"conditional_writes is only supported on s3://, not {url}")
        self.conditional_writes = conditional_writes
        _filesystem_class(self.protocol)  # fail at start-up, with the install hint
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._fs: Any = None
        self._root = ""
        self._pid = -1
        self._guard = threading.Lock()
        self._partition_locks: dict[tuple[str, int], threading.Lock] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_fs", "_root", "_pid", "_guard", "_partition_locks"):
            state.pop(key, None)
        state["throttle"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def __repr__(self) -> str:
        return f"FsspecRemoteStore({self.url!r})"

    # -- filesystem --------------------------------------------------------------------

    @property
    def fs(self) -> Any:
        """The fsspec filesystem, created on first use (and again in a forked child)."""
        with self._guard:
            if self._fs is None or self._pid != os.getpid():
                import fsspec.core

                try:
                    fs, root = fsspec.core.url_to_fs(self.url, **self.storage_options)
                except ImportError as exc:
                    raise missing_package(self.protocol, exc) from exc
                self._fs, self._root, self._pid = fs, str(root).rstrip("/"), os.getpid()
            return self._fs

    @property
    def is_local(self) -> bool:
        from fsspec.implementations.local import LocalFileSystem

        return isinstance(self.fs, LocalFileSystem)

    def partition_path(self, topic: str, partition: int) -> str:
        """The partition's directory as an fsspec path (no protocol)."""
        self.fs  # noqa: B018 -- sets _root
        name = partition_dir(topic, partition)
        return f"{self._root}/{name}" if self._root else f"/{name}"

    def object_path(self, segment: RemoteSegment, kind: str) -> str:
        """Path of one of the segment's objects: kind log, index, timeindex, or an
        auxiliary state's kind (producer_snapshot, leader_epoch_checkpoint)."""
        name = object_name(segment.base_offset, segment.segment_id, kind)
        return f"{self.partition_path(segment.topic, segment.partition)}/{name}"

    def manifest_path(self, topic: str, partition: int) -> str:
        return f"{self.partition_path(topic, partition)}/{MANIFEST_NAME}"

    def manifest_url(self, topic: str, partition: int) -> str:
        return self.url_of(self.manifest_path(topic, partition))

    def url_of(self, path: str) -> str:
        """Full URL of a path, for messages (``s3://bucket/prefix/orders-0/...``)."""
        return str(self.fs.unstrip_protocol(path))

    def _retrying(self, what: str, call: Callable[[], T]) -> T:
        """Run ``call``, retrying retriable failures with exponential backoff."""
        deadline = self.clock.monotonic_ms() + self.retry_timeout_ms
        attempt = 0
        while True:
            try:
                return call()
            except RemoteStorageError as exc:
                error = exc
            except Exception as exc:
                error = translate(exc, what)
                error.__cause__ = exc
            if (
                not error.retriable
                or attempt >= self.retries
                or self.clock.monotonic_ms() >= deadline
            ):
                raise error
            delay_ms = min(self.backoff_ms * (2**attempt), self.max_backoff_ms)
            log.warning("%s; retry %d in %d ms", error, attempt + 1, delay_ms)
            self.sleep(delay_ms / 1000)
            attempt += 1

    # -- RemoteStorage -----------------------------------------------------------------

    def copy_segment(
        self,
        segment: RemoteSegment,
        log_path: Path,
        offset_index_path: Path,
        time_index_path: Path,
        aux_state: Mapping[IndexKind, bytes] | None = None,
    ) -> None:
        """Upload the ``.log`` (streamed), then ``.index`` and ``.timeindex``, then the
        auxiliary state; see ``RemoteStorage.copy_segment``.

        The local files are opened first, so a segment renamed or deleted locally
        meanwhile still uploads whole (open descriptors keep working).

        Raises:
            OSError: a local file cannot be opened (passed through untranslated).
            ValueError: ``log_path``'s size is not ``segment.size_bytes``.
            RemoteStorageError: an upload failed (after retries when retriable).
        """
        with ExitStack() as stack:
            files = [
                (kind, Path(local), stack.enter_context(open(local, "rb")))
                for kind, local in (
                    ("log", log_path),
                    ("index", offset_index_path),
                    ("timeindex", time_index_path),
                )
            ]
            size = os.fstat(files[0][2].fileno()).st_size
            if size != segment.size_bytes:
                raise ValueError(
                    f"{log_path} holds {size} bytes, the segment says {segment.size_bytes}"
                )
            for kind, local, src in files:
                remote = self.object_path(segment, kind)
                self._retrying(
                    f"upload {local} to {self.url_of(remote)}",
                    functools.partial(self._upload, src, remote),
                )
        for index_kind, data in (aux_state or {}).items():
            remote = self.object_path(segment, index_kind.value)
            self._retrying(
                f"upload {index_kind.value} to {self.url_of(remote)}",
                functools.partial(self._upload, io.BytesIO(data), remote),
            )

    def _upload(self, src: BinaryIO, remote: str) -> None:
        fs = self.fs
        src.seek(0)  # a retry starts over
        try:
            out = fs.open(remote, "wb")
        except FileNotFoundError:  # a directory-based store: create the parent first
            fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
            out = fs.open(remote, "wb")
        try:
            while chunk := src.read(self.copy_chunk_bytes):
                if self.throttle is not None:
                    self.throttle(len(chunk))
                out.write(chunk)
        except BaseException:
            # Abort a multipart upload rather than commit a truncated object. Files that
            # cannot discard (local with autocommit: RuntimeError) keep the partial
            # object: it is in no manifest, and the retry overwrites it.
            try:
                out.discard()
            except (AttributeError, RuntimeError):
                out.close()
            raise
        out.close()

    def fetch_range(self, segment: RemoteSegment, start: int, end: int | None) -> bytes:
        """Bytes ``[start, end)`` of the ``.log``, clipped to its size."""
        if start < 0 or (end is not None and end < start):
            raise ValueError(f"bad byte range [{start}, {end})")
        stop = segment.size_bytes if end is None else min(end, segment.size_bytes)
        if start >= stop:
            return b""
        path = self.object_path(segment, "log")
        return self._retrying(
            f"read bytes [{start}, {stop}) of {self.url_of(path)}",
            lambda: bytes(self.fs.cat_file(path, start=start, end=stop)),
        )

    def fetch_index(self, segment: RemoteSegment, kind: IndexKind) -> bytes:
        path = self.object_path(segment, kind.value)
        return self._retrying(f"read {self.url_of(path)}", lambda: bytes(self.fs.cat_file(path)))

    def delete_segment(self, segment: RemoteSegment) -> None:
        """Delete the auxiliary state and indexes (the aborted-transaction one included),
        then the ``.log`` last, so a retry after a crash half-way still finds the segment;
        missing objects are fine."""
        txn_index = (TXN_INDEX_KIND,) if segment.has_txn_index else ()
        for kind in (*txn_index, *aux_object_names(segment), "index", "timeindex", "log"):
            path = self.object_path(segment, kind)
            self._retrying(f"delete {self.url_of(path)}", functools.partial(self._rm, path))

    def _rm(self, path: str) -> None:
        with suppress(FileNotFoundError):
            self.fs.rm_file(path)

    def delete_object(self, topic: str, partition: int, name: str) -> None:
        """Delete one object of a partition by its name (orphan cleanup); missing is fine."""
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"not an object name: {name!r}")
        path = f"{self.partition_path(topic, partition)}/{name}"
        self._retrying(f"delete {self.url_of(path)}", functools.partial(self._rm, path))

    def list_objects(self, topic: str, partition: int) -> list[str]:
        directory = self.partition_path(topic, partition)
        return self._retrying(f"list {self.url_of(directory)}", lambda: self._list_names(directory))

    def _list_names(self, directory: str) -> list[str]:
        fs = self.fs
        fs.invalidate_cache(directory)  # listings are cached by s3fs & co
        try:
            entries = fs.ls(directory, detail=True)
        except FileNotFoundError:
            return []
        return sorted(
            str(e["name"]).rstrip("/").rsplit("/", 1)[-1]
            for e in entries
            if e.get("type") == "file"
        )

    # -- RemoteMetadata ----------------------------------------------------------------

    def read_manifest(self, topic: str, partition: int) -> Manifest:
        path = self.manifest_path(topic, partition)
        manifest, _ = self._retrying(
            f"read {self.url_of(path)}", lambda: self._load(topic, partition, path)
        )
        return manifest

    def _load(self, topic: str, partition: int, path: str) -> tuple[Manifest, str | None]:
        """The stored manifest (empty at version 0 when missing) and, for conditional
        writes, the ETag to make the next write conditional on ("" when missing)."""
        fs = self.fs
        etag: str | None = None
        try:
            if self.conditional_writes:
                # HEAD before GET: if a write lands in between, the GET sees a newer
                # version than the ETag, and the conditional PUT fails (a safe conflict).
                etag = str(fs.info(path, refresh=True)["ETag"])
            data = bytes(fs.cat_file(path))
        except FileNotFoundError:
            return empty(topic, partition), ("" if self.conditional_writes else None)
        manifest = decode(data, self.url_of(path))
        if (manifest.topic, manifest.partition) != (topic, partition):
            raise CorruptManifestError(
                self.url_of(path),
                f"it describes {manifest.topic}-{manifest.partition}, not {topic}-{partition}",
            )
        return manifest, etag

    def commit(
        self, topic: str, partition: int, manifest: Manifest, expected_version: int
    ) -> Manifest:
        """Compare-and-set the manifest (see ``RemoteMetadata.commit`` and the module
        docstring for what each backend guarantees). When an attempt fails in a way that
        may hide success (a write whose response was lost) and the retry finds exactly
        this manifest stored, the commit has succeeded; a first attempt finding the same
        content written by someone else is still a conflict."""
        if (manifest.topic, manifest.partition) != (topic, partition):
            raise ValueError(f"manifest of {manifest.topic}-{manifest.partition} for {topic}")
        new = dataclasses.replace(
            manifest, version=expected_version + 1, format_version=FORMAT_VERSION
        )
        data = encode(new)
        path = self.manifest_path(topic, partition)
        attempts = 0

        def attempt() -> Manifest:
            nonlocal attempts
            attempts += 1
            return self._commit_once(new, data, expected_version, path, retry=attempts > 1)

        with self._partition_lock(topic, partition):
            return self._retrying(f"commit {self.url_of(path)}", attempt)

    def _commit_once(
        self, new: Manifest, data: bytes, expected: int, path: str, *, retry: bool
    ) -> Manifest:
        where = self.url_of(path)
        with self._file_lock(path) if self.is_local else nullcontext():
            current, etag = self._load(new.topic, new.partition, path)
            if retry and current.version == new.version and encode(current) == data:
                return current  # our earlier attempt landed; its response was lost
            if current.leader_epoch > new.leader_epoch:
                raise FencedLeaderEpochError(
                    f"{where}: leader epoch {new.leader_epoch} is fenced by the stored "
                    f"epoch {current.leader_epoch}",
                    stored_epoch=current.leader_epoch,
                    writer_epoch=new.leader_epoch,
                )
            if current.version != expected:
                raise ManifestConflictError(
                    f"{where}: expected version {expected}, found {current.version}",
                    expected_version=expected,
                    actual_version=current.version,
                )
            if current.topic_id not in (ZERO_UUID, new.topic_id):
                raise ManifestConflictError(
                    f"{where}: belongs to topic id {current.topic_id}, not {new.topic_id} "
                    "(a recreated topic must not reuse the old topic's remote data)",
                    expected_version=expected,
                    actual_version=current.version,
                )
            self._write_manifest(path, data, etag, expected)
        return new

    def _write_manifest(self, path: str, data: bytes, etag: str | None, expected: int) -> None:
        fs = self.fs
        if self.is_local:
            _atomic_local_write(fs._strip_protocol(path), data)
        elif etag is not None:
            condition = {"mode": "create"} if etag == "" else {"IfMatch": etag}
            try:
                fs.pipe_file(path, data, **condition)
            except OSError as exc:
                if not precondition_failed(exc):
                    raise
                raise ManifestConflictError(
                    f"{self.url_of(path)}: changed since it was read (conditional write "
                    f"failed; expected version {expected})",
                    expected_version=expected,
                    actual_version=-1,
                ) from exc
        else:
            fs.pipe_file(path, data)

    def _partition_lock(self, topic: str, partition: int) -> threading.Lock:
        with self._guard:
            return self._partition_locks.setdefault((topic, partition), threading.Lock())

    @contextmanager
    def _file_lock(self, manifest_path: str) -> Iterator[None]:
        directory = self.fs._strip_protocol(manifest_path).rsplit("/", 1)[0]
        os.makedirs(directory, exist_ok=True)
        fd = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock


def _atomic_local_write(path: str, data: bytes) -> None:
    """Write via a temp file, fsync, rename over ``path``, fsync the directory (as
    ``tierlog.local.checkpoint``): readers see the old or the new manifest, never a mix."""
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _protocol_of(url: str) -> str:
    try:
        import fsspec.core
    except ImportError as exc:  # style rule 7: optional heavy imports name their package
        raise RemoteStorageError(
            "the remote tier needs fsspec; install it with: pip install fsspec"
        ) from exc

    protocol = fsspec.core.split_protocol(url)[0] or "file"
    return "file" if protocol == "local" else protocol


def _filesystem_class(protocol: str) -> type:
    import fsspec

    try:
        cls: type = fsspec.get_filesystem_class(protocol)
        return cls
    except ImportError as exc:
        raise missing_package(protocol, exc) from exc
    except ValueError as exc:
        raise RemoteStorageError(f"remote storage URL: {exc}") from exc
