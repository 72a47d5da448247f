from __future__ import annotations

from tierlog.util.properties import parse_properties


def test_separators_comments_and_continuations() -> None:
    text = (
        "# comment\n! also a comment\n"
        "a=1\nb : 2\nc 3\n  d = 4 \\\n   5\ne=x\\=y\\:z\nf\n"
        "g=tab\\there\nh=\\u00e9t\\u00e9\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4 5",
        "e": "x=y:z",
        "f": "",
        "g": "tab\there",
        "h": "été",
    }


def test_later_keys_override_earlier_ones() -> None:
    assert parse_properties("k=1\nk=2\n") == {"k": "2"}


def test_escaped_separator_in_key() -> None:
    assert parse_properties("a\\=b=c\n") == {"a=b": "c"}
