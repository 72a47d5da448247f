"""``ssl.principal.mapping.rules``: a certificate's DN -> a principal name, as Kafka's
``SslPrincipalMapper`` does it.

Rules are tried in order; the first that matches names the principal::

    RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,
    RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,
    DEFAULT

- ``DEFAULT`` maps the DN to itself (the whole RFC 2253 string).
- ``RULE:pattern/replacement/`` applies when ``pattern`` matches the *whole* DN; the
  result is Java's ``dn.replaceAll(pattern, replacement)``. ``$n`` in the replacement is
  group ``n``; ``\\x`` is a literal ``x``. A ``$n`` whose group does not exist is kept
  literally (Kafka escapes it; its docs call this NiFi's rule: ``$123`` with 12 groups is
  ``$12`` then ``3``). A trailing ``L`` or ``U`` lower- or upper-cases the result.
- ``/`` inside a pattern or replacement is written ``\\/``; rules are separated by commas
  (a comma inside a rule is part of it when the rule's grammar needs it, exactly as
  Kafka's splitting regex decides); empty rules are ignored.
- No rule matching is an error (Kafka fails the authentication).

The splitting and parsing regexes are Kafka's own, which Python's ``re`` reads the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from tierlog.security.errors import SecurityConfigError

__all__ = ["NoMatchingRuleError", "SslPrincipalMapper"]

_KEY: Final = "ssl.principal.mapping.rules"
_RULE_PATTERN: Final = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER: Final = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER: Final = re.compile(_RULE_PATTERN)


class NoMatchingRuleError(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a DN."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"
    source: str = ""  # the pattern as written (Java syntax)

    def __str__(self) -> str:
        # Kafka's Rule.toString, so that the mapper's repr matches Kafka's.
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.source}/{self.replacement}" + (f"/{self.case}" if self.case else "")

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(lambda m: _expand(m, self.replacement), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _expand(match: re.Match[str], replacement: str) -> str:
    """Java's ``Matcher.appendReplacement`` after Kafka's literal-back-reference escaping.

    ``$`` followed by digits takes the first digit, then further digits while the number
    stays a valid group; a reference with no such group is kept as literal text (Kafka's
    ``escapeLiteralBackReferences``). ``${name}`` is a named group; ``\\c`` is ``c``.
    """
    groups = match.re.groups
    out: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        ch = replacement[i]
        if ch == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
        elif ch == "$" and i + 1 < n and replacement[i + 1].isdigit():
            j = i + 1
            number = int(replacement[j])
            j += 1
            while (
                j < n and replacement[j].isdigit() and number * 10 + int(replacement[j]) <= groups
            ):
                number = number * 10 + int(replacement[j])
                j += 1
            if number > groups and groups > 0:
                out.append(replacement[i:j])  # Kafka escapes it: a literal "$4"
            elif number > groups:
                raise NoMatchingRuleError(f"No group {number} in pattern {match.re.pattern!r}")
            else:
                out.append(match.group(number) or "")
            i = j
        elif ch == "$" and replacement.startswith("${", i) and "}" in replacement[i:]:
            end = replacement.index("}", i)
            name = replacement[i + 2 : end]
            try:
                out.append(match.group(name) or "")
            except IndexError:
                raise NoMatchingRuleError(f"No group with name {{{name}}}") from None
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _java_regex(pattern: str) -> re.Pattern[str]:
    # Java's named groups are (?<name>...); Python wants (?P<name>...).
    python = re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", pattern)
    return re.compile(python)


class SslPrincipalMapper:
    """Parsed ``ssl.principal.mapping.rules``; ``name(dn)`` maps one DN.

    Raises:
        SecurityConfigError: (constructor) a rule Kafka would refuse, naming the key.
    """

    def __init__(self, rules: str | None = "DEFAULT") -> None:
        text = "DEFAULT" if rules is None else rules
        parsed = (self._parse(rule) for rule in self._split(text))
        self._rules = [rule for rule in parsed if rule is not None]

    @staticmethod
    def _split(text: str) -> list[str]:
        return [m.group(1) for m in _RULE_SPLITTER.finditer(text.strip())]

    @staticmethod
    def _parse(rule: str) -> _Rule | None:
        match = _RULE_PARSER.match(rule)
        if match is None:
            raise SecurityConfigError(_KEY, f"Invalid rule: {rule}")
        if match.end() != len(rule):
            raise SecurityConfigError(
                _KEY, f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end() :]}`"
            )
        if match.group(1) is not None:
            return _Rule(None)
        if match.group(2) is not None:
            try:
                pattern = _java_regex(match.group(2))
            except re.error as exc:
                raise SecurityConfigError(_KEY, f"Invalid rule: {rule}: {exc}") from None
            return _Rule(pattern, match.group(4), match.group(6) or "", match.group(2))
        return None  # an empty rule is ignored

    def name(self, dn: str) -> str:
        """The principal name for ``dn`` (RFC 2253 form, ``tierlog.security.dn``).

        Raises:
            NoMatchingRuleError: no rule applies.
        """
        for rule in self._rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRuleError(f"No rules apply to {dn}")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(str(rule) for rule in self._rules)}])"
