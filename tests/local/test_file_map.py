"""tierlog.local.file_map: a shared map that keeps no file descriptor (issue 20, item 8)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from tierlog.local.file_map import FileMap

from .test_open_files import files_open


def test_a_map_holds_no_descriptor_and_writes_through(tmp_path: Path) -> None:
    path = tmp_path / "f.index"
    path.write_bytes(bytes(4096))
    fd = os.open(path, os.O_RDWR)
    mapped = FileMap(fd, 4096)
    os.close(fd)
    assert files_open(tmp_path) == []
    struct.pack_into(">iI", mapped.view, 8, 7, 4242)
    mapped.flush()
    assert path.read_bytes()[8:16] == struct.pack(">iI", 7, 4242)
    # Another process's write to the file is seen through the map (MAP_SHARED).
    with open(path, "r+b") as f:
        f.seek(16)
        f.write(struct.pack(">i", 99))
    assert struct.unpack_from(">i", mapped.view, 16) == (99,)
    mapped.close()


def test_a_closed_map_refuses_its_view(tmp_path: Path) -> None:
    path = tmp_path / "f.index"
    path.write_bytes(bytes(4096))
    fd = os.open(path, os.O_RDWR)
    mapped = FileMap(fd, 4096)
    os.close(fd)
    view = mapped.view
    mapped.close()
    with pytest.raises(ValueError):
        struct.unpack_from(">i", view, 8)  # released: never the unmapped memory
    mapped.close()  # twice is fine


def test_an_empty_map_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        FileMap(0, 0)
