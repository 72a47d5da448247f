"""One remote root on fsspec: the filesystem, paths and URLs under it, and retries.

``FsspecRoot`` is what ``FsspecRemoteStore`` (segments) and ``FsspecManifests`` (the
manifests) share: the lazily created fsspec filesystem (again after a fork; dropped when
pickled, so Spark executors rebuild it from the URL and options), the partition paths
under the root (layout in ``tierlog.remote.manifest``) and the retry loop that turns
backend failures into the remote tier's errors (``_errors``). ``open_filesystem`` opens
any fsspec URL with the same install hints, for tools that read one object by its URL.

Thread-safe: the filesystem is created once under a lock; everything else is a call into
fsspec.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tierlog.remote._errors import missing_package, translate
from tierlog.remote.api import RemoteStorageError, RequestCounts
from tierlog.remote.manifest import partition_dir
from tierlog.util.clock import Clock, SystemClock

log = logging.getLogger(__name__)

T = TypeVar("T")


class FsspecRoot:
    """The remote root ``url`` on fsspec.

    Args:
        url: the remote root, e.g. ``file:///data/remote`` or ``s3://bucket/prefix``.
        storage_options: passed to the fsspec filesystem.
        clock: bounds the time spent retrying (monotonic).
        retries, backoff_ms, max_backoff_ms, retry_timeout_ms, sleep: see
            ``FsspecRemoteStore``.

    Raises:
        RemoteStorageError: the URL's protocol is unknown or its package is not installed.
    """

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        retries: int = 3,
        backoff_ms: int = 100,
        max_backoff_ms: int = 1000,
        retry_timeout_ms: int = 30_000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.clock = clock or SystemClock()
        self.retries = retries
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.retry_timeout_ms = retry_timeout_ms
        self.sleep = sleep
        self.protocol = protocol_of(url)
        # Requests sent through this root, counted by its users (storage, manifests).
        self.requests = RequestCounts()
        filesystem_class(self.protocol)  # fail at start-up, with the install hint
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._fs: Any = None
        self._root = ""
        self._pid = -1
        self._guard = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_fs", "_root", "_pid", "_guard"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    @property
    def fs(self) -> Any:
        """The fsspec filesystem, created on first use (and again in a forked child)."""
        with self._guard:
            if self._fs is None or self._pid != os.getpid():
                fs, root = open_filesystem(self.url, self.storage_options, self.protocol)
                self._fs, self._root, self._pid = fs, root.rstrip("/"), os.getpid()
            return self._fs

    @property
    def is_local(self) -> bool:
        from fsspec.implementations.local import LocalFileSystem

        return isinstance(self.fs, LocalFileSystem)

    @property
    def root_path(self) -> str:
        """The root as an fsspec path (no protocol)."""
        self.fs  # noqa: B018 -- sets _root
        return self._root or "/"

    def partition_path(self, topic: str, partition: int) -> str:
        """The partition's directory as an fsspec path (no protocol)."""
        self.fs  # noqa: B018 -- sets _root
        name = partition_dir(topic, partition)
        return f"{self._root}/{name}" if self._root else f"/{name}"

    def url_of(self, path: str) -> str:
        """Full URL of a path, for messages (``s3://bucket/prefix/orders-0/...``)."""
        return str(self.fs.unstrip_protocol(path))

    def local_path(self, path: str) -> str:
        """A ``file://`` path as the operating system names it."""
        return str(self.fs._strip_protocol(path))

    def list_names(self, directory: str, kind: str = "file") -> list[str]:
        """Names of the ``kind`` entries (file or directory) in ``directory``, sorted; []
        when it does not exist. Listings are fetched afresh (s3fs & co cache them)."""
        fs = self.fs
        fs.invalidate_cache(directory)
        try:
            entries = fs.ls(directory, detail=True)
        except FileNotFoundError:
            return []
        return sorted(
            str(e["name"]).rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == kind
        )

    def retrying(self, what: str, call: Callable[[], T]) -> T:
        """Run ``call``, retrying retriable failures with exponential backoff; failures
        come out as ``RemoteStorageError`` whose message starts with ``what``."""
        deadline = self.clock.monotonic_ms() + self.retry_timeout_ms
        attempt = 0
        while True:
            try:
                return call()
            except RemoteStorageError as exc:
                error = exc
            except Exception as exc:
                error = translate(exc, what)
                error.__cause__ = exc
            if (
                not error.retriable
                or attempt >= self.retries
                or self.clock.monotonic_ms() >= deadline
            ):
                raise error
            delay_ms = min(self.backoff_ms * (2**attempt), self.max_backoff_ms)
            log.warning("%s; retry %d in %d ms", error, attempt + 1, delay_ms)
            self.sleep(delay_ms / 1000)
            attempt += 1


def protocol_of(url: str) -> str:
    """fsspec's protocol of ``url`` (``file`` for a plain path)."""
    try:
        import fsspec.core
    except ImportError as exc:  # style rule 7: optional heavy imports name their package
        raise RemoteStorageError(
            "the remote tier needs fsspec; install it with: pip install fsspec"
        ) from exc

    protocol = fsspec.core.split_protocol(url)[0] or "file"
    return "file" if protocol == "local" else protocol


def filesystem_class(protocol: str) -> type:
    """fsspec's filesystem class for ``protocol``.

    Raises:
        RemoteStorageError: unknown protocol, or its package is missing (install hint).
    """
    import fsspec

    try:
        cls: type = fsspec.get_filesystem_class(protocol)
        return cls
    except ImportError as exc:
        raise missing_package(protocol, exc) from exc
    except ValueError as exc:
        raise RemoteStorageError(f"remote storage URL: {exc}") from exc


def open_filesystem(
    url: str, storage_options: dict[str, Any] | None = None, protocol: str | None = None
) -> tuple[Any, str]:
    """``(filesystem, path)`` of an fsspec URL.

    Raises:
        RemoteStorageError: the backend's package is missing (with the install hint), or
            the filesystem cannot be opened (``hdfs://`` without libhdfs: one line).
    """
    import fsspec.core

    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as exc:
        raise missing_package(protocol or protocol_of(url), exc) from exc
    except (OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RemoteStorageError(f"cannot open {url}: {reason}") from exc
    return fs, str(path)


def check_url(url: str) -> str | None:
    """Why fsspec cannot serve ``url``, or None (nothing is opened)."""
    try:
        import fsspec
    except ImportError:
        return "the remote tier needs fsspec; install it with: pip install fsspec"
    protocol = protocol_of(url)
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        return f"{url!r}: unknown storage scheme {protocol!r}"
    except ImportError as exc:
        return str(missing_package(protocol, exc))  # with the pip install hint
    return None
