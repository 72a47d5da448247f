"""The remote tier (KIP-405): closed segments in object storage behind two interfaces.

Modules: ``api`` (the ``RemoteStorage`` and ``RemoteMetadata`` interfaces, ``RemoteSegment``,
``SegmentState``, errors), ``registry`` (``open_store``: the store for a URL's scheme, the
one way in), ``manifest`` and ``manifest_json`` (the per-partition manifest: data type,
versions, JSON formats, pure helpers), ``fsspec_storage`` with ``fsspec_manifests`` and
``fsspec_root`` (both interfaces on any fsspec URL), ``chunk_cache`` (the bounded on-disk
cache of remote byte ranges), ``segment_reader`` (checked offset/timestamp lookups and
reads on one remote segment). Importing this package loads neither fsspec nor s3fs: a
store imports them when opened.
"""

from tierlog.remote.api import (
    CorruptManifestError,
    CorruptRemoteDataError,
    FencedLeaderEpochError,
    IndexKind,
    ManifestConflictError,
    RemoteMetadata,
    RemoteResourceNotFoundError,
    RemoteSegment,
    RemoteStorage,
    RemoteStorageError,
    RemoteStorageUnavailableError,
    RemoteStore,
    SegmentPart,
    SegmentState,
)
from tierlog.remote.chunk_cache import ChunkCache, ChunkSlice
from tierlog.remote.manifest import Manifest
from tierlog.remote.registry import open_store, register_store
from tierlog.remote.segment_reader import RemoteSegmentReader

__all__ = [
    "ChunkCache",
    "ChunkSlice",
    "CorruptManifestError",
    "CorruptRemoteDataError",
    "FencedLeaderEpochError",
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
    "RemoteStore",
    "SegmentPart",
    "SegmentState",
    "open_store",
    "register_store",
]
