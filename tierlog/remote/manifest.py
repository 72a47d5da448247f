"""The per-partition remote manifest: its data type, JSON format and pure helpers (sans-I/O).

The manifest is the one source of truth for what a partition holds in the remote tier. It
lives next to the segment objects and Spark, tools and humans read it without a broker, so
the files describe themselves. Nothing here does I/O; ``tierlog.remote.fsspec_manifests``
reads and writes it.

Object layout under a remote root (any fsspec URL)::

    <root>/<topic>-<partition>/manifest.json             the pointer: which version is current
    <root>/<topic>-<partition>/manifest-<version:020d>.json   one immutable manifest per commit
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.segment    all of the below
                                                       in one object (issue 24), or:
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.log        the local .log
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.index      as-is (Kafka's
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.timeindex  byte formats)
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.snapshot   producer state
    <root>/<topic>-<partition>/<...>.leader-epoch-checkpoint    and epochs at its end
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.txnindex   aborted txns
                                                       (KIP-98; only when it has any)

Why versions and a pointer (issue 20, item 13). Stores differ in what a reader can see of
an object being written: S3, GCS and Azure make a PUT visible whole or not at all but have
no rename; ``file://`` has an atomic rename; HDFS through WebHDFS creates the file empty and
appends to it, so a file overwritten in place is readable half-written (1.4% of manifest
reads during offload were torn), and a writer killed mid-overwrite would leave the only copy
of the manifest destroyed. Rewriting one ``manifest.json`` in place is therefore wrong on
HDFS whatever the reader does. Retry-and-check alone detects torn reads but cannot undo a
torn write. So each commit writes a new object, ``manifest-<version>.json``, that nobody
reads until it is whole, created only if that version does not exist yet (the store's
create-exclusive: S3 ``If-None-Match: *``, a hard link on ``file://``, a rename that refuses
to overwrite on WebHDFS): that creation is the commit's compare-and-set. Then the small
pointer ``manifest.json`` names it, and readers read the pointer first, then the version it
names. The pointer is overwritten in place (atomic on object stores and ``file://``; on
HDFS it may be read half-written, which the reader detects, since a prefix of a JSON
object is never a JSON object, and retries; after a few tries it lists the directory and
takes the newest version, so even a pointer torn for good by a crash loses nothing).
The pointer records the version's size and CRC-32C, so a version read is checked too.

Per-object cost matters on both stores (HDFS: a NameNode round trip per object; S3: paid
per request), so the scheme adds one small request each way: two GETs per read (the
pointer, ~150 bytes, then the version; a read is checked against the size and CRC-32C the
pointer records, so a damaged version is noticed at the next read) and two PUTs per
commit; old versions are deleted in batches (``KEEP_VERSIONS`` behind the newest are kept
for readers that read the pointer just before a commit). Listing, which S3 bills at ten
times a GET and HDFS answers with every entry of the directory, is only the fallback.

A writer that died between the version and the pointer leaves the pointer one version
behind: readers see the state before that commit, which is a committed state; the next
commit finds the version taken, repairs the pointer and re-reads; the orphan scan, which
lists the directory anyway, refuses to run while a version newer than the one it read
exists, so it never deletes a newer commit's objects.

Compatibility: a ``manifest.json`` holding a whole manifest (written before versions) is
read as before, and the first commit replaces it with a pointer; readers older than
versions then refuse the pointer loudly (its ``format`` is not theirs) instead of taking
the partition for empty.

Segment parts and layouts (issue 24). Each segment entry lists its ``parts``: for each
kind (log, index, timeindex, producer_snapshot, leader_epoch_checkpoint, txn_index) the
object it is in, the offset and size inside that object, and its CRC-32C. Segments are
uploaded as ONE object each, ``<base_offset:020d>-<segment_id>.segment``: the log, then its
indexes and auxiliary state back to back (``PART_KINDS`` order), at growing offsets; such
an entry has no ``objects`` and the manifest is written as format 2 (older readers refuse
it with "upgrade tierlog"). Segments uploaded before, one object per part at offset 0 (the
names above), keep ``objects`` / ``aux_objects`` / ``txn_index`` too, and a manifest of
only those stays format 1. Readers follow ``parts`` only, so both layouts, and manifests
mixing them, read the same way.
Checksums: a part downloaded whole (an index, a snapshot, a whole ``.log``) is checked
against its CRC-32C; ranges of the ``.log`` are checked batch by batch (Kafka's own
CRC-32C per batch), before any byte is served (issue 20, item 7).

The JSON formats of a version object and of the pointer are in
``tierlog.remote.manifest_json``.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from crc32c import crc32c

from tierlog.remote.segments import (
    TRANSITIONS,
    RemoteSegment,
    SegmentPart,
    SegmentState,
)

FORMAT = "tierlog-remote-manifest"
# The newest format this reader reads; writers write the oldest that describes the content.
FORMAT_VERSION = 2
LEGACY_FORMAT_VERSION = 1  # every segment's parts are objects of their own
POINTER_FORMAT = "tierlog-remote-manifest-pointer"
POINTER_FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"  # the pointer (a whole manifest before versions)
# Versions kept behind the newest, for readers that read the pointer just before a commit
# (they re-read it when the version they want is gone); deleted in batches of this many.
KEEP_VERSIONS = 8
_VERSION_OBJECT = re.compile(r"manifest-(\d{20})\.json")
ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: no topic id known
NO_OFFSET = -1  # end_offset() of a manifest with no committed segment
SUFFIXES = {"log": ".log", "index": ".index", "timeindex": ".timeindex"}
# KIP-405's auxiliary state, beside segments that have it (``has_aux_state``).
AUX_SUFFIXES = {
    "producer_snapshot": ".snapshot",
    "leader_epoch_checkpoint": ".leader-epoch-checkpoint",
}
# KIP-98's aborted-transaction index, beside segments that have one (``has_txn_index``).
TXN_INDEX_KIND = "txn_index"
TXN_INDEX_SUFFIXES = {TXN_INDEX_KIND: ".txnindex"}
_KIND_OF_SUFFIX = {
    suffix[1:]: kind for kind, suffix in (SUFFIXES | AUX_SUFFIXES | TXN_INDEX_SUFFIXES).items()
} | {"segment": "segment"}

# Kafka's legal topic names (Topic.validate); they become directory names, so this also
# keeps a manifest from pointing outside its root. Segment ids become object names.
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
SEGMENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_OBJECT = re.compile(
    r"(\d{20})-([A-Za-z0-9_-]{1,64})\."
    r"(log|index|timeindex|snapshot|leader-epoch-checkpoint|txnindex|segment)"
)
# Every kind a segment may have, in the order a single object lays them out.
PART_KINDS = ("log", "index", "timeindex", *AUX_SUFFIXES, TXN_INDEX_KIND)
SINGLE_OBJECT_SUFFIX = ".segment"


@dataclass(frozen=True, slots=True)
class Manifest:
    """What one partition holds in the remote tier (immutable; helpers return copies).

    Attributes:
        topic, partition, topic_id: the partition (``topic_id`` all zeros when unknown).
        leader_epoch: epoch of the leader that wrote it last; lower epochs are fenced.
        version: compare-and-set counter; 0 means never written.
        log_start_offset: the remote log start offset; only moves forward.
        segments: every remote segment in any state, sorted by base offset.
        format_version: the JSON format version it was read from or will be written as.
    """

    topic: str
    partition: int
    topic_id: uuid.UUID = ZERO_UUID
    leader_epoch: int = -1
    version: int = 0
    log_start_offset: int = 0
    segments: tuple[RemoteSegment, ...] = ()
    # Informative only (not compared): the format it was read from.
    format_version: int = dataclasses.field(default=LEGACY_FORMAT_VERSION, compare=False)
    # Derived from ``segments`` once, when the manifest is made (``CommittedIndex``).
    committed: CommittedIndex = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "committed", CommittedIndex.of(self.segments))


@dataclass(frozen=True, slots=True)
class CommittedIndex:
    """The committed (COPY_FINISHED) segments of a manifest, indexed for the read path.

    Every remote fetch looks up the segment holding an offset, and every read_committed
    fetch of remote offsets walks the segments that have a ``.txnindex``. Built once per
    manifest snapshot (a manifest is immutable), these make both a bisection: done over
    the whole segment list per call, as before, a read_committed replay of a partition of
    125 segments spent ~10 ms of the event loop per fetch in building lists (issue 26,
    item 4: replay fell from 0.70 to 0.51 of the hot tier).

    Attributes:
        segments: the committed segments, by offset.
        ends: their end offsets, in the same order (bisection keys).
        txn_positions: the positions in ``segments`` of those with a ``.txnindex``.
    """

    segments: tuple[RemoteSegment, ...]
    ends: tuple[int, ...]
    txn_positions: tuple[int, ...]

    @classmethod
    def of(cls, segments: Iterable[RemoteSegment]) -> CommittedIndex:
        committed = tuple(s for s in segments if s.state is SegmentState.COPY_FINISHED)
        return cls(
            committed,
            tuple(s.end_offset for s in committed),
            tuple(n for n, s in enumerate(committed) if s.has_txn_index),
        )

    def position_for_offset(self, offset: int) -> int:
        """Position of the first segment whose end offset is >= ``offset`` (the number
        of segments when there is none)."""
        return bisect.bisect_left(self.ends, offset)


# -- names --------------------------------------------------------------------------------


def check_topic(topic: str) -> str:
    """Return ``topic`` if it is a legal Kafka topic name, else raise ValueError."""
    if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise ValueError(f"illegal topic name {topic!r}")
    return topic


def partition_dir(topic: str, partition: int) -> str:
    """``<topic>-<partition>``: the partition's directory under the remote root."""
    if partition < 0:
        raise ValueError(f"illegal partition {partition}")
    return f"{check_topic(topic)}-{partition}"


