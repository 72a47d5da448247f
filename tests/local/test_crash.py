"""Crash test: a child process appends and flushes; the parent SIGKILLs it at random points,
sometimes tears the tail of the active segment as a power cut would, and checks that an
unclean reopen keeps every flushed offset, truncates to the last whole batch and goes on.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tierlog.local.checkpoint import CorruptCheckpointError, read_offsets
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.local.log_manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE, LogManager
from tierlog.records.builder import Record, build_batch
from tierlog.records.errors import RecordsError
from tierlog.records.header import validate_batch

from .conftest import all_records, assert_dense, crash, make_batch

ROUNDS = 25
SEED = 20240611
TOPIC, PARTITION = "crash", 0

CONFIG = LogConfig(
    segment_bytes=24 * 1024,
    segment_index_bytes=960,  # 80 time-index entries: some rolls happen on a full index
    index_interval_bytes=256,
    flush_messages=25,
    retention_ms=-1,
)

# The child: append batches whose record values name their own offset, print each new
# recovery point (everything below it is fsynced) and sometimes checkpoint it.
CHILD = r"""
import random, sys
from pathlib import Path
from tierlog.local.config import LogConfig
from tierlog.local.log_manager import LogManager
from tierlog.records.builder import Record, build_batch

directory, seed, props = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
config = LogConfig.from_props(dict(kv.split("=", 1) for kv in props.split(";")))
rng = random.Random(seed)
manager = LogManager([directory], config)
manager.startup()
log = manager.get_or_create_log("crash", 0)
print("START", log.log_end_offset, flush=True)
reported = log.recovery_point
flushes = 0
while True:
    parts = []
    offset = log.log_end_offset
    for _ in range(1 if rng.random() < 0.7 else rng.randint(2, 4)):
        n = rng.randint(1, 8)
        records = [
            Record(b"k%d" % (offset + i), b"%d:" % (offset + i) + b"x" * rng.randint(0, 300))
            for i in range(n)
        ]
        parts.append(build_batch(records, base_timestamp=1_700_000_000_000 + offset))
        offset += n
    log.append(b"".join(parts), leader_epoch=1)
    if log.recovery_point > reported:
        reported = log.recovery_point
        flushes += 1
        if flushes % 3 == 0:
            manager.checkpoint()
        print("FLUSHED", reported, flush=True)
