"""Where a changelog rebuild puts its state: a Python dict or a SQLite table.

A sink owns its state and the positions it has applied (per partition: the next offset
to read). ``ChangelogReader`` asks ``start`` for the positions, reads from there and hands
over each partition's changes in offset order with ``apply``. A sink drops any change below
its position, so a range handed over twice is applied once.

SQLite layout (``table`` defaults to ``changelog``)::

    "<table>"          key BLOB PRIMARY KEY, value BLOB NOT NULL, "offset" INTEGER,
                       partition INTEGER            (WITHOUT ROWID: the key is the row)
    "<table>_offsets"  topic TEXT, partition INTEGER, next_offset INTEGER, topic_id TEXT,
                       PRIMARY KEY (topic, partition)

One ``apply`` is one transaction: the rows and the partition's next offset commit together,
so a process killed at any point leaves the database at the end of some earlier ``apply``
and a re-run resumes exactly there (no change applied twice, none skipped). Keys and values
are stored as they come (bytes) unless decoders are given. A key lives in one partition
when producers partition by key (Kafka's default partitioner); should it appear in several,
the change read last wins in the dict, and in SQLite a row is replaced only by a later
offset of its own partition or by any change of another partition.
"""

from __future__ import annotations

import bisect
import re
import sqlite3
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, Protocol

from tierlog.compaction.changelog_decode import Changes, latest_per_key

Decoder = Callable[[bytes], Any]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_MISSING = object()
_DELETED = object()  # a tombstone's place while decoded values are applied


class ChangelogMismatchError(Exception):
    """The sink was built from another topic of the same name (deleted and created again):
    resuming would mix the two. Rebuild into a fresh table."""


class Sink(Protocol):
    """What ``ChangelogReader`` needs from a target."""

    def start(self, topic: str, topic_id: str) -> dict[int, int]:
        """The next offset to read per partition already applied ({} when none).

        Raises:
            ChangelogMismatchError: the state came from another topic id.
        """
        ...

    def apply(self, changes: Changes) -> None:
        """Apply one partition's changes, in offset order, and move its position."""
        ...


def _unseen(changes: Changes, position: int | None) -> int:
    """Index of the first change at or above ``position``: the ones before were applied."""
    if position is None or not changes.offsets or changes.offsets[0] >= position:
        return 0
    return bisect.bisect_left(changes.offsets, position)


class DictSink:
    """Rebuilds ``key -> value`` in ``data`` (a new dict unless given).

    Args:
        data: the mapping to fill; it keeps what it holds, so pass the same one with
            ``positions`` to resume.
        key_decoder, value_decoder: applied to each key and each non-null value (e.g.
            ``bytes.decode``, ``json.loads``); the raw bytes are kept otherwise.
        positions: next offset per partition already in ``data``.
    """

    def __init__(
        self,
        data: MutableMapping[Any, Any] | None = None,
        *,
        key_decoder: Decoder | None = None,
        value_decoder: Decoder | None = None,
        positions: dict[int, int] | None = None,
    ) -> None:
        self.data: MutableMapping[Any, Any] = {} if data is None else data
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self.positions: dict[int, int] = dict(positions or {})

    def start(self, topic: str, topic_id: str) -> dict[int, int]:
        return dict(self.positions)

    def apply(self, changes: Changes) -> None:
        first = _unseen(changes, self.positions.get(changes.partition))
        keys: list[Any] = changes.keys[first:] if first else changes.keys
        values: list[Any] = changes.values[first:] if first else changes.values
        tombstones = changes.tombstones
        if first:
            tombstones = [row - first for row in tombstones if row >= first]
        if self.key_decoder is not None:
            keys = list(map(self.key_decoder, keys))
        deleted: object = None
        if self.value_decoder is not None:
            decode = self.value_decoder
            values = [_DELETED if v is None else decode(v) for v in values]
            deleted = _DELETED
        data = self.data
        # Every change in order, in C; then a key whose last change was a tombstone holds
        # the tombstone's marker and is removed. Keys set again after their tombstone
        # hold the new value and stay.
        data.update(zip(keys, values, strict=True))
        for row in tombstones:
            key = keys[row]
            if data.get(key, _MISSING) is deleted:
                del data[key]
        self.positions[changes.partition] = max(
            changes.next_offset, self.positions.get(changes.partition, 0)
        )