def object_name(base_offset: int, segment_id: str, kind: str) -> str:
    """``<base_offset:020d>-<segment_id><suffix>`` for kind log, index, timeindex,
    producer_snapshot (``.snapshot``), leader_epoch_checkpoint or txn_index
    (``.txnindex``)."""
    if not SEGMENT_ID.fullmatch(segment_id):
        raise ValueError(f"illegal segment id {segment_id!r}")
    suffix = SUFFIXES.get(kind) or AUX_SUFFIXES.get(kind) or TXN_INDEX_SUFFIXES[kind]
    return f"{base_offset:020d}-{segment_id}{suffix}"


def single_object_name(base_offset: int, segment_id: str) -> str:
    """``<base_offset:020d>-<segment_id>.segment``: a segment's one object (issue 24)."""
    return object_name(base_offset, segment_id, "log")[: -len(SUFFIXES["log"])] + (
        SINGLE_OBJECT_SUFFIX
    )


def object_names(segment: RemoteSegment) -> dict[str, str]:
    """The segment's three object names, keyed log / index / timeindex."""
    return {kind: object_name(segment.base_offset, segment.segment_id, kind) for kind in SUFFIXES}


def aux_object_names(segment: RemoteSegment) -> dict[str, str]:
    """The auxiliary state's object names (producer_snapshot, leader_epoch_checkpoint), {}
    when the segment has none. Kept apart from ``objects`` in the JSON, so readers that
    predate them (checking ``objects`` exactly) still read the manifest."""
    if not segment.has_aux_state:
        return {}
    return {
        kind: object_name(segment.base_offset, segment.segment_id, kind) for kind in AUX_SUFFIXES
    }


