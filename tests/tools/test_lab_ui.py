"""The lab as a person uses it (issue 25 item 2): after the demo, with its data served by
``tierlog demo serve``, ``tierlog lab`` is opened in headless Chromium (Debian's, driven by
Playwright), and each shipped notebook is run with the lab's own Run > Run All Cells on its
own defaults: every code cell must finish without an error, and the explore notebook's plot
must be on screen. Real parts throughout: the demo, a broker process, JupyterLab, its kernel,
Spark in local mode.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.background import Background
from tests.browser import chromium
from tests.cli import closed_port
from tests.demo_data import REPO, clone_after_demo, demo_data, tierlog_env

pytestmark = [pytest.mark.fixed_ports, pytest.mark.timeout(2400)]

# The flags that work on this machine (tests/browser.py): no sandbox (root), no GPU, and no
# calls home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Spark's start-up and the notebook's jobs: about a minute on a quiet 2-core machine; a
# busy one takes several.
RUN_ALL_TIMEOUT_S = 900.0

# The code cells' prompts: "[3]:" ran, "[*]:" running, "[ ]:" not run (Run All stops at a
# failing cell, so cells after it stay unrun).
PROMPTS = """() => Array.from(
    document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')
).map(p => p.textContent.trim())"""
PLOTS = """() => Array.from(
    document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output img')
).filter(i => i.naturalWidth > 0 && i.getBoundingClientRect().width > 100).length"""


@pytest.fixture
def lab_after_demo(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Path]]:
    """A clone after the demo with ``demo serve`` and ``tierlog lab`` running in it; yields
    the lab's base URL, its token and the clone."""
    clone = clone_after_demo(tmp_path / "clone", demo_data(tmp_path_factory))
    # The lab saves what it runs: a copy of the notebooks, not a link to the repo's.
    (clone / "notebooks").unlink()
    shutil.copytree(REPO / "notebooks", clone / "notebooks")
    port = closed_port()
    with (
        Background(
            ".venv/bin/tierlog demo serve",
            clone,
            tierlog_env(),
            ready="started on port 9092",
            log=tmp_path / "serve.log",
        ) as serve,
        Background(
            f".venv/bin/tierlog lab --port {port}",
            clone,
            {**tierlog_env(), "HOME": str(tmp_path / "home")},
            ready="token=",
            log=tmp_path / "lab.log",
        ) as lab,
    ):
        serve.wait_ready()
        lab.wait_ready()
        token = lab.output().split("token=", 1)[1].split()[0]
        yield f"http://127.0.0.1:{port}", token, clone
        assert lab.interrupt() == 0, lab.output()[-2000:]
        assert serve.interrupt() == 0, serve.output()[-2000:]


def saved_outputs(base: str, token: str, name: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        f"{base}/api/contents/notebooks/{name}", headers={"Authorization": f"token {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        model = json.loads(answer.read())
    return [o for c in model["content"]["cells"] for o in c.get("outputs", [])]


def run_all(page: Any, base: str, token: str, name: str) -> list[str]:
    """Open ``name`` in the lab, wait for its kernel, Run > Run All Cells, wait until the
    run ends; returns the code cells' prompts."""
    page.goto(f"{base}/lab/tree/notebooks/{name}?token={token}")
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell", timeout=120_000)
    page.wait_for_selector(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status="idle"]',
        timeout=180_000,
    )
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    deadline = time.monotonic() + RUN_ALL_TIMEOUT_S
    started = False
    while time.monotonic() < deadline:
        prompts = page.evaluate(PROMPTS)
        started = started or any(p != "[ ]:" for p in prompts)
        running = any("*" in p for p in prompts)
        if started and not running:
            time.sleep(2)  # the next cell's "[*]" may not be drawn yet
            if not any("*" in p for p in page.evaluate(PROMPTS)):
                return list(page.evaluate(PROMPTS))
        time.sleep(2)
    raise AssertionError(f"{name}: Run All did not finish in {RUN_ALL_TIMEOUT_S:.0f} s")


def test_every_notebook_runs_all_cells_in_the_lab_on_its_defaults(
    lab_after_demo: tuple[str, str, Path], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    base, token, clone = lab_after_demo
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium(), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            for name in (
                "ingest_to_delta.ipynb",
                "explore_events.ipynb",
                "replay_from_object_storage.ipynb",
            ):
                prompts = run_all(page, base, token, name)
                page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
                page.keyboard.press("Control+s")  # the outputs, as the lab saves them
                time.sleep(2)
                outputs = saved_outputs(base, token, name)
                errors = [o for o in outputs if o.get("output_type") == "error"]
                assert not errors, f"{name}: {errors[0]['ename']}: {errors[0]['evalue']}"
                assert all(p[1:-2].isdigit() for p in prompts), f"{name}: cells not run: {prompts}"
                if name == "explore_events.ipynb":
                    assert page.evaluate(PLOTS) >= 1, "the event-rate plot is not on screen"
                    assert any("image/png" in o.get("data", {}) for o in outputs)
                page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").first.click()
                page.locator(".lm-Menu-itemLabel", has_text="Shut Down Kernel").first.click()
        finally:
            browser.close()
    assert (clone / "data" / "delta" / "activity" / "_delta_log").is_dir()
    assert (clone / "data" / "delta" / "activity_replay" / "_delta_log").is_dir()
