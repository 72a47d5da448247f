"""Kafka v2 record batches, sans-I/O: build, validate and decode them from bytes.

Modules: ``header`` (the 61-byte batch header), ``varint`` (zigzag varints),
``codecs`` (gzip/snappy/lz4/zstd blocks), ``builder`` (records -> batch bytes),
``reader`` (batch bytes -> records), ``errors``. Two more are imported explicitly and
never from here: ``tierlog.records.arrow`` (needs pyarrow, which the broker must not
load) and ``tierlog.records.fuzz`` (the fuzz entry point).
"""

from tierlog.records.builder import ControlType, Record, build_batch, build_control_batch
from tierlog.records.codecs import DEFAULT_MAX_SIZE, compress, decompress
from tierlog.records.errors import (
    CorruptBatchError,
    InvalidRecordError,
    RecordsError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)
from tierlog.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    Attr,
    BatchHeader,
    Compression,
    TimestampType,
    compute_crc,
    iter_batches,
    parse_header,
    peek_size,
    rewrite_prefix,
    set_log_append_time,
    validate_batch,
)
from tierlog.records.reader import (
    DecodedRecord,
    RecordColumns,
    decode_batch,
    decode_columns,
    iter_batches_records,
    iter_records,
    iter_whole_batches,
)
from tierlog.records.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

__all__ = [
    "DEFAULT_MAX_SIZE",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "Attr",
    "BatchHeader",
    "Compression",
    "ControlType",
    "CorruptBatchError",
    "DecodedRecord",
    "InvalidRecordError",
    "Record",
    "RecordColumns",
    "RecordsError",
    "TimestampType",
    "UnsupportedCompressionError",
    "UnsupportedMagicError",
    "build_batch",
    "build_control_batch",
    "compress",
    "compute_crc",
    "decode_batch",
    "decode_columns",
    "decode_varint",
    "decode_varlong",
    "decompress",
    "encode_varint",
    "encode_varlong",
    "iter_batches",
    "iter_batches_records",
    "iter_records",
    "iter_whole_batches",
    "parse_header",
    "peek_size",
    "rewrite_prefix",
    "set_log_append_time",
    "validate_batch",
]
