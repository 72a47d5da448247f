"""A second ``RemoteStore`` implementation, objects in a process-wide dict (unit tests only):
it proves the seam. Registered under its own scheme, it is opened by ``open_store`` and
serves the remote log manager, the Spark source's readers, changelog rebuilds and the
tools without a line of theirs changed (issue 21, item 6). It follows the interface's
contracts: parts with CRC-32C from ``copy_segment``, checked downloads, compare-and-set
commits fenced by leader epoch.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from tierlog.remote.api import (
    CorruptRemoteDataError,
    FencedLeaderEpochError,
    IndexKind,
    ManifestConflictError,
    RemoteResourceNotFoundError,
    RemoteSegment,
    RequestCounts,
    SegmentPart,
)
from tierlog.remote.manifest import (
    Manifest,
    empty,
    object_name,
    part_crc,
    part_kinds,
    partition_dir,
    segment_part,
)
from tierlog.remote.manifest_json import decode, encode
from tierlog.util.clock import Clock

SCHEME = "dictstore"


class DictStore:
    """``RemoteStorage`` and ``RemoteMetadata`` on ``dictstore://<name>``: one dict of
    object name -> bytes per name, shared by every store opened on it in the process."""

    _buckets: ClassVar[dict[str, dict[str, bytes]]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        throttle: Callable[[int], None] | None = None,
    ) -> None:
        self.url = url
        self.throttle = throttle
        self.requests = RequestCounts()
        with self._lock:
            self.objects = self._buckets.setdefault(url, {})

    @staticmethod
    def check_url(url: str) -> str | None:
        return None if url.startswith(f"{SCHEME}://") else f"{url!r} is not a {SCHEME} URL"

    @property
    def is_local(self) -> bool:
        return False

    def _key(self, topic: str, partition: int, name: str) -> str:
        return f"{partition_dir(topic, partition)}/{name}"

    def _get(self, key: str) -> bytes:
        try:
            return self.objects[key]
        except KeyError:
            raise RemoteResourceNotFoundError(f"{self.url}/{key}: not found") from None

    # -- RemoteStorage -----------------------------------------------------------------

    def copy_segment(
        self,
        segment: RemoteSegment,
        log_path: Path,
        offset_index_path: Path,
        time_index_path: Path,
        aux_state: Mapping[IndexKind, bytes] | None = None,
    ) -> RemoteSegment:
        contents = {
            "log": Path(log_path).read_bytes(),
            "index": Path(offset_index_path).read_bytes(),
            "timeindex": Path(time_index_path).read_bytes(),
            **{kind.value: data for kind, data in (aux_state or {}).items()},
        }
        parts = []
        for kind in part_kinds(segment):
            name = object_name(segment.base_offset, segment.segment_id, kind)
            data = contents[kind]
            if self.throttle is not None:
                self.throttle(len(data))
            self.objects[self._key(segment.topic, segment.partition, name)] = data
            self.requests.add(puts=1)
            parts.append(SegmentPart(kind, name, 0, len(data), part_crc(data)))
        return dataclasses.replace(segment, parts=tuple(parts))

    def _part(self, segment: RemoteSegment, kind: str) -> bytes:
        part = segment_part(segment, kind)
        self.requests.add(gets=1)
        data = self._get(self._key(segment.topic, segment.partition, part.object))
        return data[part.offset : part.offset + part.size] if part.size >= 0 else data

    def fetch_range(self, segment: RemoteSegment, start: int, end: int | None) -> bytes:
        data = self._part(segment, "log")
        stop = len(data) if end is None else min(end, len(data))
        if start == 0 and end is None:
            self._check(segment, "log", data)
        return data[start:stop]

    def fetch_index(self, segment: RemoteSegment, kind: IndexKind) -> bytes:
        data = self._part(segment, kind.value)
        self._check(segment, kind.value, data)
        return data

    def _check(self, segment: RemoteSegment, kind: str, data: bytes) -> None:
        part = segment_part(segment, kind)
        if part.crc32c is not None and part_crc(data) != part.crc32c:
            url = self.object_url(segment, kind)
            raise CorruptRemoteDataError(
                f"{url}: damaged, the manifest recorded another CRC-32C",
                object_url=url,
                first_offset=segment.base_offset,
                last_offset=segment.end_offset,
            )

    def delete_segment(self, segment: RemoteSegment) -> None:
        for kind in part_kinds(segment):
            key = self._key(segment.topic, segment.partition, segment_part(segment, kind).object)
            self.objects.pop(key, None)

    def list_objects(self, topic: str, partition: int) -> list[str]:
        prefix = f"{partition_dir(topic, partition)}/"
        return sorted(k[len(prefix) :] for k in list(self.objects) if k.startswith(prefix))

    def delete_object(self, topic: str, partition: int, name: str) -> None:
        self.objects.pop(self._key(topic, partition, name), None)

    def object_url(self, segment: RemoteSegment, kind: str = "log") -> str:
        name = segment_part(segment, kind).object
        return f"{self.url}/{self._key(segment.topic, segment.partition, name)}"

    # -- RemoteMetadata ----------------------------------------------------------------

    def read_manifest(self, topic: str, partition: int) -> Manifest:
        data = self.objects.get(self._key(topic, partition, "manifest"))
        if data is None:
            return empty(topic, partition)
        return decode(data, self.manifest_url(topic, partition))

    def commit(
        self, topic: str, partition: int, manifest: Manifest, expected_version: int
    ) -> Manifest:
        with self._lock:
            current = self.read_manifest(topic, partition)
            if current.leader_epoch > manifest.leader_epoch:
                raise FencedLeaderEpochError(
                    "fenced",
                    stored_epoch=current.leader_epoch,
                    writer_epoch=manifest.leader_epoch,
                )
            if current.version != expected_version:
                raise ManifestConflictError(
                    "conflict",
                    expected_version=expected_version,
                    actual_version=current.version,
                )
            new = dataclasses.replace(manifest, version=expected_version + 1)
            self.objects[self._key(topic, partition, "manifest")] = encode(new)
            return new

    def manifest_url(self, topic: str, partition: int) -> str:
        return f"{self.url}/{self._key(topic, partition, 'manifest')}"

    def list_partitions(self, topic: str | None = None) -> list[tuple[str, int]]:
        if not self.objects:
            raise RemoteResourceNotFoundError(f"{self.url}: empty")
        found = set()
        for key in list(self.objects):
            stem, _, number = key.split("/", 1)[0].rpartition("-")
            if topic is None or stem == topic:
                found.add((stem, int(number)))
        return sorted(found)
