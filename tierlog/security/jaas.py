"""JAAS login entries as Kafka's ``sasl.jaas.config`` writes them.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

One entry is ``<login module class> <control flag> [<option>=<value>]* ;``. The tokens
follow ``java.io.StreamTokenizer`` as Kafka's ``JaasConfig`` sets it up: ``//`` and
``/* */`` comments; ``"`` or ``'`` quoted values with Java escapes; bare words of letters,
``-``, ``_`` and ``$`` that go on through digits and dots. A bare value that starts with a
digit (``iterations=4096``) is a number token, which Kafka refuses as "Value not specified";
so does this parser, so that a config accepted here is accepted by Kafka's tools too.

``sasl.jaas.config`` must hold exactly one login module (Kafka's ``JaasContext``); every
error is a ``SecurityConfigError`` naming the config key. Option values are secrets as
often as not, so ``JaasEntry``'s repr masks them (``tierlog.security.password``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from tierlog.security.errors import SecurityConfigError
from tierlog.security.password import HIDDEN, is_secret_key

__all__ = [
    "OAUTHBEARER_LOGIN_MODULE",
    "PLAIN_LOGIN_MODULE",
    "SCRAM_LOGIN_MODULE",
    "JaasEntry",
    "parse_jaas_config",
    "parse_jaas_entries",
]

PLAIN_LOGIN_MODULE: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE: Final = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

_FLAGS: Final = ("required", "requisite", "sufficient", "optional")
_JAVA_ESCAPES: Final = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@dataclass(frozen=True)
class JaasEntry:
    """One login module: its class name, control flag (lower case) and options."""

    login_module: str
    control_flag: str
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def option(self, name: str, default: str | None = None) -> str | None:
        return self.options.get(name, default)

    def __repr__(self) -> str:
        shown = {k: (HIDDEN if is_secret_key(k) else v) for k, v in self.options.items()}
        return f"JaasEntry({self.login_module!r}, {self.control_flag!r}, {shown!r})"


# Token kinds: a word or quoted string carries its text; a number carries None (Java's
# ``sval`` is null for TT_NUMBER); any other character is itself.
_WORD: Final = "word"
_NUMBER: Final = "number"
_CHAR: Final = "char"


def _is_word_start(ch: str) -> bool:
    return (ch.isascii() and ch.isalpha()) or ch in "_$" or ord(ch) >= 0xA0


def _is_word_char(ch: str) -> bool:
    return _is_word_start(ch) or (ch.isascii() and ch.isdigit()) or ch in ".-"


def _tokens(text: str, key: str) -> Iterator[tuple[str, str | None]]:
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if ch <= " ":
            i += 1
        elif ch == "/" and nxt == "/":
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif ch == "/" and nxt == "*":
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch in "\"'":
            value, i = _quoted(text, i, key)
            yield _WORD, value
        elif (
            (ch.isascii() and ch.isdigit())
            or ch == "."
            or (ch == "-" and (nxt == "." or nxt.isdigit()))
        ):
            i += 1
            while i < n and ((text[i].isascii() and text[i].isdigit()) or text[i] == "."):
                i += 1
            yield _NUMBER, None
        elif _is_word_start(ch):
            start = i
            while i < n and _is_word_char(text[i]):
                i += 1
            yield _WORD, text[start:i]
        else:
            i += 1
            yield _CHAR, ch


def _quoted(text: str, start: int, key: str) -> tuple[str, int]:
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return "".join(out), i + 1
        if ch in "\r\n":
            break  # StreamTokenizer ends a quoted string at a line end
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "01234567":
                j = i + 1
                while j < len(text) and j < i + 4 and text[j] in "01234567":
                    j += 1
                out.append(chr(int(text[i + 1 : j], 8) & 0xFF))
                i = j
                continue
            out.append(_JAVA_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    raise SecurityConfigError(key, "JAAS config has an unterminated quoted value")


def parse_jaas_entries(text: str, key: str = "sasl.jaas.config") -> list[JaasEntry]:
    """Every login entry in ``text``, in order.

    Raises:
        SecurityConfigError: naming ``key``, with Kafka's reason.
    """
    tokens = list(_tokens(text, key))
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        kind, module = tokens[i]
        if kind != _WORD or not module:
            raise SecurityConfigError(key, "JAAS config: expected a login module class name")
        i += 1
        if i >= len(tokens):
            raise SecurityConfigError(key, "Login module control flag not specified in JAAS config")
        kind, flag = tokens[i]
        if kind != _WORD or flag is None or flag.lower() not in _FLAGS:
            raise SecurityConfigError(
                key, f"Invalid login module control flag '{flag}' in JAAS config"
            )
        i += 1
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != (_CHAR, ";"):
            kind, name = tokens[i]
            if kind != _WORD or not name:
                raise SecurityConfigError(key, "JAAS config: expected an option name")
            value = tokens[i + 2][1] if i + 2 < len(tokens) else None
            if value is None or tokens[i + 1] != (_CHAR, "=") or tokens[i + 2][0] != _WORD:
                raise SecurityConfigError(
                    key, f"Value not specified for key '{name}' in JAAS config"
                )
            options[name] = value
            i += 3
        if i >= len(tokens):
            raise SecurityConfigError(key, "JAAS config entry not terminated by semi-colon")
        i += 1  # the ';'
        entries.append(JaasEntry(module, flag.lower(), options))
    if not entries:
        raise SecurityConfigError(key, "Login module not specified in JAAS config")
    return entries


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """The one login entry of a ``sasl.jaas.config`` value.

    Raises:
        SecurityConfigError: naming ``key``: a syntax error, or not exactly one module.
    """
    entries = parse_jaas_entries(text, key)
    if len(entries) != 1:
        raise SecurityConfigError(
            key, f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]
