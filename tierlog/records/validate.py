"""The one validator of the batches a log appends (issue 21, item 5): every append path
(a producer's request, the broker's own coordinators, a follower's replication) checks its
batches here and appends the ``ValidatedBatches`` it returns.

What is checked, by whom (Kafka's ``AppendOrigin``), and what it costs:

=========================================  ======================  ==========================
check                                      origin                  cost
=========================================  ======================  ==========================
whole, magic 2, batchLength, counts >= 0   all                     the 61-byte header
max.message.bytes, segment.bytes           all                     none
CRC-32C                                    all                     one pass, ~19 GB/s
recordCount == lastOffsetDelta + 1 > 0,    client, coordinator     none
no control batch, a sequence when
idempotent (not for the coordinator)
records fill the batch, recordCount many   client, coordinator     a walk of record lengths
  (uncompressed)                                                   (no field decoded)
stated sizes possible and readable         client, coordinator     a few bytes
  (compressed)
the topic's codec (``compression.type``)   client, coordinator     one compare (the header)
zstd: the frames' block headers            client, coordinator     one step per block
every record's length; its key on a        client, coordinator     decoding, off the event
  compacted topic; the decompressed size                           loop, bounded (``decode``)
  of a block that could pass 256 MiB
=========================================  ======================  ==========================

What the produce path decodes (DESIGN.md principle 2: the hot path reads headers). Most
batches need nothing past the header walk: uncompressed records are counted by their length
prefixes, and a compressed block is cleared when its length times its codec's largest
expansion stays under ``max_decompressed_bytes`` (``expansion.MAX_EXPANSION``), or, for zstd,
when its frames' block headers bound its output (``expansion.zstd_output_bound``). What is
left must be decoded: a compacted topic's records (the key rule) and a block that could
expand past the limit without its framing binding it (a zstd frame without its content
size, a large gzip or lz4 block). Stored unchecked, such a block stalled every consumer at
its offset (issue 20, item 10). ``needs_decoding`` says so; ``decode`` does it in pieces
(``codecs.iter_decompressed``: memory stays at one piece) within a ``RequestBudget``, and
the broker runs it on a worker thread, never on the event loop.

Recompression (``compression.type`` other than ``producer``, as Kafka's ``LogValidator``):
a batch whose codec is not the topic's is re-encoded before it is appended
(``needs_recompression``, then ``recompress``; ``tierlog.records.recompress`` owns the
bytes), on the same worker thread and within the same budget as ``decode``; the re-encoded
batches are checked against the size limits again. A batch already in the topic's codec,
and every batch of a ``producer`` topic, costs one compare more than before. Followers
never re-encode: they store the leader's bytes (``Origin.REPLICATION``).

Large batches: the CRC-32C (and record count) of one whole batch of at least
``crc_later_from`` bytes is left to the caller (``crc_pending``), which computes it beside
the write (``tierlog.local.crc_worker``) and hands the result to ``check_crc``; ``complete``
does it inline.

Sans-I/O: bytes and rules in, a ``ValidatedBatches`` or an exception out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from crc32c import crc32c

from tierlog.records.codecs import DEFAULT_MAX_SIZE, iter_decompressed
from tierlog.records.errors import (
    CorruptBatchError,
    DecompressedTooLargeError,
    InvalidRecordError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from tierlog.records.expansion import (
    EXPANSION_SLACK,
    MAX_EXPANSION,
    check_declared_sizes,
    zstd_output_bound,
)
from tierlog.records.header import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    NO_SEQUENCE,
    Attr,
    BatchHeader,
    Compression,
    parse_header,
    validate_batch,
)
from tierlog.records.keys import RecordScan
from tierlog.records.recompress import TargetCompression, needs_recompression, recompress_batch
from tierlog.records.record_walk import count_records
from tierlog.records.varint import BytesLike

# Decompressed bytes one produce request may cost the checks (``decode``): the bound one
# reader of a batch has (``codecs.DEFAULT_MAX_SIZE``), for the whole request.
DECODE_BYTES_PER_REQUEST = 256 * 1024 * 1024
# Each record walked counts this much more: a block of tiny records costs per record, not
# per byte (a 7-byte record takes ~1 us of Python to step over).
RECORD_COST = 64
# zstd block headers one request may walk on the event loop (~0.25 us each). 4,096 cover
# a legitimate 512 MiB of 128 KiB blocks; a block with more goes to ``decode``.
ZSTD_WALK_BLOCKS_PER_REQUEST = 4096


class Origin(enum.Enum):
    """Who wrote the batches (Kafka's ``AppendOrigin``)."""

    CLIENT = "client"  # a producer: every rule
    COORDINATOR = "coordinator"  # this broker's group and transaction coordinators
    REPLICATION = "replication"  # a follower appending its leader's (checked) batches


@dataclass(frozen=True, slots=True)
class AppendRules:
    """What a partition's configuration asks of the batches appended to it.

    Args:
        max_batch_bytes: ``max.message.bytes``, per batch (MESSAGE_TOO_LARGE).
        max_append_bytes: ``segment.bytes``: one append goes into one segment
            (RECORD_LIST_TOO_LARGE).
        keys_required: ``cleanup.policy`` has ``compact``: every record needs a key.
        max_decompressed_bytes: the most one compressed batch may decompress to: what a
            reader of this broker decompresses (MESSAGE_TOO_LARGE past it).
        compression: the topic's ``compression.type`` and level; None for ``producer``
            (batches are kept in the producer's codec).
    """

    max_batch_bytes: int
    max_append_bytes: int
    keys_required: bool = False
    max_decompressed_bytes: int = DEFAULT_MAX_SIZE
    compression: TargetCompression | None = None


class RequestBudget:
    """What one produce request may cost the checks, shared by its partitions: zstd block
    headers walked on the event loop, bytes decoded off it."""

    def __init__(
        self,
        decode_bytes: int = DECODE_BYTES_PER_REQUEST,
        walk_blocks: int = ZSTD_WALK_BLOCKS_PER_REQUEST,
    ) -> None:
        self.decode_bytes = decode_bytes
        self.walk_blocks = walk_blocks
        self.total_decode_bytes = decode_bytes


@dataclass(slots=True, eq=False)
class ValidatedBatches:
    """Batches that passed ``validate``, with what is left to check.

    ``crc_pending``: the one large batch's CRC-32C and record count are not checked yet
    (``check_crc`` / ``complete``). ``needs_decoding``: ``decode`` must run before they
    are appended; ``decoded`` once it has. ``needs_recompression``: some are not in the
    topic's codec; ``recompress`` re-encodes them (and clears it).
    """

    records: BytesLike
    headers: list[BatchHeader]
    rules: AppendRules
    origin: Origin
    size: int
    record_count: int
    crc_pending: bool = False
    needs_decoding: bool = False
    decoded: bool = False
    needs_recompression: bool = False


def validate(
    records: BytesLike,
    rules: AppendRules,
    origin: Origin = Origin.CLIENT,
    *,
    crc_later_from: int | None = None,
    budget: RequestBudget | None = None,
) -> ValidatedBatches:
    """Check every batch in ``records`` as the table above says; nothing is decoded.

    Args:
        crc_later_from: leave the CRC-32C and record count of one whole batch of at least
            this many bytes to the caller (``crc_pending``); None checks everything here.
        budget: the request's budget (a new one when None).

    Raises:
        CorruptBatchError: malformed, truncated or CRC-failing batch, an impossible stated
            size (UnsupportedMagicError: magic other than 2).
        InvalidRecordError: a client rule broken (counts, control batch, sequence).
        RecordTooLargeError / RecordBatchTooLargeError: the size limits.
        DecompressedTooLargeError: a block that states, or provably expands to, more than
            ``max_decompressed_bytes``.
    """
    view = memoryview(records)
    end = len(view)
    client = origin is not Origin.REPLICATION
    headers: list[BatchHeader] = []
    pos = count = 0
    crc_pending = needs_decoding = recompressing = False
    target = rules.compression
    while pos < end:
        header = parse_header(view, pos)
        size = header.size
        if pos + size > end:
            raise CorruptBatchError(
                f"batch at offset {header.base_offset} truncated: {end - pos} of {size} bytes"
            )
        if header.last_offset_delta < 0 or header.record_count < 0:
            raise CorruptBatchError(
                f"batch at offset {header.base_offset} has negative lastOffsetDelta/recordCount"
            )
        if size > rules.max_batch_bytes:
            raise RecordTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes {rules.max_batch_bytes}"
            )
        if size > rules.max_append_bytes:
            raise RecordBatchTooLargeError(
                f"batch of {size} bytes exceeds segment.bytes {rules.max_append_bytes}"
            )
        later = crc_later_from is not None and size == end and size >= crc_later_from
        if not later and crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != header.crc:
            validate_batch(view, pos)  # raises CorruptBatchError with the details
        if client:
            _check_client_batch(header, origin)
            codec = header.attributes & Attr.COMPRESSION_MASK
            block = view[pos + HEADER_SIZE : pos + size]
            if codec:
                limit = rules.max_decompressed_bytes
                check_declared_sizes(codec, block, header.record_count, limit)
                # Its length alone clears most blocks: no look further, no budget.
                if len(block) * MAX_EXPANSION[codec] + EXPANSION_SLACK > limit:
                    budget = budget or RequestBudget()
                    needs_decoding |= _may_exceed(codec, block, limit, budget)
            elif not later:
                _check_record_count(count_records(view, pos + HEADER_SIZE, pos + size), header)
            needs_decoding |= rules.keys_required
            if target is not None:
                recompressing |= needs_recompression(header.attributes, target)
        crc_pending |= later
        headers.append(header)
        count += header.record_count
        pos += size
    # One append goes into one segment, so all of it must fit (Kafka checks the whole
    # request against segment.bytes, RECORD_LIST_TOO_LARGE).
    if end > rules.max_append_bytes:
        raise RecordBatchTooLargeError(
            f"{end} bytes in one append exceed segment.bytes {rules.max_append_bytes}"
        )
    return ValidatedBatches(
        records,
        headers,
        rules,
        origin,
        end,
        count,
        crc_pending,
        needs_decoding and client,
        needs_recompression=recompressing,
    )


