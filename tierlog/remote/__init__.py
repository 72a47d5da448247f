"""The remote tier (KIP-405): closed segments in object storage behind two interfaces.

Modules: ``api`` (the ``RemoteStorage`` and ``RemoteMetadata`` interfaces, ``RemoteSegment``,
``SegmentState``, errors), ``manifest`` (the per-partition manifest: data type, JSON format,
pure helpers), ``fsspec_storage`` (both interfaces on any fsspec URL), ``chunk_cache`` (the
bounded on-disk cache of remote byte ranges), ``segment_reader`` (offset/timestamp lookups
and reads on one remote segment). Importing this package loads neither fsspec nor s3fs:
``FsspecRemoteStore`` imports them when constructed.
"""

from tierlog.remote.api import (
    CorruptManifestError,
    FencedLeaderEpochError,
    IndexKind,
    ManifestConflictError,
    RemoteMetadata,
    RemoteResourceNotFoundError,
    RemoteSegment,
    RemoteStorage,
    RemoteStorageError,
    RemoteStorageUnavailableError,
    SegmentState,
)
from tierlog.remote.chunk_cache import ChunkCache, ChunkSlice
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.manifest import Manifest
from tierlog.remote.segment_reader import RemoteSegmentReader

__all__ = [
    "ChunkCache",
    "ChunkSlice",
    "CorruptManifestError",
    "FencedLeaderEpochError",
    "FsspecRemoteStore",
    "IndexKind",
    "Manifest",
    "ManifestConflictError",
    "RemoteMetadata",
    "RemoteResourceNotFoundError",
    "RemoteSegment",
    "RemoteSegmentReader",
    "RemoteStorage",
    "RemoteStorageError",
    "RemoteStorageUnavailableError",
    "SegmentState",
]
