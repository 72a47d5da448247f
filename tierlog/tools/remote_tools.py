"""``tierlog remote ls``: a topic's remote segments, read from the partition manifests in
object storage with no broker; and how the remote tools find the store and fetch objects.

The store is named the way the broker names it: ``--remote-url`` and repeatable
``--remote-option key=value`` (the dotted keys of ``remote.log.storage.options.*``), or
``--config server.properties`` for the broker's ``remote.log.storage.url`` / ``.options.*``
and, when no URL is set, its default ``file://<first log dir>/remote`` (a relative log dir
is taken from the current directory, as the broker takes it). With neither, the embedded
broker's default, ``file://./data/remote``. Command-line options win over the file.

Read-only: nothing here writes to the store. Failures the user can act on (no such topic,
an unreachable store, a corrupt manifest, which the message names by its URL) are printed
as one line on stderr with exit code 1.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tierlog.tools.client_config import ToolError, parse_key_values
from tierlog.tools.ids import kafka_id

if TYPE_CHECKING:
    from tierlog.remote.api import RemoteStore
    from tierlog.remote.manifest import Manifest

# Where a downloaded object is streamed in pieces of this size (an S3 ranged GET each).
DOWNLOAD_CHUNK_BYTES = 8 << 20


def is_remote(path: str | os.PathLike[str]) -> bool:
    """True for an fsspec URL (``file://``, ``s3://``...), False for a plain local path."""
    return isinstance(path, str) and "://" in path


# -- where the store is -------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteLocation:
    """A remote root URL and the fsspec storage options that reach it."""

    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def store(self) -> RemoteStore:
        """The read-side store on this location (the install hint if a package is missing)."""
        from tierlog.remote.registry import open_store

        return open_store(self.url, self.storage_options)


def parse_remote_options(items: list[str]) -> dict[str, Any]:
    """``--remote-option a.b=v`` items -> nested fsspec options, by the same rules as the
    broker's ``remote.log.storage.options.a.b=v`` (booleans and integers converted)."""
    from tierlog.remote.storage_options import REMOTE_OPTIONS_PREFIX, remote_options

    pairs = parse_key_values(items, "--remote-option")
    try:
        return remote_options({REMOTE_OPTIONS_PREFIX + k: v for k, v in pairs.items()})
    except ValueError as exc:
        raise ToolError(f"--remote-option: {exc}") from None


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``, nested groups merged key by key."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def resolve_location(
    remote_url: str | None, option_items: list[str], config_path: str | None
) -> RemoteLocation:
    """The store named by ``--remote-url`` / ``--remote-option`` / ``--config`` (see the
    module docstring for the precedence).

    Raises:
        ToolError: the config file cannot be read or is invalid, or an option is malformed.
    """
    from tierlog.broker.config import BrokerConfig

    try:
        config = BrokerConfig.load(Path(config_path)) if config_path else BrokerConfig()
    except (OSError, ValueError) as exc:
        raise ToolError(f"--config {config_path}: {exc}") from None
    options = _merge(config.remote_storage_options, parse_remote_options(option_items))
    return RemoteLocation(remote_url or config.remote_storage_url, options)