def _check_client_batch(header: BatchHeader, origin: Origin) -> None:
    # Kafka's LogValidator.validateBatch rules for batches from clients.
    if header.record_count <= 0:
        raise InvalidRecordError(f"invalid record count {header.record_count}")
    if header.record_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"inconsistent batch: lastOffsetDelta {header.last_offset_delta} with "
            f"{header.record_count} records"
        )
    if header.attributes & Attr.CONTROL:
        raise InvalidRecordError("clients are not allowed to write control records")
    if (
        header.producer_id >= 0
        and header.base_sequence == NO_SEQUENCE
        and origin is not Origin.COORDINATOR
    ):
        # The coordinator's transactional offset commits carry no sequence (Kafka's
        # AppendOrigin.COORDINATOR); a producer's idempotent batch must.
        raise InvalidRecordError(f"invalid sequence number {header.base_sequence}")


def _check_record_count(walked: int, header: BatchHeader) -> None:
    """The records an uncompressed batch holds must be the ones its header declares
    (Kafka's DefaultRecordBatch iterator refuses the same batches, INVALID_RECORD)."""
    if walked != header.record_count:
        found = "records that do not fill its length" if walked < 0 else f"{walked} records"
        raise InvalidRecordError(
            f"batch declares {header.record_count} records (lastOffsetDelta "
            f"{header.last_offset_delta}) but holds {found}"
        )


