"""A segment's aborted-transaction index file, ``<base offset>.txnindex`` (Kafka's
``TransactionIndex``).

The bytes are Kafka's, a plain sequence of 34-byte entries with no header (the layout is
documented in ``txn_index_codec``, which encodes and decodes them)::

     0  version  int16 | producer_id int64 | first_offset int64 | last_offset int64
        | last_stable_offset int64

One entry per transaction aborted by a marker in the segment, in marker order (so
``last_offset`` rises). The file is created at the first entry only: a segment without
aborted transactions has none, as in Kafka. The entries are also kept in memory (a
segment rarely holds many aborts; 34 bytes each), so reads never touch the file, and no
file descriptor is held: the file is opened for each write and for the ``fsync`` of a
flush (an abort is rare next to a batch; issue 20, item 8, counts descriptors).

Owned by its ``LogSegment``, which renames and deletes it with its other files; not
thread-safe (the log's event loop).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tierlog.records.txn_index_codec import (
    ENTRY_SIZE,
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    CorruptTxnIndexError,
    decode_entries,
    encode_entry,
    overlapping,
)

log = logging.getLogger(__name__)


def txn_index_path(directory: Path, base_offset: int) -> Path:
    return Path(directory) / f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


class TransactionIndex:
    """Args:
    path: the file (need not exist).

    ``corrupt`` is True when the file existed but was not whole entries: it is then
    treated as empty and the owner should rebuild it (segment recovery does).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        # Entries written since the last flush (their fsync is due).
        self._dirty = False
        self.corrupt = False
        self._entries: list[AbortedTxn] = []
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        try:
            self._entries = decode_entries(data, str(self.path))
        except CorruptTxnIndexError as exc:
            log.warning("%s; it will be rebuilt from the log", exc)
            self.corrupt = True

    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, in file order (a copy)."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def last_offset(self) -> int | None:
        return self._entries[-1].last_offset if self._entries else None

    def _write(self, data: bytes, position: int) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, position)
        finally:
            os.close(fd)
        self._dirty = True

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry at the end of the file (creating it).

        Raises:
            ValueError: ``txn.last_offset`` is not above the previous entry's (Kafka's
                rule: markers are appended in offset order).
        """
        last = self.last_offset
        if last is not None and txn.last_offset <= last:
            raise ValueError(
                f"{self.path}: aborted transaction ending at {txn.last_offset} is not after "
                f"the last one, ending at {last}"
            )
        self._write(encode_entry(txn), len(self._entries) * ENTRY_SIZE)
        self._entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The entries a fetch of [fetch_offset, upper_bound_offset) must list, and
        whether the search is complete: an entry whose ``last_stable_offset`` reaches the
        upper bound means no later segment can hold one that matters (Kafka's
        ``TransactionIndex.collectAbortedTxns``)."""
        found: list[AbortedTxn] = []
        for txn in self._entries:
            found += overlapping((txn,), fetch_offset, upper_bound_offset)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of markers at or after ``offset`` (the log was cut there)."""
        kept = [txn for txn in self._entries if txn.last_offset < offset]
        if len(kept) == len(self._entries) and not self.corrupt:
            return
        self._entries = kept
        self.corrupt = False
        if self.path.exists():
            os.truncate(self.path, len(kept) * ENTRY_SIZE)
            self._dirty = True

    def reset(self) -> None:
        """Forget every entry and remove the file (before rebuilding it by recovery)."""
        self._entries = []
        self.corrupt = False
        self._dirty = False
        self.path.unlink(missing_ok=True)

    def flush(self) -> None:
        if not self._dirty:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    def close(self) -> None:
        """Nothing to release (no descriptor is held); kept for the segment's symmetry."""

    def rename(self, new_path: Path) -> None:
        """Move the file (when there is one) to ``new_path``; later writes go there."""
        if self.path.exists():
            os.rename(self.path, new_path)
        self.path = Path(new_path)

    def delete(self) -> None:
        self._dirty = False
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path.name}, entries={len(self._entries)})"
