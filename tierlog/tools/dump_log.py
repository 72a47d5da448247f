"""``tierlog dump-log``: print the batches, records and index entries of segment files, like
Kafka's ``kafka-dump-log.sh`` (DumpLogSegments), and check indexes against their log.

Reads files only; never writes. A corrupt batch is reported with its position and ends the
dump of that file (nothing after a bad length can be trusted).

Cleaned (compacted) segments print as Kafka prints them, plus what compaction left there:
each batch's ``deleteHorizonMs`` (KIP-534: set on a batch whose tombstones the cleaner has
seen once; they go after that time), empty batches marked ``(empty: kept for producer N)``
(the cleaner keeps an idempotent producer's last batch for its sequence numbers), and with
``--deep`` each tombstone's ``payload: null (tombstone)``. A last line lists the offsets
that hold no record (between batches; with ``--deep`` inside them too): the cleaner removed
those records but never moves an offset, so gaps are not corruption.

A path may also be a remote segment object's URL (``file://``, ``s3://``..., as ``tierlog
remote ls`` lists them: ``<base offset:020d>-<segment id>.log``): the object is read through
fsspec (``tierlog.tools.remote_tools.fetched``) and printed exactly as the same local file
would be, only named by its URL.

An aborted-transaction index (``.txnindex``, KIP-98; local, or a remote segment's object)
prints one line per entry as Kafka's tool does (``version: 0 producerId: ... firstOffset:
... lastOffset: ... lastStableOffset: ...``); a partial entry at its end is a problem.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from tierlog.local.offset_index import OffsetIndex
from tierlog.local.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from tierlog.local.time_index import TimeIndex
from tierlog.records.errors import RecordsError
from tierlog.records.header import (
    NO_SEQUENCE,
    Attr,
    BatchHeader,
    TimestampType,
    compute_crc,
    parse_header,
)
from tierlog.records.txn_index_codec import (
    ENTRY_SIZE,
    ENTRY_VERSION,
    TXN_INDEX_SUFFIX,
    CorruptTxnIndexError,
    decode_entries,
)

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# A local segment file's stem is its base offset; a remote object's adds "-<segment id>"
# (tierlog.remote.manifest.object_name).
_STEM = re.compile(r"(\d+)(?:-[A-Za-z0-9_-]+)?")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _preview(data: bytes | None, limit: int = 64) -> str:
    if data is None:
        return "null"
    text = data[:limit].decode("utf-8", errors="backslashreplace")
    return text + ("..." if len(data) > limit else "")


def delete_horizon(header: BatchHeader) -> str:
    """``deleteHorizonMs`` as Kafka's DumpLogSegments prints it (a Java ``OptionalLong``):
    the batch's base timestamp is the horizon when attribute bit 6 is set (KIP-534)."""
    if header.attributes & Attr.DELETE_HORIZON:
        return f"OptionalLong[{header.base_timestamp}]"
    return "OptionalLong.empty"


def batch_notes(header: BatchHeader) -> str:
    """What compaction left on a batch that Kafka's line does not say in words."""
    if header.record_count == 0 and not header.is_control:
        return f" (empty: kept for producer {header.producer_id})"
    return ""


def record_sequence(header: BatchHeader, offset: int) -> int:
    """A record's sequence number, as Kafka prints it (-1 without an idempotent producer)."""
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (header.base_sequence + offset - header.base_offset) & 0x7FFFFFFF


def _payload(value: bytes | None) -> str:
    # Kafka prints no payload for a null value; saying "tombstone" is what a reader of a
    # compacted log wants to know (the key is deleted once the delete horizon passes).
    return "null (tombstone)" if value is None else _preview(value)


