"""The broker tier against a scripted leader: a log whose last offsets were cleaned away
(no batch between the last one kept and the high watermark) ends at the high watermark
instead of failing; a leader that answers nothing below its high watermark while holding
bytes is an error."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tierlog.client.log_client import EARLIEST, FetchResult
from tierlog.compaction.changelog import ChangelogReader, DictSink
from tierlog.compaction.changelog_sources import ChangelogReadError
from tierlog.records.builder import Record, build_batch

HIGH_WATERMARK = 10


class ScriptedLeader:
    """One partition: batches at offsets 0..5 (a=1, b=2, a tombstone), then nothing up to
    the high watermark 10; ``tail`` is what a fetch at 6 or later answers."""

    def __init__(self, tail: bytes = b"") -> None:
        self.log = build_batch(
            [Record(b"a", b"1"), Record(b"b", b"2"), Record(b"a", None)],
            offset_deltas=[0, 2, 5],
        )
        self.tail = tail
        self.fetched: list[int] = []

    def partitions(self, topic: str) -> list[int]:
        return [0]

    def topic_id(self, topic: str) -> str:
        return "00000000-0000-0000-0000-000000000000"

    def list_offsets(self, wanted: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        return {key: 0 if ts == EARLIEST else HIGH_WATERMARK for key, ts in wanted.items()}

    def fetch(self, topic: str, partition: int, offset: int, **_: int) -> FetchResult:
        self.fetched.append(offset)
        records = self.log if offset < 6 else self.tail
        return FetchResult(records, HIGH_WATERMARK, 0)

    def close(self) -> None:
        pass


def test_a_log_whose_last_offsets_were_cleaned_away_ends_at_the_high_watermark() -> None:
    leader = ScriptedLeader()
    sink = DictSink()
    with ChangelogReader("users", client=leader) as reader:  # type: ignore[arg-type]
        stats = reader.catch_up(sink)
    assert sink.data == {b"b": b"2"}
    assert stats.positions == {0: HIGH_WATERMARK}
    assert leader.fetched == [0, 6]


def test_bytes_without_a_whole_batch_below_the_high_watermark_are_an_error() -> None:
    cut = build_batch([Record(b"c", b"3")], base_offset=6)[:30]  # never whole
    leader = ScriptedLeader(tail=cut)
    with (
        ChangelogReader("users", client=leader) as reader,  # type: ignore[arg-type]
        pytest.raises(ChangelogReadError, match="no whole batch at offset 6"),
    ):
        reader.catch_up(DictSink())
