"""A background thread that checks large batches (CRC-32C, record count) while the log
writes them.

For a 1 MiB batch the CRC check costs about a third of the write itself; ``crc32c``
releases the GIL, so running it beside the ``pwritev`` hides most of that. The record
count of an uncompressed batch (``tierlog.records.record_walk``) runs there after the
CRC. In Python it holds the GIL, so it cannot overlap the event loop's Python, only the
log's ``pwritev`` (which releases the GIL); see ``_run`` for why it stays here. The
compiled walk (numba, when a broker loads it: ``TIERLOG_JIT=1``) releases the GIL and
overlaps both. The worker only reads the (immutable) bytes it is handed and returns an
int, so the log's single-threaded contract holds: the log still makes every state change
on its own thread, after the result.
"""

from __future__ import annotations

import queue
import threading

from crc32c import crc32c

from tierlog.records.header import ATTRIBUTES_OFFSET, HEADER_SIZE
from tierlog.records.record_walk import count_records

# Below this, handing the work to another thread costs more than it saves.
OVERLAP_MIN_BYTES = 256 * 1024


class CrcWorker:
    def __init__(self) -> None:
        # (the bytes after the CRC field, whether to count records); (CRC, records).
        self._requests: queue.SimpleQueue[tuple[memoryview, bool]] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[tuple[int, int]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while True:
            view, count = self._requests.get()
            try:
                crc = int(crc32c(view, gil_release_mode=1))
                # ``view`` starts at the attributes: the records start 40 bytes in.
                # The Python walk holds the GIL. Here it can still run while the log's thread
                # is in ``pwritev`` (GIL released); inline it would always come after
                # the write. A/B on the shared 2-core box (Log.append of 1 MiB batches,
                # best of 6-12 x 200, 2026-11-25): here 726-1021 us per append, inline
                # 738-1083; the worker was ahead in 4 of 5 runs (by 2-13%), behind in
                # one (by 9%): a small edge, so the walk stays here.
                start = HEADER_SIZE - ATTRIBUTES_OFFSET
                records = count_records(view, start, len(view)) if count else -1
            except BaseException:  # never leave the caller waiting
                crc, records = -1, -1
            self._results.put((crc, records))

    def submit(self, view: memoryview, count: bool = False) -> PendingCrc:
        """Start computing the CRC of ``view`` (a batch from its attributes field on) and,
        when ``count``, the number of records it holds (uncompressed batches). One request
        at a time: the caller must take the result (``PendingCrc.value``) before
        submitting again, even on errors."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="tierlog-crc", daemon=True
                    )
                    self._thread.start()
        self._requests.put((view, count))
        return PendingCrc(self._results)


class PendingCrc:
    """The CRC being computed; ``value`` waits for it once and then remembers it."""

    def __init__(self, results: queue.SimpleQueue[tuple[int, int]]) -> None:
        self._results = results
        self._value: tuple[int, int] | None = None

    def value(self) -> int:
        """The CRC-32C (-1 if computing it failed)."""
        if self._value is None:
            self._value = self._results.get()
        return self._value[0]

    def records(self) -> int:
        """The records counted (``record_walk.NOT_WHOLE`` when they do not tile the batch,
        also -1 when not asked for)."""
        self.value()
        assert self._value is not None
        return self._value[1]


# One per process: logs are driven from one thread (the broker's event loop), so there is
# never more than one request in flight.
CRC_WORKER = CrcWorker()