class OffsetGaps:
    """The offsets of one segment, from its base offset, that hold no record."""

    SHOWN = 8  # ranges listed; a long-cleaned segment can have thousands

    def __init__(self, base_offset: int) -> None:
        self.next = base_offset
        self.ranges: list[tuple[int, int]] = []
        self.count = 0

    def held(self, first: int, last: int) -> None:
        """Offsets ``first..last`` hold records (or a batch, when records are not read)."""
        if first > self.next:
            self.ranges.append((self.next, first - 1))
            self.count += first - self.next
        self.next = max(self.next, last + 1)

    def describe(self, inside_batches: bool) -> str | None:
        if not self.ranges:
            return None
        shown = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in self.ranges[: self.SHOWN])
        if len(self.ranges) > self.SHOWN:
            shown += f", ... ({len(self.ranges)} ranges)"
        where = "" if inside_batches else " between batches"
        return (
            f"Offsets with no record{where}: {shown} ({self.count} offsets; cleaned away by "
            "compaction, not corruption)"
        )


def base_offset_of(path: Path) -> int:
    """The base offset a segment file (or remote segment object) is named by."""
    match = _STEM.fullmatch(path.name.split(".", 1)[0])
    if match is None:
        raise ValueError(f"{path}: segment files are named by a 20-digit base offset")
    return int(match[1])


def scan_log(
    buf: memoryview, verify_crc: bool = True
) -> Iterator[tuple[int, BatchHeader | None, str | None]]:
    """Yield ``(position, header, problem)`` for each batch; a malformed or truncated batch
    ends the scan. Without ``verify_crc`` only headers are read (where batches start)."""
    position = 0
    while position < len(buf):
        try:
            header = parse_header(buf, position)
        except RecordsError as exc:
            yield position, None, str(exc)
            return
        if position + header.size > len(buf):
            yield position, header, f"truncated: {len(buf) - position} of {header.size} bytes"
            return
        problem = None
        if verify_crc and compute_crc(buf[position : position + header.size]) != header.crc:
            problem = "CRC-32C mismatch"
        yield position, header, problem
        position += header.size


def dump_log_file(path: Path, out: TextIO, deep: bool, name: str | None = None) -> int:
    """Print one ``.log`` file (headed by ``name``, default its path); returns the number
    of invalid batches found."""
    from tierlog.records.reader import iter_records  # decoding is only needed with --deep

    print(f"Dumping {name or path}", file=out)
    print(f"Log starting offset: {base_offset_of(path)}", file=out)
    size = path.stat().st_size
    if size == 0:
        return 0
    invalid = 0
    gaps = OffsetGaps(base_offset_of(path))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        buf = memoryview(m)
        try:
            for position, header, problem in scan_log(buf):
                if header is None:
                    print(f"position: {position} invalid batch: {problem}", file=out)
                    return invalid + 1
                invalid += problem is not None
                ts_name = (
                    "LogAppendTime"
                    if header.timestamp_type is TimestampType.LOG_APPEND_TIME
                    else "CreateTime"
                )
                print(
                    f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
                    f"count: {header.record_count} baseSequence: {header.base_sequence} "
                    f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
                    f"producerEpoch: {header.producer_epoch} "
                    f"partitionLeaderEpoch: {header.partition_leader_epoch} "
                    f"isTransactional: {_bool(header.is_transactional)} "
                    f"isControl: {_bool(header.is_control)} "
                    f"deleteHorizonMs: {delete_horizon(header)} position: {position} "
                    f"{ts_name}: {header.max_timestamp} size: {header.size} "
                    f"magic: {header.magic} "
                    f"compresscodec: {_CODECS.get(header.compression, '?')} crc: {header.crc} "
                    f"isvalid: {_bool(problem is None)}"
                    + (f" problem: {problem}" if problem else "")
                    + batch_notes(header),
                    file=out,
                )
                if problem and problem.startswith("truncated"):
                    return invalid
                if header.record_count and not (deep and problem is None):
                    gaps.held(header.base_offset, header.last_offset)
                if deep and problem is None:
                    if header.is_control:  # a marker's record holds its offset
                        gaps.held(header.base_offset, header.last_offset)
                    batch = bytes(buf[position : position + header.size])
                    try:
                        for record in iter_records(batch, verify_crc=False):
                            gaps.held(record.offset, record.offset)
                            keys = [k for k, _ in record.headers]
                            print(
                                f"| offset: {record.offset} {ts_name}: {record.timestamp} "
                                f"keySize: {-1 if record.key is None else len(record.key)} "
                                f"valueSize: {-1 if record.value is None else len(record.value)} "
                                f"sequence: {record_sequence(header, record.offset)} "
                                f"headerKeys: {keys} key: {_preview(record.key)} "
                                f"payload: {_payload(record.value)}",
                                file=out,
                            )
                    except RecordsError as exc:
                        invalid += 1
                        print(f"| records undecodable: {exc}", file=out)
        finally:
            buf.release()
    line = gaps.describe(inside_batches=deep)
    if line:
        print(line, file=out)
    return invalid


