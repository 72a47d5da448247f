"""The leader epoch cache of one partition and its ``leader-epoch-checkpoint`` file.

Each entry says "epoch E started at offset O" (KIP-101). A follower asks the leader for the
end offset of its latest epoch (OffsetForLeaderEpoch) and truncates to it, so logs never
diverge after a leader change. The file uses Kafka's checkpoint format
(``tierlog.local.checkpoint``) with "epoch startOffset" entries.

Not thread-safe; owned by one ``Log``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

from tierlog.local.checkpoint import CorruptCheckpointError, read_checkpoint, write_checkpoint

log = logging.getLogger(__name__)

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Args:
    directory: the partition directory holding ``leader-epoch-checkpoint``.

    A checkpoint that cannot be read, or whose entries break the cache's rules (epochs
    rising, start offsets rising, none negative), is not trusted: a WARNING names the file
    and the problem, the cache starts empty and the file is written again empty, and the
    log rebuilds the entries from its batch headers as it loads (issue 20, item 12, as
    for the other checkpoints). Before, a garbled file was taken silently as empty, and
    one with entries out of order was used as it was.
    """

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILE_NAME
        try:
            rows = read_checkpoint(self.path, 2)
            self.entries = _checked([EpochEntry(int(e), int(o)) for e, o in rows], self.path)
        except (CorruptCheckpointError, ValueError) as exc:
            problem = exc if isinstance(exc, CorruptCheckpointError) else f"{self.path}: {exc}"
            log.warning("%s; rebuilding it from the log's batch headers", problem)
            self.entries = []
            try:
                self.flush()
            except OSError as write_error:  # the rebuild's first assign writes it anyway
                log.warning("%s: not rewritten: %s", self.path, write_error)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns True if it is new.

        Entries with a lower epoch never follow a higher one; a new epoch whose start
        offset is not after an older entry's replaces it (KIP-279 rules).
        """
        if epoch < 0 or (self.entries and epoch <= self.latest_epoch):
            return False
        before = list(self.entries)
        while self.entries and self.entries[-1].start_offset >= start_offset:
            self.entries.pop()
        self.entries.append(EpochEntry(epoch, start_offset))
        try:
            self.flush()
        except OSError:
            # Not written (a full disk): forget it too, so the caller's retry assigns and
            # writes it again instead of finding it "known" and never saving it.
            self.entries = before
            raise
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetForLeaderEpoch; see ``end_offset_for``."""
        return end_offset_for(self.entries, epoch, log_end_offset)

    def restore(self, entries: list[EpochEntry]) -> None:
        """Replace every entry by ``entries`` (sorted, as in a checkpoint): a replica
        restarting at its leader's local log start takes the history from the remote tier
        (KIP-405)."""
        self.entries = list(entries)
        self.flush()

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after ``end_offset`` (log truncated to it)."""
        before = len(self.entries)
        self.entries = [e for e in self.entries if e.start_offset < end_offset]
        if len(self.entries) != before:
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to ``start_offset``: the epoch in force there now starts there."""
        kept = [e for e in self.entries if e.start_offset >= start_offset]
        older = [e for e in self.entries if e.start_offset < start_offset]
        if older and (not kept or kept[0].start_offset > start_offset):
            kept.insert(0, EpochEntry(older[-1].epoch, start_offset))
        if kept != self.entries:
            self.entries = kept
            self.flush()

    def flush(self) -> None:
        write_checkpoint(self.path, self.entries)

    def clear(self) -> None:
        self.entries = []
        self.flush()


def _checked(entries: list[EpochEntry], path: Path) -> list[EpochEntry]:
    """``entries`` when they could have been written by the cache.

    Raises:
        CorruptCheckpointError: naming the first entry that breaks a rule.
    """
    previous: EpochEntry | None = None
    for entry in entries:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise CorruptCheckpointError(
                f"{path}: negative entry {entry.epoch} {entry.start_offset}"
            )
        if previous is not None and (
            entry.epoch <= previous.epoch or entry.start_offset <= previous.start_offset
        ):
            raise CorruptCheckpointError(
                f"{path}: entry {entry.epoch} {entry.start_offset} does not follow "
                f"{previous.epoch} {previous.start_offset}"
            )
        previous = entry
    return entries


def end_offset_for(entries: list[EpochEntry], epoch: int, log_end_offset: int) -> tuple[int, int]:
    """``(epoch, end offset)`` for OffsetForLeaderEpoch over sorted ``entries``, as Kafka's
    ``LeaderEpochFileCache.endOffsetFor``:

    * the latest epoch ends at the log end;
    * an older epoch ends where the first later known epoch starts, reported with the
      largest known epoch <= ``epoch``;
    * an epoch older than every entry (its data deleted) ends where the first entry
      starts, reported with ``epoch`` itself;
    * ``(-1, -1)`` for an undefined epoch, one newer than the latest, or no entries.

    The two edge cases used to answer (-1, -1) and (latest, log end): a Kafka consumer
    validating its position (KIP-320) then saw an undefined answer after retention and
    reset its offset.
    """
    if epoch == UNDEFINED_EPOCH or not entries:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if epoch == entries[-1].epoch:
        return epoch, log_end_offset
    floor: EpochEntry | None = None
    for entry in entries:
        if entry.epoch > epoch:
            # ``entry`` is the first epoch after the requested one.
            return (epoch if floor is None else floor.epoch), entry.start_offset
        floor = entry
    return UNDEFINED_EPOCH, UNDEFINED_OFFSET
