"""File helpers for tests that watch a live broker's directories."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path


def present_bytes(paths: Iterable[Path]) -> int:
    """The sizes of ``paths`` added up, a file deleted since it was listed counting 0: a
    running broker's retention may remove a segment between the listing and the stat."""
    total = 0
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total
