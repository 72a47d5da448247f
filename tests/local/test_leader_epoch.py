from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tierlog.local.leader_epoch import (
    FILE_NAME,
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)

from .conftest import LogFactory, make_batch


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochCache:
    return LeaderEpochCache(tmp_path)


def file_text(tmp_path: Path) -> str:
    return (tmp_path / FILE_NAME).read_text()


def test_new_cache_is_empty_and_writes_nothing(cache: LeaderEpochCache, tmp_path: Path) -> None:
    assert cache.entries == []
    assert cache.latest_epoch == UNDEFINED_EPOCH
    assert not (tmp_path / FILE_NAME).exists()


def test_assign_writes_the_kafka_checkpoint(cache: LeaderEpochCache, tmp_path: Path) -> None:
    assert cache.assign(0, 0)
    assert cache.assign(2, 150)
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(2, 150)]
    assert cache.latest_epoch == 2
    assert file_text(tmp_path) == "0\n2\n0 0\n2 150\n"
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()


def test_assign_rules(cache: LeaderEpochCache, tmp_path: Path) -> None:
    assert cache.assign(1, 10)
    # the same epoch again: no new entry (each later append of epoch 1 calls assign)
    assert not cache.assign(1, 20)
    # a lower epoch never follows a higher one
    assert not cache.assign(0, 30)
    assert not cache.assign(-1, 30)
    assert cache.entries == [EpochEntry(1, 10)]
    # a new epoch whose start is not after older entries replaces them (KIP-279)
    assert cache.assign(2, 40)
    assert cache.assign(3, 40)
    assert cache.entries == [EpochEntry(1, 10), EpochEntry(3, 40)]
    assert cache.assign(4, 5)
    assert cache.entries == [EpochEntry(4, 5)]
    assert file_text(tmp_path) == "0\n1\n4 5\n"


def test_reload_from_file(cache: LeaderEpochCache, tmp_path: Path) -> None:
    cache.assign(3, 0)
    cache.assign(7, 99)
    again = LeaderEpochCache(tmp_path)
    assert again.entries == [EpochEntry(3, 0), EpochEntry(7, 99)]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1\n1\n0 0\n",  # unknown version
        "0\n2\n0 0\n",  # count says 2
        "0\nx\n",
        "0\n1\n0 0 0\n",  # three fields
        "0\n1\nzero 0\n",
    ],
)
def test_corrupt_file_gives_an_empty_cache(tmp_path: Path, text: str) -> None:
    (tmp_path / FILE_NAME).write_text(text)
    cache = LeaderEpochCache(tmp_path)
    assert cache.entries == []
    # and the next assignment rewrites a good file
    cache.assign(1, 0)
    assert file_text(tmp_path) == "0\n1\n1 0\n"


GARBLED = [
    b"\xff\xfe\x00garbage",  # not text
    b"0\n3\n0 0\n2 150\n",  # the count says 3
    b"0\n2\n0 0\n2 1x0\n",  # not a number
    b"0\n2\n2 150\n0 0\n",  # epochs out of order
    b"0\n2\n0 150\n1 100\n",  # start offsets going back
    b"0\n1\n-3 0\n",  # negative
]


@pytest.mark.parametrize("garbled", GARBLED)
def test_a_garbled_checkpoint_is_reported_and_rebuilt_from_the_log(
    garbled: bytes, make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 20, item 12: it was accepted silently (out-of-order entries were even used)."""
    lg = make_log(segment_bytes=1000)
    for epoch in (0, 0, 2, 2, 5):
        lg.append(make_batch(3, value_size=50), leader_epoch=epoch)
    expected = list(lg.leader_epoch_cache.entries)
    assert [e.epoch for e in expected] == [0, 2, 5]
    lg.close()
    (log_dir / FILE_NAME).write_bytes(garbled)
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=1000, had_clean_shutdown=True)
    assert again.leader_epoch_cache.entries == expected
    assert [r.getMessage() for r in caplog.records if str(log_dir / FILE_NAME) in r.getMessage()], (
        caplog.text
    )
    assert "rebuilding it from the log" in caplog.text
    # The file on disk is good again.
    assert LeaderEpochCache(log_dir).entries == expected


def test_end_offset_for(cache: LeaderEpochCache) -> None:
    cache.assign(2, 10)
    cache.assign(4, 20)
    cache.assign(7, 35)
    leo = 50
    # the latest epoch ends at the log end
    assert cache.end_offset_for(7, leo) == (7, leo)
    # an epoch ends where the next known one starts
    assert cache.end_offset_for(2, leo) == (2, 20)
    assert cache.end_offset_for(4, leo) == (4, 35)
    # an unknown epoch between two: the largest known epoch below it
    assert cache.end_offset_for(3, leo) == (2, 20)
    assert cache.end_offset_for(6, leo) == (4, 35)


def test_end_offset_for_edges_as_kafka(cache: LeaderEpochCache) -> None:
    # Kafka's LeaderEpochFileCache.endOffsetFor: consumers validate positions with these
    assert cache.end_offset_for(0, 10) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)  # empty
    cache.assign(5, 100)
    cache.assign(8, 200)
    # undefined epoch asked
    assert cache.end_offset_for(UNDEFINED_EPOCH, 300) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
    # an epoch older than any known (its data was deleted): it ends where the first starts
    assert cache.end_offset_for(3, 300) == (3, 100)
    # an epoch newer than the latest is unknown
    assert cache.end_offset_for(9, 300) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def test_truncate_from_end(cache: LeaderEpochCache, tmp_path: Path) -> None:
    for epoch, start in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(21)
    assert cache.latest_epoch == 3
    cache.truncate_from_end(20)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10)]
    assert file_text(tmp_path) == "0\n2\n1 0\n2 10\n"
    cache.truncate_from_end(0)
    assert cache.entries == []
    assert file_text(tmp_path) == "0\n0\n"


def test_truncate_from_start(cache: LeaderEpochCache, tmp_path: Path) -> None:
    for epoch, start in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, start)
    # the start moves inside epoch 2: it now starts there
    cache.truncate_from_start(15)
    assert cache.entries == [EpochEntry(2, 15), EpochEntry(3, 20)]
    assert file_text(tmp_path) == "0\n2\n2 15\n3 20\n"
    # exactly at an entry's start: older ones go, that one stays
    cache.truncate_from_start(20)
    assert cache.entries == [EpochEntry(3, 20)]
    # past the last entry's start: it is moved up
    cache.truncate_from_start(99)
    assert cache.entries == [EpochEntry(3, 99)]
    # backwards: nothing changes
    cache.truncate_from_start(5)
    assert cache.entries == [EpochEntry(3, 99)]


def test_truncate_from_start_unchanged_does_not_rewrite(
    cache: LeaderEpochCache, tmp_path: Path
) -> None:
    cache.assign(1, 10)
    path = tmp_path / FILE_NAME
    path.write_text("sentinel")
    cache.truncate_from_start(10)
    cache.truncate_from_end(11)
    assert path.read_text() == "sentinel"


def test_clear(cache: LeaderEpochCache, tmp_path: Path) -> None:
    cache.assign(1, 10)
    cache.clear()
    assert cache.entries == []
    assert LeaderEpochCache(tmp_path).entries == []
    assert file_text(tmp_path) == "0\n0\n"