def dump_index_file(path: Path, out: TextIO, verify: bool, name: str | None = None) -> int:
    """Print an ``.index`` or ``.timeindex`` (headed by ``name``, default its path); with
    ``verify``, check each entry against the ``.log`` beside it. Returns the number of
    mismatches."""
    print(f"Dumping {name or path}", file=out)
    base = base_offset_of(path)
    log_path = path.with_suffix(LOG_SUFFIX)
    # Batch boundaries of the log beside it: what entries are checked against, and how a
    # preallocated (zero) tail is told from real entries. Headers only, through mmap.
    boundaries: dict[int, BatchHeader] = {}
    if log_path.exists() and log_path.stat().st_size:
        with open(log_path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            view = memoryview(m)
            try:
                for position, header, problem in scan_log(view, verify_crc=False):
                    if header is None or problem:
                        break
                    boundaries[position] = header
            finally:
                view.release()
    by_last_offset = {h.last_offset: h for h in boundaries.values()}
    # Open a copy-free read of the index without ever growing it (the tool must not write).
    index_cls = OffsetIndex if path.suffix == INDEX_SUFFIX else TimeIndex
    mismatches = 0
    size = path.stat().st_size
    entry = index_cls.ENTRY
    with open(path, "rb") as f:
        raw = f.read(size - size % entry.size)
    for n in range(len(raw) // entry.size):
        a, b = entry.unpack_from(raw, n * entry.size)
        if index_cls is OffsetIndex:
            offset, position = base + a, b
            if offset == base and position == 0 and (n > 0 or not _real_first_entry(boundaries)):
                # Preallocated zeros after the last entry (the active segment's index). An
                # entry (base, 0) is real only if the first batch ends at the base offset.
                break
            line = f"offset: {offset} position: {position}"
            if verify:
                header = boundaries.get(position)
                if header is None or header.last_offset != offset:
                    mismatches += 1
                    line += " MISMATCH: no batch ending at that offset starts there"
        else:
            timestamp, offset = a, base + b
            if timestamp == 0 and b == 0:
                break  # preallocated zeros: no record is stamped at the epoch start
            line = f"timestamp: {timestamp} offset: {offset}"
            if verify and offset not in by_last_offset:
                mismatches += 1
                line += " MISMATCH: no batch ends at that offset"
        print(line, file=out)
    return mismatches


def dump_txn_index_file(path: Path, out: TextIO, name: str | None = None) -> int:
    """Print a ``.txnindex`` (headed by ``name``, default its path), one aborted
    transaction a line. Returns 1 when its bytes are not whole entries (the whole entries
    before the damage are printed), else 0."""
    print(f"Dumping {name or path}", file=out)
    data = path.read_bytes()
    whole = len(data) - len(data) % ENTRY_SIZE
    try:
        entries = decode_entries(data[:whole], str(name or path))
    except CorruptTxnIndexError as exc:
        print(f"Found invalid entries: {exc}", file=out)
        return 1
    for txn in entries:
        print(
            f"version: {ENTRY_VERSION} producerId: {txn.producer_id} firstOffset: "
            f"{txn.first_offset} lastOffset: {txn.last_offset} lastStableOffset: "
            f"{txn.last_stable_offset}",
            file=out,
        )
    if whole != len(data):
        print(f"Found a partial entry: {len(data) - whole} bytes at position {whole}", file=out)
        return 1
    return 0


def _real_first_entry(boundaries: dict[int, BatchHeader]) -> bool:
    first = boundaries.get(0)
    return first is not None and first.last_offset == first.base_offset


def dump(
    paths: Sequence[Path | str],
    out: TextIO,
    *,
    deep: bool = False,
    verify_index: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> int:
    """Dump each path (a file, a partition directory: all its files, or a remote segment
    object's URL, read with the fsspec ``storage_options``). Returns the count of problems
    found (invalid batches + index mismatches).

    Raises:
        FileNotFoundError: a file or remote object does not exist.
        ValueError: a file is not a segment file.
        ToolError: a remote store cannot be reached or read.
    """
    problems = 0
    files: list[Path | str] = []
    for item in paths:
        if isinstance(item, str) and "://" in item:
            files.append(item)
            continue
        path = Path(item)
        if path.is_dir():
            files.extend(
                sorted(
                    p
                    for p in path.iterdir()
                    if p.suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
                )
            )
        else:
            files.append(path)
    listed = {str(f) for f in files}
    for item in files:
        if isinstance(item, str):
            problems += _dump_remote(item, out, deep, verify_index, listed, storage_options or {})
            continue
        if not item.exists():
            raise FileNotFoundError(f"{item}: no such file")
        problems += _dump_file(item, out, deep, verify_index, listed, str)
    return problems


def _dump_remote(
    url: str,
    out: TextIO,
    deep: bool,
    verify_index: bool,
    listed: Collection[str],
    storage_options: dict[str, Any],
) -> int:
    from tierlog.tools.remote_tools import fetched

    suffix = Path(url).suffix
    if suffix not in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        raise ValueError(
            f"{url}: not a .log, .index or .timeindex object, nor a .txnindex (tierlog "
            "remote ls lists them)"
        )
    # An index is always read with the log beside it (its batch boundaries tell real
    # entries from a preallocated tail); a log needs its indexes only to verify them.
    siblings: tuple[str, ...]
    if suffix == LOG_SUFFIX:
        siblings = (INDEX_SUFFIX, TIME_INDEX_SUFFIX) if verify_index else ()
    elif suffix == TXN_INDEX_SUFFIX:
        siblings = ()
    else:
        siblings = (LOG_SUFFIX,)
    directory = url.rsplit("/", 1)[0]
    with fetched(url, storage_options, siblings) as local:
        return _dump_file(local, out, deep, verify_index, listed, lambda p: f"{directory}/{p.name}")


def _dump_file(
    path: Path,
    out: TextIO,
    deep: bool,
    verify_index: bool,
    listed: Collection[str],
    name_of: Callable[[Path], str],
) -> int:
    """Dump one local file, printed under ``name_of(path)``; with ``verify_index`` a log's
    indexes are checked too, unless they are dumped on their own (in ``listed``)."""
    problems = 0
    if path.suffix == LOG_SUFFIX:
        problems += dump_log_file(path, out, deep, name_of(path))
        if verify_index:
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                sibling = path.with_suffix(suffix)
                if sibling.exists() and name_of(sibling) not in listed:
                    problems += dump_index_file(sibling, out, True, name_of(sibling))
    elif path.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        problems += dump_index_file(path, out, verify_index, name_of(path))
    elif path.suffix == TXN_INDEX_SUFFIX:
        problems += dump_txn_index_file(path, out, name_of(path))
    else:
        raise ValueError(f"{name_of(path)}: not a .log, .index, .timeindex or .txnindex file")
    out.flush()
    return problems
