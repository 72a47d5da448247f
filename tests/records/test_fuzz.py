"""Tests for tierlog.records.fuzz: the harness runs clean and would catch a stray error."""

from __future__ import annotations

import random
import time

import pytest

from tierlog.records import fuzz, reader
from tierlog.records.errors import RecordsError
from tierlog.records.header import HEADER_SIZE, parse_header
from tierlog.records.reader import iter_records


def test_seeded_run_only_raises_records_errors() -> None:
    started = time.perf_counter()
    assert fuzz.run(4000, seed=20240501, arrow=True) == 4000
    assert time.perf_counter() - started < 20  # "a few seconds" with a wide CI margin


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_seeds(seed: int) -> None:
    fuzz.run(700, seed=seed)


def test_seed_corpus_is_valid_and_covers_every_codec() -> None:
    corpus = fuzz.seed_corpus()
    codecs = set()
    for data in corpus[:-1]:  # the last entry is several batches
        codecs.add(parse_header(data).attributes & 0x07)
        assert list(iter_records(data))
    assert codecs == {0, 1, 2, 3, 4}


def test_mutants_reach_the_record_decoder() -> None:
    # Most mutants are re-sealed with a valid CRC; some must then fail inside records,
    # which proves the fuzzer gets past the header checks.
    rng = random.Random(5)
    corpus = fuzz.seed_corpus()
    messages = []
    for _ in range(1500):
        data = fuzz.mutate(rng, rng.choice(corpus), corpus)
        try:
            list(iter_records(data))
        except RecordsError as exc:
            messages.append(str(exc))
    assert any(", record " in m for m in messages)
    assert any("records block is" in m for m in messages)


def test_harness_reports_unexpected_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise IndexError("decoder bug")

    monkeypatch.setattr(fuzz, "iter_records", broken)
    with pytest.raises(AssertionError, match="IndexError: decoder bug; input \\(hex\\)"):
        fuzz.run(5)


def test_fuzz_one_input_on_edge_inputs() -> None:
    for data in (b"", b"\x00", b"\xff" * HEADER_SIZE, bytes(200), fuzz.seed_corpus()[0][:70]):
        fuzz.fuzz_one_input(data)
        fuzz.fuzz_arrow_input(data)


def test_main_runs_and_returns_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert fuzz.main(["-n", "50", "--seed", "9"]) == 0
    assert "50 inputs" in capsys.readouterr().out


def test_reader_module_is_what_fuzz_calls() -> None:
    # Guards the monkeypatch above: fuzz must call the real decoder, not a copy.
    assert fuzz.iter_records is reader.iter_records
