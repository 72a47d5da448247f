"""The remote tier's two plugin interfaces, their data types and their errors (KIP-405).

Only interfaces live here (style rule 4); ``tierlog.remote.fsspec_storage`` implements both
on any fsspec URL, ``tierlog.remote.manifest`` owns the manifest's data type and JSON form,
``tierlog.remote.segments`` the segment's types (re-exported here).
Callers open a store with ``tierlog.remote.registry.open_store(url, options)`` and type it
as ``RemoteStore``: the URL's scheme picks the implementation, so a second store is one
module registered under its scheme, and no caller changes.

* ``RemoteStorage`` is Kafka's ``RemoteStorageManager``: copy a closed segment (data, then
  indexes), fetch a byte range of its ``.log``, fetch an index, delete it. Every call is
  safe to retry: a retried copy overwrites the same object names, a delete of missing
  objects succeeds. Where each part of a segment is stored (which object, at which
  offset) is the store's choice, returned by ``copy_segment`` as ``SegmentPart``s with
  their CRC-32C and recorded in the manifest; reads check what they download against
  them and raise ``CorruptRemoteDataError``, never return damaged bytes.
* ``RemoteMetadata`` is Kafka's ``RemoteLogMetadataManager``: the per-partition manifest,
  the one source of truth for what is remote. Writes are compare-and-set on a version
  counter and fenced by leader epoch, so a deposed leader can never commit.

Segment lifecycle (``SegmentState``, Kafka's ``RemoteLogSegmentState``)::

    COPY_STARTED ----copied + committed----> COPY_FINISHED
         |                                         |
         | upload abandoned (orphan cleanup)       | retention / DeleteRecords
         v                                         v
    DELETE_STARTED <-------------------------------+
         |
         | objects deleted
         v
    (removed from the manifest)

Only COPY_FINISHED segments are readable; a segment enters DELETE_STARTED in the manifest
*before* its objects are deleted, so no reader is sent to a half-deleted segment.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

# The segment's data types live below this module and tierlog.remote.manifest, so the two
# need not import each other; they are re-exported here, where callers have always found them.
from tierlog.remote.segments import (
    TRANSITIONS,  # noqa: F401 (re-exported)
    IndexKind,
    RemoteSegment,
    SegmentPart,  # noqa: F401 (re-exported)
    SegmentState,  # noqa: F401 (re-exported)
)

if TYPE_CHECKING:
    from tierlog.remote.manifest import Manifest
    from tierlog.util.clock import Clock


class RequestCounts:
    """Requests a store has sent, by what object stores bill (S3: GET vs PUT, LIST,
    POST, COPY classes): ``gets`` read an object or a range of one, ``puts`` create or
    write one (a multipart upload counts its start, each part and its completion).
    Issue 24: request cost is what object storage bills, so replay and offload report
    them per GiB. Thread-safe; a pickled copy starts from zero.
    """

    def __init__(self) -> None:
        self.gets = 0
        self.puts = 0
        self._lock = threading.Lock()

    def add(self, *, gets: int = 0, puts: int = 0) -> None:
        with self._lock:
            self.gets += gets
            self.puts += puts

    def __reduce__(self) -> tuple[type[RequestCounts], tuple[()]]:
        return RequestCounts, ()


# -- errors -------------------------------------------------------------------------------


class RemoteStorageError(Exception):
    """Base of remote-tier failures. ``retriable`` says whether the same call may succeed
    later unchanged (the broker answers a retriable error to clients and retries uploads).
    ``code`` is the Kafka error code a client is answered: KAFKA_STORAGE_ERROR (56),
    retriable, so consumers wait for the data instead of skipping it. The broker's error
    map reads it, so this tier needs no import from the broker (nor of kio's code table,
    which would cost every Spark executor a second of imports).
    """

    retriable: bool = False
    code = 56  # KAFKA_STORAGE_ERROR

    def __init__(self, message: str, *, retriable: bool | None = None) -> None:
        super().__init__(message)
        if retriable is not None:
            self.retriable = retriable


class RemoteStorageUnavailableError(RemoteStorageError):
    """The store cannot be reached (connection refused, timeout, DNS, 5xx): retriable."""

    retriable = True


class RemoteResourceNotFoundError(RemoteStorageError):
    """An object the call needs does not exist (Kafka's RemoteResourceNotFoundException)."""


class RemoteDataLostError(RemoteStorageError):
    """A read of offsets the remote tier once committed and has lost (an emptied bucket):
    answered KAFKA_STORAGE_ERROR, never skipped over (``remote_checkpoint``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retriable=True)


class CorruptRemoteDataError(RemoteStorageError):
    """Bytes read from the store fail their check: a batch's length, header or CRC-32C in
    a range of a segment's ``.log``, or a part's CRC-32C recorded in the manifest. The
    bytes are never served. The message names the object (its URL), the offsets and the
    byte range; ``object_url``, ``first_offset`` and ``last_offset`` (-1: to the segment's
    end) carry them for callers. Retriable as every remote read failure is (Kafka's
    KAFKA_STORAGE_ERROR): the object may be repaired or the read tried again elsewhere,
    and a consumer must wait at the damage rather than skip past it."""

    def __init__(
        self, message: str, *, object_url: str, first_offset: int, last_offset: int
    ) -> None:
        super().__init__(message, retriable=True)
        self.object_url = object_url
        self.first_offset = first_offset
        self.last_offset = last_offset


class CorruptManifestError(RemoteStorageError):
    """A manifest cannot be decoded or breaks its invariants. The message starts with the
    manifest's full path or URL (``where``) and says what is wrong. Never a reason to
    delete local data."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: corrupt remote manifest: {reason}")
        self.where = where
        self.reason = reason


