"""The lab as a person uses it (issue 25 item 2): ``tierlog lab`` opened in headless
Chromium (Debian's, driven by Playwright), each shipped notebook opened from the lab, run
with the lab's Run > Run All Cells, and looked at once its kernel is idle: no cell may have
an error output, every code cell must have run, and each plot must be on screen with
pixels drawn.

Real parts throughout: a broker process with a small tiered topic ``activity`` (the demo's
topic, partly offloaded to its file:// remote tier), JupyterLab and its "tierlog" kernel,
Spark in local mode. The lab is started in a directory laid out as after the demo (the
broker's remote tier at ``data/demo/logs/remote``), so the notebooks' relative defaults
hold; only the broker's address differs from the shipped default (127.0.0.1:9092 is the
demo's, and fixed ports are kept for the tests that need them), so the copies the lab opens
name the test broker's port instead, as a user with a broker elsewhere edits that line.
That the shipped defaults themselves work after ``make demo`` is
tests/jobs/test_shipped_schedule.py's part.

All notebooks run in one lab session, one after another, each kernel shut down before the
next notebook opens (a Spark kernel holds a JVM of about 1 GB).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests import browser
from tests.tiered_data import TieredTopic, running_tiered_topic
from tests.tools.test_lab import RunningLab, running_lab

REPO = Path(__file__).resolve().parents[2]
EVENTS = 2000
SINK_CONFIG = {"segment.bytes": str(1 << 20), "retention.ms": "-1"}
SHIPPED_BOOTSTRAP = '"127.0.0.1:9092"'
# A notebook's Run All: its kernel's start, Spark's JVM, its jobs. About a minute alone on
# a 2-core machine; a hang guard, several times that.
RUN_ALL_TIMEOUT_S = 600.0
KERNEL_READY_TIMEOUT_S = 180.0
pytestmark = [pytest.mark.timeout(2400), pytest.mark.notebooks]

# The open notebook (the lab hides the others' panels).
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
# Whether a code cell shown has run or is queued ("[3]:", "[*]:"; "[ ]:" not run). The lab
# draws only the cells in view, so this says a run started, not that every cell ran.
ANY_CELL_RAN = f"""() => Array.from(
    document.querySelectorAll('{PANEL} .jp-CodeCell .jp-InputPrompt')
).some(p => p.textContent.trim() !== '[ ]:')"""
# The kernel the page has attached to the notebook, as its toolbar names it ("No Kernel"
# until then; the toolbar's execution indicator says "idle" from the start, so it cannot
# tell). The shipped notebooks name the "tierlog" kernel.
KERNEL_ATTACHED = f"""() => Array.from(
    document.querySelectorAll('{PANEL} .jp-KernelName')
).some(k => k.textContent.trim() === 'tierlog')"""
# How long a click on Run All Cells may take to mark a cell queued ("[*]:"), which the lab
# does before it sends anything to the kernel.
RUN_ALL_STARTS_S = 20.0
RUN_ALL_ATTEMPTS = 3
# Run All is done when the kernel has been idle this long (between two cells it is idle
# for milliseconds).
IDLE_FOR_S = 3.0


@pytest.fixture(scope="module")
def demo_like(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, TieredTopic]]:
    """A directory laid out as after the demo, its broker serving a small tiered topic."""
    where = tmp_path_factory.mktemp("lab-run-all")
    (where / "data" / "demo").mkdir(parents=True)
    with running_tiered_topic(where / "data" / "demo" / "logs", count=EVENTS) as topic:
        # exactly_once's sink, made before the notebook would make it on the broker's
        # defaults: this broker's 6,000-byte segments (tests/tiered_data.py) are smaller
        # than the transactional producer's batches (RECORD_LIST_TOO_LARGE).
        admin = AdminClient({"bootstrap.servers": topic.bootstrap, "log_level": 4})
        sink = NewTopic("activity_enriched", topic.partitions, 1, config=SINK_CONFIG)
        admin.create_topics([sink])["activity_enriched"].result(timeout=10)
        yield where, topic


def notebook_copies(where: Path, bootstrap: str) -> list[str]:
    """The shipped notebooks copied into ``where/notebooks``, pointed at ``bootstrap``."""
    (where / "notebooks").mkdir(exist_ok=True)
    names = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    for name in names:
        notebook = json.loads((REPO / "notebooks" / name).read_text())
        for cell in notebook["cells"]:
            if "parameters" in cell["metadata"].get("tags", []):
                source = "".join(cell["source"])
                cell["source"] = source.replace(SHIPPED_BOOTSTRAP, f'"{bootstrap}"')
        (where / "notebooks" / name).write_text(json.dumps(notebook, indent=1) + "\n")
    return names


def kernel_state(lab: RunningLab, name: str) -> str | None:
    """The execution state of the kernel of notebook ``name``'s session (None: no session)."""
    for session in lab.api("/api/sessions"):
        if session["path"].endswith(f"notebooks/{name}"):
            return str(session["kernel"]["execution_state"])
    return None


def wait_for(check: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout_s:.0f} s"
        time.sleep(0.5)