def txn_index_object_name(segment: RemoteSegment) -> str | None:
    """The aborted-transaction index's object name, None when the segment has none. A
    field of its own in the JSON (``txn_index``), so readers that predate it (checking
    ``objects`` and ``aux_objects`` exactly) still read the manifest."""
    if not segment.has_txn_index:
        return None
    return object_name(segment.base_offset, segment.segment_id, TXN_INDEX_KIND)


def parse_object_name(name: str) -> tuple[int, str, str] | None:
    """``(base_offset, segment_id, kind)`` of a segment object name, else None."""
    match = _OBJECT.fullmatch(name)
    if match is None:
        return None
    return int(match[1]), match[2], _KIND_OF_SUFFIX[match[3]]


def version_object_name(version: int) -> str:
    """``manifest-<version:020d>.json``: the immutable object of one manifest version."""
    if version < 1:
        raise ValueError(f"manifest versions start at 1, not {version}")
    return f"manifest-{version:020d}.json"


def parse_version_object_name(name: str) -> int | None:
    """The version a ``manifest-<version>.json`` name holds, else None."""
    match = _VERSION_OBJECT.fullmatch(name)
    return int(match[1]) if match else None


def newer_versions(manifest: Manifest, names: Iterable[str]) -> list[int]:
    """Versions above ``manifest``'s among listed object names: a commit the manifest read
    does not know (a pointer left behind by a writer that died after its version)."""
    found = (parse_version_object_name(name) for name in names)
    return sorted(v for v in found if v is not None and v > manifest.version)


