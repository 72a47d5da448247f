"""Fuzz entry point for the record codecs: arbitrary bytes in, only RecordsError out.

``fuzz_one_input`` runs every decoding entry point (header parse/validate, batch walk,
record iteration, decompression, varints) on one input; any exception that is not a
``RecordsError`` is a bug. ``run`` feeds it seeded random inputs and mutations of valid
batches of every codec (bit flips, truncation, edited length/count/codec fields, spliced
batches), re-sealing most mutants with a correct CRC so they reach the record decoder.
It needs no fuzzing library; with atheris installed the same target works::

    import atheris, sys
    from tierlog.records.fuzz import fuzz_one_input
    atheris.Setup(sys.argv, fuzz_one_input)
    atheris.Fuzz()

Command line: ``python -m tierlog.records.fuzz -n 5000 --seed 1 [--arrow]``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import struct
from collections.abc import Callable, Sequence

from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.codecs import compress, decompress
from tierlog.records.errors import RecordsError
from tierlog.records.header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
    TimestampType,
    compute_crc,
    iter_batches,
    parse_header,
    validate_batch,
)
from tierlog.records.reader import iter_batches_records, iter_records
from tierlog.records.varint import decode_varint, decode_varlong

# Small enough that a fuzz input cannot make one iteration slow or memory-hungry.
FUZZ_MAX_SIZE = 1 << 20
_CRC = struct.Struct(">I")
_INT32 = struct.Struct(">i")
LENGTH_OFFSET = 8


def _swallow(fn: Callable[[], object]) -> None:
    with contextlib.suppress(RecordsError):
        fn()


def fuzz_one_input(data: bytes) -> None:
    """Run every decoder on ``data``; raises only if a non-RecordsError escapes."""
    _swallow(lambda: parse_header(data))
    _swallow(lambda: validate_batch(data))
    _swallow(lambda: list(iter_batches(data)))
    _swallow(lambda: list(iter_records(data, max_decompressed_size=FUZZ_MAX_SIZE)))
    # Without the CRC check random bytes reach the record decoder too.
    _swallow(
        lambda: list(iter_records(data, verify_crc=False, max_decompressed_size=FUZZ_MAX_SIZE))
    )
    _swallow(
        lambda: list(
            iter_batches_records(data, verify_crc=False, max_decompressed_size=FUZZ_MAX_SIZE)
        )
    )
    if data:
        _swallow(lambda: decompress(data[0] & 0x07, data[1:], FUZZ_MAX_SIZE))
    _swallow(lambda: decode_varint(data, 0))
    _swallow(lambda: decode_varlong(data, 0))


def fuzz_arrow_input(data: bytes) -> None:
    """Like ``fuzz_one_input`` for the Arrow conversion (imports pyarrow)."""
    from tierlog.records.arrow import batches_to_table

    _swallow(
        lambda: batches_to_table(
            data, "fuzz", 0, verify_crc=False, max_decompressed_size=FUZZ_MAX_SIZE
        )
    )
    _swallow(
        lambda: batches_to_table(
            data, "fuzz", 0, start_offset=1, end_offset=5, max_decompressed_size=FUZZ_MAX_SIZE
        )
    )


def seed_corpus() -> list[bytes]:
    """Valid inputs to mutate: batches of every codec and shape, and a multi-batch buffer."""
    rng = random.Random(1234)
    corpus: list[bytes] = []
    for codec in Compression:
        records = [
            Record(
                key=None if i % 3 == 0 else rng.randbytes(rng.randrange(0, 20)),
                value=None if i % 7 == 6 else rng.randbytes(rng.randrange(0, 150)),
                headers=(("h", b"v"), ("n", None)) if i % 4 == 1 else (),
                timestamp=1_700_000_000_000 + rng.randrange(-100, 100_000),
            )
            for i in range(rng.randrange(1, 12))
        ]
        corpus.append(build_batch(records, base_offset=rng.randrange(1000), compression=codec))
    corpus.append(
        build_batch(
            [Record(b"k", b"v")],
            base_timestamp=5,
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            offset_deltas=[300],
        )
    )
    corpus.append(
        build_control_batch(ControlType.COMMIT, producer_id=7, producer_epoch=1, timestamp=9)
    )
    corpus.append(corpus[0] + corpus[1] + corpus[-1])
    return corpus


def _reseal(data: bytearray, fix_length: bool) -> None:
    """Store a correct CRC (and batchLength) so the mutant reaches the record decoder."""
    if len(data) >= HEADER_SIZE:
        if fix_length:
            _INT32.pack_into(data, LENGTH_OFFSET, len(data) - LOG_OVERHEAD)
        _CRC.pack_into(data, CRC_OFFSET, compute_crc(data))


def _mutate_bytes(rng: random.Random, out: bytearray, start: int) -> None:
    """Flip, overwrite, insert or delete a few bytes at or after ``start``."""
    if len(out) <= start:
        out += rng.randbytes(rng.randrange(1, 4))
        return
    i = rng.randrange(start, len(out))
    kind = rng.randrange(4)
    if kind == 0:
        out[i] ^= 1 << rng.randrange(8)
    elif kind == 1:
        out[i] = rng.choice([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF, rng.randrange(256)])
    elif kind == 2:
        out[i:i] = rng.randbytes(rng.randrange(1, 8))
    else:
        del out[i : i + rng.randrange(1, 8)]


def _mutate_records(rng: random.Random, out: bytearray) -> bytearray:
    """Mutate the decompressed records block and compress it again with the same codec,
    so that compressed batches exercise the record decoder, not just the codecs."""
    codec = struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)[0] & 0x07
    if codec > Compression.ZSTD:
        return out
    try:
        block = bytearray(decompress(codec, bytes(out[HEADER_SIZE:]), FUZZ_MAX_SIZE))
    except RecordsError:
        return out
    for _ in range(rng.randrange(1, 3)):
        _mutate_bytes(rng, block, 0)
    return out[:HEADER_SIZE] + compress(codec, bytes(block))


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    """One random structural mutation of ``data``."""
    out = bytearray(data)
    kind = rng.randrange(8)
    if kind == 0 and out:  # bit flips anywhere
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncation
        del out[rng.randrange(len(out) + 1) :]
    elif kind == 2 and len(out) >= HEADER_SIZE:  # header count/length fields
        field, fmt = rng.choice([(8, ">i"), (23, ">i"), (57, ">i"), (27, ">q"), (35, ">q")])
        value = rng.choice([0, -1, 1, 2, 0x7FFFFFFF, -(1 << 31), rng.randrange(-500, 500)])
        if fmt == ">q":
            value = rng.choice([value, (1 << 63) - 1, -(1 << 63)])
        struct.pack_into(fmt, out, field, value)
    elif kind == 3 and len(out) >= HEADER_SIZE:  # attributes: codec and flag bits
        struct.pack_into(">h", out, ATTRIBUTES_OFFSET, rng.randrange(-(1 << 15), 1 << 15))
    elif kind == 4 and len(out) > HEADER_SIZE:  # bytes of the (compressed) records block
        _mutate_bytes(rng, out, HEADER_SIZE)
    elif kind == 5 and len(out) > HEADER_SIZE:  # bytes of the decompressed records
        out = _mutate_records(rng, out)
    elif kind == 6:  # insert or delete a run of bytes anywhere
        _mutate_bytes(rng, out, 0)
    else:  # splice with another corpus entry
        out += rng.choice(corpus)[: rng.randrange(200)]
    roll = rng.random()
    if roll < 0.7:
        _reseal(out, fix_length=roll < 0.5)
    return bytes(out)


def run(iterations: int, seed: int = 0, *, arrow: bool = False) -> int:
    """Run ``iterations`` fuzz inputs (a third random, the rest mutants); return the count.

    Raises:
        AssertionError: a non-RecordsError escaped; the message holds the input in hex.
    """
    rng = random.Random(seed)
    corpus = seed_corpus()
    targets: list[Callable[[bytes], None]] = [fuzz_one_input]
    if arrow:
        targets.append(fuzz_arrow_input)
    for i in range(iterations):
        if i < len(corpus):
            data = corpus[i]
        elif i % 3 == 0:
            data = rng.randbytes(rng.randrange(0, 300))
        else:
            data = rng.choice(corpus)
            for _ in range(rng.randrange(1, 4)):
                data = mutate(rng, data, corpus)
        for target in targets:
            try:
                target(data)
            except Exception as exc:
                raise AssertionError(
                    f"{target.__name__} raised {type(exc).__name__}: {exc}; "
                    f"input (hex): {data.hex()}"
                ) from exc
    return iterations


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fuzz the Kafka record decoders.")
    parser.add_argument("-n", "--iterations", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arrow", action="store_true", help="also fuzz the Arrow conversion")
    args = parser.parse_args(argv)
    count = run(args.iterations, args.seed, arrow=args.arrow)
    print(f"{count} inputs, no unexpected exception")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
