"""One tiered partition as the remote log manager knows it (``TieredPartition``): its log,
its leader epoch and high watermark, the last manifest snapshot, the open remote segment
readers and the remote checkpoint.

Threads: ``manifest`` is replaced, never mutated. The ``remote-log`` worker thread (the
manifest's one writer: ``remote_log_manager``, ``remote_copy``, ``remote_retention``)
assigns it after each commit; the event loop reads whichever snapshot is there
(``remote_reads``, ``unified_log``). ``readers`` is filled on the event loop by
``remote_reads`` and pruned by retention on the worker thread: both hold
``readers_lock`` (a lookup followed by ``move_to_end`` raced a pop on the other thread).
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable

from tierlog.local.log import Log
from tierlog.remote import manifest as mf
from tierlog.remote import remote_checkpoint as rc
from tierlog.remote.api import RemoteSegment
from tierlog.remote.segment_reader import RemoteSegmentReader


@dataclasses.dataclass
class TieredPartition:
    """What the manager knows of one partition; ``manifest`` is replaced, never mutated."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    log: Log
    leader_epoch: Callable[[], int]
    # The partition's high watermark (its replication state owns it): only segments
    # wholly below it are offloaded, so nothing uncommitted ever reaches the remote tier.
    high_watermark: Callable[[], int]
    # True for a partition this broker follows: its manifest is read, never written.
    follower: bool = False
    manifest: mf.Manifest | None = None
    problem: str | None = None  # the last error, reported once per change
    cycles: int = 0
    readers: OrderedDict[str, RemoteSegmentReader] = dataclasses.field(default_factory=OrderedDict)
    readers_lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    # How far the remote tier was known to reach, and what it lost (remote_checkpoint.py).
    checkpoint: rc.RemoteCheckpoint = dataclasses.field(default_factory=rc.RemoteCheckpoint)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def committed(self) -> list[RemoteSegment]:
        return mf.committed_segments(self.manifest) if self.manifest else []

    def remote_end(self) -> int:
        """Next offset after the last committed remote segment (0 when none)."""
        return max(mf.end_offset(self.manifest), 0) if self.manifest else 0

    def earliest_offset(self) -> int:
        """The whole log's start: the remote log start when remote data exists. A range
        the remote tier lost still counts (its reads fail loudly): the log start never
        moves over acknowledged data without DeleteRecords saying so."""
        start = self.log.log_start_offset
        manifest = self.manifest
        first = mf.start_offset(manifest) if manifest is not None else None
        if first is not None and manifest is not None:
            start = min(max(first, manifest.log_start_offset), start)
        lost = self.lost()
        return min(lost[0], start) if lost is not None else start

    def lost(self) -> tuple[int, int] | None:
        """``[start, end)`` the remote tier lost, None when it lost nothing."""
        return self.checkpoint.lost if self.checkpoint.has_loss else None
