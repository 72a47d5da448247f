from __future__ import annotations

import os
from pathlib import Path

import pytest

from tierlog.local.checkpoint import (
    CorruptCheckpointError,
    read_checkpoint,
    read_offsets,
    write_checkpoint,
    write_offsets,
)


def test_write_offsets_in_kafka_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets(path, {("orders", 0): 1042, ("clicks", 3): 77, ("clicks", 10): 5})
    # sorted by topic, then partition number (not text)
    assert path.read_text() == "0\n3\nclicks 3 77\nclicks 10 5\norders 0 1042\n"
    assert read_offsets(path) == {("orders", 0): 1042, ("clicks", 3): 77, ("clicks", 10): 5}


def test_empty_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_offsets(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_offsets(path) == {}


def test_missing_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "nope", 2) == []
    assert read_offsets(tmp_path / "nope") == {}


def test_read_file_written_by_kafka(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    # blank trailing lines and surrounding spaces are tolerated, as Kafka's reader does
    path.write_text("0\n2\nmy-topic 0 10\n  my.topic 12 0  \n\n")
    assert read_offsets(path) == {("my-topic", 0): 10, ("my.topic", 12): 0}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "version"),
        ("0\n", "version"),
        ("1\n0\n", "version"),
        ("0\nabc\n", "bad entry count"),
        ("0\n2\nt 0 1\n", "expected 2 entries, found 1"),
        ("0\n1\nt 0\n", ":3: expected 3 fields"),
        ("0\n1\nt 0 1 2\n", "expected 3 fields"),
        ("0\n1\nt zero 1\n", "invalid literal"),
        ("0\n1\nt 0 1.5\n", "invalid literal"),
    ],
)
def test_corrupt_checkpoint(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError) as info:
        read_offsets(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_write_is_atomic_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_checkpoint(path, [(1, 2), (3, 4)])
    assert sorted(os.listdir(tmp_path)) == ["cp"]
    assert read_checkpoint(path, 2) == [["1", "2"], ["3", "4"]]


def test_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cp"
    write_checkpoint(path, [(1, 2)])

    def broken_fsync(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        write_checkpoint(path, [(5, 6)])
    assert read_checkpoint(path, 2) == [["1", "2"]]


def test_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_offsets(path, {("a", 0): 1})
    write_offsets(path, {("b", 1): 2})
    assert read_offsets(path) == {("b", 1): 2}
