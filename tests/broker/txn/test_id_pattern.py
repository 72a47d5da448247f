"""ListTransactions v2's transactional id pattern: RE2's syntax through Python's ``re``,
whole-id matches, and what RE2 does not have refused."""

from __future__ import annotations

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
        ("a}+", ["a}}"], ["a"]),  # a literal } repeated, not a possessive {m,n}+
        ("[(?=]x", ["(x", "=x"], ["x"]),  # inside a class nothing is a group
    ],
)
def test_what_both_engines_share_matches_whole_ids(
    pattern: str, matching: list[str], not_matching: list[str]
) -> None:
    compiled = compile_id_pattern(pattern)
    assert [i for i in matching if compiled.fullmatch(i)] == matching
    assert [i for i in not_matching if compiled.fullmatch(i)] == []


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
    ],
)
def test_what_re2_refuses_is_an_invalid_regular_expression(pattern: str) -> None:
    with pytest.raises(InvalidIdPatternError):
        compile_id_pattern(pattern)