def run_all_cells(page: Any, lab: RunningLab, name: str) -> None:
    """Open ``name`` in the lab, wait for its kernel, Run > Run All Cells, and wait until
    the kernel has run what was queued (idle for ``IDLE_FOR_S``: Run All sends every
    cell at once, so the kernel stays busy until the last one ends or an error drops the
    rest)."""
    page.goto(f"http://127.0.0.1:{lab.port}/lab/tree/notebooks/{name}?token={lab.token}&reset")
    page.wait_for_selector(f"{PANEL} .jp-CodeCell", timeout=120_000)
    wait_for(
        lambda: kernel_state(lab, name) == "idle",
        f"{name}: its kernel was not ready",
        KERNEL_READY_TIMEOUT_S,
    )
    # The server's kernel being idle is not enough: until the page has attached it, the
    # lab's Run All clears the cells instead of running them (no kernel, no error; CI
    # found a notebook with no cell run).
    wait_for(
        lambda: bool(page.evaluate(KERNEL_ATTACHED)),
        f"{name}: the page did not attach its kernel",
        KERNEL_READY_TIMEOUT_S,
    )
    # Only a cell's prompt says the run started: the kernel is also busy briefly when the
    # page connects, with nothing run. A click that marked no cell ran nothing, so it is
    # made again, as a person would.
    for attempt in range(1, RUN_ALL_ATTEMPTS + 1):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        deadline = time.monotonic() + RUN_ALL_STARTS_S
        while not page.evaluate(ANY_CELL_RAN) and time.monotonic() < deadline:
            time.sleep(0.5)
        if page.evaluate(ANY_CELL_RAN):
            break
        assert attempt < RUN_ALL_ATTEMPTS, f"{name}: Run All Cells ran nothing, {attempt} times"
    idle_since: float | None = None

    def settled() -> bool:
        nonlocal idle_since
        if kernel_state(lab, name) != "idle":
            idle_since = None
            return False
        idle_since = idle_since or time.monotonic()
        return time.monotonic() - idle_since >= IDLE_FOR_S

    wait_for(settled, f"{name}: Run All Cells did not finish", RUN_ALL_TIMEOUT_S)


def save_and_read(page: Any, lab: RunningLab, name: str) -> dict[str, Any]:
    """File > Save (Ctrl+S) in the lab, then the notebook as the server stored it."""
    before = lab.api(f"/api/contents/notebooks/{name}?content=0")["last_modified"]
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while lab.api(f"/api/contents/notebooks/{name}?content=0")["last_modified"] == before:
        assert time.monotonic() < deadline, f"{name}: not saved"
        time.sleep(0.2)
    # Jupyter's "atomic" save copies the old file aside and rewrites the notebook in
    # place, so its modification time moves before the write ends: a read in between gets
    # 400 "Unreadable Notebook" (CI saw it once). Read again until the file parses.
    while True:
        try:
            content: dict[str, Any] = lab.api(f"/api/contents/notebooks/{name}")["content"]
            return content
        except urllib.error.HTTPError as error:
            if error.code != 400 or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)


def shut_down_kernels(lab: RunningLab) -> None:
    for session in lab.api("/api/sessions"):
        request = urllib.request.Request(
            f"http://127.0.0.1:{lab.port}/api/sessions/{session['id']}",
            headers={"Authorization": f"token {lab.token}"},
            method="DELETE",
        )
        urllib.request.urlopen(request, timeout=60).close()


def plots_on_screen(page: Any, tmp_path: Path, name: str) -> list[Path]:
    """Each image output of the open notebook, scrolled into view and shot as shown;
    returns the shots that have pixels drawn (not one flat colour)."""
    shots = []
    images = page.locator(f"{PANEL} .jp-OutputArea-output img, {PANEL} .jp-OutputArea-output svg")
    for n in range(images.count()):
        image = images.nth(n)
        image.scroll_into_view_if_needed()
        path = tmp_path / f"{name}-plot-{n}.png"
        pixels = browser.png_pixels(image.screenshot(path=str(path)))
        if pixels.shape[0] > 50 and pixels.shape[1] > 50 and not browser.is_blank(pixels):
            shots.append(path)
    return shots


def test_every_notebook_runs_all_cells_in_the_lab(
    demo_like: tuple[Path, TieredTopic], tmp_path: Path
) -> None:
    where, topic = demo_like
    names = notebook_copies(where, topic.bootstrap)
    timings: dict[str, float] = {}
    with (
        running_lab(where / "notebooks", where, tmp_path / "lab.log") as lab,
        browser.playwright_page() as page,
    ):
        for name in names:
            started = time.monotonic()
            run_all_cells(page, lab, name)
            timings[name] = round(time.monotonic() - started, 1)
            page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
            notebook = save_and_read(page, lab, name)
            errors = [
                o
                for c in notebook["cells"]
                for o in c.get("outputs", [])
                if o["output_type"] == "error"
            ]
            assert not errors, f"{name}: {errors[0]['ename']}: {errors[0]['evalue']}"
            unrun = [
                c["id"]
                for c in notebook["cells"]
                if c["cell_type"] == "code" and c["execution_count"] is None
            ]
            assert not unrun, f"{name}: cells not run: {unrun}"
            images = [
                o
                for c in notebook["cells"]
                for o in c.get("outputs", [])
                if {"image/png", "image/svg+xml"} & set(o.get("data", {}))
            ]
            shots = plots_on_screen(page, tmp_path, name)
            assert len(shots) >= len(images), f"{name}: {len(images)} plots, {len(shots)} drawn"
            if name == "explore_events.ipynb":
                assert shots, "the event-rate plot is not on screen"
            shut_down_kernels(lab)
    print(json.dumps({"run_all_seconds": timings}))
    assert (where / "data" / "delta" / "activity" / "_delta_log").is_dir()  # ingest ran