def _may_exceed(codec: int, block: memoryview, limit: int, budget: RequestBudget) -> bool:
    """Whether ``block``, which its length alone does not clear, could decompress past
    ``limit`` with nothing but decoding to tell.

    Raises:
        DecompressedTooLargeError: its zstd raw and RLE blocks alone pass ``limit``.
    """
    if codec != Compression.ZSTD or budget.walk_blocks <= 0:
        return True
    found = zstd_output_bound(block, budget.walk_blocks)
    budget.walk_blocks -= found.blocks
    if found.exact > limit:
        raise DecompressedTooLargeError(
            f"ZSTD records block decompresses to at least {found.exact} bytes, more than "
            f"the {limit} bytes a reader of this broker decompresses"
        )
    return found.bound is None or found.bound > limit


def check_crc(batches: ValidatedBatches, crc: int, walked: int) -> None:
    """Finish ``crc_pending``: ``crc`` is the CRC-32C computed beside the write, ``walked``
    the records counted (uncompressed batches; ignored otherwise).

    Raises:
        CorruptBatchError, InvalidRecordError: as ``validate``.
    """
    header = batches.headers[0]
    if crc != header.crc:
        validate_batch(batches.records)  # raises CorruptBatchError with the details
    if batches.origin is not Origin.REPLICATION and not header.attributes & Attr.COMPRESSION_MASK:
        _check_record_count(walked, header)
    batches.crc_pending = False


def complete(batches: ValidatedBatches) -> None:
    """Finish ``crc_pending`` here and now."""
    if batches.crc_pending:
        view = memoryview(batches.records)
        size = len(view)
        check_crc(batches, crc32c(view[ATTRIBUTES_OFFSET:]), count_records(view, HEADER_SIZE, size))


