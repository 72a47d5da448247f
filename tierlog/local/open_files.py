"""How many segments keep their files open at once: a budget of file descriptors.

A segment holds one file descriptor while it is open, its ``.log`` (its indexes are mapped
with their files closed, ``file_map``), and opens it on first use (issue 20, item 8). Kafka
keeps every segment open for the broker's life: with the default limit of 1,024
descriptors that caps a broker at a few hundred partitions, and a broker with more on disk
than it has descriptors cannot even start. tierlog keeps at most ``limit`` segments open
and closes the least recently used idle one when another opens: every partition on disk
is served, an idle one paying an ``open`` (~10 us) when it is used again.

The limit comes from the process's ``RLIMIT_NOFILE`` (``ulimit -n``), less what the rest
of the broker needs (client connections, replication, ZooKeeper, files opened for a
moment), and from ``vm.max_map_count`` (an open segment maps two index files). A segment
whose file is leased (a fetch answer being sent, the scrubber reading) is never closed;
the budget may then run over for a moment.

Which one goes: the least recently used, by second chance (the CLOCK algorithm): each
open segment has a "used" bit its reads and appends set; a sweep from the oldest clears
it and moves the segment to the back, and closes the first one found with it clear. No
list is reordered on a read or an append, the hot paths.

Not thread-safe: the logs' thread (the broker's event loop). ``FDS_PER_PARTITION`` is the
figure other parts budget with (CreateTopics limits, ``docs/limits.md``).
"""

from __future__ import annotations

import itertools
import logging
import resource
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

# File descriptors one partition holds while it is in use: its active segment's .log (the
# indexes are mapped, their files closed; checkpoints, snapshots and the .txnindex are
# opened only for the moment they are written). A closed segment being read holds one
# more while it is open. An idle partition holds none once the budget closes its segment.
FDS_PER_PARTITION = 1
# Maps one open segment holds: its offset index and its time index.
MAPS_PER_SEGMENT = 2
# Descriptors left to everything else: client and replication connections, ZooKeeper,
# the lock and checkpoint files, files opened for a moment; a quarter of the limit, at
# least this many.
RESERVED_FDS = 256
# Maps left to the interpreter, its libraries and the rest of the process.
RESERVED_MAPS = 4096
# Open segments one opening looks at, at most, for one to close.
SWEEP_LIMIT = 256
_MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")


class OpenSegment(Protocol):
    """What the budget needs of a segment (``LogSegment``)."""

    recently_used: bool

    def can_release(self) -> bool: ...

    def release_files(self) -> None: ...


def fd_limit() -> int:
    """The process's soft limit of open files (``ulimit -n``)."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def default_limit(fds: int | None = None, max_maps: int | None = None) -> int:
    """Segments that may stay open under a descriptor limit of ``fds`` (the process's,
    by default) and a map limit of ``max_maps`` (``vm.max_map_count``)."""
    if fds is None:
        fds = fd_limit()
    if fds == resource.RLIM_INFINITY or fds <= 0:
        fds = 1 << 20
    if max_maps is None:
        try:
            max_maps = int(_MAX_MAP_COUNT.read_text())
        except (OSError, ValueError):
            max_maps = 65530  # Linux's default
    by_fds = (fds - max(RESERVED_FDS, fds // 4)) // FDS_PER_PARTITION
    by_maps = (max_maps - RESERVED_MAPS) // MAPS_PER_SEGMENT
    return max(16, min(by_fds, by_maps))


class OpenFiles:
    """The open segments of every log of a process, at most ``limit`` of them idle.

    Args:
        limit: segments kept open at once (``default_limit()``).
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the budget needs room for one open segment")
        self.limit = limit
        # Insertion-ordered: the oldest first (the CLOCK hand starts there).
        self._open: dict[OpenSegment, None] = {}
        self.closed_for_budget = 0  # segments closed to make room, since start
        self.peak = 0

    def __len__(self) -> int:
        return len(self._open)

    @property
    def full(self) -> bool:
        """More segments open than the limit: none of the others could be closed (each
        has a lease outstanding, a fetch answer being sent)."""
        return len(self._open) > self.limit

    def opened(self, segment: OpenSegment) -> None:
        """``segment`` opened a file: count it, and close idle ones past the limit."""
        if segment in self._open:
            return
        self._open[segment] = None
        if len(self._open) > self.limit:
            self._make_room(len(self._open) - self.limit, segment)
        self.peak = max(self.peak, len(self._open))

    def closed(self, segment: OpenSegment) -> None:
        """``segment`` let go of its files (closed, deleted, or released here)."""
        self._open.pop(segment, None)

    def make_room(self, count: int) -> None:
        """Close up to ``count`` idle segments now (the process ran out of descriptors)."""
        self._make_room(count, None)

    def _make_room(self, count: int, keep: OpenSegment | None) -> None:
        # Two sweeps at most (the first clears used bits, the second finds them clear),
        # and at most SWEEP_LIMIT candidates looked at: when every segment is leased (a
        # fetch of thousands of partitions), opening each one more must not cost a walk
        # over all the others.
        candidates = list(itertools.islice(self._open, SWEEP_LIMIT))
        for candidate in candidates * 2:
            if count <= 0:
                return
            if candidate is keep or candidate not in self._open:
                continue
            if candidate.recently_used or not candidate.can_release():
                candidate.recently_used = False
                del self._open[candidate]
                self._open[candidate] = None  # to the back: a second chance
                continue
            candidate.release_files()  # calls closed()
            self.closed_for_budget += 1
            count -= 1
        if count > 0:
            log.debug("open-file budget over by %d: every other segment is in use", count)

    def __repr__(self) -> str:
        return f"OpenFiles({len(self)} of {self.limit} open)"


# One budget per process: descriptors are the process's (a test may pass its own).
PROCESS_FILES = OpenFiles(default_limit())