class SqliteSink:
    """Rebuilds a SQLite table (see the module docstring), resumable and idempotent.

    Args:
        database: a path (opened here, WAL journal, ``synchronous=NORMAL``: a commit
            survives the process being killed) or an open connection (used as it is).
        table: the data table's name; ``<table>_offsets`` holds the positions.
        key_decoder, value_decoder: applied before storing; results must be values SQLite
            stores (bytes, str, int, float).
    """

    def __init__(
        self,
        database: str | Path | sqlite3.Connection,
        *,
        table: str = "changelog",
        key_decoder: Decoder | None = None,
        value_decoder: Decoder | None = None,
    ) -> None:
        if not _IDENTIFIER.fullmatch(table):
            raise ValueError(f"table name {table!r} is not a plain SQL identifier")
        self.table = table
        self.offsets_table = f"{table}_offsets"
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self._owned = not isinstance(database, sqlite3.Connection)
        if isinstance(database, sqlite3.Connection):
            self.connection = database
        else:
            self.connection = sqlite3.connect(str(database))
            self.connection.execute("PRAGMA journal_mode=WAL")
            self.connection.execute("PRAGMA synchronous=NORMAL")
        self.topic: str | None = None
        self.topic_id = _ZERO_ID
        self.positions: dict[int, int] = {}
        self._create()
        t = f'"{self.table}"'
        # Upsert guarded by offset: a row moves only forwards within its partition.
        self._upsert = (
            f'INSERT INTO {t} (key, value, "offset", partition) VALUES (?, ?, ?, ?) '
            'ON CONFLICT (key) DO UPDATE SET value = excluded.value, "offset" = '
            'excluded."offset", partition = excluded.partition WHERE excluded.partition != '
            f'{t}.partition OR excluded."offset" > {t}."offset"'
        )
        self._delete = f'DELETE FROM {t} WHERE key = ? AND NOT (partition = ? AND "offset" > ?)'

    def close(self) -> None:
        """Close the connection if it was opened here."""
        if self._owned:
            self.connection.close()

    def __enter__(self) -> SqliteSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        with self.connection:
            self.connection.execute(
                f'CREATE TABLE IF NOT EXISTS "{self.table}" (key BLOB PRIMARY KEY, '
                'value BLOB NOT NULL, "offset" INTEGER NOT NULL, partition INTEGER NOT NULL) '
                "WITHOUT ROWID"
            )
            self.connection.execute(
                f'CREATE TABLE IF NOT EXISTS "{self.offsets_table}" (topic TEXT NOT NULL, '
                "partition INTEGER NOT NULL, next_offset INTEGER NOT NULL, topic_id TEXT, "
                "PRIMARY KEY (topic, partition))"
            )

    def start(self, topic: str, topic_id: str) -> dict[int, int]:
        rows = self.connection.execute(
            f'SELECT partition, next_offset, topic_id FROM "{self.offsets_table}" WHERE topic = ?',
            (topic,),
        ).fetchall()
        unknown = ("", _ZERO_ID)
        for _, _, stored_id in rows:
            if stored_id not in unknown and topic_id not in unknown and stored_id != topic_id:
                raise ChangelogMismatchError(
                    f"{self.table} was rebuilt from topic {topic!r} with id {stored_id}, "
                    f"but the topic now has id {topic_id} (deleted and created again); "
                    "rebuild into a fresh table"
                )
        self.topic = topic
        self.topic_id = topic_id
        self.positions = {int(p): int(n) for p, n, _ in rows}
        return dict(self.positions)

    def apply(self, changes: Changes) -> None:
        if self.topic is None:
            raise RuntimeError("SqliteSink.apply before start")
        partition = changes.partition
        first = _unseen(changes, self.positions.get(partition))
        if first:
            changes = Changes(
                partition,
                changes.keys[first:],
                changes.values[first:],
                changes.offsets[first:],
                [row - first for row in changes.tombstones if row >= first],
                changes.next_offset,
            )
        latest = latest_per_key(changes)
        kd, vd = self.key_decoder, self.value_decoder
        upserts = []
        deletes = []
        for key, (value, offset) in latest.items():
            stored_key = key if kd is None else kd(key)
            if value is None:
                deletes.append((stored_key, partition, offset))
            else:
                upserts.append((stored_key, value if vd is None else vd(value), offset, partition))
        next_offset = max(changes.next_offset, self.positions.get(partition, 0))
        connection = self.connection
        if connection.in_transaction:
            # Our commit would also commit the caller's half-done work.
            raise RuntimeError(
                "SqliteSink.apply: the connection has an open transaction; commit or roll "
                "it back first"
            )
        connection.execute("BEGIN")
        try:
            if upserts:
                connection.executemany(self._upsert, upserts)
            if deletes:
                connection.executemany(self._delete, deletes)
            connection.execute(
                f'INSERT INTO "{self.offsets_table}" (topic, partition, next_offset, topic_id) '
                "VALUES (?, ?, ?, ?) ON CONFLICT (topic, partition) DO UPDATE SET "
                "next_offset = excluded.next_offset, topic_id = excluded.topic_id",
                (self.topic, partition, next_offset, self.topic_id),
            )
            connection.commit()
        except BaseException:
            connection.rollback()
            raise
        self.positions[partition] = next_offset

    def to_dict(self) -> dict[Any, Any]:
        """The table as ``key -> value`` (for checks and small tables)."""
        return dict(self.connection.execute(f'SELECT key, value FROM "{self.table}"'))


_ZERO_ID = "00000000-0000-0000-0000-000000000000"
