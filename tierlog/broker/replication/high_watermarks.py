"""The high-watermark checkpoint: Kafka's ``replication-offset-checkpoint`` in every log
dir, written every ``replica.high.watermark.checkpoint.interval.ms`` and at shutdown, read
once at start-up so a restarted replica does not begin its high watermark at zero."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from tierlog.local.checkpoint import CorruptCheckpointError, read_offsets, write_offsets
from tierlog.local.log_manager import TopicPartition

log = logging.getLogger(__name__)

# Kafka's name and format (version 0, a count, then "topic partition offset" lines).
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"


def read_high_watermarks(log_dirs: Iterable[Path]) -> dict[TopicPartition, int]:
    """Every log dir's checkpoint, merged; a corrupt one is skipped with a warning."""
    found: dict[TopicPartition, int] = {}
    for log_dir in log_dirs:
        try:
            found.update(read_offsets(log_dir / HIGH_WATERMARK_FILE))
        except CorruptCheckpointError as exc:
            # A leader recomputes its high watermark from the ISR; a follower learns it
            # from its leader's next fetch response. Nothing is lost.
            log.warning("%s; high watermarks start from the log start", exc)
    return found


def write_high_watermarks(by_dir: Mapping[Path, dict[TopicPartition, int]]) -> None:
    """Each log dir's checkpoint, replaced atomically (``write_offsets``)."""
    for log_dir, offsets in by_dir.items():
        write_offsets(log_dir / HIGH_WATERMARK_FILE, offsets)
