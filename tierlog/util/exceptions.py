"""Walking an exception's chain of causes (``__cause__``, else ``__context__``)."""

from __future__ import annotations

from collections.abc import Iterator


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what caused it, and so on; each once (a chain may loop)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
