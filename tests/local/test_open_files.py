"""tierlog.local.open_files: a bounded number of segments keeps its files open, the least
recently used idle ones are closed and opened again on use (issue 20, item 8)."""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path

from tierlog.local.log import Log
from tierlog.local.open_files import FDS_PER_PARTITION, OpenFiles, default_limit

from .conftest import T0, LogFactory, make_batch


def files_open(directory: Path) -> list[str]:
    """Names of the files in ``directory`` this process holds a descriptor on."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if target.parent == directory:
                found.append(target.name)
    return sorted(found)


def first_base(lg: Log, offset: int) -> int:
    found = lg.read(offset, 1 << 20)
    assert found is not None
    try:
        return struct.unpack_from(">q", found.read())[0]
    finally:
        found.release()


def test_the_limit_leaves_room_for_connections_and_maps() -> None:
    assert default_limit(1024, 65530) == 768
    assert default_limit(20000, 65530) == 15000
    assert default_limit(1 << 20, 65530) == (65530 - 4096) // 2  # maps bound it then
    assert default_limit(64, 65530) == 16  # never none
    assert FDS_PER_PARTITION == 1


def test_a_segment_holds_one_descriptor_and_its_indexes_none(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log(segment_bytes=1200)
    for i in range(20):
        lg.append(make_batch(3, value_size=50, base_timestamp=T0 + i))
    active = lg.active_segment.path.name
    # Closed segments were never read: nothing open but the active segment's .log.
    assert files_open(log_dir) == [active]
    assert first_base(lg, 0) == 0  # a closed segment read: its .log opens, no index
    assert files_open(log_dir) == sorted(["00000000000000000000.log", active])


def test_idle_segments_past_the_budget_are_closed_and_opened_again(
    make_log: LogFactory, log_dir: Path
) -> None:
    budget = OpenFiles(limit=3)
    lg = make_log(segment_bytes=1200, open_files=budget)
    bases = []
    for i in range(40):
        bases.append(lg.append(make_batch(3, value_size=50, base_timestamp=T0 + i)).first_offset)
    assert len(lg.segments) >= 8
    for _ in range(2):
        for base in bases:
            assert first_base(lg, base) == base
            assert len(files_open(log_dir)) <= 3
    assert budget.closed_for_budget > 0
    # The active segment was closed too, and takes appends again.
    end = lg.log_end_offset
    assert lg.append(make_batch(2)).first_offset == end
    assert first_base(lg, end) == end
    lg.close()
    again = make_log(segment_bytes=1200, recovery_point=lg.recovery_point, had_clean_shutdown=True)
    assert [first_base(again, b) for b in bases] == bases


def test_a_leased_segment_is_never_closed_for_the_budget(
    make_log: LogFactory, log_dir: Path
) -> None:
    budget = OpenFiles(limit=2)
    lg = make_log(segment_bytes=1200, open_files=budget)
    for i in range(30):
        lg.append(make_batch(3, value_size=50, base_timestamp=T0 + i))
    held = lg.read(0, 1 << 20)  # a fetch answer not sent yet
    assert held is not None
    for segment in lg.segments[1:]:
        assert first_base(lg, segment.base_offset) == segment.base_offset
    assert "00000000000000000000.log" in files_open(log_dir)
    assert struct.unpack_from(">q", held.read())[0] == 0
    held.release()


def test_a_read_past_a_full_budget_of_leased_files_gets_the_bytes(
    make_log: LogFactory, log_dir: Path
) -> None:
    """A fetch of thousands of partitions leases a file per partition until its answer
    is sent: past the budget a read copies its bytes and closes the file again, so the
    process never runs out of descriptors (it did, measured with 10,000 partitions)."""
    budget = OpenFiles(limit=2)
    lg = make_log(segment_bytes=1200, open_files=budget)
    for i in range(30):
        lg.append(make_batch(3, value_size=50, base_timestamp=T0 + i))
    held = [lg.read(s.base_offset, 1 << 20) for s in lg.segments[:2]]
    assert all(h is not None and not isinstance(h, bytes) for h in held)
    third = lg.segments[2]
    copied = lg.read(third.base_offset, 1 << 20)
    assert isinstance(copied, bytes)
    assert struct.unpack_from(">q", copied)[0] == third.base_offset
    assert third.path.name not in files_open(log_dir)
    for h in held:
        assert h is not None and not isinstance(h, bytes)
        h.release()
    after = lg.read(third.base_offset, 1 << 20)  # room again: a slice as usual
    assert after is not None and not isinstance(after, bytes)
    after.release()
