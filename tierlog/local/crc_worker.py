"""A background thread that computes CRC-32C of large batches while the log writes them.

For a 1 MiB batch the CRC check costs about a third of the write itself; ``crc32c``
releases the GIL, so running it beside the ``pwritev`` hides most of that. The worker only
reads the (immutable) bytes it is handed and returns an int, so the log's single-threaded
contract holds: the log still makes every state change on its own thread, after the result.
"""

from __future__ import annotations

import queue
import threading

from crc32c import crc32c

# Below this, handing the work to another thread costs more than it saves.
OVERLAP_MIN_BYTES = 256 * 1024


class CrcWorker:
    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[memoryview] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while True:
            view = self._requests.get()
            self._results.put(int(crc32c(view, gil_release_mode=1)))

    def submit(self, view: memoryview) -> PendingCrc:
        """Start computing the CRC of ``view``. One request at a time: the caller must
        take the result (``PendingCrc.value``) before submitting again, even on errors."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="tierlog-crc", daemon=True
                    )
                    self._thread.start()
        self._requests.put(view)
        return PendingCrc(self._results)


class PendingCrc:
    """The CRC being computed; ``value`` waits for it once and then remembers it."""

    def __init__(self, results: queue.SimpleQueue[int]) -> None:
        self._results = results
        self._value: int | None = None

    def value(self) -> int:
        if self._value is None:
            self._value = self._results.get()
        return self._value


# One per process: logs are driven from one thread (the broker's event loop), so there is
# never more than one request in flight.
CRC_WORKER = CrcWorker()