def orphaned_objects(manifest: Manifest, names: Iterable[str]) -> list[str]:
    """Names from ``list_objects`` that no manifest entry accounts for: segment objects of
    unknown segment ids (interrupted uploads), manifest versions more than
    ``KEEP_VERSIONS`` behind ``manifest``'s, and anything else but the pointer (left-over
    temp files). Uploads in flight are the caller's to exclude, and so is a listing that
    shows versions newer than ``manifest`` (``newer_versions``): then ``manifest`` is not
    the newest, and objects it does not know may be committed."""
    known = {seg.segment_id for seg in manifest.segments}
    out = []
    for name in names:
        if name == MANIFEST_NAME:
            continue
        version = parse_version_object_name(name)
        if version is not None:
            if version < manifest.version - KEEP_VERSIONS:
                out.append(name)
            continue
        parsed = parse_object_name(name)
        if parsed is None or parsed[1] not in known:
            out.append(name)
    return sorted(out)


# -- parts --------------------------------------------------------------------------------


def part_kinds(segment: RemoteSegment) -> list[str]:
    """The kinds of part ``segment`` has: log, index, timeindex, then its auxiliary state
    and aborted-transaction index when it has them."""
    kinds = ["log", "index", "timeindex"]
    if segment.has_aux_state:
        kinds += list(AUX_SUFFIXES)
    if segment.has_txn_index:
        kinds.append(TXN_INDEX_KIND)
    return kinds


def segment_part(segment: RemoteSegment, kind: str) -> SegmentPart:
    """Where ``segment``'s part ``kind`` is: as recorded, or, for segments described
    before parts were, its own object named by the naming rule (size unknown: -1 for all
    but the log, no CRC).

    Raises:
        KeyError: the segment has no such part.
    """
    recorded = segment.part(kind)
    if recorded is not None:
        return recorded
    if kind not in part_kinds(segment):
        raise KeyError(f"segment {segment.segment_id} has no {kind} part")
    size = segment.size_bytes if kind == "log" else -1
    return SegmentPart(
        kind, object_name(segment.base_offset, segment.segment_id, kind), 0, size, None
    )


def stored_object_names(segment: RemoteSegment) -> set[str]:
    """The names of the objects that hold the segment's parts, in whichever layout it was
    uploaded (one ``.segment`` object, or one object per part)."""
    return {segment_part(segment, kind).object for kind in part_kinds(segment)}


def own_objects(segment: RemoteSegment) -> bool:
    """True when every part is an object of its own, named by the naming rule (the layout
    format-1 readers know)."""
    return all(
        part.offset == 0
        and part.object == object_name(segment.base_offset, segment.segment_id, part.kind)
        for part in segment.parts
    )