"""


def config_props(config: LogConfig) -> str:
    return ";".join(f"{k}={v}" for k, v in config.to_props().items())


@dataclass
class ChildRun:
    lines: list[str]
    killed_after_start: bool

    @property
    def flushed(self) -> int:
        values = [int(line.split()[1]) for line in self.lines if line.startswith("FLUSHED")]
        return max(values, default=0)

    @property
    def start_offset(self) -> int | None:
        for line in self.lines:
            if line.startswith("START"):
                return int(line.split()[1])
        return None


def run_child_and_kill(directory: Path, seed: int, rng: random.Random) -> ChildRun:
    env = dict(os.environ)
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), str(seed), config_props(CONFIG)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: list[str] = []
    started = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.endswith("\n"):
                break  # killed in the middle of printing it
            lines.append(line.strip())
            if line.startswith("START"):
                started.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    after_start = rng.random() < 0.85
    if after_start:
        # kill while appending (most rounds)
        if not started.wait(20):
            proc.kill()
            raise AssertionError(f"child never started: {proc.communicate()[1]}")
        time.sleep(rng.uniform(0.0, 0.25))
    else:
        # kill at any moment, possibly during start-up recovery
        time.sleep(rng.uniform(0.0, 0.15))
    if proc.poll() is not None:
        raise AssertionError(f"child died on its own: {proc.communicate()[1]}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    thread.join(10)
    assert proc.stderr is not None
    proc.stderr.close()
    return ChildRun(lines, after_start)


def whole_batches(data: bytes) -> list[tuple[int, int]]:
    """``(end position, next offset)`` after each valid batch from the start of ``data``."""
    out = []
    pos = 0
    while pos < len(data):
        try:
            header = validate_batch(data, pos)
        except RecordsError:
            break
        pos += header.size
        out.append((pos, header.next_offset))
    return out


def tear(partition_dir: Path, flushed: int, rng: random.Random) -> tuple[str, int, int] | None:
    """Damage the tail of the last segment beyond the flushed offset; returns the kind
    of damage and the (size, log end) recovery must come back to."""
    last = max(partition_dir.glob("*.log"), key=lambda p: int(p.stem))
    base = int(last.stem)
    data = last.read_bytes()
    ends = [(0, base), *whole_batches(data)]
    flushed_pos = max((pos for pos, nxt in ends if nxt <= flushed), default=0)
    valid_end, valid_next = ends[-1]
    choice = rng.random()
    if choice < 0.5 and valid_end > flushed_pos:
        cut = rng.randint(flushed_pos, valid_end - 1)
        with open(last, "r+b") as f:
            f.truncate(cut)
        pos, nxt = max((e for e in ends if e[0] <= cut), key=lambda e: e[0])
        return "truncate", pos, nxt
    if choice < 0.7:
        garbage = os.urandom(rng.randint(1, 200))
        kind = "random bytes"
    elif choice < 0.85:
        garbage = b"\x00" * rng.randint(1, 4096)  # like a preallocated, unwritten tail
        kind = "zeros"
    else:
        # a whole valid batch whose offsets go backwards (a stale write); below the
        # segment's base when the segment is empty
        garbage = make_batch(2, base_offset=valid_next - 1)
        kind = "stale batch"
    with open(last, "ab") as f:
        f.write(garbage)
    return kind, valid_end, valid_next


def checkpointed_recovery_point(data_dir: Path) -> int:
    try:
        return read_offsets(data_dir / RECOVERY_POINT_FILE).get((TOPIC, PARTITION), 0)
    except (OSError, CorruptCheckpointError):
        return 0


def check_log(lg: Log) -> None:
    """Valid, dense from the log start, and every record is where its value says."""
    assert lg.log_start_offset == 0
    assert_dense(lg)
    records = all_records(lg)
    assert [r.offset for r in records] == list(range(lg.log_end_offset))
    for r in records:
        assert r.key == b"k%d" % r.offset
        assert r.value is not None and r.value.split(b":")[0] == b"%d" % r.offset


@pytest.mark.timeout(120)
def test_kill_and_recover_many_times(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    data_dir = tmp_path / "data"
    partition_dir = data_dir / f"{TOPIC}-{PARTITION}"
    highest_flushed = 0
    total_flushes = 0
    torn_rounds = 0
    deadline = time.monotonic() + 50
    for round_no in range(ROUNDS):
        assert time.monotonic() < deadline, f"too slow: stopped at round {round_no}"
        run = run_child_and_kill(data_dir, seed=rng.randrange(2**32), rng=rng)
        if run.start_offset is not None:
            # a child that started consumed the clean-shutdown marker
            assert not (data_dir / CLEAN_SHUTDOWN_FILE).exists()
            # the child recovered everything the previous round left
            assert run.start_offset >= highest_flushed
        # The child may have flushed (and checkpointed) past its last printed line when it
        # was killed: a power cut cannot tear what the recovery point says is on disk.
        flushed = max(run.flushed, highest_flushed, checkpointed_recovery_point(data_dir))
        total_flushes += len([x for x in run.lines if x.startswith("FLUSHED")])
        expected = None
        if partition_dir.exists() and round_no % 3 == 1:
            # A child killed before its start-up left the previous clean stop's marker; a
            # torn tail needs a writer, whose start-up would have consumed it first.
            (data_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
            expected = tear(partition_dir, flushed, rng)
            torn_rounds += 1

        manager = LogManager([data_dir], CONFIG)
        manager.startup()
        lg = manager.get_log(TOPIC, PARTITION)
        if lg is None:  # killed before the child created its log
            assert run.flushed == 0 and highest_flushed == 0
            manager.shutdown()
            continue
        context = f"round {round_no}, tear {expected}, flushed {flushed}, lines {run.lines[-3:]}"
        assert lg.log_end_offset >= flushed, context
        if expected is not None:
            _, size, end = expected
            assert lg.log_end_offset == end, context
            assert lg.active_segment.size == size, context
        check_log(lg)
        assert lg.leader_epoch_cache.entries in ([], [(1, 0)])
        highest_flushed = max(flushed, highest_flushed)
        # appends continue from the log end
        end = lg.log_end_offset
        record = Record(b"k%d" % end, b"%d:parent" % end)
        assert lg.append(build_batch([record]), leader_epoch=1).first_offset == end
        assert_dense(lg)
        if rng.random() < 0.5:
            manager.shutdown()  # a clean stop: the child starts without recovery
            assert (data_dir / CLEAN_SHUTDOWN_FILE).exists()
        else:
            lg.flush()
            manager.checkpoint()
            for log in manager.logs.values():
                crash(log)
            for fd in manager._locks:
                os.close(fd)
        highest_flushed = end + 1
    assert total_flushes > ROUNDS, "the child hardly flushed: the test proved little"
    assert torn_rounds == len(range(1, ROUNDS, 3))