class FencedLeaderEpochError(RemoteStorageError):
    """A manifest write from a leader epoch older than the stored one: the writer is no
    longer the leader and must stop (Kafka's FENCED_LEADER_EPOCH)."""

    def __init__(self, message: str, *, stored_epoch: int, writer_epoch: int) -> None:
        super().__init__(message)
        self.stored_epoch = stored_epoch
        self.writer_epoch = writer_epoch


class ManifestConflictError(RemoteStorageError):
    """Compare-and-set failed: the stored manifest is not at the expected version (another
    write won). Re-read the manifest and redo the change if still the leader."""

    def __init__(self, message: str, *, expected_version: int, actual_version: int) -> None:
        super().__init__(message)
        self.expected_version = expected_version
        self.actual_version = actual_version


# -- interfaces ---------------------------------------------------------------------------


@runtime_checkable
class RemoteStorage(Protocol):
    """Kafka's ``RemoteStorageManager``: segment objects in the store. All calls block and
    are safe to retry; errors are ``RemoteStorageError`` subclasses."""

    def copy_segment(
        self,
        segment: RemoteSegment,
        log_path: Path,
        offset_index_path: Path,
        time_index_path: Path,
        aux_state: Mapping[IndexKind, bytes] | None = None,
    ) -> RemoteSegment:
        """Upload the ``.log`` (streamed), then the ``.index`` and ``.timeindex``, then
        ``aux_state``: the producer snapshot and leader-epoch checkpoint when the segment
        ``has_aux_state``, its aborted-transaction index (``IndexKind.TRANSACTION``) when
        it ``has_txn_index``.

        Returns:
            ``segment`` with ``parts``: where each part went and its CRC-32C. The caller
            commits this to the manifest, only after the call returns.

        Idempotent: a retry with the same ``segment`` overwrites the same object names.
        """
        ...

    def fetch_range(self, segment: RemoteSegment, start: int, end: int | None) -> bytes:
        """Bytes ``[start, end)`` of the segment's ``.log`` (``end`` None: to the end).
        The whole ``.log`` (``0, None``: a download) is checked against its recorded
        CRC-32C; ranges are checked batch by batch by their readers
        (``tierlog.remote.segment_reader``), so the intact batches before damage are
        still served.

        Raises:
            RemoteResourceNotFoundError: the object is missing.
            RemoteStorageUnavailableError: the store cannot be reached.
            CorruptRemoteDataError: the bytes do not match the recorded size or CRC-32C.
        """
        ...

    def fetch_index(self, segment: RemoteSegment, kind: IndexKind) -> bytes:
        """The whole offset or time index, producer snapshot, leader-epoch checkpoint or
        aborted-transaction index of the segment (Kafka's byte formats), checked against
        its recorded size and CRC-32C when the manifest has them.

        Raises:
            CorruptRemoteDataError: the bytes do not match what was recorded.
        """
        ...

    def delete_segment(self, segment: RemoteSegment) -> None:
        """Delete the segment's objects (its ``.txnindex`` too when ``has_txn_index``),
        the ``.log`` last; objects already gone are fine."""
        ...

    def list_objects(self, topic: str, partition: int) -> list[str]:
        """Names (relative to the partition's directory, sorted) of every object stored
        for the partition, the manifest included: for orphan cleanup."""
        ...

    def delete_object(self, topic: str, partition: int, name: str) -> None:
        """Delete one object of a partition by the name ``list_objects`` gave (orphan
        cleanup, a deleted topic's data); missing is fine."""
        ...

    def object_url(self, segment: RemoteSegment, kind: str = "log") -> str:
        """The URL of the object holding the segment's part ``kind``, for messages."""
        ...

    @property
    def is_local(self) -> bool:
        """True when the objects are plain files on this machine: readers read them in
        place instead of through a local cache."""
        ...

    @property
    def requests(self) -> RequestCounts:
        """The GET and PUT requests sent so far (metadata reads and writes included)."""
        ...