def part_crc(data: bytes | memoryview) -> int:
    """CRC-32C of a part's bytes, as recorded in ``SegmentPart.crc32c``."""
    return int(crc32c(data))


# -- pure helpers -------------------------------------------------------------------------


def empty(topic: str, partition: int, topic_id: uuid.UUID = ZERO_UUID) -> Manifest:
    """The manifest of a partition with nothing remote yet (version 0)."""
    partition_dir(topic, partition)
    return Manifest(topic, partition, topic_id)


def with_segment(manifest: Manifest, segment: RemoteSegment) -> Manifest:
    """Add ``segment``, or replace the entry with its ``segment_id``, keeping the order.

    An empty manifest without a topic id takes the segment's.

    Raises:
        ValueError: another partition's (or topic id's) segment, or a COPY_FINISHED
            segment overlapping another COPY_FINISHED one.
    """
    if (segment.topic, segment.partition) != (manifest.topic, manifest.partition):
        raise ValueError(
            f"segment of {segment.topic}-{segment.partition} added to the manifest of "
            f"{manifest.topic}-{manifest.partition}"
        )
    if manifest.topic_id == ZERO_UUID and not manifest.segments:
        # A partition's first segment names its topic id (read_manifest of a partition
        # never written cannot know it).
        manifest = dataclasses.replace(manifest, topic_id=segment.topic_id)
    rest = [s for s in manifest.segments if s.segment_id != segment.segment_id]
    keys = [s.base_offset for s in rest]
    rest.insert(bisect.bisect_right(keys, segment.base_offset), segment)
    out = dataclasses.replace(manifest, segments=tuple(rest))
    problem = invariant_problem(out)
    if problem is not None:
        raise ValueError(problem)
    return out


def mark(manifest: Manifest, segment_id: str, state: SegmentState) -> Manifest:
    """Move a segment to ``state`` (a no-op when it is there already).

    Raises:
        KeyError: no segment with that id.
        ValueError: a move ``TRANSITIONS`` does not allow, or one that would make two
            COPY_FINISHED segments overlap.
    """
    segment = _find(manifest, segment_id)
    if segment.state is state:
        return manifest
    if state not in TRANSITIONS[segment.state]:
        raise ValueError(
            f"segment {segment_id}: illegal transition {segment.state.name} -> {state.name}"
        )
    return with_segment(manifest, dataclasses.replace(segment, state=state))


def without(manifest: Manifest, segment_id: str) -> Manifest:
    """The manifest without the segment (unknown ids are ignored: deletes are retried)."""
    kept = tuple(s for s in manifest.segments if s.segment_id != segment_id)
    return dataclasses.replace(manifest, segments=kept)


def with_log_start_offset(manifest: Manifest, offset: int) -> Manifest:
    """Advance the remote log start offset (never backwards)."""
    if offset <= manifest.log_start_offset:
        return manifest
    return dataclasses.replace(manifest, log_start_offset=offset)


def committed_segments(manifest: Manifest) -> list[RemoteSegment]:
    """COPY_FINISHED segments, by offset: the only ones readers may use."""
    return list(manifest.committed.segments)


def leader_epoch_history(manifest: Manifest, below: int) -> list[tuple[int, int]]:
    """``(epoch, start offset)`` of every epoch the committed segments record starting
    below ``below``, in order: the remote tier's part of the leader-epoch cache. An epoch
    going on into the next segment is listed again at that segment's base; only its first
    start counts."""
    out: list[tuple[int, int]] = []
    for segment in committed_segments(manifest):
        for epoch, start in segment.leader_epochs:
            if start < below and (not out or epoch > out[-1][0]):
                out.append((epoch, start))
    return out


