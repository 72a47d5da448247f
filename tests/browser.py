"""Headless Chromium (Debian's package, `make chromium`) for tests that look at a page as a
user would: the DOM after its scripts ran (``dump_dom``) and a screenshot (``screenshot``),
plus pixel checks on the PNG. One browser process per call, with its own throwaway
profile, bounded by a timeout.

For a page a test must act on (click a menu, wait for a run), ``playwright_page`` drives
the same Chromium through Playwright, which talks to it over the DevTools protocol; no
browser of Playwright's own is downloaded or used."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

INSTALL_HINT = "`make test` installs it (target chromium), or: apt-get install chromium"
# Virtual time lets a page's timers and fetches settle without waiting for them in real
# time; JupyterLab needs a few virtual seconds to lay out its file browser and launcher.
BUDGET_MS = 20_000
TIMEOUT_S = 90.0


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail(f"Chromium is not installed: {INSTALL_HINT}", pytrace=False)
    return path


def _run(url: str, args: list[str], *, window: tuple[int, int], budget_ms: int) -> bytes:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        result = subprocess.run(
            [
                chromium(),
                "--headless=new",
                "--no-sandbox",  # tests may run as root, which the sandbox refuses
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={window[0]},{window[1]}",
                f"--virtual-time-budget={budget_ms}",
                *args,
                url,
            ],
            capture_output=True,
            timeout=TIMEOUT_S,
            cwd=profile,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    return result.stdout


@contextmanager
def playwright_page(window: tuple[int, int] = (1400, 1000)) -> Iterator[Any]:
    """A Playwright page in headless Chromium (the system's), closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=chromium(),
            headless=True,
            # As _run's: no sandbox (root), no GPU; and no calls home.
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            page = instance.new_page(viewport={"width": window[0], "height": window[1]})
            page.set_default_timeout(TIMEOUT_S * 1000)
            yield page
        finally:
            instance.close()


def dump_dom(url: str, *, window: tuple[int, int] = (1280, 900), budget_ms: int = BUDGET_MS) -> str:
    """The page's DOM, serialized after its scripts ran for ``budget_ms`` of virtual time."""
    return _run(url, ["--dump-dom"], window=window, budget_ms=budget_ms).decode()


def screenshot(
    url: str,
    path: Path,
    *,
    window: tuple[int, int] = (1280, 900),
    budget_ms: int = BUDGET_MS,
) -> np.ndarray:
    """A screenshot of the window's view of the page, saved at ``path``, as an RGB array."""
    _run(url, [f"--screenshot={path}"], window=window, budget_ms=budget_ms)
    assert path.is_file(), f"Chromium wrote no screenshot at {path}"
    return np.asarray(Image.open(path).convert("RGB"))


def png_pixels(data: bytes) -> np.ndarray:
    """A PNG's pixels as an RGB array."""
    from io import BytesIO

    return np.asarray(Image.open(BytesIO(data)).convert("RGB"))


def is_blank(pixels: np.ndarray) -> bool:
    """One flat colour (a white page, a black window): nothing was drawn."""
    return float(pixels.reshape(-1, 3).std(axis=0).max()) < 1.0


def colour_counts(pixels: np.ndarray, *, at_least: int) -> dict[tuple[int, int, int], int]:
    """The saturated colours (not white, black or a grey) that fill at least ``at_least``
    pixels: a plot's bar fills, not its text or antialiasing."""
    flat = pixels.reshape(-1, 3).astype(int)
    saturated = flat[(flat.max(axis=1) - flat.min(axis=1)) > 40]
    colours, counts = np.unique(saturated, axis=0, return_counts=True)
    return {
        (int(r), int(g), int(b)): int(n)
        for (r, g, b), n in zip(colours, counts, strict=True)
        if n >= at_least
    }


def count_colour(pixels: np.ndarray, colour: tuple[int, int, int]) -> int:
    return int(np.all(pixels == np.array(colour, dtype=pixels.dtype), axis=-1).sum())