def add_location_options(parser: Any, *, url: bool = True) -> None:
    """The options naming the store, for ``remote ls`` (and ``dump-log``: no ``--remote-url``,
    the URL is the object's)."""
    if url:
        parser.add_argument(
            "--remote-url",
            metavar="URL",
            help="the remote root, e.g. s3://bucket/prefix (default: the broker's, from "
            "--config, else file://./data/remote)",
        )
    parser.add_argument(
        "--remote-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an fsspec storage option, dotted keys as remote.log.storage.options.* "
        "(e.g. endpoint_url=http://127.0.0.1:9000, client_kwargs.region_name=us-east-1; "
        "repeatable)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="broker server.properties: take remote.log.storage.url/options.* (and log.dirs "
        "for the default URL) from it"
        if url
        else "broker server.properties: take remote.log.storage.options.* from it",
    )


def run_remote_tool(
    action: Callable[[], int], passthrough: tuple[type[Exception], ...] = ()
) -> int:
    """Run a remote tool; expected failures print one line on stderr and return 1.
    Exceptions of the ``passthrough`` types are raised to the caller."""
    from tierlog.remote.api import RemoteStorageError

    try:
        return action()
    except passthrough:
        raise
    except (ToolError, RemoteStorageError, ValueError) as exc:
        print(f"tierlog: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # ``| head`` went away: stop quietly, and keep the exit-time flush from failing.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        print(f"tierlog: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


# -- remote ls ----------------------------------------------------------------------------


# Where the remote tier is when it is not where ``remote ls`` looked: a first-time user has
# run the demo, whose tier is not the default one (that follows log.dirs=./data).
WHERE_HINT = (
    "point at the broker's remote tier with --remote-url URL or --config server.properties "
    "(the demo's: --remote-url data/demo/logs/remote; run `make demo` first)"
)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def list_partitions(store: RemoteStore, topic: str) -> list[int]:
    """Partitions of ``topic`` the store has anything of.

    Raises:
        ToolError: the root does not exist or cannot be listed.
    """
    from tierlog.remote.api import RemoteResourceNotFoundError, RemoteStorageError
    from tierlog.remote.manifest import check_topic

    check_topic(topic)
    try:
        return [partition for _, partition in store.list_partitions(topic)]
    except RemoteResourceNotFoundError:
        raise ToolError(f"{store.url}: no such remote directory; {WHERE_HINT}") from None
    except RemoteStorageError as exc:
        raise ToolError(_describe(exc)) from exc


def _read(store: RemoteStore, topic: str, partition: int, explicit: bool) -> Manifest:
    """The partition's manifest; a partition with no manifest and no object is an error
    when asked for by number (listed directories always exist)."""
    manifest = store.read_manifest(topic, partition)
    if manifest.version == 0 and explicit and not store.list_objects(topic, partition):
        raise ToolError(
            f"no remote data for partition {partition} of topic {topic!r} under {store.url}"
        )
    return manifest


def iso_ms(timestamp: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC (``2023-11-14T22:13:20.000Z``); -1 as ``-``."""
    if timestamp < 0:
        return "-"
    when = datetime.fromtimestamp(timestamp / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _offset_range(manifest: Manifest) -> tuple[int, int] | None:
    """First and last readable offsets of the committed segments, or None."""
    from tierlog.remote.manifest import committed_segments, end_offset

    committed = committed_segments(manifest)
    if not committed:
        return None
    first = max(manifest.log_start_offset, committed[0].base_offset)
    return first, end_offset(manifest) - 1


def print_manifest(store: RemoteStore, manifest: Manifest, out: TextIO) -> None:
    """One partition: header, one line per segment, summary."""
    from tierlog.remote.manifest import committed_size, object_names

    topic, partition = manifest.topic, manifest.partition
    directory = store.manifest_url(topic, partition).rsplit("/", 1)[0]
    print(f"{topic}-{partition}  {directory}", file=out)
    if manifest.version == 0:
        print("  no manifest yet: nothing committed", file=out)
        return
    print(
        f"  remote log start offset: {manifest.log_start_offset}  manifest version: "
        f"{manifest.version}  leader epoch: {manifest.leader_epoch}  topic id: "
        f"{kafka_id(manifest.topic_id)}",
        file=out,
    )
    rows = [("BASE", "END", "SIZE", "STATE", "MAX TIMESTAMP", "SEGMENT ID", "OBJECTS")]
    for seg in manifest.segments:
        stem = object_names(seg)["log"].removesuffix(".log")
        rows.append(
            (
                str(seg.base_offset),
                str(seg.end_offset),
                str(seg.size_bytes),
                seg.state.value,
                iso_ms(seg.max_timestamp),
                seg.segment_id,
                f"{stem}.{{log,index,timeindex}}",
            )
        )
    widths = [max(len(row[n]) for row in rows) for n in range(len(rows[0]) - 1)]
    right = {0, 1, 2}  # numbers right-aligned
    for row in rows:
        cells = [
            cell.rjust(widths[n]) if n in right else cell.ljust(widths[n])
            for n, cell in enumerate(row[:-1])
        ]
        print("  " + "  ".join([*cells, row[-1]]), file=out)
    states: dict[str, int] = {}
    for seg in manifest.segments:
        states[seg.state.value] = states.get(seg.state.value, 0) + 1
    by_state = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    span = _offset_range(manifest)
    offsets = f"offsets {span[0]}..{span[1]}" if span else "no committed offsets"
    print(
        f"  {len(manifest.segments)} segment(s) ({by_state or 'none'}), "
        f"{committed_size(manifest)} bytes committed, {offsets}",
        file=out,
    )


def remote_ls(
    location: RemoteLocation,
    topic: str,
    partition: int | None,
    out: TextIO,
    err: TextIO,
    *,
    as_json: bool = False,
) -> int:
    """``tierlog remote ls``: print the manifests of ``topic`` (one ``partition`` or all found
    under the root). With ``as_json``, one manifest per line in its stored JSON format
    (``tierlog.remote.manifest``), so ``manifest.decode`` reads each line back.

    A partition that cannot be read is reported on ``err`` and the others still printed.

    Returns:
        0, or 1 when any partition could not be read.

    Raises:
        ToolError: the topic has no partition under the root, or the root cannot be listed.
    """
    from tierlog.remote.api import RemoteStorageError
    from tierlog.remote.manifest import committed_size
    from tierlog.remote.manifest_json import encode

    store = location.store()
    if partition is None:
        partitions = list_partitions(store, topic)
        if not partitions:
            raise ToolError(
                f"no remote partition of topic {topic!r} under {store.url} (nothing of it "
                f"offloaded yet, or another remote tier); {WHERE_HINT}"
            )
    else:
        partitions = [partition]
    failed = 0
    manifests: list[Manifest] = []
    for p in partitions:
        try:
            manifest = _read(store, topic, p, explicit=partition is not None)
        except (RemoteStorageError, ToolError) as exc:
            if partition is not None:
                raise
            print(f"tierlog: {exc}", file=err)
            failed += 1
            continue
        manifests.append(manifest)
        if as_json:
            out.write(encode(manifest).decode())
        else:
            print_manifest(store, manifest, out)
        out.flush()
    if not as_json and len(partitions) > 1:
        segments = sum(len(m.segments) for m in manifests)
        nbytes = sum(committed_size(m) for m in manifests)
        print(
            f"total: {len(manifests)} partition(s), {segments} segment(s), {nbytes} bytes "
            "committed",
            file=out,
        )
    return 1 if failed else 0


# -- fetching one object for dump-log -----------------------------------------------------


def _open_object_store(url: str, storage_options: dict[str, Any]) -> tuple[Any, str]:
    """(filesystem, path) of one object's fsspec URL (``dump-log`` reads a file by its URL,
    not a store), with the same install hints as the remote tier."""
    from tierlog.remote.fsspec_root import open_filesystem

    return open_filesystem(url, storage_options)


@contextlib.contextmanager
def fetched(
    url: str, storage_options: dict[str, Any], siblings: tuple[str, ...] = ()
) -> Iterator[Path]:
    """A local file holding the object at ``url``, with the objects beside it whose names
    differ only by the suffixes in ``siblings`` (``.index``...) next to it when they exist.

    A local filesystem (``file://``) is read in place; any other is downloaded to a
    temporary directory (removed on exit) under the same names, so the local dump code,
    which finds a segment's indexes and log by name, works unchanged.

    Raises:
        FileNotFoundError: no object at ``url``.
        ToolError: the store cannot be reached or read.
    """
    from fsspec.implementations.local import LocalFileSystem

    fs, path = _open_object_store(url, storage_options)
    name = path.rsplit("/", 1)[-1]
    try:
        is_dir = fs.isdir(path)
        exists = is_dir or fs.exists(path)
    except Exception as exc:  # backends raise their own types (s3fs, botocore, aiohttp)
        raise ToolError(f"read {url}: {_describe(exc)}") from exc
    if is_dir:
        raise ToolError(f"{url} is a directory: name one segment object (see tierlog remote ls)")
    if not exists:
        stem, _, suffix = name.rpartition(".")
        whole = f"{path.rsplit('/', 1)[0]}/{stem}.segment"
        if stem and fs.exists(whole):
            # A segment uploaded as one object (issue 24): its parts, as the manifest
            # places them, become the files the local dump code reads.
            with _segment_parts(url, storage_options, stem) as directory:
                yield directory / name
            return
        raise FileNotFoundError(f"{url}: no such object")
    if isinstance(fs, LocalFileSystem):
        yield Path(path)
        return
    stem = name.rsplit(".", 1)[0]
    with tempfile.TemporaryDirectory(prefix="tierlog-dump-") as tmp:
        local = Path(tmp) / name
        _download(fs, path, local, url)
        for suffix in siblings:
            other = f"{path.rsplit('/', 1)[0]}/{stem}{suffix}"
            if other != path:
                with contextlib.suppress(FileNotFoundError):
                    _download(fs, other, Path(tmp) / f"{stem}{suffix}", url)
        yield local


@contextlib.contextmanager
def _segment_parts(url: str, storage_options: dict[str, Any], stem: str) -> Iterator[Path]:
    """A temporary directory holding the parts of the one-object segment ``stem`` (the
    ``<base>-<id>`` beside ``url``) as ``<stem>.log``, ``.index``, ``.timeindex`` and
    ``.txnindex``, cut out of its ``.segment`` object where its manifest entry places them
    (each checked against the CRC-32C recorded there)."""
    from tierlog.remote.api import IndexKind, RemoteStorageError
    from tierlog.remote.manifest import TXN_INDEX_SUFFIXES, parse_object_name
    from tierlog.remote.registry import open_store

    directory, _ = url.rsplit("/", 1)
    root, partition_dir = directory.rsplit("/", 1)
    topic, _, number = partition_dir.rpartition("-")
    parsed = parse_object_name(f"{stem}.segment")
    if not topic or not number.isdigit() or parsed is None:
        raise ToolError(f"{url}: not a segment object of a <topic>-<partition> directory")
    try:
        store = open_store(root, storage_options)
        manifest = store.read_manifest(topic, int(number))
        found = [s for s in manifest.segments if s.segment_id == parsed[1]]
        if not found:
            raise ToolError(f"{url}: segment {parsed[1]} is in no manifest entry (an orphan?)")
        segment = found[0]
        kinds = {".index": IndexKind.OFFSET, ".timeindex": IndexKind.TIME}
        if segment.has_txn_index:
            kinds[TXN_INDEX_SUFFIXES["txn_index"]] = IndexKind.TRANSACTION
        with tempfile.TemporaryDirectory(prefix="tierlog-dump-") as tmp:
            (Path(tmp) / f"{stem}.log").write_bytes(store.fetch_range(segment, 0, None))
            for suffix, kind in kinds.items():
                (Path(tmp) / f"{stem}{suffix}").write_bytes(store.fetch_index(segment, kind))
            yield Path(tmp)
    except RemoteStorageError as exc:
        raise ToolError(f"read {url}: {exc}") from exc


def _download(fs: Any, path: str, local: Path, url: str) -> None:
    """Stream object ``path`` to ``local`` (named, in messages, as the object beside ``url``)."""
    where = f"{url.rsplit('/', 1)[0]}/{local.name}"
    try:
        with fs.open(path, "rb", block_size=DOWNLOAD_CHUNK_BYTES) as src, open(local, "wb") as dst:
            shutil.copyfileobj(src, dst, DOWNLOAD_CHUNK_BYTES)
    except FileNotFoundError:
        local.unlink(missing_ok=True)
        raise FileNotFoundError(f"{where}: no such object") from None
    except Exception as exc:
        local.unlink(missing_ok=True)
        raise ToolError(f"read {where}: {_describe(exc)}") from exc
