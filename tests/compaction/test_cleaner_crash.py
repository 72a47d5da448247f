"""Crash test: a child process appends keyed records and cleans its log in a loop; the
parent SIGKILLs it at random points, many times. After every restart the log loads, every
record in it is the one written at its offset, offsets rise, and every key's last value
below the log end is there: the old segments or the cleaned ones, never a mix.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tierlog.local.log_manager import LogManager

from .conftest import compacted, read_all

ROUNDS = 16
SEED = 20261125
KEYS = 300

# Record i of the log has key KEYS-modulo and a value naming its offset, so the parent
# can tell what every offset held without a journal; every 13th record is a tombstone.
CHILD = r"""
import sys
from pathlib import Path
from tierlog.compaction.cleaner import CleanerConfig, LogCleaner
from tierlog.local.config import LogConfig
from tierlog.local.log_manager import LogManager
from tierlog.records.builder import Record, build_batch

directory, keys = Path(sys.argv[1]), int(sys.argv[2])
config = LogConfig.from_props(
    {"cleanup.policy": "compact", "segment.bytes": "3000", "min.cleanable.dirty.ratio": "0.01",
     "delete.retention.ms": "0", "file.delete.delay.ms": "0"}
)
manager = LogManager([directory], config)
manager.startup()
log = manager.get_or_create_log("t", 0, config)
cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=1 << 16), workers=0)
print("START", log.log_end_offset, flush=True)
while True:
    records = []
    for i in range(log.log_end_offset, log.log_end_offset + 5):
        value = None if i % 13 == 0 else b"v%d" % i
        records.append(Record(b"k%d" % (i % keys), value))
    log.append(build_batch(records))
    if log.log_end_offset % 40 < 5:
        cleaner.clean_once()
"""


def _check(directory: Path) -> int:
    manager = LogManager([directory], compacted(segment_bytes=3000))
    manager.startup()
    try:
        log = manager.get_log("t", 0)
        assert log is not None
        end = log.log_end_offset
        records = read_all(log)
        offsets = [r.offset for r in records]
        assert offsets == sorted(set(offsets))
        for r in records:
            expected = None if r.offset % 13 == 0 else b"v%d" % r.offset
            assert (r.key, r.value) == (b"k%d" % (r.offset % KEYS), expected), r
        present = set(offsets)
        for key in range(KEYS):
            latest = max((o for o in range(end) if o % KEYS == key), default=None)
            if latest is not None and latest % 13:
                assert latest in present, f"k{key}'s last value at {latest} is gone"
        leftovers = [
            p.name for p in log.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))
        ]
        assert leftovers == []
        return end
    finally:
        manager.shutdown()


def test_sigkill_while_cleaning_never_leaves_a_mix(tmp_path: Path) -> None:
    rnd = random.Random(SEED)
    directory = tmp_path / "logs"
    ends = []
    for _ in range(ROUNDS):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(directory), str(KEYS)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().startswith("START")
            time.sleep(rnd.uniform(0.05, 0.6))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
        ends.append(_check(directory))
    assert ends == sorted(ends) and ends[-1] > ends[0], "the log grew across the rounds"
