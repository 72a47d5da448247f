"""ListTransactions v2's transactional id pattern: RE2's syntax and linear matching,
whole-id matches, and what RE2/J does not have refused."""

from __future__ import annotations

import time

import pytest

from tierlog.broker.txn.id_pattern import InvalidIdPatternError, compile_id_pattern


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("orders-.*", ["orders-1", "orders-"], ["x-orders-1"]),
        ("orders", ["orders"], ["orders-1", "my-orders"]),  # the whole id (matches())
        ("[a-c]+-\\d{2}", ["abc-12"], ["abd-12", "abc-123"]),
        ("(?i)Pay.*", ["payments", "PAY"], ["repay"]),
        ("a|b-.+?", ["a", "b-x"], ["ab"]),
        ("[]x]+", ["]x]"], ["y"]),  # a leading ] in a class is literal
        ("\\++", ["+++"], ["a"]),  # an escaped +, then a plain quantifier
        ("a}+", ["a}}"], ["a"]),  # a literal } repeated
        ("[(?=]x", ["(x", "=x"], ["x"]),  # inside a class nothing is a group
        # RE2 syntax Python's re lacks, which Kafka (RE2/J) accepts.
        ("\\Qa.b\\E-\\d", ["a.b-1"], ["axb-1"]),
        ("\\p{Greek}+", ["αβ"], ["ab"]),
        ("(?<name>t)-\\w+\\z", ["t-x"], ["t-"]),
        ("[[:alpha:]]+-[[:digit:]]", ["ab-1"], ["ab-x"]),
        ("\\Q\\C(?P<a>\\E", ["\\C(?P<a>"], []),  # quoted: literal, not \C or a group
        ("(?P<a>x)|(?P<b>y)", ["x", "y"], ["xy"]),
    ],
)
def test_re2_syntax_matches_whole_ids(
    pattern: str, matching: list[str], not_matching: list[str]
) -> None:
    compiled = compile_id_pattern(pattern)
    assert [i for i in matching if compiled.matches(i)] == matching
    assert [i for i in not_matching if compiled.matches(i)] == []


@pytest.mark.parametrize(
    "pattern",
    [
        "t1-(unclosed",  # no pattern at all
        "t-(?=lookahead)",
        "t-(?!x)",
        "(?<=a)b",
        "(?<!a)b",
        "(a)\\1",
        "(?P<g>a)(?P=g)",
        "(a)?(?(1)b|c)",
        "(?>ab)",
        "a*+",
        "a++",
        "a?+",
        "a{2,3}+",
        "a\\Z",  # RE2's end of text is \z
        "a{1001}",  # more than RE2's 1000 repetitions
        # RE2 compiles these two; RE2/J refuses them, and so does tierlog.
        "a\\Cb",
        "(?P<g>a)(?<g>b)",
    ],
)
def test_what_re2j_refuses_is_an_invalid_regular_expression(pattern: str) -> None:
    with pytest.raises(InvalidIdPatternError):
        compile_id_pattern(pattern)


@pytest.mark.timeout(30)
def test_a_pathological_pattern_matches_in_linear_time() -> None:
    # (a+)+b against a's without the b: a backtracking engine tries every split of the a's
    # (2**40 here, hours); RE2 reads the id once.
    compiled = compile_id_pattern("(a+)+b")
    started = time.monotonic()
    assert not compiled.matches("a" * 40)
    assert not compiled.matches("a" * 100_000)
    assert compiled.matches("a" * 100_000 + "b")
    assert time.monotonic() - started < 1.0
