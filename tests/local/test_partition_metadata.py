"""tierlog.local.partition_metadata: Kafka's ``partition.metadata`` file."""

from __future__ import annotations

import uuid
from pathlib import Path

from tierlog.local import partition_metadata


def test_written_and_read_back_in_kafkas_format(tmp_path: Path) -> None:
    topic_id = uuid.UUID("5b7b7a1c-8d29-4bd4-9a6f-1b7e0d1e2f30")
    partition_metadata.write(tmp_path, topic_id)
    text = (tmp_path / "partition.metadata").read_text()
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding.
    assert text == "version: 0\ntopic_id: W3t6HI0pS9Sabxt-DR4vMA\n"
    assert partition_metadata.read(tmp_path) == topic_id


def test_missing_or_unreadable_is_no_id(tmp_path: Path) -> None:
    assert partition_metadata.read(tmp_path) is None
    for garbled in ("version: 1\ntopic_id: W3t6HI0pS9Sabxt-DR4vMA\n", "version: 0\n", "\xff"):
        (tmp_path / "partition.metadata").write_text(garbled)
        assert partition_metadata.read(tmp_path) is None
    (tmp_path / "partition.metadata").write_text("version: 0\ntopic_id: short\n")
    assert partition_metadata.read(tmp_path) is None
