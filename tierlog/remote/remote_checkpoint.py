"""What this broker last knew to be in the remote tier, per partition: the local witness
that lets it notice a remote tier that lost committed data (issue 10, item 7).

Kafka keeps remote metadata in a replicated topic, so an emptied bucket cannot erase it;
tierlog's manifest lives in the bucket beside the segments, so one emptied or restored
from an old backup takes the manifest with it, and the manifest alone would then say
"nothing was ever remote". A small file in the partition's directory remembers how far
the remote tier was known to reach::

    <partition dir>/remote-log-checkpoint      Kafka's checkpoint text format
    0                                           version
    1                                           entry count
    <log_start> <remote_end> <lost_start> <lost_end>

``remote_end`` is the offset after the last committed remote segment ever seen;
``log_start`` the remote log start then. ``[lost_start, lost_end)`` is a range the remote
tier lost (both -1 when none): it stays recorded, across restarts, until data covering it
is back or DeleteRecords moves the log start past it, so the loss is never forgotten
silently. Pure functions here; ``RemoteLogManager`` reads and writes the file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tierlog.local.checkpoint import (
    CorruptCheckpointError,
    decode_checkpoint,
    encode_checkpoint,
)
from tierlog.remote import manifest as mf

FILE_NAME = "remote-log-checkpoint"
NO_LOSS = (-1, -1)


@dataclass(frozen=True, slots=True)
class RemoteCheckpoint:
    log_start: int = 0
    remote_end: int = 0
    lost: tuple[int, int] = NO_LOSS

    @property
    def has_loss(self) -> bool:
        return self.lost != NO_LOSS


def encode(checkpoint: RemoteCheckpoint) -> bytes:
    return encode_checkpoint([(checkpoint.log_start, checkpoint.remote_end, *checkpoint.lost)])


def decode(data: bytes, name: str) -> RemoteCheckpoint:
    """Raises CorruptCheckpointError naming ``name``."""
    rows = decode_checkpoint(data, 4, name)
    if len(rows) != 1:
        raise CorruptCheckpointError(f"{name}: expected one entry, found {len(rows)}")
    try:
        start, end, lost_start, lost_end = (int(v) for v in rows[0])
    except ValueError:
        raise CorruptCheckpointError(f"{name}: not four integers: {rows[0]}") from None
    return RemoteCheckpoint(start, end, (lost_start, lost_end))


def path_in(directory: Path) -> Path:
    return directory / FILE_NAME


def accounted_end(manifest: mf.Manifest) -> int:
    """The offset up to which the manifest accounts for the log: its committed segments,
    or its log start when retention or DeleteRecords removed everything below it."""
    return max(mf.end_offset(manifest), manifest.log_start_offset, 0)


def observe(
    checkpoint: RemoteCheckpoint, manifest: mf.Manifest, local_start: int | None = None
) -> RemoteCheckpoint:
    """The checkpoint after reading ``manifest``: it reaches further (uploads), or it
    accounts for less than was committed before (data lost: the lost range grows to cover
    it), or it covers a recorded loss again (restored: the loss is cleared).

    ``local_start`` is the local log's start: offsets from it on are still on local disk,
    so they are not lost even when the remote tier lost its copy of them.
    """
    end = accounted_end(manifest)
    lost = checkpoint.lost
    if end < checkpoint.remote_end:
        # Retention only ever removes the oldest data and moves the log start with it;
        # committed segments vanishing from the end means the store lost them.
        start = max(checkpoint.log_start, end, manifest.log_start_offset)
        stop = (
            checkpoint.remote_end
            if local_start is None
            else min(checkpoint.remote_end, local_start)
        )
        if start < stop:
            lost = (
                (start, stop)
                if not checkpoint.has_loss
                else (min(start, lost[0]), max(stop, lost[1]))
            )
    elif checkpoint.has_loss and _covers(manifest, lost):
        lost = NO_LOSS
    return RemoteCheckpoint(
        max(checkpoint.log_start, manifest.log_start_offset)
        if end >= checkpoint.remote_end
        else checkpoint.log_start,
        max(checkpoint.remote_end, end),
        lost,
    )


def acknowledge(checkpoint: RemoteCheckpoint, log_start: int) -> RemoteCheckpoint:
    """DeleteRecords to ``log_start``: a loss below it is given up on knowingly."""
    if checkpoint.has_loss and log_start >= checkpoint.lost[1]:
        return replace(checkpoint, lost=NO_LOSS, log_start=max(checkpoint.log_start, log_start))
    return checkpoint


def _covers(manifest: mf.Manifest, lost: tuple[int, int]) -> bool:
    """Whether the manifest's committed segments (or its log start) cover ``lost``
    again, without a gap."""
    position = max(lost[0], manifest.log_start_offset)
    for segment in mf.committed_segments(manifest):
        if segment.end_offset < position:
            continue
        if segment.base_offset > position:
            return False
        position = segment.end_offset + 1
        if position >= lost[1]:
            return True
    return position >= lost[1]
