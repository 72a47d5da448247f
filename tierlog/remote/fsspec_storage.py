"""``FsspecRemoteStore``: both remote-tier interfaces on any fsspec URL, the store
``tierlog.remote.registry.open_store`` opens for every scheme without a store of its own.

Owns the segment objects under one remote root (``file://``, ``memory://``,
``s3://bucket/prefix``, ``webhdfs://``...): uploads, with each part's CRC-32C computed
while it streams up, and reads checked against what the manifest recorded
(``RemoteStorage``). The manifests (``RemoteMetadata``) are ``FsspecManifests``'s; the
filesystem, paths, retries and request counts ``FsspecRoot``'s; how bytes get into an
object (atomic rename, parallel multipart) ``fsspec_uploads``'s. Object layout and
manifest format: ``tierlog.remote.manifest``.

Layouts (issue 24). By default a segment is ONE object, ``<base>-<id>.segment``: the
``.log``, then its ``.index``, ``.timeindex`` and whatever auxiliary state it has, back to
back, each part's offset and size in the manifest entry. One PUT (or one multipart upload)
per segment instead of three to six, and one object for readers to range-GET. With
``single_object=False`` every part is an object of its own, the layout written before;
reads follow each segment's recorded parts, so both layouts (and manifests mixing them)
read the same way.

Thread-safe: every call is a stateless call into fsspec (see the parts it composes).
Picklable (Spark executors rebuild it from the URL and options): the filesystem, locks
and throttle are dropped and recreated lazily, also after a fork.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import logging
import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any, BinaryIO

from crc32c import crc32c

from tierlog.remote import fsspec_root
from tierlog.remote._errors import translate
from tierlog.remote.api import (
    CorruptRemoteDataError,
    IndexKind,
    RemoteResourceNotFoundError,
    RemoteSegment,
    RemoteStorageError,
    RequestCounts,
    SegmentPart,
)
from tierlog.remote.fsspec_manifests import CONDITIONAL_CREATE_PROTOCOLS, FsspecManifests
from tierlog.remote.fsspec_root import FsspecRoot
from tierlog.remote.fsspec_uploads import (
    DEFAULT_COPY_CHUNK_BYTES,
    DEFAULT_UPLOAD_PARALLELISM,
    Uploads,
)
from tierlog.remote.manifest import (
    Manifest,
    check_topic,
    object_name,
    part_kinds,
    segment_part,
    single_object_name,
)
from tierlog.util.clock import Clock

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_COPY_CHUNK_BYTES", "FsspecRemoteStore"]


class FsspecRemoteStore:
    """``RemoteStorage`` and ``RemoteMetadata`` on the fsspec URL ``url``.

    Args:
        url: the remote root, e.g. ``file:///data/remote`` or ``s3://bucket/prefix``.
        storage_options: passed to the fsspec filesystem (``remote.log.storage.options.*``:
            ``endpoint_url``, ``key``, ``secret``, ``client_kwargs``, ``config_kwargs``...).
        clock: bounds the time spent retrying (monotonic).
        throttle: called with each chunk's size before it is written, to rate-limit
            uploads (remote.log.manager.copy.max.bytes.per.second); not pickled.
        retries: retries of a call failing with a retriable error (the backend may retry
            inside each attempt too: s3fs/botocore do).
        backoff_ms, max_backoff_ms: first retry delay, doubled per retry up to the max
            (Kafka's retry.backoff.ms / retry.backoff.max.ms defaults: 100 ms, 1 s).
        retry_timeout_ms: no retry starts after this long since the call began.
        sleep: waits between retries (tests pass a fake).
        copy_chunk_bytes: read/write size when streaming a segment up, and the part size
            of a multipart upload.
        conditional_writes: create manifest versions with a conditional PUT (S3's
            ``If-None-Match: *``, GCS's ``ifGenerationMatch=0``, Azure's ``If-None-Match``);
            None = on for those stores.
        single_object: upload each segment as one object holding the log and its indexes
            (the default; issue 24); False: one object per part, the layout before.
        upload_parallelism: parts of one multipart upload sent at once
            (``fsspec_uploads``; memory: (this + 1) x ``copy_chunk_bytes`` per upload).

    Raises:
        RemoteStorageError: the URL's protocol is unknown, its package is not installed
            (the message has the ``pip install`` command), or its filesystem cannot be
            opened (``hdfs://`` without libhdfs).
    """

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        throttle: Callable[[int], None] | None = None,
        retries: int = 3,
        backoff_ms: int = 100,
        max_backoff_ms: int = 1000,
        retry_timeout_ms: int = 30_000,
        sleep: Callable[[float], None] | None = None,
        copy_chunk_bytes: int = DEFAULT_COPY_CHUNK_BYTES,
        conditional_writes: bool | None = None,
        single_object: bool = True,
        upload_parallelism: int = DEFAULT_UPLOAD_PARALLELISM,
    ) -> None:
        extra = {} if sleep is None else {"sleep": sleep}
        self.root = FsspecRoot(
            url,
            storage_options,
            clock=clock,
            retries=retries,
            backoff_ms=backoff_ms,
            max_backoff_ms=max_backoff_ms,
            retry_timeout_ms=retry_timeout_ms,
            **extra,
        )
        self.url = url
        self.single_object = single_object
        self.uploads = Uploads(self.root, copy_chunk_bytes, upload_parallelism, throttle)
        protocol = self.root.protocol
        if conditional_writes is None:
            conditional_writes = protocol in CONDITIONAL_CREATE_PROTOCOLS
        elif conditional_writes and protocol not in CONDITIONAL_CREATE_PROTOCOLS:
            raise ValueError(
                f"conditional_writes is supported on S3, GCS and Azure Blob, not {url}"
            )
        self.manifests = FsspecManifests(self.root, conditional_writes)
        # Opened now: a URL fsspec knows but cannot reach (hdfs:// without libhdfs) fails
        # here, in one line, not at the first upload.
        self.root.fs  # noqa: B018

    @staticmethod
    def check_url(url: str) -> str | None:
        """Why fsspec cannot serve ``url`` (``api.StoreFactory``), or None."""
        return fsspec_root.check_url(url)

    @property
    def throttle(self) -> Callable[[int], None] | None:
        """The upload throttle (called with each chunk's size before it is sent)."""
        return self.uploads.throttle

    @property
    def copy_chunk_bytes(self) -> int:
        return self.uploads.part_bytes

    @property
    def requests(self) -> RequestCounts:
        """GET and PUT requests sent through this store (manifests included)."""
        return self.root.requests

    def __repr__(self) -> str:
        return f"FsspecRemoteStore({self.url!r})"

    # -- where things are --------------------------------------------------------------

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (tests reach objects through it)."""
        return self.root.fs

    @property
    def is_local(self) -> bool:
        return self.root.is_local

    def partition_path(self, topic: str, partition: int) -> str:
        """The partition's directory as an fsspec path (no protocol)."""
        return self.root.partition_path(topic, partition)

    def url_of(self, path: str) -> str:
        return self.root.url_of(path)

    def object_path(self, segment: RemoteSegment, kind: str) -> str:
        """Path of the object holding the segment's part ``kind`` (log, index, timeindex,
        producer_snapshot, leader_epoch_checkpoint, txn_index)."""
        name = segment_part(segment, kind).object
        return f"{self.partition_path(segment.topic, segment.partition)}/{name}"

    def object_url(self, segment: RemoteSegment, kind: str = "log") -> str:
        return self.url_of(self.object_path(segment, kind))

    def manifest_url(self, topic: str, partition: int) -> str:
        return self.manifests.manifest_url(topic, partition)

    def manifest_path(self, topic: str, partition: int) -> str:
        """Path of the partition's ``manifest.json`` (the pointer; tests reach it)."""
        return self.manifests.pointer_path(topic, partition)

    # -- RemoteStorage -----------------------------------------------------------------

    def copy_segment(
        self,
        segment: RemoteSegment,
        log_path: Path,
        offset_index_path: Path,
        time_index_path: Path,
        aux_state: Mapping[IndexKind, bytes] | None = None,
    ) -> RemoteSegment:
        """Upload the ``.log`` (streamed), its ``.index`` and ``.timeindex``, then the
        auxiliary state; see ``RemoteStorage.copy_segment``. In the single-object layout
        (the default) they go, in that order, into one ``<base>-<id>.segment`` object (the
        parts at growing offsets: ``tierlog.remote.manifest``); otherwise each is an
        object of its own. Returns ``segment`` with its parts and their CRC-32C, computed
        from the bytes as they were sent.

        The local files are opened first, so a segment renamed or deleted locally
        meanwhile still uploads whole (open descriptors keep working).

        Raises:
            OSError: a local file cannot be opened (passed through untranslated).
            ValueError: ``log_path``'s size is not ``segment.size_bytes``.
            RemoteStorageError: an upload failed (after retries when retriable).
        """
        with ExitStack() as stack:
            sources: list[tuple[str, BinaryIO]] = [
                (kind, stack.enter_context(open(local, "rb")))
                for kind, local in (
                    ("log", log_path),
                    ("index", offset_index_path),
                    ("timeindex", time_index_path),
                )
            ]
            size = os.fstat(sources[0][1].fileno()).st_size
            if size != segment.size_bytes:
                raise ValueError(
                    f"{log_path} holds {size} bytes, the segment says {segment.size_bytes}"
                )
            sources += [(kind.value, io.BytesIO(data)) for kind, data in (aux_state or {}).items()]
            given = {kind for kind, _ in sources}
            missing = [kind for kind in part_kinds(segment) if kind not in given]
            if missing:
                raise ValueError(f"segment {segment.segment_id}: no {', '.join(missing)} given")
            order = {kind: n for n, kind in enumerate(part_kinds(segment))}
            sources = sorted(
                (item for item in sources if item[0] in order), key=lambda item: order[item[0]]
            )
            what = f"upload {log_path}"
            if self.single_object:
                name = single_object_name(segment.base_offset, segment.segment_id)
                parts = self._upload_object(segment, name, sources, what)
            else:
                parts = []
                for kind, src in sources:
                    name = object_name(segment.base_offset, segment.segment_id, kind)
                    parts += self._upload_object(segment, name, [(kind, src)], what)
        return dataclasses.replace(segment, parts=tuple(parts))

    def _upload_object(
        self,
        segment: RemoteSegment,
        name: str,
        sources: list[tuple[str, BinaryIO]],
        what: str,
    ) -> list[SegmentPart]:
        """Upload ``sources`` back to back as the object ``name``; the parts they became."""
        remote = f"{self.partition_path(segment.topic, segment.partition)}/{name}"
        write = functools.partial(self.uploads.upload, sources, remote)
        sums = self.root.retrying(f"{what} to {self.url_of(remote)}", write)
        parts, offset = [], 0
        for (kind, _), (size, crc) in zip(sources, sums, strict=True):
            parts.append(SegmentPart(kind, name, offset, size, crc))
            offset += size
        return parts

    def fetch_range(self, segment: RemoteSegment, start: int, end: int | None) -> bytes:
        """Bytes ``[start, end)`` of the ``.log``, clipped to its size; the whole object
        (``0, None``) is checked against its recorded CRC-32C."""
        if start < 0 or (end is not None and end < start):
            raise ValueError(f"bad byte range [{start}, {end})")
        stop = segment.size_bytes if end is None else min(end, segment.size_bytes)
        if start >= stop:
            return b""
        data = self._read_part(segment, "log", start, stop)
        if start == 0 and end is None:
            self._check_part(segment, "log", data)
        return data

    def fetch_index(self, segment: RemoteSegment, kind: IndexKind) -> bytes:
        part = segment_part(segment, kind.value)
        data = self._read_part(segment, kind.value, 0, None if part.size < 0 else part.size)
        self._check_part(segment, kind.value, data)
        return data

    def _read_part(self, segment: RemoteSegment, kind: str, start: int, stop: int | None) -> bytes:
        """Bytes ``[start, stop)`` of a part (``stop`` None: to the object's end)."""
        part = segment_part(segment, kind)
        path = self.object_path(segment, kind)
        lo = part.offset + start
        hi = None if stop is None else part.offset + stop
        if hi is not None and hi <= lo:
            return b""  # an empty part (an empty index): nothing to ask the store for
        self.root.requests.add(gets=1)
        if lo == 0 and hi is None:
            what, call = f"read {self.url_of(path)}", functools.partial(self.fs.cat_file, path)
        else:
            what = f"read bytes [{lo}, {hi}) of {self.url_of(path)}"
            call = functools.partial(self.fs.cat_file, path, start=lo, end=hi)
        return bytes(self.root.retrying(what, call))

    def _check_part(self, segment: RemoteSegment, kind: str, data: bytes) -> None:
        """Raise ``CorruptRemoteDataError`` unless ``data`` is the part as recorded."""
        part = segment_part(segment, kind)
        if part.crc32c is None:
            return  # described before parts were: nothing recorded to compare with
        actual = int(crc32c(data))
        if len(data) == part.size and actual == part.crc32c:
            return
        url = self.object_url(segment, kind)
        raise CorruptRemoteDataError(
            f"{url}: remote {kind} of {segment.topic}-{segment.partition} offsets "
            f"{segment.base_offset}-{segment.end_offset} in {self.url} is damaged: "
            f"{len(data)} bytes with CRC-32C {actual:#010x}, the manifest recorded "
            f"{part.size} bytes with {part.crc32c:#010x}; not served",
            object_url=url,
            first_offset=segment.base_offset,
            last_offset=segment.end_offset,
        )

    def delete_segment(self, segment: RemoteSegment) -> None:
        """Delete every object of the segment, the ``.log``'s last, so a retry after a
        crash half-way still finds the segment; missing objects are fine."""
        kinds = part_kinds(segment)
        names: list[str] = []
        for kind in [*kinds[1:][::-1], "log"]:
            name = segment_part(segment, kind).object
            if name not in names:
                names.append(name)
        # Objects a retried upload may have left that the parts do not name (none today).
        for name in names:
            path = f"{self.partition_path(segment.topic, segment.partition)}/{name}"
            self.root.retrying(f"delete {self.url_of(path)}", functools.partial(self._rm, path))

    def _rm(self, path: str) -> None:
        with suppress(FileNotFoundError):
            self.fs.rm_file(path)

    def delete_object(self, topic: str, partition: int, name: str) -> None:
        """Delete one object of a partition by its name (orphan cleanup); missing is fine."""
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"not an object name: {name!r}")
        path = f"{self.partition_path(topic, partition)}/{name}"
        self.root.retrying(f"delete {self.url_of(path)}", functools.partial(self._rm, path))

    def list_objects(self, topic: str, partition: int) -> list[str]:
        directory = self.partition_path(topic, partition)
        return self.root.retrying(
            f"list {self.url_of(directory)}", functools.partial(self.root.list_names, directory)
        )

    # -- RemoteMetadata ----------------------------------------------------------------

    def read_manifest(self, topic: str, partition: int) -> Manifest:
        return self.manifests.read_manifest(topic, partition)

    def commit(
        self, topic: str, partition: int, manifest: Manifest, expected_version: int
    ) -> Manifest:
        """Compare-and-set the manifest (``FsspecManifests.commit``)."""
        return self.manifests.commit(topic, partition, manifest, expected_version)

    def list_partitions(self, topic: str | None = None) -> list[tuple[str, int]]:
        """The ``<topic>-<n>`` directories under the root (of ``topic``'s, when given)."""
        if topic is not None:
            check_topic(topic)
        root = self.root.root_path
        # Not retried: the readers that list (Spark planning, tools) report at once.
        try:
            if not self.fs.exists(root):
                raise RemoteResourceNotFoundError(f"{self.url}: no such remote directory")
            names = self.root.list_names(root, "directory")
        except RemoteStorageError:
            raise
        except Exception as exc:
            raise translate(exc, f"list {self.url}") from exc
        found = []
        for name in names:
            stem, sep, number = name.rpartition("-")
            if not sep or not number.isdigit() or (topic is not None and stem != topic):
                continue
            found.append((stem, int(number)))
        return sorted(found)
