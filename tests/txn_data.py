"""Logs holding Kafka transactions, built by hand until the broker writes them (KIP-98).

``append_transactions`` appends, with offsets it assigns itself (``append_as_follower``),
interleaved transactional batches of three producers, non-transactional batches and the
COMMIT / ABORT markers, and writes each segment's ``.txnindex`` with the codec, as the
local log does for a segment an ABORT marker went into. It returns what a read_committed
reader must see (``committed``) and what a read_uncommitted one sees (``all_values``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tierlog.local.log import Log
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.txn_index_codec import TXN_INDEX_SUFFIX, AbortedTxn, encode_entries

T0 = 1_700_000_000_000
PIDS = (4000, 4001, 4002)


@dataclass
class TxnLog:
    """What ``append_transactions`` wrote."""

    committed: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, value)
    all_values: list[tuple[int, bytes]] = field(default_factory=list)
    aborted: list[AbortedTxn] = field(default_factory=list)  # in marker order
    # Offsets of every data record of each aborted transaction.
    aborted_offsets: set[int] = field(default_factory=set)


def _records(tag: str, n: int, ts: int) -> list[Record]:
    return [Record(f"{tag}-k{i}".encode(), f"{tag}-{i}".encode(), timestamp=ts) for i in range(n)]


def append_transactions(log: Log, rounds: int = 12, *, abort_every: int = 3) -> TxnLog:
    """Append ``rounds`` rounds to ``log``; in each, every producer writes a transaction of
    two batches interleaved with the others' and with a plain batch, then the producers'
    markers follow: producer ``p`` aborts in round ``r`` when ``(r + p) % abort_every == 0``.
    Aborted transactions thus start in one segment and end in a later one now and then.
    """
    out = TxnLog()
    offset = log.log_end_offset
    ts = T0
    seq = dict.fromkeys(PIDS, 0)

    def put(data: bytes, values: list[tuple[int, bytes]] | None) -> None:
        nonlocal offset
        info = log.append_as_follower(data)
        offset = info.last_offset + 1
        for item in values or ():
            out.all_values.append(item)

    for r in range(rounds):
        first: dict[int, int] = {}
        written: dict[int, list[tuple[int, bytes]]] = {p: [] for p in PIDS}
        for step in range(2):
            for p in PIDS:
                recs = _records(f"r{r}p{p}s{step}", 3, ts)
                data = build_batch(
                    recs, base_offset=offset, producer_id=p, producer_epoch=0,
                    base_sequence=seq[p], transactional=True,
                )  # fmt: skip
                seq[p] += len(recs)
                first.setdefault(p, offset)
                values = [(offset + i, rec.value or b"") for i, rec in enumerate(recs)]
                written[p] += values
                put(data, values)
            plain = _records(f"r{r}plain{step}", 2, ts)
            values = [(offset + i, rec.value or b"") for i, rec in enumerate(plain)]
            out.committed += values
            put(build_batch(plain, base_offset=offset), values)
            ts += 10
        open_pids = list(PIDS)
        for n, p in enumerate(PIDS):
            abort = (r + n) % abort_every == 0
            marker = offset
            kind = ControlType.ABORT if abort else ControlType.COMMIT
            put(
                build_control_batch(
                    kind, producer_id=p, producer_epoch=0, base_offset=marker, timestamp=ts
                ),
                None,
            )
            open_pids.remove(p)
            if abort:
                # The LSO once the marker is written: the earliest open transaction's
                # first offset, else the log end.
                lso = min((first[q] for q in open_pids), default=marker + 1)
                out.aborted.append(AbortedTxn(p, first[p], marker, lso))
                out.aborted_offsets |= {o for o, _ in written[p]}
            else:
                out.committed += written[p]
    out.committed.sort()
    write_txn_indexes(log, out.aborted)
    return out


def write_txn_indexes(log: Log, aborted: list[AbortedTxn]) -> None:
    """Each segment's ``.txnindex``: the entries whose marker it holds, none when none."""
    bases = [s.base_offset for s in log.segments]
    per_segment: dict[int, list[AbortedTxn]] = {}
    for txn in aborted:
        base = max(b for b in bases if b <= txn.last_offset)
        per_segment.setdefault(base, []).append(txn)
    for segment in log.segments:
        path = segment.path.with_suffix(TXN_INDEX_SUFFIX)
        entries = per_segment.get(segment.base_offset)
        if entries:
            path.write_bytes(encode_entries(entries))
        else:
            path.unlink(missing_ok=True)
