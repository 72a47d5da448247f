"""A shared memory map of a file that holds no file descriptor once made (Kafka's indexes).

Kafka maps each index file and closes the file: a map does not need its descriptor, so a
segment costs one descriptor, its ``.log``. Python's ``mmap.mmap`` keeps a duplicate of the
descriptor it was given for as long as the map lives (CPython 3.11; 3.13's ``trackfd=False``
is the way out there), which made every mapped index cost one: with the ``.log`` and the
index files' own descriptors, five per partition (issue 20, item 8). This maps with the C
library's ``mmap`` through ``ctypes`` and hands out a ``memoryview`` of the mapping, which
``struct.pack_into`` / ``unpack_from`` use as they would the ``mmap`` object (a little
faster, measured: 0.47 vs 0.69 us per unpack).

The caller owns the lifetime: no view of the mapping may be used after ``close``. Its
owner, ``MappedIndex``, keeps the view to itself and drops it in ``close``. A store to a
page past the file's end raises SIGBUS, as with any map; ``tierlog.local.index`` explains
how blocks are reserved first.

Linux (and any POSIX C library); not thread-safe (its owner's thread).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os

_libc = ctypes.CDLL(None, use_errno=True)
_mmap = _libc.mmap
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_munmap = _libc.munmap
_munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_msync = _libc.msync
_msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_as_view = ctypes.pythonapi.PyMemoryView_FromMemory
_as_view.restype = ctypes.py_object
_as_view.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]

_MAP_FAILED = ctypes.c_void_p(-1).value
_PYBUF_WRITE = 0x200
_MS_SYNC = 4


def _raise(what: str) -> None:
    errno = ctypes.get_errno()
    raise OSError(errno, f"{os.strerror(errno)} ({what})")


class FileMap:
    """``size`` bytes of the file behind ``fd``, mapped shared and writable; ``fd`` may
    be closed as soon as this returns.

    Raises:
        OSError: the map could not be made (ENOMEM past ``vm.max_map_count``, ...).
    """

    __slots__ = ("_address", "size", "view")

    def __init__(self, fd: int, size: int) -> None:
        self._address: int | None = None
        if size <= 0:
            raise ValueError("a map needs at least one byte")
        address = _mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            _raise(f"mapping {size} bytes")
        self._address = address
        self.size = size
        self.view: memoryview = _as_view(address, size, _PYBUF_WRITE)

    def flush(self) -> None:
        """Write dirty pages to the file (``msync``, synchronous)."""
        if self._address is not None and _msync(self._address, self.size, _MS_SYNC) != 0:
            _raise("msync")

    def close(self) -> None:
        """Unmap; the view is released first, so a later use raises instead of touching
        memory that is gone."""
        if self._address is None:
            return
        self.view.release()
        address, self._address = self._address, None
        if _munmap(address, self.size) != 0:
            _raise("munmap")

    def __del__(self) -> None:
        with contextlib.suppress(OSError, ValueError, BufferError):
            self.close()
