"""tierlog.local.segment_patch: a damaged range of a closed segment is rewritten in place
with the same batches from a replica, and nothing that does not line up is accepted
(issue 10, item 2: repair from an in-sync replica)."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from tierlog.local import damage_marks
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.log import Log
from tierlog.local.scrubber import verify_segment_crc
from tierlog.local.segment_patch import (
    PatchRefused,
    accept_empty,
    apply_patch,
    check_patch,
    damaged_ranges,
)
from tierlog.records.header import iter_batches

from .conftest import LogFactory, make_batch
from .test_scrubber import fill, flip

SEGMENT_BYTES = 4000


def damaged_log(make_log: LogFactory, tmp_path: Path) -> tuple[Log, bytes]:
    """A log whose second segment has batch 3 flipped and marked; returns the log and
    that segment's intact bytes (what a replica holds)."""
    lg = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=200)
    fill(lg, 40)
    segment = lg.segments[1]
    intact = segment.path.read_bytes()
    position, _ = list(iter_batches(intact))[3]
    flip(segment.path, position + 100)
    for problem in verify_segment_crc(segment.path):
        segment.mark_damaged(problem.position, problem.end_position, problem.problem)
    return lg, intact


def replica_bytes(intact: bytes, position: int, end: int) -> bytes:
    return intact[position:end]


def test_ranges_name_the_offsets_between_the_intact_batches(
    make_log: LogFactory, tmp_path: Path
) -> None:
    lg, intact = damaged_log(make_log, tmp_path)
    batches = list(iter_batches(intact))
    (damaged,) = damaged_ranges(lg.segments)
    (p3, h3), (p4, h4) = batches[3], batches[4]
    assert (damaged.position, damaged.end) == (p3, p4)
    assert (damaged.first_offset, damaged.end_offset) == (h3.base_offset, h4.base_offset)
    assert "CRC-32C" in damaged.problem


def test_the_replicas_batches_repair_the_range_and_reads_work_again(
    make_log: LogFactory, tmp_path: Path
) -> None:
    lg, intact = damaged_log(make_log, tmp_path)
    (damaged,) = damaged_ranges(lg.segments)
    with pytest.raises(CorruptSegmentError):
        lg.read(damaged.first_offset, 1 << 20)
    damage_marks.save(lg.segments)
    assert (lg.directory / damage_marks.FILE_NAME).exists()

    rest = apply_patch(lg.segments, damaged, replica_bytes(intact, damaged.position, damaged.end))

    assert rest is None
    segment = damaged.segment
    assert segment.damaged == []
    assert segment.path.read_bytes() == intact
    assert verify_segment_crc(segment.path) == []
    assert not (lg.directory / damage_marks.FILE_NAME).exists()
    assert lg.read(damaged.first_offset, 1 << 20) is not None


def test_a_range_is_repaired_in_pieces_and_the_mark_shrinks(
    make_log: LogFactory, tmp_path: Path
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=200)
    fill(lg, 40)
    segment = lg.segments[0]
    intact = segment.path.read_bytes()
    batches = list(iter_batches(intact))
    position = batches[2][0]
    with open(segment.path, "r+b") as f:  # a damaged length: the rest of the file is lost
        f.seek(position + 8)
        f.write(struct.pack(">i", 0x7FFF0000))
    (problem,) = verify_segment_crc(segment.path)
    segment.mark_damaged(problem.position, problem.end_position, problem.problem)
    (damaged,) = damaged_ranges(lg.segments)
    assert (damaged.first_offset, damaged.end_offset) == (
        batches[2][1].base_offset,
        lg.segments[1].base_offset,
    )

    first_piece = intact[position : batches[4][0]]
    rest = apply_patch(lg.segments, damaged, first_piece)
    assert rest is not None and rest.position == batches[4][0]
    assert rest.first_offset == batches[4][1].base_offset
    assert segment.damaged == [(batches[4][0], len(intact), problem.problem)]
    # What was repaired reads again; what is not still fails.
    assert lg.read(batches[3][1].base_offset, 100) is not None
    with pytest.raises(CorruptSegmentError):
        lg.read(batches[4][1].base_offset, 100)

    assert apply_patch(lg.segments, rest, intact[rest.position :]) is None
    assert segment.path.read_bytes() == intact and segment.damaged == []


