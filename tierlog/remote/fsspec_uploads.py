"""Writing one remote object from several local sources, as fast as the store takes it.

Owns how ``FsspecRemoteStore`` puts a segment's bytes into an object (issue 24: offload
at >= 0.8x of a raw upload of the same bytes). The sources (a ``.log``, its indexes, the
auxiliary state) are read one after another as one stream, each source's size and
CRC-32C computed from the bytes as they are sent, and written by the store's cheapest
way that never shows a half-written object under the final name:

* ``file://``: written to ``<name>.tmp-<random>`` in the same directory and renamed onto
  ``<name>`` (atomic). A killed upload leaves only the temp file, which no manifest names
  and the orphan scan deletes. Not fsynced: the manifest commit that makes the object
  reachable is the durable step (``fsspec_manifests``), as before.
* ``s3://``: an object of one part (at most ``part_bytes``) is one PUT; a larger one is a
  multipart upload whose parts (``part_bytes`` each, above S3's 5 MiB minimum) are sent
  ``parallelism`` at a time from a thread pool while the next part is read. S3 shows a
  multipart object only when it is completed; any failure aborts the upload, so nothing
  partial is ever visible. Memory is bounded by ``(parallelism + 1) * part_bytes``.
* other stores: fsspec's writer (``fs.open(..., "wb")``), discarded on failure where the
  backend can discard (as before issue 24).

Every request sent is counted in the root's ``RequestCounts`` (PUTs: a multipart upload
counts its start, each part and its completion).

Thread-safe: an upload keeps its state on its own stack; the part pool is shared.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import suppress
from pathlib import Path
from typing import Any, BinaryIO

from crc32c import crc32c

from tierlog.remote.api import RequestCounts
from tierlog.remote.fsspec_root import FsspecRoot

# 8 MiB: above S3's 5 MiB multipart minimum, small enough to throttle smoothly.
DEFAULT_COPY_CHUNK_BYTES = 8 << 20
# Parts of one multipart upload in flight at once: 4 x 8 MiB of buffers per upload. The
# loopback moto server and a real S3 endpoint both stop gaining beyond a few streams per
# object (s3fs's own default for put_file is 10 parts at a time; boto3's is 10 too).
DEFAULT_UPLOAD_PARALLELISM = 4

Source = tuple[str, BinaryIO]


class _Stream:
    """The sources read back to back as one stream, each one's size and CRC-32C kept."""

    def __init__(self, sources: Sequence[Source]) -> None:
        self.sources = [src for _, src in sources]
        for src in self.sources:
            src.seek(0)  # a retry starts over
        self.sums = [[0, 0] for _ in self.sources]  # [size, crc] per source
        self._current = 0

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes, fewer only at the end of the last source."""
        pieces: list[bytes] = []
        want = n
        while want > 0 and self._current < len(self.sources):
            data = self.sources[self._current].read(want)
            if not data:
                self._current += 1
                continue
            total = self.sums[self._current]
            total[0] += len(data)
            total[1] = int(crc32c(data, total[1]))
            pieces.append(data)
            want -= len(data)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def results(self) -> list[tuple[int, int]]:
        return [(size, crc) for size, crc in self.sums]


class Uploads:
    """Args:
    root: the remote root (filesystem, request counts).
    part_bytes: read size, and the size of each part of a multipart upload.
    parallelism: parts of one multipart upload sent at once.
    throttle: called with each chunk's size before it is sent
        (remote.log.manager.copy.max.bytes.per.second); not pickled.
    """

    def __init__(
        self,
        root: FsspecRoot,
        part_bytes: int = DEFAULT_COPY_CHUNK_BYTES,
        parallelism: int = DEFAULT_UPLOAD_PARALLELISM,
        throttle: Callable[[int], None] | None = None,
    ) -> None:
        if part_bytes <= 0 or parallelism < 1:
            raise ValueError(f"bad upload sizes: part_bytes={part_bytes} parallelism={parallelism}")
        self.root = root
        self.part_bytes = part_bytes
        self.parallelism = parallelism
        self.throttle = throttle
        self._pool: ThreadPoolExecutor | None = None
        self._guard = threading.Lock()
        self._throttling = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(throttle=None, _pool=None)
        del state["_guard"], state["_throttling"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._guard = threading.Lock()
        self._throttling = threading.Lock()

    @property
    def requests(self) -> RequestCounts:
        return self.root.requests

    def upload(self, sources: Sequence[Source], remote: str) -> list[tuple[int, int]]:
        """Write ``sources``, back to back, as the object at the fsspec path ``remote``.

        Returns:
            Each source's ``(size, crc32c)`` as sent, in order.
        """
        stream = _Stream(sources)
        if self.root.is_local:
            self._to_file(stream, remote)
        elif self.root.protocol in ("s3", "s3a"):
            self._to_s3(stream, remote)
        else:
            self._to_writer(stream, remote)
        return stream.results()

    def _chunk(self, stream: _Stream) -> bytes:
        data = stream.read(self.part_bytes)
        if data and self.throttle is not None:
            # Segments upload on several threads (remote_copy); the throttle is one
            # budget and not thread-safe: its waits are taken one at a time.
            with self._throttling:
                self.throttle(len(data))
        return data

    # -- file:// -------------------------------------------------------------------------

    def _to_file(self, stream: _Stream, remote: str) -> None:
        final = Path(self.root.local_path(remote))
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f"{final.name}.tmp-{uuid.uuid4().hex}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            try:
                while data := self._chunk(stream):
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self.requests.add(puts=1)

    # -- s3:// ---------------------------------------------------------------------------

    def _to_s3(self, stream: _Stream, remote: str) -> None:
        fs = self.root.fs
        first = self._chunk(stream)
        following = self._chunk(stream) if len(first) == self.part_bytes else b""
        if not following:
            fs.pipe_file(remote, first)  # one PUT, atomic
            self.requests.add(puts=1)
            return
        bucket, key, _ = fs.split_path(remote)
        started = fs.call_s3("create_multipart_upload", Bucket=bucket, Key=key)
        upload_id = started["UploadId"]
        self.requests.add(puts=1)
        ids = {"Bucket": bucket, "Key": key, "UploadId": upload_id}
        try:
            pool = self._part_pool()
            running: set[Future[Any]] = set()
            etags: dict[int, Future[str]] = {}
            number, data = 1, first
            while data:
                while len(running) >= self.parallelism:  # bounds the buffers in memory
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        future.result()  # a failed part fails the upload now
                future = pool.submit(self._put_part, ids, number, data)
                etags[number] = future
                running.add(future)
                number += 1
                data, following = following, b""
                if not data:
                    data = self._chunk(stream)
            parts = [{"PartNumber": n, "ETag": etags[n].result()} for n in sorted(etags)]
            fs.call_s3("complete_multipart_upload", **ids, MultipartUpload={"Parts": parts})
            self.requests.add(puts=1)
        except BaseException:
            for future in etags.values():
                future.cancel()
            wait(list(etags.values()))
            # Nothing of an aborted multipart upload is ever visible (an abort that fails
            # leaves parts S3's lifecycle rules expire; still never an object).
            with suppress(Exception):
                fs.call_s3("abort_multipart_upload", **ids)
            raise
        fs.invalidate_cache(remote)

    def _put_part(self, ids: dict[str, str], number: int, data: bytes) -> str:
        answer = self.root.fs.call_s3("upload_part", **ids, PartNumber=number, Body=data)
        self.requests.add(puts=1)
        return str(answer["ETag"])

    def _part_pool(self) -> ThreadPoolExecutor:
        with self._guard:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    self.parallelism, thread_name_prefix="remote-upload-part"
                )
            return self._pool

    # -- any other fsspec store ----------------------------------------------------------

    def _to_writer(self, stream: _Stream, remote: str) -> None:
        fs = self.root.fs
        try:
            out = fs.open(remote, "wb")
        except FileNotFoundError:  # a directory-based store: create the parent first
            fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
            out = fs.open(remote, "wb")
        try:
            while data := self._chunk(stream):
                out.write(data)
        except BaseException:
            # Abort a multipart upload rather than commit a truncated object. Files that
            # cannot discard (RuntimeError) keep the partial object: it is in no manifest,
            # and the retry overwrites it.
            try:
                out.discard()
            except (AttributeError, RuntimeError):
                out.close()
            raise
        out.close()
        self.requests.add(puts=1)

    def close(self) -> None:
        with self._guard:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
