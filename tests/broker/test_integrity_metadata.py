"""Issue 10, item 4: garbage in ``meta.properties`` or ``tierlog-metadata.json`` stops the
broker with one message naming the file, the problem and the way out; no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tierlog.broker.coordination.local import FILE_NAME as METADATA
from tierlog.broker.coordination.local import LocalCoordinator
from tierlog.broker.meta_properties import FILE_NAME as META
from tierlog.broker.meta_properties import MetaPropertiesError, check_or_write

GARBAGE = {
    "binary": b"\x00\xff\xfe\x80garbage\x9c",
    "text": b"this is not a properties file\n",
    "half": b"version=0\nbroker.id=zero\n",
}
JSON_GARBAGE = {
    "binary": b"\x00\xff\xfe\x80",
    "not json": b"{topics: ",
    "a list": b"[1, 2]",
    "no topics": b'{"version": 1, "cluster_id": "x"}',
}


def start_broker(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tierlog.cli",
            "broker",
            "start",
            "--override",
            f"log.dirs={data_dir}",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbled_meta_properties_is_named_with_the_way_out(tmp_path: Path, kind: str) -> None:
    (tmp_path / META).write_bytes(GARBAGE[kind])
    with pytest.raises(MetaPropertiesError) as raised:
        check_or_write(tmp_path, 0, "cluster")
    message = str(raised.value)
    assert str(tmp_path / META) in message
    assert "move meta.properties away" in message


@pytest.mark.parametrize("kind", sorted(JSON_GARBAGE))
def test_garbled_metadata_json_is_named_with_the_way_out(tmp_path: Path, kind: str) -> None:
    (tmp_path / METADATA).write_bytes(JSON_GARBAGE[kind])
    with pytest.raises(ValueError) as raised:
        LocalCoordinator(tmp_path)
    message = str(raised.value)
    assert str(tmp_path / METADATA) in message
    assert "move it away" in message


@pytest.mark.parametrize("name", [META, METADATA])
def test_broker_start_on_a_garbled_file_prints_one_line(tmp_path: Path, name: str) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / name).write_bytes(b"\x00\xff garbage \x80")
    done = start_broker(data_dir)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if str(data_dir / name) in line]
    assert len(lines) == 1, done.stderr
    assert "not text" in lines[0]
    assert "move" in lines[0]
