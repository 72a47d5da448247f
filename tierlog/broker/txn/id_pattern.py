"""ListTransactions v2's transactional id pattern (KIP-1152).

Kafka compiles the pattern with RE2/J and lists the ids it matches whole (``matches()``, not
``find()``); an empty or null pattern filters nothing, and one RE2/J cannot compile is
answered INVALID_REGULAR_EXPRESSION. Here Python's ``re`` compiles it and ``fullmatch``
applies it, which is the same for the syntax the two share (literals, classes, ``.``,
anchors, alternation, groups, greedy and lazy quantifiers, ``(?i)``-style flags, ``\\d``
``\\w`` ``\\s``). Where they differ:

* What RE2 refuses because it never backtracks, Python accepts: lookaround ``(?=`` ``(?!``
  ``(?<=`` ``(?<!``, backreferences ``\\1`` ``(?P=name)``, conditionals ``(?(``, atomic
  groups ``(?>`` and possessive quantifiers ``*+`` ``++`` ``?+`` ``{m,n}+``. They are
  refused here, as Kafka refuses them.
* RE2 syntax that Python lacks is refused here and accepted by Kafka: ``\\Q...\\E``,
  ``\\p{Greek}``-style classes, ``\\z``, ``(?<name>...)``, ``[[:alpha:]]``.
* Python's engine backtracks, so a pathological pattern (``(a+)+b``) can take long on an
  id that nearly matches, where RE2 is linear. This API has no authorisation here, as no
  admin API has (DeleteTopics does more harm).
"""

from __future__ import annotations

import re

# Group openings RE2 has no equivalent of (all need backtracking).
_BACKTRACKING_GROUPS = ("(?=", "(?!", "(?<=", "(?<!", "(?P=", "(?(", "(?>")
_BOUNDED_REPEAT_END = re.compile(r"\{\d*,?\d*\}$")


class InvalidIdPatternError(ValueError):
    """The pattern does not compile, or uses what RE2 does not have."""


def compile_id_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled pattern, to be applied with ``fullmatch``.

    Raises:
        InvalidIdPatternError: INVALID_REGULAR_EXPRESSION for the client.
    """
    refused = _backtracking_construct(pattern)
    if refused is not None:
        raise InvalidIdPatternError(f"{pattern!r}: RE2 has no {refused}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidIdPatternError(f"{pattern!r}: {exc}") from None


def _backtracking_construct(pattern: str) -> str | None:
    """The first construct of ``pattern`` that RE2 lacks and Python has, if any; escapes
    and character classes are skipped (their contents are literal there)."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            following = pattern[i + 1 : i + 2]
            if following.isdigit() and following != "0":
                return f"backreference \\{following}"
            i += 2
            continue
        if c == "[":
            i = _class_end(pattern, i)
            continue
        if c == "(":
            for opening in _BACKTRACKING_GROUPS:
                if pattern.startswith(opening, i):
                    return f"{opening}...) group"
        if pattern[i + 1 : i + 2] == "+" and (
            c in "*+?" or (c == "}" and _BOUNDED_REPEAT_END.search(pattern, 0, i + 1))
        ):
            return f"possessive quantifier {c}+"
        i += 1
    return None


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class opening at ``start`` (a ``]`` right after
    ``[`` or ``[^`` is a literal, as in both engines)."""
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i + 1
        i += 1
    return i  # unterminated: re.compile says so
