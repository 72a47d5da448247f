"""Removing deleted partitions' directories on a thread of their own.

A deleted partition's directory is renamed aside first (``LogManager.delete_log``: the
rename is atomic, and a start-up finishes any removal a crash interrupted). What follows is
``rmtree``, and unlinking a large log is slow: ext4 frees each extent, 0.47 s for 1.5 GiB of
segments on the benchmark box, which on the event loop stalled every request of the broker
(seen as a produce p99 of 43 ms in ``bench/cluster.py`` right after its throughput topics
were deleted). Nothing reads a renamed-aside directory again, so one daemon thread removes
them in turn, as Kafka's ``kafka-delete-logs`` task does on its scheduler.
"""

from __future__ import annotations

import logging
import queue
import shutil
import threading
from pathlib import Path

log = logging.getLogger(__name__)


def remove_now(path: Path) -> None:
    """Remove ``path`` before returning (tools and tests: no thread)."""
    shutil.rmtree(path, ignore_errors=True)


class DirRemover:
    """``submit`` returns at once; the directory goes on the remover's thread, in order."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, path: Path) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tierlog-delete-logs", daemon=True
                )
                self._thread.start()
        self._queue.put(path)

    def close(self, timeout: float = 30.0) -> None:
        """Finish what was submitted (bounded by ``timeout``), then stop the thread. What
        is left is removed at the next start (``LogManager`` drops leftovers)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            path = self._queue.get()
            if path is None:
                return
            try:
                shutil.rmtree(path)
            except OSError as exc:  # the next start removes what is left
                log.warning("cannot remove %s yet: %s", path, exc)
