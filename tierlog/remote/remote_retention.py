"""Remote retention and cleanup for the remote log manager (KIP-405's expiration task):
remote-only segments past retention.ms / retention.bytes or below a log start offset
raised by DeleteRecords, deletes a crash left half-way, orphaned objects, and the remote
data of deleted topics (``RemoteRetention``).

Owns the deletion protocol: a doomed segment's entry is first marked DELETE_STARTED
(committed), then its objects are deleted, then the entry is dropped from the manifest and
the remote log start moves past it. A crash in between leaves a DELETE_STARTED entry,
which the orphan scan finishes the same way; an interrupted upload leaves objects no
entry names, which the orphan scan deletes.

Threads: ``RemoteRetention.candidates`` runs on the event loop (it reads the live ``Log``
and the published manifest snapshot); every other method runs on the manager's
``remote-log`` worker thread, the partition manifest's one writer, so no upload of this
broker is in flight meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid

from tierlog.remote import manifest as mf
from tierlog.remote.api import RemoteSegment, RemoteStore, SegmentState
from tierlog.remote.chunk_cache import ChunkCache
from tierlog.remote.tiered_partition import TieredPartition
from tierlog.util.clock import Clock

log = logging.getLogger(__name__)


class RemoteRetention:
    """Args:
    store: the remote storage and metadata.
    cache: the chunk cache of remote reads; a deleted segment's chunks leave it.
    clock: what retention.ms is measured against.
    """

    def __init__(self, store: RemoteStore, cache: ChunkCache, clock: Clock) -> None:
        self.store = store
        self.cache = cache
        self.clock = clock
        self.deleted_segments = 0
        self.orphans_removed = 0

    def candidates(self, state: TieredPartition) -> list[RemoteSegment]:
        """Remote-only segments past retention.ms / retention.bytes (whole log), or below a
        log start offset raised by DeleteRecords."""
        log_, config = state.log, state.log.config
        now = self.clock.milliseconds()
        remote_only = [s for s in state.committed() if s.end_offset < log_.log_start_offset]
        total = sum(s.size_bytes for s in remote_only) + log_.size
        start = state.manifest.log_start_offset if state.manifest else 0
        doomed = []
        for segment in remote_only:
            below_start = segment.end_offset < start
            too_old = (
                config.delete
                and config.retention_ms >= 0
                and (now - segment.max_timestamp > config.retention_ms)
            )
            too_big = (
                config.delete
                and config.retention_bytes >= 0
                and (total - segment.size_bytes >= config.retention_bytes)
            )
            if not (below_start or too_old or too_big):
                break
            doomed.append(segment)
            total -= segment.size_bytes
        return doomed

    def delete(
        self, state: TieredPartition, doomed: list[RemoteSegment], epoch: int
    ) -> mf.Manifest:
        """Delete ``doomed`` (from ``candidates``) one by one, committing as ``epoch``.
        Returns the stored manifest (also assigned to ``state.manifest``)."""
        manifest = state.manifest
        assert manifest is not None
        for segment in doomed:
            marked = dataclasses.replace(
                mf.mark(manifest, segment.segment_id, SegmentState.DELETE_STARTED),
                leader_epoch=epoch,
            )
            manifest = self.store.commit(state.topic, state.partition, marked, manifest.version)
            state.manifest = manifest
            self._delete_segment_objects(segment)
            with state.readers_lock:
                state.readers.pop(segment.segment_id, None)
            dropped = mf.with_log_start_offset(
                mf.without(manifest, segment.segment_id), segment.end_offset + 1
            )
            manifest = self.store.commit(state.topic, state.partition, dropped, manifest.version)
            state.manifest = manifest
            self.deleted_segments += 1
            log.info(
                "%s: remote retention deleted segment %d-%d",
                state.name,
                segment.base_offset,
                segment.end_offset,
            )
        return manifest

    def raise_log_start(self, state: TieredPartition, offset: int) -> None:
        """Commit the remote log start ``offset`` (DeleteRecords); the segments wholly
        below it are ``candidates`` from then on."""
        manifest = state.manifest or self.store.read_manifest(state.topic, state.partition)
        raised = dataclasses.replace(
            mf.with_log_start_offset(manifest, offset), leader_epoch=state.leader_epoch()
        )
        state.manifest = self.store.commit(state.topic, state.partition, raised, manifest.version)

    def _delete_segment_objects(self, segment: RemoteSegment) -> None:
        """Every object of one remote segment and what is cached of it. A decoded
        ``.txnindex`` stays in its LRU until evicted: a segment id is never reused, so
        nothing asks for it again."""
        self.store.delete_segment(segment)
        self.cache.remove_segment(segment.segment_id)

    def delete_partition_data(self, topic: str, topic_id: uuid.UUID, partition: int) -> None:
        """Every object of a deleted topic's partition, then its manifest; nothing when the
        manifest already belongs to a newer topic of the same name."""
        manifest = self.store.read_manifest(topic, partition)
        if manifest.topic_id not in (mf.ZERO_UUID, topic_id):
            return
        for segment in manifest.segments:
            self._delete_segment_objects(segment)
        for name in self.store.list_objects(topic, partition):
            if name != mf.MANIFEST_NAME:
                self.store.delete_object(topic, partition, name)
        self.store.delete_object(topic, partition, mf.MANIFEST_NAME)
        log.info("%s-%d: deleted the remote data of the deleted topic", topic, partition)

    def discard_previous_topic(self, state: TieredPartition, manifest: mf.Manifest) -> mf.Manifest:
        """The manifest belongs to a deleted topic of the same name (another topic id):
        delete its objects, then the manifest, and start the new topic empty (KIP-405
        deletes a topic's remote data with it). Until then ``state.manifest`` is unset, so
        nothing of the new log counts as remote — without this, local retention took the
        old manifest's end offset as proof that the new topic's segments were uploaded.
        A crash half-way is finished by the next cycle: the old manifest is still there."""
        log.warning(
            "%s: remote data of a deleted topic with the same name (topic id %s, this one "
            "is %s): deleting it",
            state.name,
            manifest.topic_id,
            state.topic_id,
        )
        with state.readers_lock:
            state.readers.clear()
        self.delete_partition_data(state.topic, manifest.topic_id, state.partition)
        return self.store.read_manifest(state.topic, state.partition)

    def remove_orphans(self, state: TieredPartition, epoch: int) -> None:
        """Objects no manifest entry names: interrupted uploads, left-over temp files.
        Runs on the worker thread, so no upload of this broker is in flight meanwhile."""
        manifest = state.manifest
        assert manifest is not None
        # Entries a crash left half-way (DELETE_STARTED) finish their deletion, as
        # ``delete`` would have: objects, then the entry, and the log start moves past it.
        # Deleting the objects alone left the entry in the manifest for ever, and the
        # remote log start never advanced over it.
        for segment in manifest.segments:
            if segment.state is SegmentState.DELETE_STARTED:
                self._delete_segment_objects(segment)
                dropped = dataclasses.replace(
                    mf.with_log_start_offset(
                        mf.without(manifest, segment.segment_id), segment.end_offset + 1
                    ),
                    leader_epoch=epoch,
                )
                manifest = self.store.commit(
                    state.topic, state.partition, dropped, manifest.version
                )
                state.manifest = manifest
        names = self.store.list_objects(state.topic, state.partition)
        newer = mf.newer_versions(manifest, names)
        if newer:
            # A commit this manifest does not know (its writer died before moving the
            # pointer): objects it names look orphaned from here. Nothing is deleted until
            # a read sees it (the next commit moves the pointer).
            log.warning(
                "%s: manifest version %d exists beside the %d read; orphan cleanup waits",
                state.name,
                newer[-1],
                manifest.version,
            )
            return
        for name in mf.orphaned_objects(manifest, names):
            self.store.delete_object(state.topic, state.partition, name)
            self.orphans_removed += 1
            log.info("%s: removed orphaned remote object %s", state.name, name)
