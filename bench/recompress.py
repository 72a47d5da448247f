"""What a topic's ``compression.type`` costs the leader's append (issue 23 item 5).

``Log.append`` + ``validate.prepare`` (what the produce path runs: the header checks, then on
the decode pool the decoding and recompression) of one producer batch, per append, for:

  producer/none     a ``producer`` topic, an uncompressed batch (the fast path)
  producer/zstd     a ``producer`` topic, a zstd batch (kept as sent)
  zstd/zstd         a ``zstd`` topic, a zstd batch: same codec, nothing re-encoded
  zstd/none         a ``zstd`` topic, an uncompressed batch: recompressed (level 3)
  lz4/none, gzip/none, snappy/none, none/zstd  the other directions

Batches: 16 KiB and 1 MiB of ~200-byte records, order events as JSON (ids, amounts and times
vary, field names repeat: zstd takes them to ~45%).
Cases alternate within each round; each figure is the median of its rounds (us per append,
MB/s of the batch as sent) with the spread (``bench/reporting.py``). The first three cases
must cost what they cost before recompression existed: run the same script against an older
tree with ``--root`` (only the ``producer`` cases run there, since it refused other
values) and compare ``producer/*`` and ``zstd/zstd`` with the old ``producer/*``.

Run (from the repository root)::

    .venv/bin/python bench/recompress.py                 # ~1 minute
    .venv/bin/python bench/recompress.py --quick
    .venv/bin/python bench/recompress.py --root /path/to/older/checkout

The LAST line on stdout is one JSON object of figures.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke run)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 7; quick 2)")
    parser.add_argument("--root", default=None, help="tierlog tree to measure (default: this one)")
    parser.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(args.root).resolve() if args.root else HERE.parent))
    sys.path.insert(1, str(HERE))
    from reporting import LOWER, Report

    import tierlog
    from tierlog.local.config import ConfigError, LogConfig
    from tierlog.local.log import Log
    from tierlog.records.builder import Record, build_batch
    from tierlog.records.header import Compression

    try:
        from tierlog.records.validate import prepare
    except ImportError:  # an older tree: decoding was all there was
        from tierlog.records.validate import ValidatedBatches, decode

        def prepare(batches: ValidatedBatches) -> int:  # type: ignore[misc]
            return decode(batches) if batches.needs_decoding else 0

    report = Report("recompress", quick=args.quick)
    report.data["tierlog"] = str(Path(tierlog.__file__).parent)
    rounds = args.rounds or (2 if args.quick else 7)
    rng = random.Random(7)
    states = [b"pending", b"paid", b"shipped", b"delivered", b"returned"]

    def value() -> bytes:
        # An order event as JSON: ids, amounts and times vary, field names repeat.
        return (
            b'{"order_id":%d,"customer":"c-%06d","state":"%s","amount":%d.%02d,'
            b'"currency":"EUR","ts":%d,"items":%d,"note":"%s"}'
            % (
                rng.randrange(10**9),
                rng.randrange(10**6),
                rng.choice(states),
                rng.randrange(10_000),
                rng.randrange(100),
                1_700_000_000_000 + rng.randrange(10**8),
                rng.randrange(1, 20),
                rng.randbytes(12).hex().encode(),
            )
        )

    def batch(size: int, codec: Compression) -> bytes:
        records = [Record(b"key-%d" % i, value()) for i in range(size // 220)]
        return build_batch(records, compression=codec)

    sizes = {"16 KiB": 16 << 10, "1 MiB": 1 << 20}
    cases = {
        "producer/none": ("producer", Compression.NONE),
        "producer/zstd": ("producer", Compression.ZSTD),
        "zstd/zstd": ("zstd", Compression.ZSTD),
        "zstd/none": ("zstd", Compression.NONE),
        "lz4/none": ("lz4", Compression.NONE),
        "gzip/none": ("gzip", Compression.NONE),
        "snappy/none": ("snappy", Compression.NONE),
        "uncompressed/zstd": ("uncompressed", Compression.ZSTD),
    }
    if args.cases:
        cases = {name: cases[name] for name in args.cases.split(",")}
    work = Path(tempfile.mkdtemp(prefix="bench-recompress-"))
    figures: dict[str, Any] = {}
    try:
        for size_name, size in sizes.items():
            appends = 400 if size < (1 << 20) else 20
            if args.quick:
                appends //= 4
            runnable: dict[str, tuple[LogConfig, bytes]] = {}
            for name, (topic_codec, sent) in cases.items():
                try:
                    config = LogConfig.from_props(
                        {"compression.type": topic_codec, "segment.bytes": str(1 << 30)}
                    )
                except ConfigError:
                    continue  # an older tree: producer only
                runnable[name] = (config, batch(size, sent))
            us: dict[str, list[float]] = {name: [] for name in runnable}
            for r in range(rounds):
                for name, (config, data) in runnable.items():
                    directory = work / f"{size_name.replace(' ', '')}-{name.replace('/', '-')}-{r}"
                    log = Log(directory, config)
                    try:
                        start = time.perf_counter()
                        for _ in range(appends):
                            batches = log.validate(data)
                            prepare(batches)
                            log.append(batches)
                        us[name].append((time.perf_counter() - start) / appends * 1e6)
                    finally:
                        log.close()
                        shutil.rmtree(directory)
            figures[size_name] = {
                name: {"us_per_append": sorted(values)[len(values) // 2], "rounds": values}
                for name, values in us.items()
            }
            base = us.get("producer/none")
            for name, values in us.items():
                if base is not None and name != "producer/none":
                    report.side_by_side(
                        f"{size_name} {name} vs producer/none",
                        {name: values, "producer/none": base},
                        unit="us/append",
                        better=LOWER,
                    )
            same = ("zstd/zstd", "producer/zstd")
            if all(n in us for n in same):
                report.side_by_side(
                    f"{size_name} zstd/zstd vs producer/zstd (same codec: nothing re-encoded)",
                    {n: us[n] for n in same},
                    unit="us/append",
                    better=LOWER,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report.data["figures"] = figures
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
