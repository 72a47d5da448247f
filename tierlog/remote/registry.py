"""The one way into the remote tier: ``open_store(url, options)``, the store picked by the
URL's scheme from a registry (fsspec's pattern), returned as the ``RemoteStore`` interface.

Registry entries map a scheme to the dotted path of a store factory (a class taking
``(url, storage_options, *, clock, throttle)``, ``api.StoreFactory``) and an install
hint; the module is imported only when a URL of that scheme is opened, so optional
packages stay optional. A scheme nobody registered goes to the fsspec store, which opens
any URL fsspec knows and names the pip package when fsspec's backend is missing
(``s3://`` without s3fs). Adding a store takes one of:

* an entry point in the ``tierlog.remote_stores`` group of the package that ships it
  (``myscheme = "mypackage.store:MyStore"``): no change to tierlog at all;
* ``register_store("myscheme", "mypackage.store.MyStore")`` before opening it;
* a line in ``KNOWN_STORES`` for a store that lives in tierlog.

Every caller (broker, compaction, Spark source, tools, pipelines) opens stores here and
types them ``RemoteStore``; none names an implementation.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, cast

from tierlog.remote.api import RemoteStorageError, RemoteStore, StoreFactory
from tierlog.util.clock import Clock

ENTRY_POINT_GROUP = "tierlog.remote_stores"
# Any scheme not registered: fsspec's whole range of filesystems through one store.
DEFAULT_STORE = "tierlog.remote.fsspec_storage.FsspecRemoteStore"


@dataclass(frozen=True)
class StoreEntry:
    """A registered store: ``target`` is a dotted path (imported on first use) or the
    factory itself; ``hint`` says what to install when its import fails."""

    target: str | StoreFactory
    hint: str = ""


# Stores that live in tierlog, by scheme (the fsspec store serves every other scheme).
KNOWN_STORES: dict[str, StoreEntry] = {}

_registry: dict[str, StoreEntry] = dict(KNOWN_STORES)
_entry_points_loaded = False
_lock = threading.Lock()


def scheme_of(url: str) -> str:
    """The URL's scheme, lower-cased (``file`` for a URL without one, as fsspec reads
    plain paths; ``local`` is fsspec's other name for it)."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        return "file"
    scheme = scheme.lower()
    return "file" if scheme == "local" else scheme


def register_store(
    scheme: str, target: str | StoreFactory, hint: str = "", *, clobber: bool = False
) -> None:
    """Serve URLs of ``scheme`` with ``target`` (a dotted ``module.Name`` path or a factory).

    Raises:
        ValueError: ``scheme`` is registered already with another target and not ``clobber``.
    """
    scheme = scheme.lower()
    with _lock:
        current = _registry.get(scheme)
        if current is not None and current.target != target and not clobber:
            raise ValueError(
                f"remote store scheme {scheme!r} is registered already ({current.target})"
            )
        _registry[scheme] = StoreEntry(target, hint)


def unregister_store(scheme: str) -> None:
    """Forget a registration (its URLs go to the default store again)."""
    with _lock:
        _registry.pop(scheme.lower(), None)


def registered_schemes() -> list[str]:
    """Schemes with a store of their own (every other one goes to the fsspec store)."""
    _load_entry_points()
    with _lock:
        return sorted(_registry)


def _load_entry_points() -> None:
    """Register the ``tierlog.remote_stores`` entry points of installed packages, once.
    Explicit registrations win over them."""
    global _entry_points_loaded
    with _lock:
        if _entry_points_loaded:
            return
        _entry_points_loaded = True
        for point in entry_points(group=ENTRY_POINT_GROUP):
            module, _, attr = point.value.partition(":")
            dotted = f"{module}.{attr}" if attr else module
            _registry.setdefault(
                point.name.lower(), StoreEntry(dotted, f"the package providing {point.value}")
            )


def store_factory(url: str) -> StoreFactory:
    """The factory that serves ``url``'s scheme (imported now).

    Raises:
        RemoteStorageError: the store's module cannot be imported (with its install hint).
    """
    _load_entry_points()
    scheme = scheme_of(url)
    with _lock:
        entry = _registry.get(scheme, StoreEntry(DEFAULT_STORE))
    if not isinstance(entry.target, str):
        return entry.target
    module_name, _, name = entry.target.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f"; install {entry.hint}" if entry.hint else ""
        raise RemoteStorageError(
            f"remote storage scheme {scheme}:// is not available ({exc}){hint}"
        ) from exc
    try:
        return cast(StoreFactory, getattr(module, name))
    except AttributeError:
        raise RemoteStorageError(
            f"remote storage scheme {scheme}://: {module_name} has no {name}"
        ) from None


def open_store(
    url: str,
    options: dict[str, Any] | None = None,
    *,
    clock: Clock | None = None,
    throttle: Callable[[int], None] | None = None,
) -> RemoteStore:
    """The remote store at ``url`` (``file://``, ``s3://bucket/prefix``, ``webhdfs://...``).

    Args:
        url: the remote root.
        options: the store's options (for fsspec stores, its storage options:
            ``remote.log.storage.options.*``).
        clock: bounds the time spent retrying (tests control it).
        throttle: called with each uploaded chunk's size before it is written
            (remote.log.manager.copy.max.bytes.per.second); None: unthrottled.

    Raises:
        RemoteStorageError: no store can open the URL, or its package is missing (the
            message has the install command), or the store refused it.
    """
    factory = store_factory(url)
    return factory(url, dict(options or {}), clock=clock, throttle=throttle)


def check_url(url: str) -> str | None:
    """Why ``url`` cannot name a remote tier, or None: for configuration checks, before
    anything is opened. A store of its own checks nothing more than its import; the
    fsspec store checks that fsspec knows the scheme and its package is installed."""
    scheme, sep, _ = url.partition("://")
    if not sep or not scheme:
        return f"{url!r} is not a URL; expected scheme://path, e.g. s3://bucket/prefix"
    try:
        factory = store_factory(url)
    except RemoteStorageError as exc:
        return str(exc)
    return factory.check_url(url)
