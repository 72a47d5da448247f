"""The vectorised path of the cleaner's rules against the per-record reference: the same
batches out, byte for byte, and the same counts, over random chunks (every codec,
tombstones with and without delete horizons, keyless records, keys long enough for
multi-byte length codes, control and empty batches)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tierlog.compaction.batch_filter import rebuild_batch, walk_records
from tierlog.compaction.chunk_records import _in_place, locate
from tierlog.compaction.offset_map import OffsetMap
from tierlog.compaction.pass_filter import CleanStats, PassFilter, is_data, keyed_offsets
from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.header import Compression, parse_header, validate_batch

SEED = (99, 101)
NOW = 1_700_000_000_000


class _Sink:
    def __init__(self) -> None:
        self.batches: list[bytes] = []

    def append(self, batch: object, last_offset: int, max_timestamp: int) -> None:
        self.batches.append(bytes(batch))  # type: ignore[call-overload]

    def append_parts(
        self, parts: list[object], size: int, last_offset: int, max_timestamp: int
    ) -> None:
        joined = b"".join(parts)  # type: ignore[arg-type]
        assert len(joined) == size
        header = validate_batch(joined)  # CRC-32C over the pieces is right
        assert header.max_timestamp == max_timestamp and header.last_offset == last_offset
        self.batches.append(joined)


def _chunk(rnd: random.Random, codecs: list[Compression]) -> list[tuple[bytes, object]]:
    out = []
    offset = 0
    for _ in range(rnd.randrange(1, 30)):
        if rnd.random() < 0.05:
            batch = build_control_batch(
                ControlType.COMMIT,
                producer_id=5,
                producer_epoch=0,
                timestamp=NOW,
                base_offset=offset,
            )
        else:
            records = []
            for _ in range(rnd.randrange(1, 12)):
                key: bytes | None = b"key-%d" % rnd.randrange(40)
                if rnd.random() < 0.05:
                    key = None
                elif rnd.random() < 0.03:
                    key = rnd.randbytes(rnd.randrange(9000, 17000))  # 3-byte length code
                value = None if rnd.random() < 0.2 else rnd.randbytes(rnd.randrange(0, 50))
                records.append(Record(key, value, timestamp=NOW - rnd.randrange(10_000)))
            batch = build_batch(
                records,
                base_offset=offset,
                compression=rnd.choice(codecs),
                producer_id=rnd.choice([-1, 7]),
                producer_epoch=0,
                base_sequence=offset,
            )
            if rnd.random() < 0.3:  # some batches already stamped with a horizon
                header = parse_header(batch)
                walked = walk_records(batch, header)
                batch = rebuild_batch(
                    header, walked, list(range(len(walked))), NOW + rnd.choice([-1, 1]) * 5000
                )
        header = parse_header(batch)
        out.append((batch, header))
        offset = header.next_offset + rnd.randrange(0, 3)
    return out


@pytest.mark.parametrize("seed", range(25))
def test_vectorised_and_reference_paths_agree(seed: int) -> None:
    rnd = random.Random(seed)
    # A third of the chunks uncompressed: the in-place walk takes only those.
    chunk = _chunk(rnd, [Compression.NONE] if seed % 3 == 0 else list(Compression))
    data = [(b, h) for b, h in chunk if is_data(h)]  # type: ignore[arg-type]
    end = chunk[-1][1].next_offset  # type: ignore[attr-defined]
    map_end = rnd.choice([end, end // 2 + 1])
    producer_last_offsets = {7: int(rnd.random() * end)}
    # The cleaner hands over views into the chunk it read: walked where they are when
    # uncompressed (chunk_records._in_place), copied into one buffer otherwise.
    buffer = b"".join(batch for batch, _ in chunk)  # type: ignore[misc]
    views, at = [], 0
    for batch, header in chunk:
        views.append((memoryview(buffer)[at : at + len(batch)], header))  # type: ignore[arg-type]
        at += len(batch)  # type: ignore[arg-type]
    results = []
    for vectorised, batches in ((True, chunk), (True, views), (False, chunk)):
        data = [(b, h) for b, h in batches if is_data(h)]  # type: ignore[arg-type]
        digests, offsets = keyed_offsets(data, 0, SEED, vectorised=vectorised)
        keep = offsets < map_end
        offset_map = OffsetMap(1 << 16)
        offset_map.reset(0)
        offset_map.put(digests[keep], offsets[keep])
        stats = CleanStats()
        rules = PassFilter(
            offset_map,
            map_end,
            now_ms=NOW,
            delete_retention_ms=1000,
            producer_last_offsets=producer_last_offsets,
            stats=stats,
            seed=SEED,
            vectorised=vectorised,
        )
        sink = _Sink()
        changed = rules.chunk(batches, sink)  # type: ignore[arg-type]
        results.append((sink.batches, changed, stats, rules.next_horizon, np.asarray(digests)))
    fast, in_place, reference = results
    assert locate(data) is not None  # the fast path took the chunk: it is what is compared
    if seed % 3 == 0:
        assert _in_place([(b, h) for b, h in views if is_data(h)]) is not None  # type: ignore[arg-type]
    for vectorised in (fast, in_place):
        assert (vectorised[4] == reference[4]).all()
        assert vectorised[:4] == reference[:4]