def test_bytes_that_do_not_line_up_are_refused_and_nothing_is_written(
    make_log: LogFactory, tmp_path: Path
) -> None:
    lg, intact = damaged_log(make_log, tmp_path)
    (damaged,) = damaged_ranges(lg.segments)
    good = replica_bytes(intact, damaged.position, damaged.end)
    on_disk = damaged.segment.path.read_bytes()
    batches = list(iter_batches(intact))
    bad_crc = bytearray(good)
    bad_crc[-3] ^= 0xFF
    following = intact[damaged.end : batches[5][0]]  # the next batch: offsets beyond the range
    earlier = intact[batches[2][0] : damaged.position]  # the batch before: offsets below it
    for offered, reason in (
        (bytes(bad_crc), "CRC-32C"),
        (following, "does not fit"),
        (earlier, "does not fit"),
        (good + following, "bytes offered for a damaged range"),
        (good[:-5], "cut short"),
        (b"", "no batches"),
    ):
        with pytest.raises(PatchRefused, match=reason):
            apply_patch(lg.segments, damaged, offered)
    assert damaged.segment.path.read_bytes() == on_disk
    assert damaged.segment.damaged == [(damaged.position, damaged.end, damaged.problem)]


def test_index_entries_inside_the_range_must_find_the_same_batches(
    make_log: LogFactory, tmp_path: Path
) -> None:
    """Two batches offered for one of the same total size and offsets (a replica that
    batched differently, or compacted) would leave an index entry pointing mid-batch."""
    lg, intact = damaged_log(make_log, tmp_path)
    segment = lg.segments[1]
    entries = list(segment.offset_index)
    assert entries, "the test needs index entries"
    _, entry_position = entries[0]
    # Mark a range that holds an index entry and offer bytes that move that batch.
    batches = list(iter_batches(intact))
    n = next(i for i, (p, _) in enumerate(batches) if p == entry_position)
    start, end = batches[n - 1][0], batches[n + 1][0]
    segment.damaged.clear()
    segment.mark_damaged(start, end, "test")
    (damaged,) = damaged_ranges(lg.segments)
    # One batch holding the offsets of both, shorter than the two: it fits the range,
    # but the entry for batch n's last offset would point inside it.
    merged_count = batches[n][1].last_offset - batches[n - 1][1].base_offset + 1
    merged = make_batch(merged_count, value_size=1, base_offset=batches[n - 1][1].base_offset)
    assert len(merged) < end - start
    with pytest.raises(PatchRefused, match="offset index"):
        check_patch(damaged, merged)
    assert check_patch(damaged, intact[start:end]) == batches[n][1].next_offset


def test_a_range_changed_meanwhile_is_not_written(make_log: LogFactory, tmp_path: Path) -> None:
    lg, intact = damaged_log(make_log, tmp_path)
    (damaged,) = damaged_ranges(lg.segments)
    damaged.segment.damaged.clear()  # e.g. the segment was replaced by compaction
    with pytest.raises(PatchRefused, match="changed meanwhile"):
        apply_patch(lg.segments, damaged, replica_bytes(intact, damaged.position, damaged.end))


def test_a_copy_of_the_log_is_the_replica_it_is_repaired_from(
    make_log: LogFactory, tmp_path: Path
) -> None:
    """End to end on files: a second copy of the partition (as a follower holds it)."""
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 40)
    replica = tmp_path / "replica"
    shutil.copytree(lg.directory, replica)
    segment = lg.segments[-2]  # the last closed one
    position, _ = list(iter_batches(segment.path.read_bytes()))[1]
    flip(segment.path, position + 90)
    for problem in verify_segment_crc(segment.path):
        segment.mark_damaged(problem.position, problem.end_position, problem.problem)
    (damaged,) = damaged_ranges(lg.segments)
    source = (replica / segment.path.name).read_bytes()
    apply_patch(lg.segments, damaged, source[damaged.position : damaged.end])
    assert segment.path.read_bytes() == source


