"""``FsspecManifests``: the ``RemoteMetadata`` interface on an fsspec root: immutable manifest
versions and the pointer that names the current one (why, and the object names, in
``tierlog.remote.manifest``; the JSON in ``tierlog.remote.manifest_json``).

A commit creates ``manifest-<version>.json`` only if that version does not exist yet, then
points ``manifest.json`` at it. How each store creates exclusively and overwrites:

* ``file://``: the version is written to a temp file, fsynced and hard-linked to its name
  (``link`` fails when the name exists); the pointer is replaced by ``rename``. An
  ``flock`` on the partition directory serialises whole commits between processes of one
  host (not over NFS).
* ``s3://``: a conditional PUT (``If-None-Match: *``), which AWS S3, MinIO and moto
  honour; the pointer is a plain PUT (atomic). Pass ``conditional_writes=False`` for
  S3-compatible stores that reject the header.
* ``gs://`` / ``gcs://`` (gcsfs) and ``abfs://`` / ``az://`` (adlfs): the same, through
  fsspec's ``mode="create"`` (GCS's ``ifGenerationMatch=0``, Azure Blob's
  ``If-None-Match: *``); both replace an object atomically, so the pointer is a plain PUT.
* ``webhdfs://``: the version is written to a temp name and renamed; HDFS refuses to
  rename onto an existing file, so the rename is the exclusive step and no reader ever
  sees the version half-written. The pointer is overwritten in place (WebHDFS has no
  atomic replace); readers detect a half-written pointer and read it again.
* anything else (and S3 without conditional writes): an existence check, then a plain
  write. Two writers racing between the two could both succeed; tierlog relies on Kafka's
  rule that only the partition leader writes, fenced by leader epoch (KIP-405).

Within one process a lock per partition serialises commits. Readers retry a pointer that
does not decode (``TORN_READ_RETRIES``; a half-written one on HDFS), and, when it stays
unreadable, list the directory and take the newest version that decodes.

A writer remembers its own last commit per partition and, when the next commit builds on
it, skips reading the manifest back (two GETs): the exclusive creation of the next version
still refuses it if anyone committed meanwhile, and the refusal re-reads (on HDFS this
halves a commit's round trips).

Thread-safe: commits take a lock per partition (which also guards the writer's memory of
its last commit); reads keep no state.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Final

from tierlog.remote._errors import precondition_failed
from tierlog.remote.api import (
    CorruptManifestError,
    FencedLeaderEpochError,
    ManifestConflictError,
)
from tierlog.remote.fsspec_root import FsspecRoot
from tierlog.remote.manifest import (
    KEEP_VERSIONS,
    MANIFEST_NAME,
    ZERO_UUID,
    Manifest,
    empty,
    parse_version_object_name,
    version_object_name,
)
from tierlog.remote.manifest_json import (
    Pointer,
    check_version_bytes,
    decode,
    decode_stored,
    encode,
    encode_pointer,
    pointer_to,
)
from tierlog.util.atomic_files import atomic_write, create_new

log = logging.getLogger(__name__)

# Reads of a pointer that does not decode before the directory is listed instead: on HDFS
# a pointer being overwritten reads empty or short for the few ms the write takes.
TORN_READ_RETRIES = 5
TORN_READ_BACKOFF_MS = 20


# Stores whose fsspec driver creates an object only if absent (``pipe_file(mode="create")``
# raising FileExistsError) and replaces one atomically.
CONDITIONAL_CREATE_PROTOCOLS: Final = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az"})


class FsspecManifests:
    """Args:
    root: the remote root.
    conditional_writes: create versions with a conditional PUT (S3, GCS, Azure Blob).
    """

    def __init__(self, root: FsspecRoot, conditional_writes: bool) -> None:
        self.root = root
        self.conditional_writes = conditional_writes
        self.torn_reads = 0  # pointer reads that did not decode and were retried
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._guard = threading.Lock()
        self._partition_locks: dict[tuple[str, int], threading.Lock] = {}
        # The last manifest this writer committed, per partition (under its lock).
        self._committed: dict[tuple[str, int], Manifest] = {}

    def __getstate__(self) -> dict[str, object]:
        return {"root": self.root, "conditional_writes": self.conditional_writes, "torn_reads": 0}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    # -- paths -------------------------------------------------------------------------

    def pointer_path(self, topic: str, partition: int) -> str:
        return f"{self.root.partition_path(topic, partition)}/{MANIFEST_NAME}"

    def version_path(self, topic: str, partition: int, version: int) -> str:
        return f"{self.root.partition_path(topic, partition)}/{version_object_name(version)}"

    def manifest_url(self, topic: str, partition: int) -> str:
        return self.root.url_of(self.pointer_path(topic, partition))

    # -- reading -----------------------------------------------------------------------

    def read_manifest(self, topic: str, partition: int) -> Manifest:
        path = self.pointer_path(topic, partition)
        return self.root.retrying(
            f"read {self.root.url_of(path)}", functools.partial(self._read, topic, partition)
        )

    def _read(self, topic: str, partition: int) -> Manifest:
        """The current manifest: the pointer, then the version it names, checked against
        the size and CRC-32C the pointer records. A pointer that does not decode, or names
        a version that is gone or does not match, is read again; then the directory is
        listed and the newest version read."""
        fs = self.root.fs
        path = self.pointer_path(topic, partition)
        where = self.root.url_of(path)
        # A listing cached by the filesystem (s3fs & co, after an orphan scan or a tool's
        # listing) would answer "not found" for a version created since.
        fs.invalidate_cache(path.rsplit("/", 1)[0])
        problem: CorruptManifestError | None = None
        for attempt in range(TORN_READ_RETRIES):
            if attempt:
                self.torn_reads += 1
                self.root.sleep(TORN_READ_BACKOFF_MS * attempt / 1000)
            self.root.requests.add(gets=1)
            try:
                data = bytes(fs.cat_file(path))
            except FileNotFoundError:
                return empty(topic, partition)
            try:
                stored = decode_stored(data, where)
                if isinstance(stored, Manifest):  # written before versions
                    return self._checked(stored, topic, partition, where)
                return self._version(topic, partition, stored)
            except CorruptManifestError as exc:
                problem = exc
            except FileNotFoundError:
                # Pruned between the two reads (a reader slower than KEEP_VERSIONS
                # commits): the pointer has moved on.
                problem = CorruptManifestError(where, "names a version that is gone")
        newest = self._newest_listed(topic, partition)
        if newest is not None:
            log.warning("%s; read the newest version listed instead (%d)", problem, newest.version)
            return newest
        assert problem is not None
        raise problem

    def _version(self, topic: str, partition: int, pointer: Pointer) -> Manifest:
        path = self.version_path(topic, partition, pointer.version)
        where = self.root.url_of(path)
        self.root.requests.add(gets=1)
        data = bytes(self.root.fs.cat_file(path))
        check_version_bytes(data, pointer, where)
        manifest = self._checked(decode(data, where), topic, partition, where)
        if manifest.version != pointer.version:
            raise CorruptManifestError(where, f"holds version {manifest.version}")
        return manifest

    def _checked(self, manifest: Manifest, topic: str, partition: int, where: str) -> Manifest:
        if (manifest.topic, manifest.partition) != (topic, partition):
            raise CorruptManifestError(
                where,
                f"it describes {manifest.topic}-{manifest.partition}, not {topic}-{partition}",
            )
        return manifest

    def _newest_listed(self, topic: str, partition: int) -> Manifest | None:
        """The newest version in the directory, None when there is none. Only the newest:
        an older one would hide commits, so a newest version that does not decode is an
        error (``CorruptManifestError``), never a reason to go back in time."""
        names = self.root.list_names(self.root.partition_path(topic, partition))
        versions = [v for v in map(parse_version_object_name, names) if v is not None]
        if not versions:
            return None
        path = self.version_path(topic, partition, max(versions))
        where = self.root.url_of(path)
        return self._checked(
            decode(bytes(self.root.fs.cat_file(path)), where), topic, partition, where
        )

    # -- committing --------------------------------------------------------------------

    def commit(
        self, topic: str, partition: int, manifest: Manifest, expected_version: int
    ) -> Manifest:
        """Compare-and-set (``RemoteMetadata.commit``): create the next version, then point
        at it. An attempt whose version was created but whose answer or pointer write was
        lost is finished by the retry (the version holds exactly these bytes); a version
        created by someone else is a conflict, after which the pointer is moved to the
        newest version so that the next read sees it."""
        if (manifest.topic, manifest.partition) != (topic, partition):
            raise ValueError(f"manifest of {manifest.topic}-{manifest.partition} for {topic}")
        new = dataclasses.replace(manifest, version=expected_version + 1)
        data = encode(new)
        path = self.pointer_path(topic, partition)
        attempts = 0

        def attempt() -> Manifest:
            nonlocal attempts
            attempts += 1
            return self._commit_once(new, data, expected_version, retry=attempts > 1)

        with self._partition_lock(topic, partition):
            return self.root.retrying(f"commit {self.root.url_of(path)}", attempt)

    def _commit_once(self, new: Manifest, data: bytes, expected: int, *, retry: bool) -> Manifest:
        """One attempt. Only a retry may take a version holding exactly ``data`` for its
        own: on a first attempt it is another writer's identical change (two writers
        making the same edit must not both count)."""
        topic, partition = new.topic, new.partition
        where = self.manifest_url(topic, partition)
        key = (topic, partition)
        with self._file_lock(topic, partition) if self.root.is_local else nullcontext():
            mine = self._committed.get(key)
            if not retry and mine is not None and mine.version == expected:
                current = mine  # built on our own last commit; the creation below checks
            else:
                current = self._read(topic, partition)
            if retry and current.version == new.version and encode(current) == data:
                return new  # an earlier attempt landed whole; its answer was lost
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
            version_path = self.version_path(topic, partition, new.version)
            created = True
            try:
                self._create(version_path, data)
            except FileExistsError:
                created = False
                if not retry or bytes(self.root.fs.cat_file(version_path)) != data:
                    self._committed.pop(key, None)
                    newest = self._repair_pointer(topic, partition, new.version)
                    raise ManifestConflictError(
                        f"{where}: version {new.version} was created by another writer "
                        f"(newest: {newest})",
                        expected_version=expected,
                        actual_version=newest,
                    ) from None
                # Ours, from an attempt whose pointer write failed: finish it.
            # Creating the next version is the compare-and-set only while that version has
            # never existed. A writer whose view is stale by more than KEEP_VERSIONS commits
            # (a zombie leader built on its own last commit, a reader descheduled for long)
            # finds the slot pruned, creates it, and would move the pointer back, dropping
            # every commit since. The pointer says whether the log moved on.
            pointed = self._pointed_version(topic, partition)
            if pointed is not None and pointed > expected:
                if created:
                    with suppress(FileNotFoundError):
                        self.root.fs.rm_file(version_path)
                    self._committed.pop(key, None)
                    raise ManifestConflictError(
                        f"{where}: expected version {expected}, found {pointed}",
                        expected_version=expected,
                        actual_version=pointed,
                    )
                # Ours, from an attempt whose answer was lost, and later commits built on it.
                self._committed.pop(key, None)
                return new
            self._point(topic, partition, pointer_to(new.version, data))
            self._committed[key] = new
        self._prune(topic, partition, new.version)
        return new

    def _pointed_version(self, topic: str, partition: int) -> int | None:
        """The version ``manifest.json`` names; None when it is missing or unreadable (the
        repair that reads it next takes the newest version listed)."""
        path = self.pointer_path(topic, partition)
        self.root.requests.add(gets=1)
        try:
            stored = decode_stored(bytes(self.root.fs.cat_file(path)), self.root.url_of(path))
        except (FileNotFoundError, CorruptManifestError):
            return None
        return stored.version

    def _create(self, path: str, data: bytes) -> None:
        """Create the object only if it does not exist; FileExistsError when it does."""
        fs, root = self.root.fs, self.root
        root.requests.add(puts=1)
        if root.is_local:
            local = Path(root.local_path(path))
            local.parent.mkdir(parents=True, exist_ok=True)
            create_new(local, data)
        elif self.conditional_writes:
            try:
                fs.pipe_file(path, data, mode="create")
            except OSError as exc:
                if precondition_failed(exc):
                    raise FileExistsError(path) from exc
                raise
        elif root.protocol in ("webhdfs", "swebhdfs"):
            # HDFS renames atomically and never onto an existing file: the version
            # appears whole, once. A refused rename leaves the temp file where it was.
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            fs.pipe_file(tmp, data)
            fs.mv(tmp, path)
            if fs.exists(tmp):
                with suppress(FileNotFoundError):
                    fs.rm_file(tmp)
                raise FileExistsError(path)
        else:
            if fs.exists(path):
                raise FileExistsError(path)
            fs.pipe_file(path, data)

    def _point(self, topic: str, partition: int, pointer: Pointer) -> None:
        path = self.pointer_path(topic, partition)
        data = encode_pointer(pointer)
        self.root.requests.add(puts=1)
        if self.root.is_local:
            atomic_write(Path(self.root.local_path(path)), data)
        else:
            self.root.fs.pipe_file(path, data)

    def _repair_pointer(self, topic: str, partition: int, known: int) -> int:
        """Point at the newest version from ``known`` (or the pointer's, if newer) on:
        versions are created one after another, so the newest is where the next one is
        missing. Returns it.

        A writer whose ``known`` is stale may find it pruned by another writer meanwhile
        (pruning runs after a commit, outside the commit's lock): the walk starts at the
        pointer's version then, and a version that vanishes under the walk means the log
        moved far on and the pointer with it, so nothing is repaired."""
        fs = self.root.fs
        newest = max(known, self._pointed_version(topic, partition) or known)
        while fs.exists(self.version_path(topic, partition, newest + 1)):
            newest += 1
        try:
            data = bytes(fs.cat_file(self.version_path(topic, partition, newest)))
        except FileNotFoundError:
            return newest
        self._point(topic, partition, pointer_to(newest, data))
        log.warning(
            "%s: the pointer was behind the newest version; it names version %d now",
            self.manifest_url(topic, partition),
            newest,
        )
        return newest

    def _prune(self, topic: str, partition: int, version: int) -> None:
        """Every ``KEEP_VERSIONS`` commits, delete the batch of versions that fell more
        than ``KEEP_VERSIONS`` behind (best effort: the orphan scan takes what is left)."""
        if version % KEEP_VERSIONS:
            return
        doomed = [
            self.version_path(topic, partition, v)
            for v in range(max(1, version - 2 * KEEP_VERSIONS), version - KEEP_VERSIONS)
        ]
        for path in doomed:
            try:
                self.root.fs.rm_file(path)
            except FileNotFoundError:
                pass
            except Exception as exc:  # a failed prune must not fail the commit
                log.info("could not delete old manifest %s: %s", self.root.url_of(path), exc)
                return

    def _partition_lock(self, topic: str, partition: int) -> threading.Lock:
        with self._guard:
            return self._partition_locks.setdefault((topic, partition), threading.Lock())

    @contextmanager
    def _file_lock(self, topic: str, partition: int) -> Iterator[None]:
        directory = self.root.local_path(self.root.partition_path(topic, partition))
        os.makedirs(directory, exist_ok=True)
        fd = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock
