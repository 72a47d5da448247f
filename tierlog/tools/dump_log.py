"""``tierlog dump-log``: print the batches, records and index entries of segment files, like
Kafka's ``kafka-dump-log.sh`` (DumpLogSegments), and check indexes against their log.

Reads files only; never writes. A corrupt batch is reported with its position and ends the
dump of that file (nothing after a bad length can be trusted).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from tierlog.local.offset_index import OffsetIndex
from tierlog.local.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from tierlog.local.time_index import TimeIndex
from tierlog.records.errors import RecordsError
from tierlog.records.header import (
    BatchHeader,
    TimestampType,
    compute_crc,
    parse_header,
)

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _preview(data: bytes | None, limit: int = 64) -> str:
    if data is None:
        return "null"
    text = data[:limit].decode("utf-8", errors="backslashreplace")
    return text + ("..." if len(data) > limit else "")


def base_offset_of(path: Path) -> int:
    stem = path.name.split(".", 1)[0]
    if not stem.isdigit():
        raise ValueError(f"{path}: segment files are named by a 20-digit base offset")
    return int(stem)


def scan_log(buf: memoryview) -> Iterator[tuple[int, BatchHeader | None, str | None]]:
    """Yield ``(position, header, problem)`` for each batch; a problem ends the scan."""
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
        if compute_crc(buf[position : position + header.size]) != header.crc:
            problem = "CRC-32C mismatch"
        yield position, header, problem
        position += header.size


def scan_headers(buf: memoryview) -> Iterator[tuple[int, BatchHeader | None, str | None]]:
    """Like ``scan_log`` without the CRC check: enough to know where batches start."""
    position = 0
    while position < len(buf):
        try:
            header = parse_header(buf, position)
        except RecordsError as exc:
            yield position, None, str(exc)
            return
        if position + header.size > len(buf):
            yield position, header, "truncated"
            return
        yield position, header, None
        position += header.size


def dump_log_file(path: Path, out: TextIO, deep: bool) -> int:
    """Print one ``.log`` file; returns the number of invalid batches found."""
    from tierlog.records.reader import iter_records  # decoding is only needed with --deep

    print(f"Dumping {path}", file=out)
    print(f"Log starting offset: {base_offset_of(path)}", file=out)
    size = path.stat().st_size
    if size == 0:
        return 0
    invalid = 0
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
                    f"isControl: {_bool(header.is_control)} position: {position} "
                    f"{ts_name}: {header.max_timestamp} size: {header.size} "
                    f"magic: {header.magic} "
                    f"compresscodec: {_CODECS.get(header.compression, '?')} crc: {header.crc} "
                    f"isvalid: {_bool(problem is None)}"
                    + (f" problem: {problem}" if problem else ""),
                    file=out,
                )
                if problem and problem.startswith("truncated"):
                    return invalid
                if deep and problem is None:
                    batch = bytes(buf[position : position + header.size])
                    try:
                        for record in iter_records(batch, verify_crc=False):
                            keys = [k for k, _ in record.headers]
                            print(
                                f"| offset: {record.offset} {ts_name}: {record.timestamp} "
                                f"keySize: {-1 if record.key is None else len(record.key)} "
                                f"valueSize: {-1 if record.value is None else len(record.value)} "
                                f"headerKeys: {keys} key: {_preview(record.key)} "
                                f"payload: {_preview(record.value)}",
                                file=out,
                            )
                    except RecordsError as exc:
                        invalid += 1
                        print(f"| records undecodable: {exc}", file=out)
        finally:
            buf.release()
    return invalid


def dump_index_file(path: Path, out: TextIO, verify: bool) -> int:
    """Print an ``.index`` or ``.timeindex``; with ``verify``, check each entry against the
    ``.log`` beside it. Returns the number of mismatches."""
    print(f"Dumping {path}", file=out)
    base = base_offset_of(path)
    log_path = path.with_suffix(LOG_SUFFIX)
    # Batch boundaries of the log beside it: what entries are checked against, and how a
    # preallocated (zero) tail is told from real entries. Headers only, through mmap.
    boundaries: dict[int, BatchHeader] = {}
    if log_path.exists() and log_path.stat().st_size:
        with open(log_path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            view = memoryview(m)
            try:
                for position, header, problem in scan_headers(view):
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


def _real_first_entry(boundaries: dict[int, BatchHeader]) -> bool:
    first = boundaries.get(0)
    return first is not None and first.last_offset == first.base_offset


def dump(paths: list[Path], out: TextIO, *, deep: bool = False, verify_index: bool = False) -> int:
    """Dump each path (a file, or a partition directory: all its files). Returns the count
    of problems found (invalid batches + index mismatches)."""
    problems = 0
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(
                sorted(
                    p
                    for p in path.iterdir()
                    if p.suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
                )
            )
        else:
            files.append(path)
    for path in files:
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file")
        if path.suffix == LOG_SUFFIX:
            problems += dump_log_file(path, out, deep)
            if verify_index:
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    sibling = path.with_suffix(suffix)
                    if sibling.exists() and sibling not in files:
                        problems += dump_index_file(sibling, out, True)
        elif path.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            problems += dump_index_file(path, out, verify_index)
        else:
            raise ValueError(f"{path}: not a .log, .index or .timeindex file")
        out.flush()
    return problems
