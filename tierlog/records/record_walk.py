"""Count the records of an uncompressed v2 batch by walking their length prefixes only.

A batch's header declares ``recordCount`` and ``lastOffsetDelta``; offsets are assigned
from them, so a batch that claims 1,000,000 records but holds 3 moved the high watermark
by a million (issue 10, item 5). Every record of a records block starts with its length
as a zigzag varint (Kafka's DefaultRecord), so the records can be counted by hopping from
length to length, without decoding a field and without a Python object per record.

Two implementations give the same answer:

* ``count_records_py``: Python, one table lookup per record (``reader._steps``). It costs
  ~70 ns a record, ~350 us for a 1 MiB batch of 200-byte records: twice the ``os.write``
  of that batch, too slow for the append path's goal (append >= 0.8x ``os.write``).
* the native walk: the same loop in C (``_SOURCE``), ~2 ns a record, built with the
  system C compiler on first use into the user's cache directory and loaded with
  ``ctypes``. A ctypes call releases the GIL, so the log runs it on its CRC worker thread
  beside the write, where it costs nothing visible. No compiler (or ``TIERLOG_NATIVE=0``)
  means the Python walk: the same checks, slower. The source is kept in this module so an
  installed package has it without package-data rules.

This module is sans-I/O except ``_load_native`` (it compiles and opens a library once).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path

from tierlog.records.reader import _steps
from tierlog.records.varint import BytesLike, decode_varint

log = logging.getLogger(__name__)

# Returned when the records do not walk cleanly: a length running past the block, a
# negative or malformed length, or a length too short for a record's fixed fields.
NOT_WHOLE = -1

# The smallest record body after its length: attributes, timestampDelta, offsetDelta,
# keyLength, valueLength and headers count, one byte each.
_MIN_BODY = 6

_SOURCE = r"""
#include <stddef.h>
#include <stdint.h>

/* Records in p[start:end): each is a zigzag varint length followed by that many bytes.
   Returns how many, or -1 when they do not tile the range exactly. */
long long tierlog_count_records(const unsigned char *p, size_t start, size_t end) {
    size_t pos = start;
    long long n = 0;
    while (pos < end) {
        uint64_t raw = 0;
        unsigned shift = 0;
        for (;;) {
            if (pos >= end || shift > 28) return -1;
            unsigned char b = p[pos++];
            raw |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
            shift += 7;
        }
        int64_t len = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
        if (len < 6 || (uint64_t)len > end - pos) return -1;
        pos += (size_t)len;
        n++;
    }
    return n;
}
"""


# _WALK[b0 | b1 << 8]: the bytes a record whose length code starts with b0, b1 takes (code
# plus body) for codes of one or two bytes; 0 when the length is negative or too short for
# a record; None for longer codes. Built on first use from the Arrow path's table.
_WALK: list[int | None] = []


def _walk_table() -> list[int | None]:
    if not _WALK:
        table = list(_steps())
        for index, step in enumerate(table):
            if step is not None and step - (2 if index & 0x80 else 1) < _MIN_BODY:
                table[index] = 0
        _WALK[:] = table
    return _WALK


def count_records_py(data: BytesLike, start: int, end: int) -> int:
    """Records in ``data[start:end]``, or ``NOT_WHOLE`` when they do not tile it."""
    steps = _walk_table()
    pos = start
    n = 0
    try:
        while pos < end:
            step = steps[data[pos] | data[pos + 1] << 8]
            if not step:
                if step == 0:  # a negative length, or too short for the fixed fields
                    return NOT_WHOLE
                length, after = decode_varint(data, pos)  # a code of three bytes or more
                if length < _MIN_BODY or after - pos > 5:
                    return NOT_WHOLE
                step = after - pos + length
            pos += step
            n += 1
    except (IndexError, ValueError):
        return NOT_WHOLE
    return n if pos == end else NOT_WHOLE


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tierlog"


def _load_native() -> Callable[[int, int, int], int] | None:
    """Build (once per source version) and open the C walk; None when that fails."""
    if os.environ.get("TIERLOG_NATIVE", "1") == "0":
        return None
    digest = hashlib.sha256(_SOURCE.encode()).hexdigest()[:16]
    tag = sysconfig.get_platform().replace("-", "_")
    library = _cache_dir() / f"record_walk-{digest}-{tag}.so"
    try:
        if not library.exists():
            library.parent.mkdir(parents=True, exist_ok=True)
            compiler = os.environ.get("CC", "cc")
            with tempfile.TemporaryDirectory(dir=library.parent) as tmp:
                source = Path(tmp) / "record_walk.c"
                source.write_text(_SOURCE)
                built = Path(tmp) / library.name
                subprocess.run(
                    [compiler, "-O2", "-shared", "-fPIC", "-o", str(built), str(source)],
                    check=True,
                    capture_output=True,
                    timeout=60,
                )
                os.replace(built, library)  # atomic: concurrent builders agree
        lib = ctypes.CDLL(str(library))
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("native record walk unavailable (%s); using the Python walk", exc)
        return None
    fn = lib.tierlog_count_records
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
    fn.restype = ctypes.c_longlong
    return fn


_native: Callable[[int, int, int], int] | None = None
_native_loaded = False


def native_available() -> bool:
    global _native, _native_loaded
    if not _native_loaded:
        _native = _load_native() if sys.platform != "win32" else None
        _native_loaded = True
    return _native is not None


def _address(data: BytesLike) -> tuple[int, object]:
    """The address of ``data``'s first byte, and the object that keeps it alive."""
    import numpy as np  # only for the address of a read-only buffer

    array = np.frombuffer(data, dtype=np.uint8)
    return array.ctypes.data, array


def count_records(data: BytesLike, start: int, end: int) -> int:
    """Records in ``data[start:end]``, or ``NOT_WHOLE``: the native walk when it could be
    built (it releases the GIL), else ``count_records_py``."""
    if end - start < _MIN_BODY + 1:
        return 0 if end == start else NOT_WHOLE
    if not native_available():
        return count_records_py(data, start, end)
    assert _native is not None
    if isinstance(data, bytes):
        return _native(data, start, end)  # type: ignore[arg-type]
    address, keep = _address(data)
    try:
        return _native(address, start, end)
    finally:
        del keep
