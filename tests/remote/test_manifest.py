"""tierlog.remote.manifest: JSON round trips, validation naming the file, pure helpers."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.remote import manifest as mf
from tierlog.remote import manifest_json as mj
from tierlog.remote.api import CorruptManifestError, RemoteSegment, SegmentPart, SegmentState

WHERE = "s3://bucket/tiered/orders-3/manifest.json"
TOPIC_ID = uuid.UUID("6f1c9f5e-0d1b-4c35-9a3f-1d2e3f405162")
COPY_STARTED = SegmentState.COPY_STARTED
FINISHED = SegmentState.COPY_FINISHED
DELETING = SegmentState.DELETE_STARTED


def seg(
    base: int,
    end: int,
    state: SegmentState = FINISHED,
    *,
    segment_id: str | None = None,
    max_timestamp: int = 1000,
    epochs: tuple[tuple[int, int], ...] | None = None,
    topic_id: uuid.UUID = TOPIC_ID,
) -> RemoteSegment:
    return RemoteSegment(
        topic="orders",
        partition=3,
        topic_id=topic_id,
        base_offset=base,
        end_offset=end,
        segment_id=segment_id or f"seg-{base}-{end}-{state.name.lower()}",
        size_bytes=100 * (end - base + 1),
        max_timestamp=max_timestamp,
        first_batch_timestamp=max_timestamp - 10,
        leader_epochs=((0, base),) if epochs is None else epochs,
        state=state,
        created_ms=1_700_000_000_000 + base,
    )


def manifest(*segments: RemoteSegment, **fields: Any) -> mf.Manifest:
    base = mf.Manifest("orders", 3, TOPIC_ID, leader_epoch=4, version=7, segments=segments)
    return dataclasses.replace(base, **fields)


SAMPLE = manifest(
    seg(0, 99, DELETING),
    seg(100, 199, epochs=((0, 100), (2, 150))),
    seg(200, 299),
    seg(200, 299, COPY_STARTED, segment_id="retry-of-200"),
    seg(350, 420, max_timestamp=5000),
    log_start_offset=120,
)


# -- round trips ------------------------------------------------------------------------------


def test_round_trip_keeps_every_field() -> None:
    data = mj.encode(SAMPLE)
    assert mj.decode(data, WHERE) == SAMPLE
    assert mj.encode(mj.decode(data, WHERE)) == data  # stable bytes


def test_json_is_self_describing() -> None:
    doc = json.loads(mj.encode(SAMPLE))
    assert doc["format"] == "tierlog-remote-manifest"
    # Segments whose parts are objects of their own: format 1, which older readers read.
    assert doc["format_version"] == mf.LEGACY_FORMAT_VERSION == 1
    assert list(doc) == sorted(doc)  # stable key order
    first = doc["segments"][1]
    assert first["state"] == "COPY_FINISHED"
    assert first["leader_epochs"] == [[0, 100], [2, 150]]
    assert first["objects"] == {
        "log": f"00000000000000000100-{first['segment_id']}.log",
        "index": f"00000000000000000100-{first['segment_id']}.index",
        "timeindex": f"00000000000000000100-{first['segment_id']}.timeindex",
    }


def test_unknown_fields_are_ignored_within_a_format_version() -> None:
    doc = json.loads(mj.encode(SAMPLE))
    doc["written_by"] = "tierlog 9"
    doc["segments"][0]["checksum"] = "abc"
    assert mj.decode(json.dumps(doc).encode(), WHERE) == SAMPLE


def test_aux_state_objects_are_listed_apart_so_older_readers_still_decode() -> None:
    with_aux = dataclasses.replace(seg(100, 199, segment_id="s1"), has_aux_state=True)
    m = manifest(seg(0, 99), with_aux)
    doc = json.loads(mj.encode(m))
    assert "aux_objects" not in doc["segments"][0]
    assert doc["segments"][1]["aux_objects"] == {
        "producer_snapshot": "00000000000000000100-s1.snapshot",
        "leader_epoch_checkpoint": "00000000000000000100-s1.leader-epoch-checkpoint",
    }
    # ``objects`` keeps the three names a reader without aux state checks exactly.
    assert doc["segments"][1]["objects"] == mf.object_names(with_aux)
    assert mj.decode(mj.encode(m), WHERE) == m
    assert mf.parse_object_name("00000000000000000100-s1.leader-epoch-checkpoint") == (
        100,
        "s1",
        "leader_epoch_checkpoint",
    )
    doc["segments"][1]["aux_objects"]["producer_snapshot"] = "elsewhere.snapshot"
    with pytest.raises(CorruptManifestError, match="aux_objects"):
        mj.decode(json.dumps(doc).encode(), WHERE)


def test_txn_index_object_is_its_own_field_and_follows_the_naming_rule() -> None:
    with_txn = dataclasses.replace(seg(100, 199, segment_id="s1"), has_txn_index=True)
    m = manifest(seg(0, 99), with_txn)
    doc = json.loads(mj.encode(m))
    assert "txn_index" not in doc["segments"][0]
    assert mf.txn_index_object_name(seg(0, 99)) is None
    assert doc["segments"][1]["txn_index"] == "00000000000000000100-s1.txnindex"
    # ``objects`` and ``aux_objects`` are unchanged, so older readers still decode it.
    assert doc["segments"][1]["objects"] == mf.object_names(with_txn)
    assert "aux_objects" not in doc["segments"][1]
    assert mj.decode(mj.encode(m), WHERE) == m
    assert mf.parse_object_name("00000000000000000100-s1.txnindex") == (100, "s1", "txn_index")
    # A manifest written before txn indexes existed decodes as segments without one.
    del doc["segments"][1]["txn_index"]
    assert not mj.decode(json.dumps(doc).encode(), WHERE).segments[1].has_txn_index
    doc["segments"][1]["txn_index"] = "00000000000000000100-s2.txnindex"
    with pytest.raises(CorruptManifestError, match="txn_index"):
        mj.decode(json.dumps(doc).encode(), WHERE)


def test_txn_index_of_a_known_segment_is_not_an_orphan() -> None:
    known = dataclasses.replace(seg(100, 199, segment_id="s1"), has_txn_index=True)
    names = ["00000000000000000100-s1.txnindex", "00000000000000000100-gone.txnindex"]
    assert mf.orphaned_objects(manifest(known), names) == ["00000000000000000100-gone.txnindex"]


def test_empty_manifest_round_trips() -> None:
    empty = mf.empty("orders", 3)
    assert empty.version == 0 and empty.topic_id == mf.ZERO_UUID
    assert mj.decode(mj.encode(empty), WHERE) == empty


@st.composite
def manifests(draw: st.DrawFn) -> mf.Manifest:
    """Valid manifests: disjoint committed ranges with gaps, plus retried uploads
    (COPY_STARTED duplicates of a range) and segments being deleted."""
    topic = draw(st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,20}", fullmatch=True))
    partition = draw(st.integers(0, 10_000))
    topic_id = uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))
    segments: list[RemoteSegment] = []
    base = draw(st.integers(0, 2**40))
    for n in range(draw(st.integers(0, 8))):
        end = base + draw(st.integers(0, 10_000))
        split = draw(st.integers(base, end))
        epochs: tuple[tuple[int, int], ...] = ((draw(st.integers(0, 5)), base),)
        if split > base:
            epochs += ((epochs[0][0] + draw(st.integers(1, 3)), split),)
        segments.append(
            RemoteSegment(
                topic=topic,
                partition=partition,
                topic_id=topic_id,
                base_offset=base,
                end_offset=end,
                segment_id=f"{uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))}-{n}",
                size_bytes=draw(st.integers(0, 2**33)),
                max_timestamp=draw(st.integers(-1, 2**50)),
                first_batch_timestamp=draw(st.integers(-1, 2**50)),
                leader_epochs=epochs,
                state=draw(st.sampled_from(list(SegmentState))),
                created_ms=draw(st.integers(0, 2**45)),
                has_aux_state=draw(st.booleans()),
                has_txn_index=draw(st.booleans()),
            )
        )
        if draw(st.booleans()):
            retry = dataclasses.replace(
                segments[-1], segment_id=f"retry-{n}", state=SegmentState.COPY_STARTED
            )
            segments.append(retry)
        base = end + 1 + draw(st.integers(0, 1000))
    return mf.Manifest(
        topic=topic,
        partition=partition,
        topic_id=topic_id,
        leader_epoch=draw(st.integers(-1, 2**31 - 1)),
        version=draw(st.integers(0, 2**40)),
        log_start_offset=draw(st.integers(0, 2**41)),
        segments=tuple(segments),
    )


@settings(max_examples=150, deadline=None)
@given(manifests())
def test_property_round_trip(m: mf.Manifest) -> None:
    data = mj.encode(m)
    assert mj.decode(data, WHERE) == m
    assert mj.encode(mj.decode(data, WHERE)) == data


def test_a_commit_encodes_only_the_segments_it_has_not_encoded_before() -> None:
    """Issue 26, item 4: every commit rewrites the whole manifest; each segment's entry is
    encoded once per value, so a growing manifest costs a join, not n re-encodings."""
    segments = [seg(i * 100, i * 100 + 99) for i in range(50)]
    mj._segment_json.cache_clear()
    first = mj.encode(manifest(*segments))
    assert mj._segment_json.cache_info().misses == 50
    mj.encode(manifest(*segments, seg(5000, 5099)))
    assert mj._segment_json.cache_info().misses == 51  # only the new segment
    # A changed segment is a new value: its entry follows the change.
    deleting = dataclasses.replace(segments[0], state=DELETING)
    assert mj.decode(mj.encode(manifest(deleting, *segments[1:])), WHERE).segments[0].state is (
        DELETING
    )
    # The bytes are those of one compact, sorted json.dumps of the whole document.
    assert (
        first
        == (json.dumps(json.loads(first), sort_keys=True, separators=(",", ":")) + "\n").encode()
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**65), 2**65) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_property_mutated_documents_decode_or_name_the_file(data: st.DataObject) -> None:
    """Replacing any field with any JSON value gives a valid manifest or a
    CorruptManifestError naming the file; nothing else escapes."""
    doc = json.loads(mj.encode(SAMPLE))
    target: dict[str, Any] = doc
    if data.draw(st.booleans()):
        target = doc["segments"][data.draw(st.integers(0, len(doc["segments"]) - 1))]
    key = data.draw(st.sampled_from(sorted(target)))
    target[key] = data.draw(json_values)
    try:
        mj.decode(json.dumps(doc).encode(), WHERE)
    except CorruptManifestError as exc:
        assert str(exc).startswith(WHERE + ": ")
        assert exc.where == WHERE


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_property_arbitrary_bytes_raise_only_corrupt_manifest(data: bytes) -> None:
    try:
        mj.decode(data, WHERE)
    except CorruptManifestError as exc:
        assert exc.where == WHERE


# -- every corruption names the file ---------------------------------------------------------

Mutation = Callable[[dict[str, Any]], object]


def _set(key: str, value: object, segment: int | None = None) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        target = doc if segment is None else doc["segments"][segment]
        target[key] = value

    return mutate


def _delete(key: str, segment: int | None = None) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        del (doc if segment is None else doc["segments"][segment])[key]

    return mutate


def _swap_first_two(doc: dict[str, Any]) -> None:
    doc["segments"][0], doc["segments"][1] = doc["segments"][1], doc["segments"][0]


def _duplicate_id(doc: dict[str, Any]) -> None:
    doc["segments"][2]["segment_id"] = doc["segments"][1]["segment_id"]
    doc["segments"][2]["objects"] = {
        k: v.replace("00000000000000000100", "00000000000000000200")
        for k, v in doc["segments"][1]["objects"].items()
    }


def _overlap(doc: dict[str, Any]) -> None:
    doc["segments"][4]["base_offset"] = 250  # into the committed [200, 299]
    doc["segments"][4]["objects"] = {
        k: v.replace("00000000000000000350", "00000000000000000250")
        for k, v in doc["segments"][4]["objects"].items()
    }
    doc["segments"][4]["leader_epochs"] = [[0, 250]]


CORRUPTIONS: dict[str, tuple[Mutation | bytes, str]] = {
    "not json": (b"{not json", "not valid UTF-8 JSON"),
    "truncated": (mj.encode(SAMPLE)[:-40], "not valid UTF-8 JSON"),
    "not utf-8": (b'{"format": "\xff"}', "not valid UTF-8 JSON"),
    "empty file": (b"", "not valid UTF-8 JSON"),
    "top level list": (b"[]", "top level is not a JSON object"),
    "wrong format": (_set("format", "parquet"), "field 'format'"),
    "newer format": (_set("format_version", 3), "newer than this reader"),
    "format version as string": (_set("format_version", "1"), "must be an integer"),
    "missing topic": (_delete("topic"), "field 'topic' must be a string"),
    "path in topic": (_set("topic", "../etc"), "illegal topic name"),
    "negative partition": (_set("partition", -1), "field 'partition' is -1"),
    "bool partition": (_set("partition", True), "must be an integer"),
    "bad topic id": (_set("topic_id", "nope"), "badly formed"),
    "negative version": (_set("version", -1), "field 'version'"),
    "float log start": (_set("log_start_offset", 1.5), "must be an integer"),
    "segments not a list": (_set("segments", {}), "'segments' must be a list"),
    "segment not an object": (_set("segments", [1]), "segments[0] is not an object"),
    "missing base offset": (_delete("base_offset", 1), "missing field 'base_offset'"),
    "end before base": (_set("end_offset", 10, 1), "field 'end_offset' is 10, below 100"),
    "unknown state": (_set("state", "UPLOADED", 1), "unknown state 'UPLOADED'"),
    "path in segment id": (_set("segment_id", "../x", 1), "illegal segment_id"),
    "epoch pair malformed": (_set("leader_epochs", [[1]], 1), "not an [epoch, offset] pair"),
    "epoch outside segment": (_set("leader_epochs", [[1, 5]], 1), "outside [100, 199]"),
    "epochs not increasing": (
        _set("leader_epochs", [[2, 100], [1, 150]], 1),
        "must increase",
    ),
    "objects renamed": (_set("objects", {"log": "x.log"}, 1), "do not follow the naming rule"),
    "unsorted segments": (_swap_first_two, "not sorted by base offset"),
    "duplicate ids": (_duplicate_id, "appears twice"),
    "overlapping committed": (_overlap, "overlaps a committed segment ending at 299"),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corruption_is_reported_with_path_and_reason(case: str) -> None:
    mutation, reason = CORRUPTIONS[case]
    if isinstance(mutation, bytes):
        data = mutation
    else:
        doc = json.loads(mj.encode(SAMPLE))
        mutation(doc)
        data = json.dumps(doc).encode()
    with pytest.raises(CorruptManifestError) as info:
        mj.decode(data, WHERE)
    message = str(info.value)
    assert message.startswith(f"{WHERE}: corrupt remote manifest: ")
    assert reason in message, message
    assert info.value.where == WHERE
    assert not info.value.retriable


def test_encode_refuses_a_manifest_breaking_invariants() -> None:
    broken = manifest(seg(0, 99), seg(50, 149))
    with pytest.raises(ValueError, match="overlaps"):
        mj.encode(broken)


# -- helpers ----------------------------------------------------------------------------------


def test_with_segment_inserts_in_offset_order_and_replaces_by_id() -> None:
    m = manifest(seg(0, 99), seg(200, 299))
    m = mf.with_segment(m, seg(100, 199))
    assert [s.base_offset for s in m.segments] == [0, 100, 200]
    updated = dataclasses.replace(m.segments[1], size_bytes=1)
    m2 = mf.with_segment(m, updated)
    assert len(m2.segments) == 3 and m2.segments[1].size_bytes == 1
    assert m.segments[1].size_bytes != 1  # immutable: the original is unchanged


def test_with_segment_refuses_overlap_and_other_partitions() -> None:
    m = manifest(seg(0, 99))
    with pytest.raises(ValueError, match="overlaps"):
        mf.with_segment(m, seg(50, 150))
    # An upload in progress may cover committed offsets (a retry); it is not readable.
    assert len(mf.with_segment(m, seg(50, 150, COPY_STARTED)).segments) == 2
    other = dataclasses.replace(seg(100, 199), partition=4)
    with pytest.raises(ValueError, match="orders-4"):
        mf.with_segment(m, other)
    with pytest.raises(ValueError, match="topic id"):
        mf.with_segment(m, seg(100, 199, topic_id=uuid.uuid4()))


def test_first_segment_names_the_topic_id() -> None:
    m = mf.with_segment(mf.empty("orders", 3), seg(0, 9))
    assert m.topic_id == TOPIC_ID


def test_mark_follows_the_transition_table() -> None:
    m = mf.with_segment(manifest(), seg(0, 99, COPY_STARTED, segment_id="a"))
    m = mf.mark(m, "a", FINISHED)
    assert m.segments[0].state is FINISHED
    assert mf.mark(m, "a", FINISHED) == m  # retried transition: no-op
    with pytest.raises(ValueError, match="COPY_FINISHED -> COPY_STARTED"):
        mf.mark(m, "a", COPY_STARTED)
    m = mf.mark(m, "a", DELETING)
    with pytest.raises(ValueError, match="DELETE_STARTED -> COPY_FINISHED"):
        mf.mark(m, "a", FINISHED)
    with pytest.raises(KeyError):
        mf.mark(m, "nope", DELETING)
    assert mf.without(m, "a").segments == ()
    assert mf.without(mf.without(m, "a"), "a").segments == ()  # retried delete


def test_mark_refuses_committing_an_overlapping_retry() -> None:
    m = manifest(seg(0, 99), seg(0, 99, COPY_STARTED, segment_id="retry"))
    with pytest.raises(ValueError, match="overlaps"):
        mf.mark(m, "retry", FINISHED)


def test_offset_lookups_use_committed_segments_only() -> None:
    m = manifest(
        seg(0, 99, DELETING),
        seg(100, 199),
        seg(300, 399),
        seg(400, 499, COPY_STARTED),
    )
    assert [s.base_offset for s in mf.committed_segments(m)] == [100, 300]
    assert mf.segment_for_offset(m, 150) == m.segments[1]
    assert mf.segment_for_offset(m, 199) == m.segments[1]
    assert mf.segment_for_offset(m, 250) == m.segments[2]  # gap: the next segment
    assert mf.segment_for_offset(m, 5) == m.segments[1]  # deleting ones are skipped
    assert mf.segment_for_offset(m, 400) is None
    assert mf.end_offset(m) == 400
    assert mf.end_offset(manifest()) == mf.NO_OFFSET == -1
    assert mf.committed_size(m) == 200 * 100


def test_segments_for_timestamp() -> None:
    m = manifest(
        seg(0, 99, max_timestamp=100),
        seg(100, 199, max_timestamp=500),
        seg(200, 299, max_timestamp=300),
        seg(300, 399, COPY_STARTED, max_timestamp=900),
    )
    assert [s.base_offset for s in mf.segments_for_timestamp(m, 250)] == [100, 200]
    assert [s.base_offset for s in mf.segments_for_timestamp(m, 0)] == [0, 100, 200]
    assert mf.segments_for_timestamp(m, 501) == []
    later = mf.with_log_start_offset(m, 150)
    assert [s.base_offset for s in mf.segments_for_timestamp(later, 0)] == [100, 200]


def test_log_start_offset_only_moves_forward() -> None:
    m = mf.with_log_start_offset(manifest(), 50)
    assert m.log_start_offset == 50
    assert mf.with_log_start_offset(m, 10).log_start_offset == 50


def test_object_names_and_orphans() -> None:
    s = seg(42, 99, segment_id="abc-1")
    assert mf.object_names(s)["log"] == "00000000000000000042-abc-1.log"
    assert mf.parse_object_name("00000000000000000042-abc-1.timeindex") == (
        42,
        "abc-1",
        "timeindex",
    )
    assert mf.parse_object_name("manifest.json") is None
    names = [
        "manifest.json",
        *mf.object_names(s).values(),
        "00000000000000000100-gone.log",
        "manifest.json.tmp-1f2e",
    ]
    m = manifest(s)
    assert mf.orphaned_objects(m, names) == [
        "00000000000000000100-gone.log",
        "manifest.json.tmp-1f2e",
    ]
    with pytest.raises(ValueError):
        mf.object_name(1, "a/b", "log")
    with pytest.raises(ValueError):
        mf.partition_dir("..", 0)


def test_segment_leader_epochs_from_cache_entries() -> None:
    entries = [(0, 0), (2, 150), (3, 180), (5, 400)]
    assert mf.segment_leader_epochs(entries, 100, 199) == ((0, 100), (2, 150), (3, 180))
    assert mf.segment_leader_epochs(entries, 150, 170) == ((2, 150),)
    assert mf.segment_leader_epochs(entries, 200, 300) == ((3, 200),)
    assert mf.segment_leader_epochs([], 0, 10) == ()


# -- parts, versions and the pointer (issues 20.7, 20.13, 24) ---------------------------------


def with_parts(segment: RemoteSegment, *, single: bool = False) -> RemoteSegment:
    """``segment`` with recorded parts: each its own object, or all in one ``.segment``."""
    one = f"{segment.base_offset:020d}-{segment.segment_id}.segment"
    parts, offset = [], 0
    for n, kind in enumerate(mf.part_kinds(segment)):
        size = segment.size_bytes if kind == "log" else 12 * (n + 1)
        name = one if single else mf.object_name(segment.base_offset, segment.segment_id, kind)
        parts.append(SegmentPart(kind, name, offset if single else 0, size, 1000 + n))
        offset += size
    return dataclasses.replace(segment, parts=tuple(parts))


def test_parts_of_own_objects_round_trip_as_format_1() -> None:
    m = manifest(with_parts(seg(0, 99)), with_parts(seg(100, 199)))
    data = mj.encode(m)
    doc = json.loads(data)
    assert doc["format_version"] == 1
    entry = doc["segments"][0]
    assert entry["objects"]["log"] == entry["parts"]["log"]["object"]
    assert entry["parts"]["log"] == {
        "object": "00000000000000000000-seg-0-99-copy_finished.log",
        "offset": 0,
        "size": 10000,
        "crc32c": 1000,
    }
    back = mj.decode(data, WHERE)
    assert back == m
    assert back.segments[0].part("index") == m.segments[0].parts[1]


def test_a_single_object_layout_is_format_2_and_read_back() -> None:
    """The layout of issue 24's next step: one object, parts at offsets, no ``objects``.
    This reader reads it already, so writing it needs no second migration."""
    m = manifest(with_parts(seg(0, 99), single=True), with_parts(seg(100, 199)))
    doc = json.loads(mj.encode(m))
    assert doc["format_version"] == 2
    assert "objects" not in doc["segments"][0] and "objects" in doc["segments"][1]
    assert doc["segments"][0]["parts"]["index"]["offset"] == 10000
    back = mj.decode(mj.encode(m), WHERE)
    assert back == m
    assert back.format_version == 2
    index = mf.segment_part(back.segments[0], "index")
    assert (index.object, index.offset) == (
        "00000000000000000000-seg-0-99-copy_finished.segment",
        10000,
    )


def test_a_manifest_without_parts_still_reads_and_names_its_objects() -> None:
    """Manifests written before parts were recorded: no checksums, names by the rule."""
    doc = json.loads(mj.encode(SAMPLE))
    assert all("parts" not in entry for entry in doc["segments"])
    old = mj.decode(json.dumps(doc).encode(), WHERE)
    part = mf.segment_part(old.segments[1], "timeindex")
    assert part == SegmentPart(
        "timeindex", "00000000000000000100-seg-100-199-copy_finished.timeindex", 0, -1, None
    )
    assert mf.segment_part(old.segments[1], "log").size == old.segments[1].size_bytes


def _parts_doc(mutate: Callable[[dict[str, Any]], None]) -> bytes:
    doc = json.loads(mj.encode(manifest(with_parts(seg(0, 99)))))
    mutate(doc["segments"][0])
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda e: e["parts"].pop("index"), "are not the segment's kinds"),
        (lambda e: e["parts"]["log"].update(object="../other.log"), "is not this segment's"),
        (lambda e: e["parts"]["log"].update(size=5), "is not size_bytes"),
        (lambda e: e["parts"]["index"].update(crc32c=1 << 33), "not a 32-bit value"),
        (lambda e: e["parts"]["index"].update(offset=-1), "below 0"),
        (lambda e: e["parts"]["index"].update(offset=7), "parts are not the objects"),
    ],
)
def test_bad_parts_are_refused(mutate: Callable[[dict[str, Any]], None], reason: str) -> None:
    with pytest.raises(CorruptManifestError, match=reason):
        mj.decode(_parts_doc(mutate), WHERE)


def test_pointer_round_trip_and_torn_reads_are_refused() -> None:
    data = mj.encode(SAMPLE)
    pointer = mj.pointer_to(7, data)
    assert pointer.object == "manifest-00000000000000000007.json"
    encoded = mj.encode_pointer(pointer)
    assert mj.decode_stored(encoded, WHERE) == pointer
    mj.check_version_bytes(data, pointer, WHERE)
    with pytest.raises(CorruptManifestError, match="the pointer says"):
        mj.check_version_bytes(data[:-1] + b" ", pointer, WHERE)
    # What a reader sees of a pointer overwritten in place (HDFS): empty, or any prefix.
    for cut in range(len(encoded) - 1):
        with pytest.raises(CorruptManifestError):
            mj.decode_stored(encoded[:cut], WHERE)
    # A whole manifest in manifest.json (written before versions) still reads.
    assert mj.decode_stored(data, WHERE) == SAMPLE


def test_manifest_versions_are_kept_by_the_orphan_scan_until_far_behind() -> None:
    m = manifest(seg(0, 99), version=20)
    names = [mf.version_object_name(v) for v in (3, 11, 12, 19, 20, 21)] + [mf.MANIFEST_NAME]
    assert mf.orphaned_objects(m, names) == [mf.version_object_name(3), mf.version_object_name(11)]
    assert mf.newer_versions(m, names) == [21]
    assert mf.parse_version_object_name("manifest-00000000000000000020.json") == 20
    assert mf.parse_version_object_name("manifest-20.json") is None
