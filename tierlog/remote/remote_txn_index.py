"""The remote tier's aborted transactions (KIP-98 with KIP-405): each remote segment's
``.txnindex`` object, fetched off the event loop, decoded (``tierlog.records.txn_index_codec``
has the byte format) and kept in an LRU, and searched as Kafka's
``RemoteLogManager.collectAbortedTransactions`` does.

Owned by ``remote_reads.RemoteReads``; used on the event loop only (the LRU takes no lock),
while the fetches run where its ``off_loop`` puts them (the ``remote-fetch`` pool).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from tierlog.records.aborted_filter import search_index
from tierlog.records.txn_index_codec import AbortedTxn, CorruptTxnIndexError, decode_entries
from tierlog.remote import manifest as mf
from tierlog.remote.api import IndexKind, RemoteSegment, RemoteStorage, RemoteStorageError

# Decoded indexes kept (by object name). They are small (34 bytes an aborted transaction)
# and consecutive read_committed fetches of a range search the same ones again.
TXN_INDEX_CACHE_SIZE = 256


class RemoteTxnIndexes:
    """Args:
    store: where the ``.txnindex`` objects are.
    off_loop: runs a blocking call away from the event loop, bounded in time (the
        remote-fetch pool of ``RemoteReads`` with remote.fetch.max.wait.ms).
    size: how many decoded indexes the LRU keeps.
    """

    def __init__(
        self,
        store: RemoteStorage,
        off_loop: Callable[[Callable[[], bytes]], Awaitable[bytes]],
        size: int = TXN_INDEX_CACHE_SIZE,
    ) -> None:
        self.store = store
        self.off_loop = off_loop
        self.size = size
        self._decoded: OrderedDict[str, list[AbortedTxn]] = OrderedDict()

    async def collect(
        self, manifest: mf.Manifest, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The entries a fetch of ``[fetch_offset, upper_bound_offset)`` must be told
        about: from the committed segment holding ``fetch_offset`` (or the next one) on,
        in order, each index's overlapping entries until one's last stable offset reaches
        the bound or the segments run out. Segments without an index are skipped.

        Raises:
            RemoteStorageError: an index cannot be fetched or decoded.
            TimeoutError: the store did not answer in time.
        """
        out: list[AbortedTxn] = []
        if upper_bound_offset <= fetch_offset:
            return out
        # Only segments with an index can list anything: a partition without aborted
        # transactions costs one bisection per fetch (issue 26, item 4).
        for segment in mf.txn_index_segments_from(manifest, fetch_offset):
            entries = await self.entries(segment)
            found, complete = search_index(entries, fetch_offset, upper_bound_offset)
            out += found
            if complete:
                break
        return out

    async def entries(self, segment: RemoteSegment) -> list[AbortedTxn]:
        """One ``has_txn_index`` segment's decoded index, from the LRU or fetched."""
        name = mf.txn_index_object_name(segment)
        if name is None:
            raise ValueError(f"segment {segment.segment_id} has no transaction index")
        entries = self._decoded.get(name)
        if entries is not None:
            self._decoded.move_to_end(name)
            return entries
        data = await self.off_loop(
            functools.partial(self.store.fetch_index, segment, IndexKind.TRANSACTION)
        )
        try:
            entries = decode_entries(data, name)
        except CorruptTxnIndexError as exc:
            raise RemoteStorageError(f"corrupt remote transaction index: {exc}") from None
        self._decoded[name] = entries
        while len(self._decoded) > self.size:
            self._decoded.popitem(last=False)
        return entries
