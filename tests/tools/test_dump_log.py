"""tierlog dump-log on real segment files: batches, records, index checks, corruption, and
a segment the log cleaner rewrote (empty batches, delete horizons, tombstones)."""

from __future__ import annotations

import io
import struct
from pathlib import Path

from tests.cleaned_log import PRODUCER_ID, clean_a_log
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import Compression
from tierlog.tools.dump_log import dump


def write_log(directory: Path) -> Log:
    log = Log(
        directory, LogConfig.from_props({"index.interval.bytes": "100"}), had_clean_shutdown=True
    )
    for n in range(20):
        records = [
            Record(b"k%d" % i, b"value-%d-%d" % (n, i), timestamp=1_000 + n * 10 + i)
            for i in range(3)
        ]
        log.append(
            build_batch(records, compression=Compression.GZIP if n % 2 else Compression.NONE)
        )
    log.close()
    return log


def run(paths: list[Path], **options: bool) -> tuple[int, str]:
    out = io.StringIO()
    problems = dump(paths, out, **options)
    return problems, out.getvalue()


def test_batches_and_deep_records(tmp_path: Path) -> None:
    write_log(tmp_path / "t-0")
    problems, text = run([tmp_path / "t-0" / "00000000000000000000.log"], deep=True)
    assert problems == 0
    assert text.count("baseOffset:") == 20
    assert "compresscodec: gzip" in text and "compresscodec: none" in text
    assert text.count("| offset:") == 60
    assert "| offset: 59 CreateTime: 1192" in text and "payload: value-19-2" in text
    assert "Offsets with no record" not in text  # a log never cleaned has no gap


def test_a_cleaned_segment_shows_empty_batches_delete_horizons_and_tombstones(
    tmp_path: Path,
) -> None:
    cleaned = clean_a_log(tmp_path)
    problems, text = run([cleaned.directory], deep=True, verify_index=True)
    assert problems == 0, text
    batches = [line for line in text.splitlines() if line.startswith("baseOffset:")]
    records = [line for line in text.splitlines() if line.startswith("| offset:")]
    # The producer's last batch, emptied: its offsets and sequence stay, its records go.
    empty = batches[0]
    assert empty.startswith("baseOffset: 1 lastOffset: 1 count: 0 baseSequence: 1 ")
    assert f"producerId: {PRODUCER_ID} " in empty
    assert empty.endswith(f"isvalid: true (empty: kept for producer {PRODUCER_ID})")
    # Offset 3 was cleaned out of this batch; a gap is not a problem.
    assert batches[1].startswith("baseOffset: 2 lastOffset: 3 count: 1 ")
    assert "deleteHorizonMs: OptionalLong.empty " in batches[1]
    assert batches[2].startswith("baseOffset: 4 lastOffset: 4 count: 1 ")
    assert f"deleteHorizonMs: OptionalLong[{cleaned.delete_horizon_ms}] " in batches[2]
    assert not [b for b in batches[1:] if "(empty" in b]
    assert [line.split()[2] for line in records] == ["2", "4", "5"]
    assert records[0].endswith("key: a payload: 3")
    assert "valueSize: -1 sequence: -1 " in records[1]
    assert records[1].endswith("key: b payload: null (tombstone)")
    assert records[2].endswith("key: c payload: 1")  # the active segment, not cleaned
    assert "tombstone" not in records[0] + records[2]
    # What the cleaner removed, listed once per file: record by record with --deep...
    assert text.count("Offsets with no record") == 1
    assert "Offsets with no record: 0..1, 3 (3 offsets; cleaned away by compaction" in text
    # ...and without it, what lies between batches (3 is inside the batch 2..3).
    _, shallow = run([cleaned.segment])
    assert "Offsets with no record between batches: 0..1 (2 offsets;" in shallow


def test_verify_index_finds_no_problem_on_a_healthy_log(tmp_path: Path) -> None:
    write_log(tmp_path / "t-0")
    problems, text = run([tmp_path / "t-0"], verify_index=True)
    assert problems == 0
    assert "MISMATCH" not in text
    assert text.count("offset: ") >= 10  # sparse entries were written and printed


def test_corrupt_batch_is_reported(tmp_path: Path) -> None:
    write_log(tmp_path / "t-0")
    log_file = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(log_file.read_bytes())
    data[200] ^= 0xFF  # inside the first batches' CRC'd bytes
    log_file.write_bytes(bytes(data))
    problems, text = run([log_file])
    assert problems >= 1
    assert "isvalid: false" in text


def test_corrupt_index_entry_is_a_mismatch(tmp_path: Path) -> None:
    write_log(tmp_path / "t-0")
    index = tmp_path / "t-0" / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 4, 7)  # first entry now points at position 7
    index.write_bytes(bytes(data))
    problems, text = run([index], verify_index=True)
    assert problems == 1
    assert "MISMATCH" in text


def test_cli_exit_codes(tmp_path: Path) -> None:
    import subprocess
    import sys

    write_log(tmp_path / "t-0")
    ok = subprocess.run(
        [sys.executable, "-m", "tierlog.cli", "dump-log", str(tmp_path / "t-0"), "--verify-index"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "tierlog.cli", "dump-log", str(tmp_path / "nope.log")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_a_txn_index_prints_its_aborted_transactions(tmp_path: Path) -> None:
    from tierlog.records.txn_index_codec import AbortedTxn, encode_entries

    write_log(tmp_path / "t-0")
    path = tmp_path / "t-0" / "00000000000000000000.txnindex"
    path.write_bytes(encode_entries([AbortedTxn(7, 3, 9, 4), AbortedTxn(8, 5, 12, 10)]))
    problems, text = run([tmp_path / "t-0"])  # a directory's listing includes it
    assert problems == 0
    assert f"Dumping {path}" in text
    assert "version: 0 producerId: 7 firstOffset: 3 lastOffset: 9 lastStableOffset: 4" in text
    assert "producerId: 8 firstOffset: 5 lastOffset: 12 lastStableOffset: 10" in text
    path.write_bytes(path.read_bytes() + b"\0" * 5)
    problems, text = run([path])
    assert problems == 1 and "producerId: 8" in text
    assert "partial entry: 5 bytes at position 68" in text
