"""Java ``.properties`` files, as Kafka's ``server.properties`` uses them.

Supports ``key=value``, ``key: value`` and ``key value``; ``#`` and ``!`` comments; lines
continued with a trailing backslash; the escapes ``\\t \\n \\r \\f \\\\ \\= \\: \\uXXXX``.
"""

from __future__ import annotations

from pathlib import Path

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """A line that cannot be read; the message names the file and line."""


def _unescape(text: str, where: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u":
                code = text[i + 2 : i + 6]
                try:
                    out.append(chr(int(code, 16)))
                except ValueError:
                    raise PropertiesError(f"{where}: bad escape \\u{code}") from None
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Split at the first unescaped '=', ':' or whitespace."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch.isspace():
            key = line[:i]
            rest = line[i:].lstrip()
            # "key = value": whitespace, then one '=' or ':' separator, is one separator.
            if ch in "=:" or rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip()
            return key, rest
        i += 1
    return line, ""


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse properties text into a dict; later keys override earlier ones."""
    result: dict[str, str] = {}
    logical = ""
    start_line = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip()
        if not logical:
            start_line = number
            if not line or line[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split(logical)
        where = f"{source}:{start_line}"
        result[_unescape(key, where)] = _unescape(value, where)
        logical = ""
    if logical:
        key, value = _split(logical)
        result[_unescape(key, source)] = _unescape(value, source)
    return result


def load_properties(path: Path) -> dict[str, str]:
    return parse_properties(Path(path).read_text(encoding="utf-8"), str(path))