def decode(batches: ValidatedBatches, budget: RequestBudget | None = None) -> int:
    """The checks that decode (``needs_decoding``): every record's length and count, each
    record's key on a compacted topic, and each compressed block's true size, decompressed
    in pieces. CPU-bound and slow for large blocks: the broker runs it on a worker thread.

    Returns:
        What it cost ``budget`` (decompressed bytes, plus ``RECORD_COST`` a record).

    Raises:
        DecompressedTooLargeError: a block past ``max_decompressed_bytes``, or the
            request's batches past ``budget`` (MESSAGE_TOO_LARGE).
        InvalidRecordError: a keyless record on a compacted topic, or a record count that
            is not the header's.
        CorruptBatchError: a block or record that does not decode.
    """
    budget = budget or RequestBudget()
    rules = batches.rules
    view = memoryview(batches.records)
    spent = pos = 0
    for header in batches.headers:
        codec = header.attributes & Attr.COMPRESSION_MASK
        block = view[pos + HEADER_SIZE : pos + header.size]
        pos += header.size
        if not codec and not rules.keys_required:
            continue  # counted already by its lengths (``validate``)
        if batches.needs_recompression and needs_recompression(
            header.attributes, rules.compression
        ):
            continue  # ``recompress`` decodes it whole and makes the same checks
        scan = RecordScan(keys_required=rules.keys_required)
        left = budget.decode_bytes - spent
        limit = min(rules.max_decompressed_bytes, left)
        try:
            for piece in iter_decompressed(codec, block, limit):
                scan.feed(piece)
                spent += len(piece) if codec else 0
        except DecompressedTooLargeError:
            raise _past(rules.max_decompressed_bytes, left, budget) from None
        walked = scan.finish()
        spent += RECORD_COST * walked
        if spent > budget.decode_bytes:
            raise _past(rules.max_decompressed_bytes, left, budget)
        if walked != header.record_count:
            raise InvalidRecordError(
                f"batch declares {header.record_count} records but holds {walked}"
            )
    budget.decode_bytes -= spent
    batches.decoded = True
    return spent


def recompress(batches: ValidatedBatches, budget: RequestBudget | None = None) -> int:
    """Re-encode the batches not in the topic's codec (``needs_recompression``), making
    the checks ``decode`` makes on them, and check the new sizes against the limits.
    CPU-bound like ``decode``: the broker runs it on a worker thread.

    Returns:
        What it cost ``budget`` (decompressed bytes, plus ``RECORD_COST`` a record).

    Raises:
        As ``decode``; RecordTooLargeError / RecordBatchTooLargeError when a re-encoded
        batch, or the request, no longer fits ``max.message.bytes`` / ``segment.bytes``
        (Kafka checks the batch it stores, not the one it was sent).
    """
    if not batches.needs_recompression:
        return 0
    complete(batches)  # the one large batch's CRC, before its bytes are trusted
    budget = budget or RequestBudget()
    rules = batches.rules
    target = rules.compression
    assert target is not None  # validate sets needs_recompression only with a target
    view = memoryview(batches.records)
    out: list[bytes | memoryview] = []
    headers: list[BatchHeader] = []
    spent = pos = total = 0
    for header in batches.headers:
        batch = view[pos : pos + header.size]
        pos += header.size
        if not needs_recompression(header.attributes, target):
            out.append(batch)
            headers.append(header)
            total += header.size
            continue
        left = budget.decode_bytes - spent
        try:
            done = recompress_batch(
                batch,
                header,
                target,
                max_decompressed_bytes=min(rules.max_decompressed_bytes, left),
                keys_required=rules.keys_required,
            )
        except DecompressedTooLargeError:
            raise _past(rules.max_decompressed_bytes, left, budget) from None
        spent += done.decoded_bytes + RECORD_COST * header.record_count
        if spent > budget.decode_bytes:
            raise _past(rules.max_decompressed_bytes, left, budget)
        new_header = parse_header(done.batch)
        if new_header.size > rules.max_batch_bytes:
            raise RecordTooLargeError(
                f"batch of {new_header.size} bytes in {target.codec.name} exceeds "
                f"max.message.bytes {rules.max_batch_bytes}"
            )
        out.append(done.batch)
        headers.append(new_header)
        total += new_header.size
    if total > rules.max_append_bytes:
        raise RecordBatchTooLargeError(
            f"{total} bytes in one append exceed segment.bytes {rules.max_append_bytes}"
        )
    batches.records = out[0] if len(out) == 1 else b"".join(out)
    batches.headers = headers
    batches.size = total
    batches.needs_recompression = False
    budget.decode_bytes -= spent
    return spent


def prepare(batches: ValidatedBatches, budget: RequestBudget | None = None) -> int:
    """What is left before ``batches`` can be appended: ``decode`` when it needs
    decoding, then ``recompress``. Returns what it cost ``budget``."""
    budget = budget or RequestBudget()
    spent = 0
    if batches.needs_decoding and not batches.decoded:
        spent += decode(batches, budget)
    return spent + recompress(batches, budget)


def _past(per_batch: int, left: int, budget: RequestBudget) -> DecompressedTooLargeError:
    if left < per_batch:
        return DecompressedTooLargeError(
            f"the batches of this produce request decompress to more than "
            f"{budget.total_decode_bytes} bytes, the most the broker decodes for one "
            "request; send smaller batches"
        )
    return DecompressedTooLargeError(
        f"a batch decompresses to more than {per_batch} bytes, more than a reader of this "
        "broker decompresses"
    )
