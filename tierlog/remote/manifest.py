"""The per-partition remote manifest: its data type, JSON format and pure helpers (sans-I/O).

The manifest is the one source of truth for what a partition holds in the remote tier. It
lives next to the segment objects, ``<root>/<topic>-<partition>/manifest.json``, and Spark,
tools and humans read it without a broker, so the file describes itself. Nothing here does
I/O; ``tierlog.remote.fsspec_storage`` reads and writes it.

Object layout under a remote root (any fsspec URL)::

    <root>/<topic>-<partition>/manifest.json
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.log        the local .log
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.index      as-is (Kafka's
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.timeindex  byte formats)
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.snapshot   producer state
    <root>/<topic>-<partition>/<...>.leader-epoch-checkpoint    and epochs at its end
    <root>/<topic>-<partition>/<base_offset:020d>-<segment_id>.txnindex   aborted txns
                                                       (KIP-98; only when it has any)

JSON format, version 1: one UTF-8 JSON object with sorted keys, written compactly on one
line (pretty-printed and annotated here; ``jq . manifest.json`` shows it so)::

    {
      "format": "tierlog-remote-manifest",
      "format_version": 1,
      "leader_epoch": 3,               leader epoch of the last writer (fencing)
      "log_start_offset": 0,           remote log start: retention, DeleteRecords
      "partition": 0,
      "segments": [                    sorted by base_offset
        {
          "aux_objects": {             KIP-405 auxiliary state: the producer snapshot and
            "leader_epoch_checkpoint": "00000000000000000000-0c7a...-4f1e.leader-epoch-checkpoint",
            "producer_snapshot": "00000000000000000000-0c7a...-4f1e.snapshot"
          },                           leader epochs at the segment's end; absent before
          "base_offset": 0,
          "created_ms": 1700000001000, when the upload attempt started
          "end_offset": 99,            last offset, inclusive
          "first_batch_timestamp": 1700000000000,
          "leader_epochs": [[0, 0], [3, 50]],   [epoch, start offset] pairs
          "max_timestamp": 1700000000999,       -1: no timestamps
          "objects": {                 object names, relative to the manifest's directory
            "index": "00000000000000000000-0c7a...-4f1e.index",
            "log": "00000000000000000000-0c7a...-4f1e.log",
            "timeindex": "00000000000000000000-0c7a...-4f1e.timeindex"
          },
          "segment_id": "0c7a...-4f1e",  a UUID per upload attempt
          "size_bytes": 10240,         size of the .log object
          "state": "COPY_FINISHED",    COPY_STARTED | COPY_FINISHED | DELETE_STARTED
          "txn_index": "00000000000000000000-0c7a...-4f1e.txnindex"
                                       the aborted-transaction index (Kafka's .txnindex);
                                       absent when the segment has none (no aborted
                                       transaction's marker in it, or uploaded before)
        }
      ],
      "topic": "orders",
      "topic_id": "6f1c9f5e-...",      UUID; all zeros when unknown
      "version": 12                    compare-and-set counter, +1 per commit
    }

A reader uses only COPY_FINISHED segments at or above ``log_start_offset``; COPY_FINISHED
segments never overlap, gaps between them are allowed (compaction, transactions).
Versioning: fields may be added within a format version (readers ignore unknown keys);
any change in meaning raises ``format_version``, and a reader refuses a version newer than
it knows, so an old Spark job fails loudly instead of misreading.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tierlog.remote.api import TRANSITIONS, CorruptManifestError, RemoteSegment, SegmentState

FORMAT = "tierlog-remote-manifest"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
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
}

# Kafka's legal topic names (Topic.validate); they become directory names, so this also
# keeps a manifest from pointing outside its root. Segment ids become object names.
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_SEGMENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_OBJECT = re.compile(
    r"(\d{20})-([A-Za-z0-9_-]{1,64})\."
    r"(log|index|timeindex|snapshot|leader-epoch-checkpoint|txnindex)"
)


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
    format_version: int = FORMAT_VERSION


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
    if not _SEGMENT_ID.fullmatch(segment_id):
        raise ValueError(f"illegal segment id {segment_id!r}")
    suffix = SUFFIXES.get(kind) or AUX_SUFFIXES.get(kind) or TXN_INDEX_SUFFIXES[kind]
    return f"{base_offset:020d}-{segment_id}{suffix}"


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


def orphaned_objects(manifest: Manifest, names: Iterable[str]) -> list[str]:
    """Names from ``list_objects`` that no manifest entry accounts for: segment objects of
    unknown segment ids (interrupted uploads) and anything else but the manifest itself
    (left-over temp files). Uploads in flight are the caller's to exclude."""
    known = {seg.segment_id for seg in manifest.segments}
    out = []
    for name in names:
        if name == MANIFEST_NAME:
            continue
        parsed = parse_object_name(name)
        if parsed is None or parsed[1] not in known:
            out.append(name)
    return sorted(out)


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
    problem = _invariant_problem(out)
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
    return [s for s in manifest.segments if s.state is SegmentState.COPY_FINISHED]


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
    committed = committed_segments(manifest)
    n = bisect.bisect_left([s.end_offset for s in committed], offset)
    return committed[n] if n < len(committed) else None


