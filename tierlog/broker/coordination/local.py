"""Single-node coordination: the ``Coordinator`` interface kept in a snapshot and a journal.

There is one broker, which is also the controller. Two files in the first log dir:

``tierlog-metadata.json``, the snapshot, replaced atomically (write, fsync, rename)::

    {"version": 1, "cluster_id": "...", "next_producer_id": 2000,
     "client_quotas": {"clients/app": {"producer_byte_rate": 1048576.0}},
     "topics": {"orders": {"topic_id": "<uuid>", "configs": {"retention.ms": "1000"},
                           "replicas": {"0": [0]},
                           "states": {"0": {"leader": 0, "leader_epoch": 3, "isr": [0],
                                            "partition_epoch": 0}}}}}

``tierlog-metadata.journal``, the changes since the snapshot, one JSON object per line::

    {"topic": "orders", "record": {<the topic's whole record, as in the snapshot>}}
    {"deleted": "orders"}
    {"next_producer_id": 3000}
    {"client_quotas": "clients/app", "values": {"producer_byte_rate": 1048576.0}}
    {"entity_configs": "client-metrics", "name": "all", "values": {"metrics": "*"}}
    {"record": "acls", "key": "/kafka-acl/Topic/orders", "value": {"version": 1, "acls": [..]}}
    {"record": "users", "key": "alice", "value": {"SCRAM-SHA-256": "salt=...,..."}}

Security's records (``RECORD_KINDS``) are kept as ZooKeeper keeps them, keyed the same way:
ACLs by their znode path with Kafka's JSON (``tierlog.security.acl_zk``), user configs (SCRAM
credentials) by user name with Kafka's config map; ``local_security`` reads and writes them.
A value of null removes the key.

Why a journal: the snapshot used to be rewritten and fsynced on every change, so creating
the n-th topic wrote all n (1,000 auto-created topics: 500,000 topic records written).
Now a change appends one line. Each line states a final value, so replaying a line again
changes nothing, and a crash between writing a new snapshot and emptying the journal is
harmless. The journal is folded into the snapshot once it has as many lines as there are
topics (at least ``COMPACT_MIN_LINES``), so a change costs O(1) amortised, and on every
clean stop, so a stopped broker's state is the snapshot alone (tests and people edit it).

Durability and the event loop: a change is visible (``topic()``, ``topics()``) and its
call returns only once its line is fsynced. The writes run on a worker thread, and changes
made while one write is in progress go out together in the next (group commit): a burst of
topic creations costs a few fsyncs, not one each, and never blocks the event loop on disk.
Listeners (``on_change``) are called once per written group.

Changes other than topic creations run one at a time (``_serial``), each computed from the
state its predecessors left, so two changes to one topic never overwrite each other.
Creations of different topics are independent and run concurrently; a name being created
is reserved so that a second creation of it fails at once.

Full disk (issue 10, item 8): a topic deletion writes its journal line before the topic's
files go, so a failure leaves the topic listed with its data, never gone from the metadata
with its bytes still on disk. But on a full disk that line may need a block there is none
of, and then nothing could be deleted to free space. ``tierlog-metadata.reserve``
(``RESERVE_BYTES`` of zeros) keeps room aside: a write holding a deletion that fails with
ENOSPC removes the reserve and tries again; the reserve is written back at the next write
that finds room.

Size: past the ~600-line guideline because the snapshot, the journal's group commit, the
full-disk reserve and the ``Coordinator`` methods that use them are one mechanism; what is
built on it without needing its internals lives beside it (``local_security``).

Start-up reads the snapshot, then replays the journal. A last line without its newline is
a write the broker died in the middle of, never acknowledged: it is dropped (and logged).
Any other unreadable line stops the broker with a message naming the file and line.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import json
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tierlog.broker.coordination.api import (
    AlterPartitionError,
    BrokerRegistration,
    CoordinationError,
    MetadataChange,
    PartitionState,
    TopicCollisionError,
    TopicExistsError,
    TopicMetadata,
    UnknownTopicError,
)
from tierlog.local.log_manager import colliding_topics
from tierlog.protocol.errors import ErrorCode

# Kafka error codes of AlterPartition refusals, by their protocol names.
NOT_LEADER_OR_FOLLOWER = ErrorCode.not_leader_or_follower
INVALID_REQUEST = ErrorCode.invalid_request
FENCED_LEADER_EPOCH = ErrorCode.fenced_leader_epoch
INVALID_UPDATE_VERSION = ErrorCode.invalid_update_version
UNKNOWN_TOPIC_OR_PARTITION = ErrorCode.unknown_topic_or_partition

FILE_NAME = "tierlog-metadata.json"
JOURNAL_NAME = "tierlog-metadata.journal"
RESERVE_NAME = "tierlog-metadata.reserve"
# A deletion's journal line is a few tens of bytes: 64 KiB (a handful of filesystem
# blocks) holds hundreds of them, and costs nothing next to a partition's segments.
RESERVE_BYTES = 64 * 1024
VERSION = 1
# Fold the journal into the snapshot only past this many lines, so a broker with few
# topics does not rewrite its snapshot every few changes.
COMPACT_MIN_LINES = 1000
# Keyed records kept for the security layer (``local_security``), each a snapshot section.
RECORD_KINDS = ("acls", "users")

log = logging.getLogger(__name__)


class MetadataFileError(CoordinationError, ValueError):
    """``tierlog-metadata.json`` cannot be read; the message names the file, the problem
    and the way out (a ValueError, so the command line prints it as one line)."""


def _topic_record(t: TopicMetadata) -> dict[str, Any]:
    return {
        "topic_id": str(t.topic_id),
        "configs": dict(t.configs),
        "replicas": {str(p): list(r) for p, r in t.replicas.items()},
        "states": {
            str(p): {
                "leader": s.leader,
                "leader_epoch": s.leader_epoch,
                "isr": list(s.isr),
                "partition_epoch": s.partition_epoch,
            }
            for p, s in t.partition_states.items()
        },
    }


def _topic_from_record(name: str, t: dict[str, Any]) -> TopicMetadata:
    return TopicMetadata(
        name=name,
        topic_id=uuid.UUID(t["topic_id"]),
        replicas={int(p): list(r) for p, r in t["replicas"].items()},
        configs=dict(t["configs"]),
        partition_states={
            int(p): PartitionState(
                s["leader"],
                s["leader_epoch"],
                list(s["isr"]),
                partition_epoch=int(s.get("partition_epoch", 0)),
            )
            for p, s in t["states"].items()
        },
    )


def _copy(t: TopicMetadata) -> TopicMetadata:
    """A copy to change: the stored object is replaced, never changed, once its line is
    written (readers holding the old one see a consistent, older state)."""
    return TopicMetadata(
        t.name,
        t.topic_id,
        {p: list(r) for p, r in t.replicas.items()},
        dict(t.configs),
        {p: replace(s, isr=list(s.isr)) for p, s in t.partition_states.items()},
    )


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def new_cluster_id() -> str:
    """Kafka's form: a random UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class LocalCoordinator:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self.journal_path = Path(data_dir) / JOURNAL_NAME
        self.reserve_path = Path(data_dir) / RESERVE_NAME
        self._reserve_ok = False
        # Whether the queued lines, and the group being written, include a deletion (so
        # their write may use the reserve).
        self._queue_frees_space = False
        self._group_frees_space = False
        self._topics: dict[str, TopicMetadata] = {}
        self._client_quotas: dict[str, dict[str, float]] = {}
        self._records: dict[str, dict[str, Any]] = {kind: {} for kind in RECORD_KINDS}
        # Other config entities (client-metrics): type -> name -> configs.
        self._entity_configs: dict[str, dict[str, dict[str, str]]] = {}
        self._me: BrokerRegistration | None = None
        self._listeners: list[Callable[[MetadataChange | None], None]] = []
        self.cluster_id = new_cluster_id()
        self._next_producer_id = 0
        self._journal_fd: int | None = None
        self._journal_lines = 0
        # Lines waiting for the next group write: (line, apply once written, caller).
        self._queue: list[tuple[bytes, Callable[[], None], asyncio.Future[None]]] = []
        # The topics the queued lines change, for the listeners (``MetadataChange``).
        self._queue_topics: set[str] = set()
        self._writer: asyncio.Task[None] | None = None
        self._creating: set[str] = set()
        self._fold_requested = False
        self._serial = asyncio.Lock()
        self._load()
        self._replay_journal()

    # -- persistence ---------------------------------------------------------------------

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            doc = json.loads(self.path.read_text())
            if doc.get("version") != VERSION:
                raise ValueError(f"unsupported version {doc.get('version')!r}")
            self.cluster_id = doc["cluster_id"]
            self._next_producer_id = int(doc.get("next_producer_id", 0))
            for name, t in doc["topics"].items():
                self._topics[name] = _topic_from_record(name, t)
            for entity, values in doc.get("client_quotas", {}).items():
                self._client_quotas[str(entity)] = {str(k): float(v) for k, v in values.items()}
            for kind in RECORD_KINDS:
                self._records[kind] = dict(doc.get(kind, {}))
            for kind, entities in doc.get("entity_configs", {}).items():
                for name, values in entities.items():
                    self._set_entity(str(kind), str(name), values)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Refuse to start rather than forget topics: the logs on disk would be orphaned.
            problem = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            if isinstance(exc, UnicodeDecodeError):
                problem = "not text"
            raise MetadataFileError(
                f"{self.path}: unreadable single-node metadata ({problem}); it holds the "
                "topics, their ids and configs: restore it from a backup, or move it away "
                "to start with no topics (the topic directories under log.dirs are then "
                "kept aside, renamed <topic>-<partition>.<id>-stray)"
            ) from None

    def _replay_journal(self) -> None:
        if not self.journal_path.exists():
            return
        data = self.journal_path.read_bytes()
        lines = data.split(b"\n")
        good = 0
        for number, line in enumerate(lines[:-1], 1):
            try:
                self._apply_change(json.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise MetadataFileError(
                    f"{self.journal_path}: line {number} is unreadable ({exc}); it holds "
                    f"the topic changes since {self.path.name} was written: restore both "
                    "from a backup, or move the journal away to start from the snapshot "
                    "alone (topics created since are then forgotten)"
                ) from None
            good += len(line) + 1
        self._journal_lines = len(lines) - 1
        if lines[-1]:
            log.warning(
                "%s: dropping a torn last line (%d bytes): the broker stopped while writing "
                "it, before the change was acknowledged",
                self.journal_path,
                len(lines[-1]),
            )
            os.truncate(self.journal_path, good)

    def _apply_change(self, change: dict[str, Any]) -> None:
        if "topic" in change:
            name = change["topic"]
            self._topics[name] = _topic_from_record(name, change["record"])
        elif "deleted" in change:
            self._topics.pop(change["deleted"], None)
        elif "next_producer_id" in change:
            self._next_producer_id = int(change["next_producer_id"])
        elif "client_quotas" in change:
            self._set_quotas(str(change["client_quotas"]), change["values"])
        elif change.get("record") in RECORD_KINDS:
            self._set_record(change["record"], str(change["key"]), change["value"])
        elif "entity_configs" in change:
            self._set_entity(str(change["entity_configs"]), str(change["name"]), change["values"])
        else:
            raise ValueError(f"unknown change {sorted(change)}")

    def _snapshot(self) -> bytes:
        doc: dict[str, Any] = {
            "version": VERSION,
            "cluster_id": self.cluster_id,
            "next_producer_id": self._next_producer_id,
            "topics": {name: _topic_record(t) for name, t in self._topics.items()},
            "client_quotas": self._client_quotas,
            **self._records,
            "entity_configs": self._entity_configs,
        }
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    def _write_snapshot(self, data: bytes) -> None:
        """Replace the snapshot with ``data``, then empty the journal it includes."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        if self._journal_fd is not None:
            os.ftruncate(self._journal_fd, 0)
            os.fsync(self._journal_fd)
        elif self.journal_path.exists():
            os.truncate(self.journal_path, 0)
        self._journal_lines = 0

    def _keep_reserve(self) -> bool:
        """Write the reserve file unless it is whole (worker thread, or start-up); whether
        it is there now. Real zeros, not a sparse file: only allocated blocks are kept."""
        try:
            if self.reserve_path.stat().st_size == RESERVE_BYTES:
                return True
        except FileNotFoundError:
            pass
        try:
            with open(self.reserve_path, "wb") as f:
                f.write(bytes(RESERVE_BYTES))
                f.flush()
                os.fsync(f.fileno())
            return True
        except OSError:
            # No room yet: a half-written reserve only takes space; try again later.
            with contextlib.suppress(OSError):
                self.reserve_path.unlink()
            return False

    def _append(self, data: bytes) -> None:
        """Append and fsync (worker thread; one call at a time); a group that will free
        space (``_group_frees_space``: a deletion) may use the reserve on a full disk."""
        try:
            self._append_once(data)
        except OSError as exc:
            if (
                exc.errno != errno.ENOSPC
                or not self._group_frees_space
                or not self.reserve_path.exists()
            ):
                raise
            log.warning(
                "%s: disk full; using the space kept for deletions (%s)",
                self.journal_path,
                self.reserve_path,
            )
            self.reserve_path.unlink()
            self._reserve_ok = False
            self._append_once(data)

    def _append_once(self, data: bytes) -> None:
        """Append and fsync. A failed write is cut back off, so the next one does not
        continue a torn line."""
        if self._journal_fd is None:
            self._journal_fd = os.open(
                self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )
            _fsync_dir(self.journal_path.parent)
        fd = self._journal_fd
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise

    async def _commit(
        self, change: dict[str, Any], apply: Callable[[], None], *, frees_space: bool = False
    ) -> None:
        """Make ``change`` durable, then ``apply`` it to the state, then return.
        ``frees_space``: applying it frees disk space, so its write may use the reserve."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        line = json.dumps(change, sort_keys=True).encode() + b"\n"
        self._queue.append((line, apply, done))
        topic = change.get("topic", change.get("deleted"))
        if isinstance(topic, str):
            self._queue_topics.add(topic)
        self._queue_frees_space |= frees_space
        self._start_writer()
        # Shielded: a caller that gives up does not undo a change already on its way.
        await asyncio.shield(done)

    def _start_writer(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_queued())

    async def _write_queued(self) -> None:
        """The only writer of both files, so a fold never overlaps an append."""
        while self._queue or self._fold_requested:
            if self._queue:
                await self._write_group()
            if self._fold_requested or self._journal_lines >= max(
                COMPACT_MIN_LINES, len(self._topics)
            ):
                self._fold_requested = False
                await self._compact()

    async def _write_group(self) -> None:
        group, self._queue = self._queue, []
        changed, self._queue_topics = MetadataChange(topics=frozenset(self._queue_topics)), set()
        self._group_frees_space, self._queue_frees_space = self._queue_frees_space, False
        try:
            await asyncio.to_thread(self._append, b"".join(line for line, _, _ in group))
        except OSError as exc:
            error = CoordinationError(f"{self.journal_path}: cannot write ({exc})")
            for _, _, done in group:
                if not done.done():
                    done.set_exception(error)
            return
        self._journal_lines += len(group)
        for _, apply, done in group:
            apply()
            if not done.done():
                done.set_result(None)
        for listener in list(self._listeners):
            try:
                # What changed, by name: the replica manager applies just that, in slices
                # (a 10,000-partition topic applied whole held the loop for seconds).
                listener(changed)
            except OSError as exc:
                # A full disk while hosting what changed (issue 10, items 8 and 9): expected,
                # and retried by whoever needs the partition; no traceback for it.
                log.warning("a metadata change listener failed: %s", exc)
            except Exception:
                # The changes are durable and applied; one listener's failure must not
                # stop the writer (every later change would wait for ever).
                log.exception("a metadata change listener failed")
        if not self._reserve_ok:
            # After the listeners: a deletion's files are gone by now, so there is room.
            self._reserve_ok = await asyncio.to_thread(self._keep_reserve)

    async def _compact(self) -> None:
        try:
            await asyncio.to_thread(self._write_snapshot, self._snapshot())
        except OSError as exc:
            # The journal still holds every change: nothing is lost, only not folded yet.
            log.warning("%s: cannot fold the journal into it (%s)", self.path, exc)

    async def _flush(self) -> None:
        """Wait until every queued change is written."""
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    # -- Coordinator ---------------------------------------------------------------------

    async def start(self, me: BrokerRegistration) -> None:
        self._me = me
        if not self.path.exists():
            self._write_snapshot(self._snapshot())
        self._reserve_ok = self._keep_reserve()

    async def stop(self) -> None:
        """Write what is queued, then fold the journal into the snapshot: after a clean
        stop the snapshot alone is the state."""
        if self._journal_lines or self.journal_path.exists():
            self._fold_requested = True
            self._start_writer()
        await self._flush()
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None
        if self._journal_lines == 0 and self.journal_path.exists():
            self.journal_path.unlink()
        self._me = None

    def brokers(self) -> list[BrokerRegistration]:
        return [self._me] if self._me else []

    def controller_id(self) -> int:
        return self._me.broker_id if self._me else -1

    def topics(self) -> dict[str, TopicMetadata]:
        return self._topics

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    async def create_topic(
        self,
        name: str,
        replicas: dict[int, list[int]],
        configs: dict[str, str],
        wait_s: float | None = None,  # nothing to wait for: one node sees its write at once
    ) -> TopicMetadata:
        if name in self._topics or name in self._creating:
            raise TopicExistsError(f"topic {name!r} already exists")
        # Checked again here, not only by the caller: names created together (one
        # CreateTopics or Metadata request) are checked against each other only here.
        colliding = colliding_topics(name, [*self._topics, *self._creating])
        if colliding:
            raise TopicCollisionError(name, colliding)
        topic = TopicMetadata(name, uuid.uuid4(), dict(replicas), dict(configs))
        for p, r in replicas.items():
            topic.partition_states[p] = PartitionState(r[0], 0, list(r))
        self._creating.add(name)
        try:
            await self._commit(
                {"topic": name, "record": _topic_record(topic)},
                lambda: self._topics.__setitem__(name, topic),
            )
        finally:
            self._creating.discard(name)
        return topic

    async def delete_topic(self, name: str) -> None:
        async with self._serial:
            self._require(name)

            def apply() -> None:
                self._topics.pop(name, None)

            await self._commit({"deleted": name}, apply, frees_space=True)

    async def add_partitions(self, name: str, replicas: dict[int, list[int]]) -> TopicMetadata:
        async with self._serial:
            topic = _copy(self._require(name))
            for p, r in replicas.items():
                topic.replicas[p] = list(r)
                topic.partition_states[p] = PartitionState(r[0], 0, list(r))
            await self._replace(topic)
            return topic

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        async with self._serial:
            topic = _copy(self._require(name))
            topic.configs = dict(configs)
            await self._replace(topic)

    async def alter_partition(
        self,
        name: str,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        isr: list[int],
        partition_epoch: int,
    ) -> PartitionState:
        # One broker: it is the only replica and the only possible ISR, so the checks are
        # Kafka's controller's, and a change can only ever restate what is stored.
        async with self._serial:
            topic = _copy(self._require(name))
            state = topic.partition_states.get(partition)
            if state is None:
                raise AlterPartitionError(UNKNOWN_TOPIC_OR_PARTITION, f"unknown {name}-{partition}")
            if leader_id != state.leader:
                raise AlterPartitionError(NOT_LEADER_OR_FOLLOWER, f"{leader_id} does not lead")
            if leader_epoch != state.leader_epoch:
                raise AlterPartitionError(
                    FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} is stale"
                )
            if partition_epoch != state.partition_epoch:
                raise AlterPartitionError(
                    INVALID_UPDATE_VERSION, f"partition epoch {partition_epoch} is stale"
                )
            if leader_id not in isr or not set(isr) <= set(topic.replicas[partition]):
                raise AlterPartitionError(INVALID_REQUEST, f"ISR {isr} is not valid")
            state.isr = list(isr)
            state.partition_epoch += 1
            await self._replace(topic)
            return state

    async def allocate_producer_ids(self, count: int) -> int:
        async with self._serial:
            first = self._next_producer_id
            after = first + count

            def apply() -> None:
                self._next_producer_id = after

            await self._commit({"next_producer_id": after}, apply)
            return first

    def client_quotas(self) -> dict[str, dict[str, float]]:
        return self._client_quotas

    async def set_client_quotas(self, entity: str, values: dict[str, float]) -> None:
        async with self._serial:
            kept = dict(values)
            await self._commit(
                {"client_quotas": entity, "values": kept}, lambda: self._set_quotas(entity, kept)
            )

    def _set_quotas(self, entity: str, values: dict[str, Any]) -> None:
        # Replaced whole: readers hold the previous dict, never one being changed.
        quotas = dict(self._client_quotas)
        if values:
            quotas[entity] = {str(k): float(v) for k, v in values.items()}
        else:
            quotas.pop(entity, None)
        self._client_quotas = quotas

    def records(self, kind: str) -> dict[str, Any]:
        """The ``kind`` records (one of ``RECORD_KINDS``), key -> value (do not change it)."""
        return self._records[kind]

    async def update_record(
        self, kind: str, key: str, change: Callable[[Any | None], Any | None]
    ) -> Any | None:
        """Replace the record by ``change(current)`` (None removes it), durably, one change
        at a time; returns the new value."""
        async with self._serial:
            value = change(self._records[kind].get(key))
            await self._commit(
                {"record": kind, "key": key, "value": value},
                lambda: self._set_record(kind, key, value),
            )
            return value

    def _set_record(self, kind: str, key: str, value: Any | None) -> None:
        records = dict(self._records[kind])  # replaced whole, as the quotas are
        if value is None:
            records.pop(key, None)
        else:
            records[key] = value
        self._records[kind] = records

    async def wait_for_topics(
        self, predicate: Callable[[dict[str, TopicMetadata]], bool], timeout_s: float
    ) -> bool:
        # One node: a change is in topics() by the time the call making it returns.
        return predicate(self._topics)

    def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        return self._entity_configs.get(entity_type, {})

    async def set_entity_configs(
        self, entity_type: str, name: str, configs: dict[str, str]
    ) -> None:
        async with self._serial:
            kept = {str(k): str(v) for k, v in configs.items()}
            await self._commit(
                {"entity_configs": entity_type, "name": name, "values": kept},
                lambda: self._set_entity(entity_type, name, kept),
            )

    def _set_entity(self, entity_type: str, name: str, values: dict[str, Any]) -> None:
        # Replaced whole, as the quotas are.
        of_type = dict(self._entity_configs.get(entity_type, {}))
        if values:
            of_type[name] = {str(k): str(v) for k, v in values.items()}
        else:
            of_type.pop(name, None)
        configs = dict(self._entity_configs)
        configs[entity_type] = of_type
        self._entity_configs = configs

    async def _replace(self, topic: TopicMetadata) -> None:
        await self._commit(
            {"topic": topic.name, "record": _topic_record(topic)},
            lambda: self._topics.__setitem__(topic.name, topic),
        )

    def on_change(self, callback: Callable[[MetadataChange | None], None]) -> None:
        self._listeners.append(callback)

    def _require(self, name: str) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return topic
