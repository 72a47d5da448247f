"""Local-tier benchmark: append and read against the OS limits, recovery cost, memory.

Run: ``make bench`` (or ``.venv/bin/python bench/storage.py [--quick]``). Everything is
measured side by side in one run and reported as ratios, because these machines are noisy;
the last line printed is one JSON object with every figure.

1. Append: ``Log.append`` of 1 MiB and 16 KiB batches of 200-byte records vs ``os.write``
   of the same bytes to one file (the limit). Each round alternates the two, N rounds.
   Also 1 MiB batches of records of varied sizes (100-300 bytes): the record count
   (issue 10, item 5) finds runs of same-size records with one numpy compare, so the
   fixed-size batches show its fast case and these its slow one.
2. Read: ``Log.read`` slices of 1 MiB sent with ``os.sendfile`` to a socket drained by a
   thread vs ``os.sendfile`` of the whole segment files to the same socket.
3. Recovery after an unclean stop: many closed segments below the checkpointed recovery
   point plus an active segment of growing size; time must follow the active segment only.
   Also a full rescan (no checkpoint) for contrast, giving seconds per GiB scanned.
4. Memory: RSS (anonymous and file-backed) before and after appending 2 GiB.
5. Produce checks (issue 10, items 5 and 6), in microseconds per batch next to the append
   itself: counting an uncompressed batch's records by their length prefixes
   (``record_walk.count_records``, compiled by numba when it is installed, as the broker
   uses it; ``--no-jit``: the Python walk), the CRC-32C for scale, and a compressed
   batch's declared-size check. ``--only append,checks`` runs a subset. Also the scrubber's rate
   (``verify_segment_crc``, GiB/s of CRC verified) over a segment of 1 MiB batches and one
   of 16 KiB batches, page-cache resident and unthrottled.
6. Roll (issue 10, "Full disk"): ``Log.roll`` with the indexes' first blocks reserved by
   ``posix_fallocate`` (what the broker does) vs sparse indexes (before it, still the
   fallback where the file system has no fallocate), and vs reserving both whole 10 MiB
   indexes for scale. Each round alternates the three, N rounds.

Every side-by-side figure is printed at the end as the median of its rounds with their
spread (min-max) and the ratio of the medians (``bench/reporting.py``); the figures of each
part keep the best rounds, as before.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from reporting import LOWER, Report

from tierlog.local import index as index_module
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.local.log_manager import LogManager
from tierlog.local.segment import LogSegment
from tierlog.records import record_walk
from tierlog.records.builder import Record, build_batch
from tierlog.util.clock import ManualClock
from tierlog.util.scheduler import ManualScheduler

MiB = 1 << 20
RECORD_VALUE = 200


def make_batches(batch_bytes: int, distinct: int = 8, varied: bool = False) -> list[bytes]:
    """``distinct`` batches of about ``batch_bytes`` of 200-byte records (uncompressed);
    ``varied``: values of 100-300 bytes drawn at random (200 on average), so that no two
    neighbours need be the same size and the record walk goes hop by hop."""
    per_record = RECORD_VALUE + 12  # value + varint lengths/deltas of a small record
    count = max(1, batch_bytes // per_record)
    rng = random.Random(batch_bytes)
    out = []
    for d in range(distinct):
        sizes = [RECORD_VALUE] * count
        if varied:  # as many as fit in the same bytes
            sizes = []
            while (sum(sizes) + len(sizes) * 13) < count * per_record - 300:
                sizes.append(rng.randint(100, 300))
        records = [
            Record(None, bytes([65 + d]) * size, timestamp=1_700_000_000_000 + i)
            for i, size in enumerate(sizes)
        ]
        out.append(build_batch(records))
    return out


def rss() -> dict[str, int]:
    """Resident memory in bytes, split into anonymous (heap) and file-backed (mmaps)."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                fields[key] = int(value.split()[0]) * 1024
    return fields


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


# -- 1. append ----------------------------------------------------------------------------