def end_offset(manifest: Manifest) -> int:
    """The offset after the last committed one, or ``NO_OFFSET`` (-1) when none is."""
    committed = committed_segments(manifest)
    return committed[-1].end_offset + 1 if committed else NO_OFFSET


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


def _invariant_problem(manifest: Manifest) -> str | None:
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


# -- JSON ---------------------------------------------------------------------------------


def encode(manifest: Manifest) -> bytes:
    """The manifest as JSON (format above): sorted keys, compact, UTF-8, newline-terminated.

    Raises:
        ValueError: the manifest breaks an invariant (a bug in the caller: never written).
    """
    problem = _invariant_problem(manifest)
    if problem is not None:
        raise ValueError(problem)
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "topic": manifest.topic,
        "partition": manifest.partition,
        "topic_id": str(manifest.topic_id),
        "leader_epoch": manifest.leader_epoch,
        "version": manifest.version,
        "log_start_offset": manifest.log_start_offset,
        "segments": [
            {
                "segment_id": s.segment_id,
                "state": s.state.value,
                "base_offset": s.base_offset,
                "end_offset": s.end_offset,
                "size_bytes": s.size_bytes,
                "first_batch_timestamp": s.first_batch_timestamp,
                "max_timestamp": s.max_timestamp,
                "leader_epochs": [list(pair) for pair in s.leader_epochs],
                "created_ms": s.created_ms,
                "objects": object_names(s),
                # Only for segments that have it: readers ignore unknown keys.
                **({"aux_objects": aux_object_names(s)} if s.has_aux_state else {}),
                **({"txn_index": txn_index_object_name(s)} if s.has_txn_index else {}),
            }
            for s in manifest.segments
        ],
    }
    # Compact (about 330 bytes a segment): the whole file is rewritten on every commit.
    return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()


class _Bad(Exception):
    """A decoding problem; ``decode`` turns it into CorruptManifestError with ``where``."""


def _int(doc: dict[str, Any], key: str, minimum: int, ctx: str) -> int:
    if key not in doc:
        raise _Bad(f"{ctx}missing field {key!r}")
    value = doc[key]
    # bool is an int subclass in Python; JSON true/false is never an offset.
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Bad(f"{ctx}field {key!r} must be an integer, not {value!r}")
    if value < minimum:
        raise _Bad(f"{ctx}field {key!r} is {value}, below {minimum}")
    return value


def _str(doc: dict[str, Any], key: str, ctx: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str):
        raise _Bad(f"{ctx}field {key!r} must be a string, not {value!r}")
    return value


def _epochs(value: object, base: int, end: int, ctx: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, list):
        raise _Bad(f"{ctx}leader_epochs must be a list of [epoch, start_offset] pairs")
    out: list[tuple[int, int]] = []
    for pair in value:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in pair)
        ):
            raise _Bad(f"{ctx}leader_epochs entry {pair!r} is not an [epoch, offset] pair")
        epoch, start = pair
        if epoch < 0 or not base <= start <= end:
            raise _Bad(f"{ctx}leader_epochs entry {pair!r} is outside [{base}, {end}]")
        if out and (epoch <= out[-1][0] or start <= out[-1][1]):
            raise _Bad(f"{ctx}leader_epochs must increase in epoch and start offset")
        out.append((epoch, start))
    return tuple(out)