# -- issue 20, items 1-2: ranges that run to the end of their file ----------------------


def reopened(make_log: LogFactory, lg: Log, **props: object) -> Log:
    """The log after a clean stop and a start with the checkpoints a broker keeps."""
    lg.close()
    return make_log(
        segment_bytes=SEGMENT_BYTES,
        index_interval_bytes=200,
        recovery_point=lg.recovery_point,
        had_clean_shutdown=True,
        **props,
    )


def test_a_file_cut_short_is_repaired_by_growing_it(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=200)
    fill(lg, 40)
    segment = lg.segments[1]
    intact = segment.path.read_bytes()
    batches = list(iter_batches(intact))
    path = segment.path
    cut = batches[5][0] + 17
    next_base = lg.segments[2].base_offset
    lg.close()
    with open(path, "r+b") as f:
        f.truncate(cut)
    again = reopened(make_log, lg)
    (damaged,) = damaged_ranges(again.segments)
    assert damaged.open_ended
    assert (damaged.position, damaged.first_offset, damaged.end_offset) == (
        batches[5][0],
        batches[5][1].base_offset,
        next_base,
    )
    # More bytes than the damaged range has: the replica's batches up to the next base.
    rest = apply_patch(again.segments, damaged, intact[damaged.position : batches[8][0]])
    assert rest is not None and rest.first_offset == batches[8][1].base_offset
    assert again.read(batches[7][1].base_offset, 100) is not None
    with pytest.raises(CorruptSegmentError):
        again.read(batches[8][1].base_offset, 100)
    assert apply_patch(again.segments, rest, intact[rest.position :]) is None
    assert path.read_bytes() == intact
    repaired = again.segments[1]
    assert repaired.damaged == [] and repaired.size == len(intact)
    # The grown part is indexed like the rest: a lookup lands on its batch.
    offset, position = repaired.offset_index.lookup(batches[-1][1].last_offset)
    assert position > cut and offset <= batches[-1][1].last_offset
    third = reopened(make_log, again)
    assert third.segments[1].damaged == []
    assert all(third.read(h.base_offset, 100) is not None for _, h in batches)


def test_a_deleted_segment_is_written_back_from_a_replica(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=200)
    fill(lg, 70)
    gone = lg.segments[2]
    replica = gone.path.read_bytes()  # the same batches, as another replica holds them
    base, next_base = gone.base_offset, lg.segments[3].base_offset
    lg.close()
    for path in gone.directory.glob(f"{base:020d}.*"):
        path.unlink()
    again = reopened(make_log, lg)
    (damaged,) = damaged_ranges(again.segments)
    assert (damaged.first_offset, damaged.end_offset) == (base, next_base)
    assert damaged.position == damaged.end == damaged.segment.size  # nothing there at all
    assert apply_patch(again.segments, damaged, replica) is None
    assert damaged.segment.damaged == []
    found = again.read(base, 100)
    assert found is not None and struct.unpack_from(">q", found.read())[0] == base
    found.release()
    third = reopened(make_log, again)
    assert not list(third.directory.glob(damage_marks.FILE_NAME))
    assert third.read(base, 100) is not None


def test_offsets_a_replica_holds_no_record_of_were_a_gap(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=200)
    fill(lg, 70)
    gone = lg.segments[2]
    base, next_base = gone.base_offset, lg.segments[3].base_offset
    lg.close()
    for path in gone.directory.glob(f"{base:020d}.*"):
        path.unlink()
    again = reopened(make_log, lg)
    (damaged,) = damaged_ranges(again.segments)
    accept_empty(again.segments, damaged)
    found = again.read(base, 100)  # goes on to the next segment, as over any gap
    assert found is not None and struct.unpack_from(">q", found.read())[0] == next_base
    found.release()
