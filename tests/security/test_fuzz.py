from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.security.fuzz import builtin_corpus, fuzz_one_input, main, run


def test_corpus_and_mutations_raise_only_documented_errors() -> None:
    for item in builtin_corpus():
        fuzz_one_input(item)
    run(builtin_corpus(), iterations=300, seed=7)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    fuzz_one_input(data)


def test_command_line(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["20", "1"]) == 0
    assert "20 mutated inputs" in capsys.readouterr().out