def segment_for_offset(manifest: Manifest, offset: int) -> RemoteSegment | None:
    """The first committed segment whose end offset is >= ``offset``: the one holding it,
    or the next one when ``offset`` falls in a gap. None past the remote end. The caller
    checks ``offset`` against ``log_start_offset``."""
    index = manifest.committed
    n = index.position_for_offset(offset)
    return index.segments[n] if n < len(index.segments) else None


def txn_index_segments_from(manifest: Manifest, offset: int) -> list[RemoteSegment]:
    """The committed segments with a ``.txnindex``, by offset, from the one holding
    ``offset`` (or the next one) on: what a read_committed fetch of remote offsets walks
    (segments without an index hold no aborted transaction to list)."""
    index = manifest.committed
    first = index.position_for_offset(offset)
    positions = index.txn_positions
    return [index.segments[n] for n in positions[bisect.bisect_left(positions, first) :]]


def end_offset(manifest: Manifest) -> int:
    """The offset after the last committed one, or ``NO_OFFSET`` (-1) when none is."""
    ends = manifest.committed.ends
    return ends[-1] + 1 if ends else NO_OFFSET


def start_offset(manifest: Manifest) -> int | None:
    """The first committed segment's base offset, None when none is committed (the
    manifest's ``log_start_offset`` may lie above it: the caller takes the larger)."""
    segments = manifest.committed.segments
    return segments[0].base_offset if segments else None


def segments_for_timestamp(manifest: Manifest, timestamp: int) -> list[RemoteSegment]:
    """Committed segments, by offset, that may hold a record at or after ``timestamp``
    (max timestamp >= it) and are not wholly below the log start: ListOffsets searches
    them in order and stops at the first hit."""
    return [
        s
        for s in committed_segments(manifest)
        if s.max_timestamp >= timestamp and s.end_offset >= manifest.log_start_offset
    ]


def committed_size(manifest: Manifest) -> int:
    """Bytes of committed segments (retention.bytes counts them with the local tier)."""
    return sum(s.size_bytes for s in committed_segments(manifest))


def segment_leader_epochs(
    entries: Iterable[tuple[int, int]], base_offset: int, end_offset: int
) -> tuple[tuple[int, int], ...]:
    """A segment's ``leader_epochs`` from leader-epoch-cache entries ``(epoch, start)``
    (sorted, as in ``leader-epoch-checkpoint``): the epochs in effect within
    ``[base_offset, end_offset]``, the first one clamped to ``base_offset`` (as Kafka's
    RemoteLogManager does when it copies a segment)."""
    out: list[tuple[int, int]] = []
    for epoch, start in entries:
        if start > end_offset:
            break
        if start <= base_offset:
            out = [(epoch, base_offset)]
        else:
            out.append((epoch, start))
    return tuple(out)


def _find(manifest: Manifest, segment_id: str) -> RemoteSegment:
    for segment in manifest.segments:
        if segment.segment_id == segment_id:
            return segment
    raise KeyError(f"no remote segment {segment_id} in {manifest.topic}-{manifest.partition}")


def invariant_problem(manifest: Manifest) -> str | None:
    """What breaks the manifest's invariants across segments, or None."""
    seen: set[str] = set()
    previous_base = -1
    finished_end = -1
    for seg in manifest.segments:
        name = f"segment {seg.segment_id}"
        if seg.segment_id in seen:
            return f"{name} appears twice"
        seen.add(seg.segment_id)
        if (seg.topic, seg.partition, seg.topic_id) != (
            manifest.topic,
            manifest.partition,
            manifest.topic_id,
        ):
            return f"{name} belongs to another partition or topic id"
        if seg.base_offset < previous_base:
            return f"{name}: segments are not sorted by base offset"
        previous_base = seg.base_offset
        if seg.state is SegmentState.COPY_FINISHED:
            if seg.base_offset <= finished_end:
                return (
                    f"{name} [{seg.base_offset}, {seg.end_offset}] overlaps a committed "
                    f"segment ending at {finished_end}"
                )
            finished_end = seg.end_offset
    return None
