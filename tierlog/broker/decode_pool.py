"""Where the broker decodes produced records, when a produce needs it: off the event loop,
one batch set at a time broker-wide.

The produce path reads headers (DESIGN.md principle 2), and ``tierlog.records.validate``
clears most batches that way. What it cannot clear must be decoded before it is stored: a
compacted topic's records (every record needs a key) and a compressed block that could
expand past what a reader decompresses with nothing but decoding to tell (a zstd frame
without its content size; issue 20, item 10). Decoding is ``validate.decode``: in pieces,
so memory stays at about one piece per job, and within the request's budget of decoded
bytes. This pool bounds it overall: ``DECODE_THREADS`` jobs run at once, the rest wait in
arrival order. Four clients sending bombs at once cost one thread's time for as long as
their budgets last, and no more memory than one piece each; before, each decoded on a
thread of its own, whole blocks in memory, and four gzip bombs took the broker to 1.4 GB.

Recompression (a topic whose ``compression.type`` is not the batch's codec) runs here too,
after decoding (``validate.prepare``): it holds one batch's decompressed records at a time,
at most what a reader decompresses, within the same budget.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from tierlog.records.validate import RequestBudget, ValidatedBatches, prepare

# One: the event loop keeps the other core of a small box, and a produce that needs no
# decoding never waits for this pool.
DECODE_THREADS = 1


class DecodePool:
    """``decode`` runs ``validate.prepare`` (``decode``, then ``recompress`` for a topic
    whose ``compression.type`` is not the batches' codec) on the pool's threads."""

    def __init__(self, threads: int = DECODE_THREADS) -> None:
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="tierlog-decode")

    async def decode(self, batches: ValidatedBatches, budget: RequestBudget) -> int:
        """Decode and recompress ``batches`` (``validate.prepare``) off the event loop;
        what it cost."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, prepare, batches, budget)

    def close(self) -> None:
        """Stop taking jobs; a job running finishes on its own (bounded by its budget)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
