"""ListTransactions v2's transactional id pattern (KIP-1152).

Kafka compiles the pattern with RE2/J and lists the ids it matches whole (``matches()``, not
``find()``); an empty or null pattern filters nothing, and one RE2/J cannot compile is
answered INVALID_REGULAR_EXPRESSION. Here Google's RE2 (the ``google-re2`` package) compiles
and runs it: RE2/J is a port of RE2's parser and automata, so the syntax is the same
(lookaround, backreferences, atomic groups and possessive quantifiers are refused by both;
``\\Q...\\E``, ``\\p{Greek}``, ``\\z``, ``(?<name>...)``, ``[[:alpha:]]`` and the flags
``i m s U`` are accepted by both), and matching takes time linear in the id, never
backtracking: a pattern such as ``(a+)+b`` cannot hold the broker's event loop, which
Python's ``re`` would on an id that nearly matches.

Where RE2 and RE2/J still differ:

* RE2 compiles two things RE2/J refuses, refused here by a scan before compiling: ``\\C``
  (any byte) and a group name given twice.
* RE2 refuses nested counted repetitions of more than 1000 in all (``((a{30}){34})``) and
  a program past its memory budget (8 MiB), which RE2/J compiles; here they are
  INVALID_REGULAR_EXPRESSION.
* ``\\p{..}`` classes follow each library's Unicode tables.
"""

from __future__ import annotations

import re
from typing import Any

import re2

# A named group's opening, in both of RE2's spellings; RE2/J's names are [A-Za-z0-9_]+.
_NAMED_GROUP = re.compile(r"\(\?P?<(\w+)>", re.ASCII)


class InvalidIdPatternError(ValueError):
    """The pattern does not compile, or uses what RE2/J does not have."""


class IdPattern:
    """A compiled pattern, matched against whole transactional ids."""

    __slots__ = ("_regexp", "text")

    def __init__(self, text: str, regexp: Any) -> None:
        self.text = text
        self._regexp = regexp

    def matches(self, transactional_id: str) -> bool:
        """Whether the pattern matches all of ``transactional_id`` (RE2/J's ``matches()``)."""
        return self._regexp.fullmatch(transactional_id) is not None


def compile_id_pattern(pattern: str) -> IdPattern:
    """The pattern compiled by RE2.

    Raises:
        InvalidIdPatternError: INVALID_REGULAR_EXPRESSION for the client.
    """
    refused = _refused_by_re2j(pattern)
    if refused is not None:
        raise InvalidIdPatternError(f"{pattern!r}: RE2/J refuses {refused}")
    options = re2.Options()
    options.log_errors = False  # a client's bad pattern is its error, not the broker's
    try:
        return IdPattern(pattern, re2.compile(pattern, options))
    except re2.error as exc:
        raise InvalidIdPatternError(f"{pattern!r}: {exc}") from None
    finally:
        # re2.compile keeps the last 128 programs (up to 8 MiB each) for reuse; a client's
        # patterns are used once, so none is kept past its request.
        re2.purge()


def _refused_by_re2j(pattern: str) -> str | None:
    """The first thing in ``pattern`` that RE2 compiles and RE2/J refuses, if any. Escapes,
    ``\\Q...\\E`` quotes and character classes are skipped (their contents are literal;
    a ``\\C`` inside a class RE2 refuses itself)."""
    names: set[str] = set()
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            following = pattern[i + 1 : i + 2]
            if following == "C":
                return "\\C (any byte)"
            if following == "Q":
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            i += 2
            continue
        if c == "[":
            i = _class_end(pattern, i)
            continue
        if c == "(":
            named = _NAMED_GROUP.match(pattern, i)
            if named is not None:
                if named[1] in names:
                    return f"the group name {named[1]!r} twice"
                names.add(named[1])
        i += 1
    return None


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class opening at ``start`` (a ``]`` right after
    ``[`` or ``[^`` is a literal, and ``[:alpha:]`` is a named class, as in both engines)."""
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern.startswith("[:", i):
            named_end = pattern.find(":]", i + 2)
            if named_end >= 0:
                i = named_end + 2
                continue
        if pattern[i] == "]":
            return i + 1
        i += 1
    return i  # unterminated: RE2 says so
