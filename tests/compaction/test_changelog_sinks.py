"""The dict and SQLite sinks: tombstones delete, the last change per key wins, changes
handed over twice are applied once, and SQLite resumes from what it committed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tierlog.compaction.changelog_decode import Changes
from tierlog.compaction.changelog_sinks import ChangelogMismatchError, DictSink, SqliteSink

TOPIC_ID = "6f1c9f5e-0000-4000-8000-000000000001"


def changes(
    partition: int, rows: list[tuple[int, bytes, bytes | None]], next_offset: int
) -> Changes:
    return Changes(
        partition,
        [k for _, k, _ in rows],
        [v for _, _, v in rows],
        [o for o, _, _ in rows],
        [n for n, (_, _, v) in enumerate(rows) if v is None],
        next_offset,
    )


FIRST = changes(0, [(0, b"a", b"1"), (1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")], 4)
SECOND = changes(0, [(5, b"a", b"2"), (6, b"c", None), (7, b"c", b"3"), (8, b"b", None)], 10)


def test_dict_sink_applies_in_order_with_tombstones() -> None:
    sink = DictSink()
    assert sink.start("t", TOPIC_ID) == {}
    sink.apply(FIRST)
    assert sink.data == {b"b": b"1", b"c": b"1"}
    sink.apply(SECOND)
    assert sink.data == {b"a": b"2", b"c": b"3"}
    assert sink.positions == {0: 10}


def test_dict_sink_ignores_changes_it_has_applied() -> None:
    sink = DictSink()
    sink.apply(FIRST)
    sink.apply(SECOND)
    sink.apply(FIRST)  # an older range again: nothing moves back
    overlapping = changes(0, [(7, b"c", b"3"), (8, b"b", None), (10, b"b", b"9")], 11)
    sink.apply(overlapping)
    assert sink.data == {b"a": b"2", b"c": b"3", b"b": b"9"}
    assert sink.positions == {0: 11}


def test_dict_sink_decodes_keys_and_values() -> None:
    rows = [(0, b"u1", b'{"mail": "x@a"}'), (1, b"u2", b'{"mail": "y@a"}'), (2, b"u1", None)]
    sink = DictSink(key_decoder=bytes.decode, value_decoder=json.loads)
    sink.apply(changes(0, rows, 3))
    assert sink.data == {"u2": {"mail": "y@a"}}


def test_dict_sink_keeps_a_key_set_again_after_its_tombstone() -> None:
    sink = DictSink(value_decoder=lambda v: None if v == b"none" else v)
    sink.apply(changes(0, [(0, b"k", None), (1, b"k", b"none"), (2, b"j", b"x")], 3))
    # The decoder's None is a value, not a tombstone.
    assert sink.data == {b"k": None, b"j": b"x"}


def test_sqlite_sink_upserts_deletes_and_records_its_position(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    with SqliteSink(path) as sink:
        assert sink.start("t", TOPIC_ID) == {}
        sink.apply(FIRST)
        sink.apply(changes(1, [(0, b"z", b"p1")], 1))
        sink.apply(SECOND)
        assert sink.to_dict() == {b"a": b"2", b"c": b"3", b"z": b"p1"}
    db = sqlite3.connect(path)
    rows = db.execute('SELECT key, value, "offset", partition FROM changelog ORDER BY key')
    assert rows.fetchall() == [(b"a", b"2", 5, 0), (b"c", b"3", 7, 0), (b"z", b"p1", 0, 1)]
    offsets = db.execute("SELECT topic, partition, next_offset, topic_id FROM changelog_offsets")
    assert sorted(offsets.fetchall()) == [("t", 0, 10, TOPIC_ID), ("t", 1, 1, TOPIC_ID)]
    db.close()


def test_sqlite_sink_resumes_and_never_applies_twice(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    with SqliteSink(path) as sink:
        sink.start("t", TOPIC_ID)
        sink.apply(FIRST)
    with SqliteSink(path) as sink:
        assert sink.start("t", TOPIC_ID) == {0: 4}
        sink.apply(FIRST)  # handed over again after a restart: no change
        assert sink.to_dict() == {b"b": b"1", b"c": b"1"}
        sink.apply(SECOND)
        sink.apply(SECOND)
        assert sink.to_dict() == {b"a": b"2", b"c": b"3"}


def test_sqlite_sink_refuses_a_recreated_topic(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    with SqliteSink(path) as sink:
        sink.start("t", TOPIC_ID)
        sink.apply(FIRST)
    with SqliteSink(path) as sink, pytest.raises(ChangelogMismatchError):
        sink.start("t", "6f1c9f5e-0000-4000-8000-000000000002")


def test_sqlite_sink_rolls_back_a_failed_apply(tmp_path: Path) -> None:
    def failing(value: bytes) -> object:
        # SQLite cannot store a dict: the upsert fails after the row before it was written.
        return {"bad": 1} if value == b"3" else value

    with SqliteSink(tmp_path / "cache.db", value_decoder=failing) as sink:
        sink.start("t", TOPIC_ID)
        sink.apply(FIRST)
        with pytest.raises(sqlite3.Error):
            sink.apply(SECOND)
        assert sink.to_dict() == {b"b": b"1", b"c": b"1"}
        assert sink.positions == {0: 4}


def test_sqlite_sink_refuses_odd_table_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        SqliteSink(tmp_path / "x.db", table='x"; DROP TABLE y; --')


def test_sqlite_sink_on_a_connection_keeps_out_of_the_callers_transaction(
    tmp_path: Path,
) -> None:
    db = sqlite3.connect(tmp_path / "app.db")
    db.execute("CREATE TABLE app (x INTEGER)")
    sink = SqliteSink(db)
    sink.start("t", TOPIC_ID)
    db.execute("INSERT INTO app VALUES (1)")  # the caller's transaction, left open
    with pytest.raises(RuntimeError, match="open transaction"):
        sink.apply(FIRST)
    db.rollback()
    sink.apply(FIRST)
    assert sink.to_dict() == {b"b": b"1", b"c": b"1"}
    assert db.execute("SELECT count(*) FROM app").fetchone() == (0,)
    db.close()