def write_raw(path: Path, batches: list[bytes], n: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for i in range(n):
            os.write(fd, batches[i % len(batches)])
    finally:
        os.close(fd)


def append_all(log: Log, batches: list[bytes], n: int) -> None:
    for i in range(n):
        log.append(batches[i % len(batches)])


def bench_append(
    work: Path, batch_bytes: int, total_bytes: int, rounds: int, varied: bool = False
) -> dict[str, Any]:
    batches = make_batches(batch_bytes, varied=varied)
    n = max(1, total_bytes // len(batches[0]))
    config = LogConfig.from_props({"segment.bytes": str(256 * MiB)})
    logs: list[float] = []
    raws: list[float] = []
    raw_path = work / "raw.bin"
    for _ in range(rounds):
        # Kafka's default flush policy never fsyncs on append and flushes a rolled segment
        # in the background; a scheduler that is never advanced keeps those flushes out of
        # the timed loop, like the os.write side, which never fsyncs either.
        log = Log(
            work / "append-0",
            config,
            had_clean_shutdown=True,
            scheduler=ManualScheduler(ManualClock()),
        )
        # Write back what earlier rounds left dirty, so neither side is throttled by the
        # other's page cache (balance_dirty_pages), then time each.
        os.sync()
        raws.append(timed(partial(write_raw, raw_path, batches, n)))
        raw_path.unlink()
        os.sync()
        logs.append(timed(partial(append_all, log, batches, n)))
        log.close()
        shutil.rmtree(log.directory)
    size = n * len(batches[0])
    best_log, best_raw = min(logs), min(raws)
    return {
        "log_mb_s": size / best_log / 1e6,
        "raw_mb_s": size / best_raw / 1e6,
        "ratio": best_raw / best_log,
        "rounds_log_mb_s": [size / s / 1e6 for s in logs],
        "rounds_raw_mb_s": [size / s / 1e6 for s in raws],
        "batches": n,
        "batch_bytes": len(batches[0]),
    }


# -- 5. produce checks ---------------------------------------------------------------------


def per_call_us(fn: Callable[[], object], calls: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6


def bench_checks(appends: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    from crc32c import crc32c

    from tierlog.records.codecs import DEFAULT_MAX_SIZE
    from tierlog.records.expansion import check_declared_sizes
    from tierlog.records.header import ATTRIBUTES_OFFSET, HEADER_SIZE, Compression, parse_header

    out: dict[str, dict[str, float]] = {}
    for name, size, varied in (
        ("1mib", MiB, False),
        ("16kib", 16 * 1024, False),
        ("1mib_varied", MiB, True),
    ):
        batch = make_batches(size, distinct=1, varied=varied)[0]
        header = parse_header(batch)
        end = len(batch)
        calls = 200 if size == MiB else 5000
        append = appends.get(f"append_{name}")
        figures = {
            "records": float(header.record_count),
            "walk_us": per_call_us(
                partial(record_walk.count_records, batch, HEADER_SIZE, end), calls // 10 or 1
            ),
            "crc_us": per_call_us(partial(crc32c, memoryview(batch)[ATTRIBUTES_OFFSET:]), calls),
        }
        if append is not None:
            figures["append_us"] = append["batch_bytes"] / append["log_mb_s"]
            figures["os_write_us"] = append["batch_bytes"] / append["raw_mb_s"]
        records = [Record(None, bytes([65 + i % 26]) * RECORD_VALUE) for i in range(4946)]
        zstd = build_batch(records, compression=Compression.ZSTD)
        figures["declared_size_zstd_us"] = per_call_us(
            partial(
                check_declared_sizes,
                Compression.ZSTD,
                memoryview(zstd)[HEADER_SIZE:],
                4946,
                DEFAULT_MAX_SIZE,
            ),
            calls,
        )
        out[name] = figures
    return out


def bench_scrub(work: Path, total_bytes: int, rounds: int) -> dict[str, dict[str, float]]:
    """GiB/s of ``verify_segment_crc`` over one segment file, best of ``rounds``: what the
    background scrubber and the pre-upload check can do at most (the broker paces the
    scrubber to ``log.scrubber.bytes.per.second``)."""
    from tierlog.local.scrubber import verify_segment_crc

    out: dict[str, dict[str, float]] = {}
    for name, size in (("1mib", MiB), ("16kib", 16 * 1024)):
        config = LogConfig.from_props({"segment.bytes": str(2 * total_bytes)})
        log = Log(
            work / f"scrub-{name}-0",
            config,
            had_clean_shutdown=True,
            scheduler=ManualScheduler(ManualClock()),
        )
        batches = make_batches(size)
        appended = 0
        while appended < total_bytes:
            appended += log.append(batches[appended // len(batches[0]) % len(batches)]).size
        path, segment_bytes = log.active_segment.path, log.size
        log.close()
        verify_segment_crc(path)  # warm: page cache and imports
        best = float("inf")
        for _ in range(rounds):
            started = time.perf_counter()
            problems = verify_segment_crc(path)
            best = min(best, time.perf_counter() - started)
            assert problems == [], problems
        shutil.rmtree(work / f"scrub-{name}-0")
        out[name] = {
            "gib_s": segment_bytes / best / (1 << 30),
            "segment_mib": segment_bytes / MiB,
            "batch_bytes": float(len(batches[0])),
        }
    return out


# -- 6. roll ------------------------------------------------------------------------------


@contextlib.contextmanager
def reservation(mode: str) -> Iterator[None]:
    """``chunk``: as shipped; ``sparse``: posix_fallocate "unsupported" (the fallback, as
    before reservations); ``whole``: chunks as large as the index (2 x 10 MiB a roll)."""
    real_fallocate, real_chunk = os.posix_fallocate, index_module.RESERVE_CHUNK

    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "not supported")

    if mode == "sparse":
        os.posix_fallocate = unsupported
    elif mode == "whole":
        index_module.RESERVE_CHUNK = 1 << 40
    try:
        yield
    finally:
        os.posix_fallocate, index_module.RESERVE_CHUNK = real_fallocate, real_chunk


def rolls(work: Path, mode: str, count: int, batch: bytes) -> float:
    """Seconds per ``Log.roll`` of a log taking one small batch per segment."""
    log = Log(
        work / f"roll-{mode}-0",
        LogConfig.from_props({}),  # 10 MiB indexes (segment.index.bytes default)
        had_clean_shutdown=True,
        scheduler=ManualScheduler(ManualClock()),  # the rolled-segment flush stays out
    )
    spent = 0.0
    with reservation(mode):
        for _ in range(count):
            log.append(batch)
            started = time.perf_counter()
            log.roll()
            spent += time.perf_counter() - started
    log.close()
    shutil.rmtree(log.directory)
    return spent / count


def bench_roll(work: Path, count: int, rounds: int) -> dict[str, Any]:
    batch = make_batches(1024, distinct=1)[0]
    seconds: dict[str, list[float]] = {"sparse": [], "chunk": [], "whole": []}
    for _ in range(rounds):
        for mode, spent in seconds.items():
            os.sync()
            spent.append(rolls(work, mode, count, batch))
    best = {mode: min(spent) for mode, spent in seconds.items()}
    return {
        "rounds_us": {mode: [s * 1e6 for s in spent] for mode, spent in seconds.items()},
        "sparse_us": best["sparse"] * 1e6,
        "chunk_us": best["chunk"] * 1e6,
        "whole_us": best["whole"] * 1e6,
        "ratio": best["sparse"] / best["chunk"],
        "whole_ratio": best["sparse"] / best["whole"],
        "rolls": count,
    }


# -- 2. read ------------------------------------------------------------------------------


class DrainedSocket:
    """A socketpair whose far end a thread reads and discards: a consumer that keeps up."""

    def __init__(self) -> None:
        self.send, self.recv = socket.socketpair()
        self.send.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MiB)
        self.received = 0
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        buf = bytearray(4 * MiB)
        while True:
            n = self.recv.recv_into(buf)
            if not n:
                return
            self.received += n

    def close(self) -> None:
        self.send.close()
        self._thread.join()
        self.recv.close()


def fetch_plan(log: Log, max_bytes: int) -> list[int]:
    """The offsets a consumer would fetch from, in order: each fetch starts after the last
    whole batch of the previous slice (what a client learns by parsing headers)."""
    from tierlog.records.header import parse_header, peek_size

    offsets = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        offsets.append(offset)
        chunk = log.read(offset, max_bytes)
        assert chunk is not None
        data = chunk.read()
        pos, next_offset = 0, offset
        while (peeked := peek_size(data, pos)) is not None and pos + peeked[1] <= len(data):
            next_offset = parse_header(data, pos).next_offset
            pos += peeked[1]
        offset = next_offset
    return offsets


def send_slices(log: Log, plan: list[int], out: int) -> None:
    """What the broker does for a consumer: one ``Log.read`` slice per fetch, sendfile'd."""
    for offset in plan:
        chunk = log.read(offset, MiB)
        assert chunk is not None
        chunk.sendfile_to(out)


def send_whole_files(log: Log, out: int) -> None:
    """The limit: sendfile of each segment file from start to end."""
    for segment in log.segments:
        sent, total = 0, segment.size
        while sent < total:
            sent += os.sendfile(out, segment.fd, sent, total - sent)


def bench_read(work: Path, total_bytes: int, rounds: int) -> dict[str, Any]:
    config = LogConfig.from_props({"segment.bytes": str(128 * MiB)})
    log = Log(work / "read-0", config, had_clean_shutdown=True)
    batches = make_batches(16 * 1024)
    for i in range(max(1, total_bytes // len(batches[0]))):
        log.append(batches[i % len(batches)])
    log.flush()
    plan = fetch_plan(log, MiB)
    size = log.size
    # Warm the page cache so both sides read memory, not the disk.
    for segment in log.segments:
        with open(segment.path, "rb") as f:
            while f.read(8 * MiB):
                pass
    slices: list[float] = []
    wholes: list[float] = []
    for _ in range(rounds):
        sink = DrainedSocket()
        out = sink.send.fileno()
        wholes.append(timed(partial(send_whole_files, log, out)))
        slices.append(timed(partial(send_slices, log, plan, out)))
        sink.close()
    log.close()
    best_slices, best_whole = min(slices), min(wholes)
    return {
        "slices_mb_s": size / best_slices / 1e6,
        "whole_file_mb_s": size / best_whole / 1e6,
        "ratio": best_whole / best_slices,
        "rounds_slices_mb_s": [size / s / 1e6 for s in slices],
        "rounds_whole_file_mb_s": [size / s / 1e6 for s in wholes],
        "fetches": len(plan),
        "bytes": size,
    }


# -- 3. recovery --------------------------------------------------------------------------


def bench_recovery(
    work: Path, closed_segments: int, segment_bytes: int, active_sizes: list[int]
) -> dict[str, object]:
    calls = {"segments": 0, "bytes": 0}
    original = LogSegment.recover

    def counting(self: LogSegment, *args: Any, **kwargs: Any) -> int:
        calls["segments"] += 1
        calls["bytes"] += self.size
        return original(self, *args, **kwargs)

    batches = make_batches(MiB)
    config = LogConfig.from_props({"segment.bytes": str(segment_bytes)})
    results: list[dict[str, float]] = []
    full: dict[str, float] = {}
    LogSegment.recover = counting  # type: ignore[method-assign]
    try:
        for active in active_sizes:
            data_dir = work / f"recovery-{active}"
            manager = LogManager([data_dir], config)
            manager.startup()
            log = manager.get_or_create_log("bench", 0)
            i = 0
            while len(log.segments) <= closed_segments:
                log.append(batches[i % len(batches)])
                i += 1
            log.flush()
            manager.checkpoint()  # recovery point = the end of the closed segments
            written = log.active_segment.size
            while written < active:
                written += log.append(batches[i % len(batches)]).size
                i += 1
            # An unclean stop: the files stay as they are, no marker, no close.
            for segment in log.segments:
                os.close(segment.fd)
            for fd in manager._locks:
                os.close(fd)
            closed_total = sum(s.size for s in log.segments[:-1])
            calls.update(segments=0, bytes=0)
            reopened = LogManager([data_dir], config)
            seconds = timed(reopened.startup)
            results.append(
                {
                    "active_mib": active / MiB,
                    "closed_mib": closed_total / MiB,
                    "seconds": seconds,
                    "segments_rescanned": calls["segments"],
                    "bytes_rescanned_mib": calls["bytes"] / MiB,
                }
            )
            if active == active_sizes[-1]:
                reopened.shutdown()
                # Contrast: no recovery-point checkpoint, so every segment is rescanned.
                (data_dir / ".kafka_cleanshutdown").unlink()
                (data_dir / "recovery-point-offset-checkpoint").unlink()
                calls.update(segments=0, bytes=0)
                rescan = LogManager([data_dir], config)
                seconds = timed(rescan.startup)
                full = {
                    "seconds": seconds,
                    "segments_rescanned": calls["segments"],
                    "gib_rescanned": calls["bytes"] / (1 << 30),
                    "seconds_per_gib": seconds / (calls["bytes"] / (1 << 30)),
                }
                rescan.shutdown()
            else:
                reopened.shutdown()
            shutil.rmtree(data_dir)
    finally:
        LogSegment.recover = original  # type: ignore[method-assign]
    scanned = sum(r["bytes_rescanned_mib"] for r in results) / 1024
    spent = sum(r["seconds"] for r in results)
    return {
        "runs": results,
        "checkpointed_seconds_per_gib": spent / scanned if scanned else 0.0,
        "full_rescan": full,
    }


# -- 4. memory ----------------------------------------------------------------------------


def bench_memory(work: Path, total_bytes: int) -> dict[str, float]:
    batches = make_batches(MiB)
    config = LogConfig.from_props({"segment.bytes": str(512 * MiB)})
    log = Log(
        work / "memory-0", config, had_clean_shutdown=True, scheduler=ManualScheduler(ManualClock())
    )
    for i in range(64):  # warm up: first segment, allocator pools, imports
        log.append(batches[i % len(batches)])
    before = rss()
    written = 0
    i = 0
    while written < total_bytes:
        written += log.append(batches[i % len(batches)]).size
        i += 1
    after = rss()
    log.close()
    shutil.rmtree(work / "memory-0")
    return {
        "appended_gib": written / (1 << 30),
        "rss_anon_before_mib": before["RssAnon"] / MiB,
        "rss_anon_after_mib": after["RssAnon"] / MiB,
        "rss_anon_growth_mib": (after["RssAnon"] - before["RssAnon"]) / MiB,
        "rss_file_after_mib": after["RssFile"] / MiB,
    }


# Goals of the ratios to the OS limits (BENCHMARKS.md's storage table).
APPEND_GOALS = {"append_1mib": 0.8, "append_16kib": 0.5, "append_1mib_varied": 0.8}
READ_GOAL = 0.9


def side_by_side(report: Report, figures: dict[str, Any]) -> None:
    """Appends against ``os.write``, reads against ``sendfile`` of whole files, rolls with
    reserved index blocks against sparse ones: medians and spreads of the rounds."""
    for name, goal in APPEND_GOALS.items():
        if name in figures:
            f = figures[name]
            rounds = {"Log.append": f["rounds_log_mb_s"], "os.write": f["rounds_raw_mb_s"]}
            report.side_by_side(name.replace("_", " "), rounds, unit="MB/s", goal=goal)
    if "read_sendfile" in figures:
        f = figures["read_sendfile"]
        rounds = {
            "Log.read slices": f["rounds_slices_mb_s"],
            "whole files": f["rounds_whole_file_mb_s"],
        }
        report.side_by_side("read with sendfile", rounds, unit="MB/s", goal=READ_GOAL)
    if "roll" in figures:
        us = figures["roll"]["rounds_us"]
        rounds = {"reserved blocks": us["chunk"], "sparse": us["sparse"]}
        report.side_by_side("roll", rounds, unit="us", better=LOWER)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    parser.add_argument(
        "--only",
        default="append,read,recovery,memory,checks,roll",
        help="comma-separated parts to run (default: all)",
    )
    parser.add_argument(
        "--no-jit",
        action="store_true",
        help="walk records in Python even when numba is installed (the walk before it)",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    scale = 8 if args.quick else 1
    report = Report("storage", quick=args.quick)
    # As a broker does at start: the compiled record walk when numba is installed.
    jit = not args.no_jit and record_walk.use_jit()
    report.data["record_walk"] = "compiled (numba)" if jit else "python"
    print(f"record walk: {report.data['record_walk']}", flush=True)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="tierlog-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = report.data
    try:
        appends: dict[str, dict[str, Any]] = {}
        for name, size, varied in (
            ("append_1mib", MiB, False),
            ("append_16kib", 16 * 1024, False),
            ("append_1mib_varied", MiB, True),
        ):
            if "append" not in only:
                break
            figures[name] = r = appends[name] = bench_append(
                base, size, 512 * MiB // scale, rounds=3, varied=varied
            )
            print(
                f"{name}: log {r['log_mb_s']:.0f} MB/s vs os.write {r['raw_mb_s']:.0f} MB/s "
                f"-> ratio {r['ratio']:.2f}",
                flush=True,
            )
        if "checks" in only:
            figures["produce_checks"] = checks = bench_checks(appends)
            for name, c in checks.items():
                print(
                    f"checks {name}: {c['records']:.0f} records; walk {c['walk_us']:.1f} us; "
                    f"crc {c['crc_us']:.1f} us; zstd declared size "
                    f"{c['declared_size_zstd_us']:.2f} us; append "
                    f"{c.get('append_us', float('nan')):.1f} us vs os.write "
                    f"{c.get('os_write_us', float('nan')):.1f} us",
                    flush=True,
                )
            figures["scrub"] = scrub = bench_scrub(base, 512 * MiB // scale, rounds=5)
            for name, c in scrub.items():
                print(
                    f"scrub {name} batches: verify_segment_crc {c['gib_s']:.2f} GiB/s over "
                    f"{c['segment_mib']:.0f} MiB (page cache, unthrottled)",
                    flush=True,
                )
        if "roll" in only:
            figures["roll"] = r = bench_roll(base, 400 // scale, rounds=5)
            print(
                f"roll: {r['chunk_us']:.0f} us with the first index blocks reserved vs "
                f"{r['sparse_us']:.0f} us sparse -> ratio {r['ratio']:.2f}; whole 2 x 10 MiB "
                f"reserved {r['whole_us']:.0f} us -> ratio {r['whole_ratio']:.2f}",
                flush=True,
            )
        if only & {"read", "recovery", "memory"}:
            _rest(base, scale, figures, only)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    side_by_side(report, figures)
    return report.finish()


def _rest(base: Path, scale: int, figures: dict[str, Any], only: set[str]) -> None:
    if "read" in only:
        figures["read_sendfile"] = r = bench_read(base, 1024 * MiB // scale, rounds=3)
        print(
            f"read: slices {r['slices_mb_s']:.0f} MB/s vs whole files "
            f"{r['whole_file_mb_s']:.0f} MB/s -> ratio {r['ratio']:.2f}",
            flush=True,
        )
    if "recovery" in only:
        figures["recovery"] = rec = bench_recovery(
            base,
            closed_segments=16,
            segment_bytes=64 * MiB // scale,
            active_sizes=[s // scale for s in (4 * MiB, 16 * MiB, 64 * MiB)],
        )
        for run in rec["runs"]:  # type: ignore[attr-defined]
            print(
                f"recovery: active {run['active_mib']:.0f} MiB, closed "
                f"{run['closed_mib']:.0f} MiB -> {run['seconds']:.3f} s, rescanned "
                f"{run['segments_rescanned']} segment(s)",
                flush=True,
            )
        print(f"recovery: full rescan {rec['full_rescan']}", flush=True)
    if "memory" in only:
        figures["memory"] = m = bench_memory(base, (2 << 30) // scale)
        print(
            f"memory: appended {m['appended_gib']:.2f} GiB, anon RSS "
            f"{m['rss_anon_before_mib']:.1f} -> {m['rss_anon_after_mib']:.1f} MiB",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
