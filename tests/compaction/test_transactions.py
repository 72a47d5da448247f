"""The log cleaner on transactional logs (KIP-98, KIP-534; Kafka's ``Cleaner`` with
``CleanedTransactionMetadata``): interleaved committed and aborted transactions, cleaned.

What a read_committed consumer sees (``aborted_filter`` over the log and its .txnindex
files) is the same before and after, up to superseded values; aborted records are gone;
markers stay while their transactions have batches left, then until their delete horizon,
and go after it; a key whose latest write was aborted keeps its committed value; nothing
at or above the first unstable offset is touched; the vectorised and reference paths
write the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tierlog.compaction.cleaner import LogCleaner
from tierlog.compaction.offset_map import OffsetMap
from tierlog.compaction.pass_filter import CleanStats, PassFilter, keyed_offsets
from tierlog.compaction.segment_cleaner import clean, remove_cleaned
from tierlog.compaction.txn_tracker import CleanedTransactions, undecided_from
from tierlog.local.log import Log
from tierlog.local.log_manager import LogManager
from tierlog.records.aborted_filter import filter_aborted
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.header import Attr, BatchHeader, Compression, iter_batches, parse_header
from tierlog.records.reader import decode_batch, iter_records
from tierlog.records.txn_index_codec import AbortedTxn
from tierlog.records.varint import BytesLike
from tierlog.util.clock import ManualClock

from .conftest import compacted

HOUR = 3_600_000
Row = tuple[int, bytes | None, bytes | None]


@dataclass
class Producer:
    """A transactional producer writing to one log (sequences counted per producer)."""

    pid: int
    epoch: int = 0
    seq: int = 0
    open: bool = False
    written: list[int] = field(default_factory=list)  # offsets of the open transaction

    def send(
        self,
        log: Log,
        items: list[tuple[bytes, bytes | None]],
        clock: ManualClock,
        codec: Compression = Compression.NONE,
    ) -> tuple[int, int]:
        now = clock.milliseconds()
        batch = build_batch(
            [Record(k, v, timestamp=now) for k, v in items],
            compression=codec,
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=self.seq,
            transactional=True,
        )
        self.seq += len(items)
        info = log.append(batch)
        self.open = True
        self.written.extend(range(info.first_offset, info.last_offset + 1))
        return info.first_offset, info.last_offset

    def end(self, log: Log, commit: bool) -> int:
        offset = log.append_marker(self.pid, self.epoch, 0, commit=commit, leader_epoch=0)
        self.open = False
        self.written = []
        return offset.first_offset


def log_bytes(log: Log) -> bytes:
    return b"".join(s.path.read_bytes() for s in log.segments)


def raw_batches(log: Log) -> list[tuple[BatchHeader, bytes]]:
    data = log_bytes(log)
    return [(h, data[p : p + h.size]) for p, h in iter_batches(data)]


def committed_view(log: Log) -> list[Row]:
    """Every record a read_committed consumer reading from the log start gets: the log's
    batches, less aborted transactions' records (as listed by the .txnindex files) and
    control batches (Kafka's consumer rule, ``aborted_filter``)."""
    data = log_bytes(log)
    aborted = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    out: list[Row] = []
    for start, end in filter_aborted(data, aborted):
        position = start
        while position < end:
            header, records = decode_batch(data, position)
            out.extend((r.offset, r.key, r.value) for r in records)
            position += header.size
    return out


def latest(rows: list[Row]) -> dict[bytes | None, Row]:
    out: dict[bytes | None, Row] = {}
    for row in rows:
        out[row[1]] = row
    return out


def markers(log: Log) -> list[tuple[int, int, bool]]:
    """(offset, producer id, has a delete horizon) of every control batch with a record."""
    return [
        (h.base_offset, h.producer_id, bool(h.attributes & Attr.DELETE_HORIZON))
        for h, _ in raw_batches(log)
        if h.is_control and h.record_count
    ]


def fill(log: Log, clock: ManualClock, rnd: random.Random) -> dict[str, set[int]]:
    """Interleaved transactions of three producers (about a third aborted, some spanning
    segments) and plain records, over 30 keys; every transaction ends. Returns the
    offsets of aborted and of committed transactional records."""
    producers = [Producer(pid) for pid in (11, 12, 13)]
    aborted: set[int] = set()
    committed: set[int] = set()
    plain = 0
    for _ in range(400):
        p = rnd.choice(producers)
        roll = rnd.random()
        if roll < 0.15:
            key = b"k%d" % rnd.randrange(30)
            log.append(build_batch([Record(key, b"plain-%d" % plain, timestamp=0)]))
            plain += 1
        elif p.open and roll < 0.35:
            commit = rnd.random() < 0.65
            (committed if commit else aborted).update(p.written)
            p.end(log, commit)
        else:
            items = [
                (b"k%d" % rnd.randrange(30), rnd.choice([None, b"v%d" % rnd.randrange(1000)]))
                for _ in range(rnd.randrange(1, 5))
            ]
            p.send(log, items, clock, rnd.choice([Compression.NONE, Compression.GZIP]))
        clock.advance(1)
    for p in producers:
        if p.open:
            (aborted).update(p.written)
            p.end(log, commit=False)
    return {"aborted": aborted, "committed": committed}


def close_all(log: Log, clock: ManualClock) -> None:
    """Roll, then one record so the segment holding the last marker is closed."""
    log.roll()
    log.append(build_batch([Record(b"tail", b"x", timestamp=clock.milliseconds())]))


@pytest.mark.parametrize("seed", range(4))
def test_cleaning_keeps_the_read_committed_view_and_drops_aborted_records(
    seed: int, manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    rnd = random.Random(seed)
    log = manager.get_or_create_log("t", 0, compacted(delete_retention_ms=HOUR))
    written = fill(log, clock, rnd)
    close_all(log, clock)
    before = committed_view(log)
    markers_before = markers(log)
    assert written["aborted"] and len(log.segments) > 5

    assert cleaner.clean_once()
    after = committed_view(log)
    # Nothing visible changed but superseded values: every kept record was visible, and
    # every key's latest visible value is there.
    assert set(after) <= set(before)
    values = {k: r for k, r in latest(before).items() if r[2] is not None}
    assert {k: r for k, r in latest(after).items() if r[2] is not None} == values
    raw = {r.offset for h, b in raw_batches(log) if not h.is_control for r in iter_records(b)}
    assert not raw & written["aborted"], "aborted records must be gone"
    # Markers are all kept by the pass that removed their transactions' data.
    assert markers(log) == markers_before

    # The next pass finds markers with no data left: stamped, not removed.
    clock.advance(1)
    _force(cleaner, log)
    stamped = markers(log)
    assert [m[:2] for m in stamped] == [m[:2] for m in markers_before]
    assert any(has for _, _, has in stamped)
    assert committed_view(log) == after

    # Past the horizon, the stamped markers go; the others (a producer's last batch is
    # kept, so its transaction's marker is too) stay unstamped.
    clock.advance(HOUR + 1)
    assert cleaner.clean_once(), "a marker's passed horizon makes the log due"
    left = markers(log)
    assert [m for m in stamped if not m[2]] == left
    assert len(left) < len(markers_before)
    # The tombstones' horizon passed too (stamped by the first pass).
    assert committed_view(log) == [r for r in after if r[2] is not None]
    entries = log.collect_aborted_transactions(0, log.log_end_offset)
    marker_offsets = {m[0] for m in left}
    assert all(e.last_offset in marker_offsets for e in entries), "no entry without its marker"


def _force(cleaner: LogCleaner, log: Log) -> None:
    """Run a pass whatever the log's dirty ratio (a pass with nothing dirty)."""
    tp = ("t", 0)
    part = cleaner.cleanable(tp, log)
    cleaner.apply(tp, part, clean(cleaner.job_for(tp, part)))


def test_a_key_whose_latest_write_was_aborted_keeps_its_committed_value(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted())
    a, b = Producer(1), Producer(2)
    a.send(log, [(b"user", b"committed"), (b"other", b"1")], clock)
    a.end(log, commit=True)
    b.send(log, [(b"user", b"aborted")], clock)
    log.append(build_batch([Record(b"plain", b"p", timestamp=0)]))
    b.send(log, [(b"user", b"aborted-2"), (b"other", None)], clock)
    b.end(log, commit=False)
    close_all(log, clock)
    assert cleaner.clean_once()
    rows = committed_view(log)
    assert latest(rows)[b"user"][2] == b"committed"
    assert latest(rows)[b"other"][2] == b"1"
    every = [
        r.value for h, batch in raw_batches(log) if not h.is_control for r in iter_records(batch)
    ]
    assert b"aborted" not in every and b"aborted-2" not in every
    # b's aborted batches were its last: kept empty (the producer's sequence), so its
    # marker and .txnindex entry stay too.
    mine = [h for h, _ in raw_batches(log) if h.producer_id == 2 and not h.is_control]
    assert [h.record_count for h in mine] == [0]
    assert log.collect_aborted_transactions(0, log.log_end_offset)[0].producer_id == 2


def test_nothing_at_or_above_the_first_unstable_offset_is_cleaned(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted())
    for i in range(40):
        log.append(build_batch([Record(b"k%d" % (i % 4), b"%d" % i, timestamp=0)]))
    log.roll()
    p = Producer(5)
    first, _ = p.send(log, [(b"k1", b"open")], clock)  # stays open
    for i in range(40):
        log.append(build_batch([Record(b"k%d" % (i % 4), b"late-%d" % i, timestamp=0)]))
        if i % 10 == 9:
            log.roll()
    assert log.first_unstable_offset == first
    part = cleaner.cleanable(("t", 0), log)
    assert part.first_uncleanable_offset <= first
    untouched = {s.base_offset: s.path.read_bytes() for s in log.segments if s.base_offset >= first}
    assert cleaner.clean_once()
    after = {s.base_offset: s.path.read_bytes() for s in log.segments if s.base_offset >= first}
    assert after == untouched
    # The part below it was cleaned: its superseded values are gone.
    below = [r for h, b in raw_batches(log) if h.base_offset < first for r in iter_records(b)]
    assert len(below) == 4
    p.end(log, commit=True)
    assert log.first_unstable_offset is None


def test_the_cleaned_txnindex_keeps_entries_of_markers_with_data(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock, tmp_path: Path
) -> None:
    log = manager.get_or_create_log("t", 0, compacted(delete_retention_ms=HOUR))
    a, b = Producer(1), Producer(2)
    a.send(log, [(b"x", b"1")], clock)
    a.end(log, commit=False)  # aborted, then superseded nowhere: its data goes
    b.send(log, [(b"y", b"1")], clock)
    b.end(log, commit=False)
    a.send(log, [(b"x", b"2")], clock)  # a's last batch: a committed transaction
    a.end(log, commit=True)
    b.send(log, [(b"y", b"2")], clock)
    b.end(log, commit=True)
    close_all(log, clock)
    indexed = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [e.producer_id for e in indexed] == [1, 2]
    assert cleaner.clean_once()
    # First pass: the data went, markers and entries stay (Kafka keeps an entry while a
    # batch of its transaction was seen by the pass).
    assert log.collect_aborted_transactions(0, log.log_end_offset) == indexed
    txn_files = sorted(p.name for p in log.directory.glob("*.txnindex"))
    assert txn_files, "the cleaned segment has its .txnindex"
    _force(cleaner, log)
    # Second pass: no data of them left, so no entry; the markers are stamped.
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []
    empty = [p.name for p in log.directory.glob("*.txnindex") if p.stat().st_size == 0]
    assert empty == [], "an emptied index is removed, not left as an empty file"
    assert [has for _, pid, has in markers(log) if pid in (1, 2)] == [True, True, False, False]


def _txn_chunk(rnd: random.Random) -> tuple[list[tuple[bytes, BatchHeader]], list[AbortedTxn]]:
    """A chunk of transactional and plain batches with markers, and the aborted ones."""
    out: list[tuple[bytes, BatchHeader]] = []
    aborted: list[AbortedTxn] = []
    open_at: dict[int, int] = {}
    offset = 0
    for _ in range(rnd.randrange(5, 40)):
        pid = rnd.choice([1, 2, 3, -1])
        if pid > 0 and pid in open_at and rnd.random() < 0.3:
            commit = rnd.random() < 0.5
            batch = build_control_batch(
                ControlType.COMMIT if commit else ControlType.ABORT,
                producer_id=pid,
                producer_epoch=0,
                base_offset=offset,
                timestamp=0,
            )
            if not commit:
                aborted.append(AbortedTxn(pid, open_at[pid], offset, offset + 1))
            del open_at[pid]
        else:
            records = [
                Record(
                    b"key-%d" % rnd.randrange(20),
                    None if rnd.random() < 0.2 else rnd.randbytes(rnd.randrange(30)),
                    timestamp=1000 + rnd.randrange(100),
                )
                for _ in range(rnd.randrange(1, 8))
            ]
            batch = build_batch(
                records,
                base_offset=offset,
                compression=rnd.choice([Compression.NONE, Compression.LZ4]),
                producer_id=pid,
                producer_epoch=0 if pid > 0 else -1,
                base_sequence=offset if pid > 0 else -1,
                transactional=pid > 0,
            )
            if pid > 0:
                open_at.setdefault(pid, offset)
        header = parse_header(batch)
        out.append((batch, header))
        offset = header.next_offset
    return out, aborted


class _Sink:
    def __init__(self) -> None:
        self.batches: list[bytes] = []

    def append(self, batch: BytesLike, last_offset: int, max_timestamp: int) -> None:
        self.batches.append(bytes(batch))

    def append_parts(
        self, parts: Sequence[BytesLike], size: int, last_offset: int, max_timestamp: int
    ) -> None:
        self.batches.append(b"".join(parts))


@pytest.mark.parametrize("seed", range(20))
def test_vectorised_and_reference_paths_agree_on_transactions(seed: int) -> None:
    rnd = random.Random(seed)
    chunk, aborted = _txn_chunk(rnd)
    end = chunk[-1][1].next_offset
    outputs = []
    for vectorised in (True, False):
        offset_map = OffsetMap(1 << 16)
        offset_map.reset(0)
        txns = CleanedTransactions(aborted)
        data = []
        for batch, header in chunk:
            if header.is_control:
                txns.on_marker(header, batch)
            elif not txns.on_batch(header):
                data.append((batch, header))
        digests, offsets = keyed_offsets(data, 0, (1, 2), vectorised)
        offset_map.put(digests, offsets)
        stats = CleanStats()
        rules = PassFilter(
            offset_map,
            end,
            now_ms=5000,
            delete_retention_ms=HOUR,
            producer_last_offsets={1: chunk[-1][1].last_offset},
            stats=stats,
            seed=(1, 2),
            vectorised=vectorised,
            transactions=CleanedTransactions(aborted),
        )
        sink = _Sink()
        rules.chunk(chunk, sink)
        outputs.append((sink.batches, stats, rules.transactions.kept_entries, rules.next_horizon))
    assert outputs[0] == outputs[1]
    kept = [parse_header(b) for b in outputs[0][0]]
    aborted_offsets = {
        o
        for t in aborted
        for h in (h for _, h in chunk if h.producer_id == t.producer_id and not h.is_control)
        if t.first_offset <= h.base_offset < t.last_offset
        for o in range(h.base_offset, h.next_offset)
    }
    assert not any(h.record_count and h.base_offset in aborted_offsets for h in kept)


def test_undecided_from_is_the_first_open_transaction() -> None:
    def header(offset: int, pid: int, attrs: int) -> BatchHeader:
        return parse_header(
            build_batch(
                [Record(b"k", b"v", timestamp=0)],
                base_offset=offset,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                transactional=bool(attrs & Attr.TRANSACTIONAL),
                control=bool(attrs & Attr.CONTROL),
            )
        )

    txn, ctl = Attr.TRANSACTIONAL, Attr.TRANSACTIONAL | Attr.CONTROL
    assert undecided_from([header(0, 1, txn), header(1, 1, ctl)]) is None
    assert undecided_from([header(0, 1, txn), header(1, 2, txn), header(2, 1, ctl)]) == 1
    assert undecided_from([header(0, 1, 0), header(3, 2, txn), header(4, 2, txn)]) == 3


def test_a_producers_last_marker_stays_empty_when_it_has_no_data_batch_left(
    manager: LogManager, cleaner: LogCleaner, clock: ManualClock
) -> None:
    log = manager.get_or_create_log("t", 0, compacted(delete_retention_ms=HOUR))
    p = Producer(4)
    p.send(log, [(b"a", b"aborted")], clock)
    # The coordinator aborts with a bumped epoch (a timed-out transaction): the producer's
    # state keeps no data batch, only the epoch, which the marker carries.
    log.append_marker(4, 1, 0, commit=False, leader_epoch=0)
    log.append(build_batch([Record(b"a", b"plain", timestamp=0)]))
    close_all(log, clock)
    entry = log.producer_state.last_entry(4)
    assert entry is not None and not entry.batches and entry.producer_epoch == 1
    assert cleaner.clean_once()
    _force(cleaner, log)
    clock.advance(HOUR + 1)
    assert cleaner.clean_once()
    mine = [h for h, _ in raw_batches(log) if h.producer_id == 4]
    assert [(h.is_control, h.record_count, h.producer_epoch) for h in mine] == [(True, 0, 1)]
    assert [r[2] for r in committed_view(log)] == [b"plain", b"x"]


@pytest.mark.parametrize("seed", range(3))
def test_a_whole_pass_writes_the_same_bytes_on_both_paths(
    seed: int,
    manager: LogManager,
    cleaner: LogCleaner,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = manager.get_or_create_log("t", 0, compacted(delete_retention_ms=HOUR))
    fill(log, clock, random.Random(100 + seed))
    close_all(log, clock)
    tp = ("t", 0)
    job = cleaner.job_for(tp, cleaner.cleanable(tp, log))

    def written() -> dict[str, bytes]:
        result = clean(job)
        out = {}
        for group in result.groups:
            stem = group.log_path.removesuffix(".log.cleaned")
            for path in Path(stem).parent.glob(Path(stem).name + ".*.cleaned"):
                out[path.name] = path.read_bytes()
            remove_cleaned(group.log_path)
        assert result.stats.aborted_removed > 0
        return out

    vectorised = written()
    monkeypatch.setattr("tierlog.compaction.pass_filter.locate", lambda batches: None)
    reference = written()
    assert vectorised == reference
    assert any(name.endswith(".txnindex.cleaned") for name in vectorised)