def _segment(doc: object, n: int, top: Manifest) -> RemoteSegment:
    if not isinstance(doc, dict):
        raise _Bad(f"segments[{n}] is not an object")
    ctx = f"segments[{n}]: "
    segment_id = _str(doc, "segment_id", ctx)
    if not _SEGMENT_ID.fullmatch(segment_id):
        raise _Bad(f"{ctx}illegal segment_id {segment_id!r}")
    ctx = f"segments[{n}] ({segment_id}): "
    try:
        state = SegmentState(_str(doc, "state", ctx))
    except ValueError:
        raise _Bad(f"{ctx}unknown state {doc['state']!r}") from None
    base = _int(doc, "base_offset", 0, ctx)
    end = _int(doc, "end_offset", base, ctx)
    segment = RemoteSegment(
        topic=top.topic,
        partition=top.partition,
        topic_id=top.topic_id,
        base_offset=base,
        end_offset=end,
        segment_id=segment_id,
        size_bytes=_int(doc, "size_bytes", 0, ctx),
        max_timestamp=_int(doc, "max_timestamp", -1, ctx),
        first_batch_timestamp=_int(doc, "first_batch_timestamp", -1, ctx),
        leader_epochs=_epochs(doc.get("leader_epochs"), base, end, ctx),
        state=state,
        created_ms=_int(doc, "created_ms", 0, ctx),
        has_aux_state="aux_objects" in doc,
        has_txn_index="txn_index" in doc,
    )
    if doc.get("objects") != object_names(segment):
        raise _Bad(f"{ctx}objects {doc.get('objects')!r} do not follow the naming rule")
    if segment.has_aux_state and doc["aux_objects"] != aux_object_names(segment):
        raise _Bad(f"{ctx}aux_objects {doc['aux_objects']!r} do not follow the naming rule")
    if segment.has_txn_index and doc["txn_index"] != txn_index_object_name(segment):
        raise _Bad(f"{ctx}txn_index {doc['txn_index']!r} does not follow the naming rule")
    return segment


def _decode(data: bytes) -> Manifest:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Bad(f"not valid UTF-8 JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise _Bad("top level is not a JSON object")
    if doc.get("format") != FORMAT:
        raise _Bad(f"field 'format' is {doc.get('format')!r}, expected {FORMAT!r}")
    format_version = _int(doc, "format_version", 1, "")
    if format_version > FORMAT_VERSION:
        raise _Bad(
            f"format_version {format_version} is newer than this reader's {FORMAT_VERSION}; "
            "upgrade tierlog"
        )
    topic = _str(doc, "topic", "")
    partition = _int(doc, "partition", 0, "")
    try:
        partition_dir(topic, partition)
        topic_id = uuid.UUID(_str(doc, "topic_id", ""))
    except ValueError as exc:
        raise _Bad(str(exc)) from None
    top = Manifest(
        topic=topic,
        partition=partition,
        topic_id=topic_id,
        leader_epoch=_int(doc, "leader_epoch", -1, ""),
        version=_int(doc, "version", 0, ""),
        log_start_offset=_int(doc, "log_start_offset", 0, ""),
        format_version=format_version,
    )
    segments = doc.get("segments")
    if not isinstance(segments, list):
        raise _Bad("field 'segments' must be a list")
    out = dataclasses.replace(
        top, segments=tuple(_segment(s, n, top) for n, s in enumerate(segments))
    )
    problem = _invariant_problem(out)
    if problem is not None:
        raise _Bad(problem)
    return out


def decode(data: bytes, where: str) -> Manifest:
    """Parse and validate a manifest read from ``where`` (its full path or URL).

    Raises:
        CorruptManifestError: anything wrong (JSON, format, versions, types, ranges,
            order, overlap, names); the message starts with ``where`` and says what.
    """
    try:
        return _decode(data)
    except _Bad as exc:
        raise CorruptManifestError(where, str(exc)) from None
