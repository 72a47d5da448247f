"""README.md as steps a test can follow: its ```sh and ```python blocks in order, and the
HTML comments that say how to treat the ones a shell cannot simply run to the end.

A comment on lines of its own right before a block (blank lines between are allowed)::

    <!-- readme-test: background ready="started on port 9092" -->   a long-running command
    <!-- readme-test: skip: REASON -->                                never run (counted)

and on its own, where the README tells the reader to press Ctrl-C::

    <!-- readme-test: stop -->        every background command gets SIGINT and must exit 0

Any other ``readme-test:`` comment, a directive not followed by a block, and a fenced block
in a language that is neither run nor known to be inert are errors: a block is never left
out silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN = {"sh", "python"}
# Fenced blocks that show text rather than commands.
INERT = {"text", "toml", "properties", "json", "ini", "diff"}

_DIRECTIVE = re.compile(r"<!--\s*readme-test:\s*(.*?)\s*-->", re.DOTALL)
_FENCE = re.compile(r"^\s*```(\S*)\s*$")  # indented too (in a list): never missed
_BACKGROUND = re.compile(r'background\s+ready="([^"]+)"')
_SKIP = re.compile(r"skip:\s*(\S.*)", re.DOTALL)


class ReadmeError(ValueError):
    """README.md breaks the rules above; the message names the line."""


@dataclass(frozen=True)
class Step:
    """One thing to do, in README order.

    ``kind`` is ``run`` (a block), ``background`` (a one-command block left running until
    ``ready`` shows in its output), ``skip`` (a block not run, for ``reason``) or ``stop``.
    """

    kind: str
    line: int
    language: str = ""
    text: str = ""
    ready: str = ""
    reason: str = ""

    def commands(self) -> list[str]:
        """A shell block's commands: lines joined at a trailing backslash, blank and
        comment-only lines left out."""
        commands, pending = [], ""
        for raw in self.text.splitlines():
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1] + " "
                continue
            command = (pending + raw).strip()
            pending = ""
            if command and not command.startswith("#"):
                commands.append(command)
        return commands


def parse(text: str) -> list[Step]:
    """The README's steps; raises ReadmeError on anything the rules above do not allow."""
    lines = text.splitlines()
    steps: list[Step] = []
    pending: tuple[str, int] | None = None  # a directive waiting for its block
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            language, start = fence[1], i + 1
            end = next((j for j in range(start, len(lines)) if lines[j].strip() == "```"), None)
            if end is None:
                raise ReadmeError(f"line {start}: a ``` block that never ends")
            body = "\n".join(lines[start:end]) + "\n"
            step = _block_step(language, start, body, pending)
            if step is not None:
                steps.append(step)
            pending = None
            i = end + 1
            continue
        if line.lstrip().startswith("<!--") and "readme-test" in line:
            # A comment may run over several lines.
            end = next((j for j in range(i, len(lines)) if "-->" in lines[j]), None)
            if end is None:
                raise ReadmeError(f"line {i + 1}: an HTML comment that never ends")
            found = _DIRECTIVE.search("\n".join(lines[i : end + 1]))
            if found is None:
                raise ReadmeError(
                    f"line {i + 1}: write readme-test directives as <!-- readme-test: ... -->"
                )
            directive = " ".join(found[1].split())
            if pending is not None:
                raise ReadmeError(f"line {pending[1]}: `{pending[0]}` is not followed by a block")
            if directive == "stop":
                steps.append(Step("stop", i + 1))
            else:
                pending = (directive, i + 1)
            i = end + 1
            continue
        if line.strip() and pending is not None:
            raise ReadmeError(f"line {pending[1]}: `{pending[0]}` is not followed by a block")
        i += 1
    if pending is not None:
        raise ReadmeError(f"line {pending[1]}: `{pending[0]}` is not followed by a block")
    return steps


def _block_step(
    language: str, line: int, body: str, directive: tuple[str, int] | None
) -> Step | None:
    """The step of a block (None for an inert one), with the directive before it."""
    if language not in RUN | INERT:
        raise ReadmeError(
            f"line {line}: a ```{language} block: tag commands ```sh or ```python (they are "
            f"run), anything else one of {sorted(INERT)}"
        )
    if directive is None:
        return Step("run", line, language, body) if language in RUN else None
    text, where = directive
    if language not in RUN:
        raise ReadmeError(f"line {where}: `{text}` before a ```{language} block, which is not run")
    skip = _SKIP.fullmatch(text)
    if skip:
        return Step("skip", line, language, body, reason=skip[1])
    background = _BACKGROUND.fullmatch(text)
    if background:
        step = Step("background", line, language, body, ready=background[1])
        if language != "sh" or len(step.commands()) != 1:
            raise ReadmeError(f"line {where}: a background block holds one shell command")
        return step
    raise ReadmeError(
        f'line {where}: unknown directive `readme-test: {text}` (background ready="TEXT", '
        "skip: REASON, stop)"
    )


def read(path: Path) -> list[Step]:
    return parse(path.read_text())
