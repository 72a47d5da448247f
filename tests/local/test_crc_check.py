"""tierlog.local.crc_check: the CRC-32C check of a file's batches that the scrubber and
the check before serving share."""

from __future__ import annotations

import os
from pathlib import Path

from tierlog.local.crc_check import check_batches

from .conftest import make_batch, with_offsets


def write(path: Path, batches: list[bytes]) -> list[int]:
    path.write_bytes(b"".join(batches))
    positions, at = [], 0
    for batch in batches:
        positions.append(at)
        at += len(batch)
    return positions


def test_whole_batches_pass_and_a_flip_is_named(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    batches = [with_offsets(make_batch(3, value_size=40), 3 * n) for n in range(4)]
    starts = write(path, batches)
    size = path.stat().st_size
    fd = os.open(path, os.O_RDWR)
    try:
        assert check_batches(fd, 0, size, size) == ([], [(0, size)])
        os.pwrite(fd, b"\xff", starts[2] + 70)
        problems, good = check_batches(fd, 0, size, size)
        assert [(p, e) for p, e, _ in problems] == [(starts[2], starts[3])]
        assert "CRC-32C" in problems[0][2]
        assert good == [(0, starts[2]), (starts[3], size)]
        # Only the batches that begin in the range asked for (the last one whole).
        assert check_batches(fd, starts[3], starts[3] + 1, size) == ([], [(starts[3], size)])
    finally:
        os.close(fd)


def test_a_file_shorter_than_expected_is_damage_to_its_end(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    batches = [with_offsets(make_batch(3, value_size=40), 3 * n) for n in range(3)]
    starts = write(path, batches)
    size = path.stat().st_size
    os.truncate(path, starts[2] + 20)  # cut under a reader that knew the old size
    fd = os.open(path, os.O_RDONLY)
    try:
        problems, good = check_batches(fd, 0, size, size)
    finally:
        os.close(fd)
    assert good == [(0, starts[2])]
    assert [(p, e) for p, e, _ in problems] == [(starts[2], size)]