@runtime_checkable
class RemoteMetadata(Protocol):
    """Kafka's ``RemoteLogMetadataManager``: one manifest per partition, strongly consistent
    for its single writer (the partition leader)."""

    def read_manifest(self, topic: str, partition: int) -> Manifest:
        """The stored manifest, or an empty one at version 0 when none was written.

        Raises:
            CorruptManifestError: the stored manifest cannot be decoded (names its path).
        """
        ...

    def commit(
        self, topic: str, partition: int, manifest: Manifest, expected_version: int
    ) -> Manifest:
        """Store ``manifest`` if the stored one is still at ``expected_version``.

        Returns:
            What was stored: ``manifest`` with ``version = expected_version + 1``.

        Raises:
            FencedLeaderEpochError: ``manifest.leader_epoch`` is below the stored one.
            ManifestConflictError: the stored version is not ``expected_version``.
        """
        ...

    def manifest_url(self, topic: str, partition: int) -> str:
        """Where the partition's manifest is, as a URL, for messages."""
        ...

    def list_partitions(self, topic: str | None = None) -> list[tuple[str, int]]:
        """``(topic, partition)`` of every partition the store has anything of (all
        topics, or ``topic``'s), sorted: what readers without a broker (Spark, tools)
        find under the root.

        Raises:
            RemoteResourceNotFoundError: the root itself does not exist.
            RemoteStorageError: the root cannot be listed.
        """
        ...


class RemoteStore(RemoteStorage, RemoteMetadata, Protocol):
    """Both interfaces in one object, as every caller uses them, opened by
    ``tierlog.remote.registry.open_store``."""

    # The root URL, for messages (``s3://bucket/prefix``).
    url: str


class StoreFactory(Protocol):
    """What the registry builds a store with: an implementation's class, called with the
    root URL, its storage options and the broker's clock and upload throttle, with a
    static ``check_url`` for configuration checks (nothing opened)."""

    @staticmethod
    def check_url(url: str) -> str | None:
        """Why this store cannot serve ``url`` (a missing package, with its install hint),
        or None."""
        ...

    def __call__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        throttle: Callable[[int], None] | None = None,
    ) -> RemoteStore: ...
