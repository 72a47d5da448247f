"""tierlog.tools.lab: the "tierlog" kernel spec (written into a prefix, once; the kernel
starts where the lab was started), one-line failures, and the real ``tierlog lab`` process
on 127.0.0.1 looked at through its REST API and in headless Chromium (tests/browser.py)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import browser
from tests.cli import REPO, TIERLOG, closed_port, one_line_failure, run
from tests.jobs.conftest import DATA
from tierlog.jobs.runner import run_notebook
from tierlog.tools.lab import KERNEL_NAME, register_kernel, start_lab, write_settings_overrides
from tierlog.tools.lab_kernel import KERNEL_CWD_ENV
from tierlog.util.cli_errors import CliError

NOTEBOOKS = ["explore_events.ipynb", "ingest_to_delta.ipynb", "replay_from_object_storage.ipynb"]
# JupyterLab starts in 5-10 s on a small machine; this only stops a hang.
START_TIMEOUT_S = 90.0


def test_register_kernel_writes_the_spec_into_the_prefix_once(tmp_path: Path) -> None:
    home = Path.home() / ".local" / "share" / "jupyter" / "kernels" / KERNEL_NAME
    had_home_spec = home.exists()
    spec_dir, written = register_kernel(tmp_path)
    assert (spec_dir, written) == (tmp_path / "share/jupyter/kernels/tierlog", True)
    spec = json.loads((spec_dir / "kernel.json").read_text())
    assert spec["display_name"] == "tierlog" and spec["language"] == "python"
    assert spec["argv"][:3] == [sys.executable, "-m", "tierlog.tools.lab_kernel"]
    assert (spec_dir / "logo-64x64.png").is_file()
    before = (spec_dir / "kernel.json").stat().st_mtime_ns
    assert register_kernel(tmp_path) == (spec_dir, False)  # idempotent: left alone
    assert (spec_dir / "kernel.json").stat().st_mtime_ns == before
    assert home.exists() == had_home_spec  # nothing written to the user's home


def test_settings_overrides_merge_into_what_is_there(tmp_path: Path) -> None:
    path = tmp_path / "share/jupyter/lab/settings/overrides.json"
    path.parent.mkdir(parents=True)
    theme = {"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}
    path.write_text(json.dumps(theme))
    assert write_settings_overrides(tmp_path) == path
    settings = json.loads(path.read_text())
    assert settings["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}
    assert settings["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"


def test_the_kernel_starts_in_the_directory_the_lab_gives_it(tmp_path: Path) -> None:
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    register_kernel(tmp_path / "prefix")
    specs = KernelSpecManager(kernel_dirs=[str(tmp_path / "prefix/share/jupyter/kernels")])
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "json.py").write_text("raise RuntimeError('shadowed')\n")
    manager = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)
    # As JupyterLab starts it: in the notebook's directory, with the lab's environment.
    manager.start_kernel(
        cwd=str(tmp_path / "notebooks"), env={**os.environ, KERNEL_CWD_ENV: str(tmp_path)}
    )
    client = manager.client()
    printed: list[str] = []

    def collect(message: dict[str, Any]) -> None:
        if message["msg_type"] == "stream":
            printed.append(message["content"]["text"])

    try:
        client.start_channels()
        client.wait_for_ready(timeout=60)
        reply = client.execute_interactive(
            "import json, os, sys; print(json.dumps([os.getcwd(), sys.executable]))",
            output_hook=collect,
            timeout=60,
        )
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert reply["content"]["status"] == "ok", reply["content"]
    # The launch directory is off sys.path: json is the standard library's, not json.py.
    assert json.loads("".join(printed)) == [str(tmp_path), sys.executable]


def test_a_taken_port_is_one_line_and_exit_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line_failure(run(TIERLOG, "lab", "--port", str(port)))
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--port" in line


def test_a_missing_notebooks_dir_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run(TIERLOG, "lab", "--notebooks-dir", str(tmp_path / "nope"))
    line = one_line_failure(result, code=2)
    assert f"no notebooks directory at {tmp_path / 'nope'}" in line


@pytest.fixture
def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """start_lab with its server command replaced by the list this returns (fill it in),
    and its kernel spec and settings written under tmp_path instead of the venv."""
    from tierlog.tools import lab

    command: list[str] = []
    monkeypatch.setattr(lab, "server_command", lambda root, port, start_in="": command)
    monkeypatch.setattr(lab, "register_kernel", lambda: (tmp_path, True))
    monkeypatch.setattr(lab, "write_settings_overrides", lambda: tmp_path)
    return command


def test_a_server_that_exits_before_it_is_ready_is_one_line(
    tmp_path: Path, fake_server: list[str]
) -> None:
    fake_server += [sys.executable, "-c", "raise SystemExit(3)"]
    with pytest.raises(CliError, match=r"^JupyterLab exited with status 3 before it was ready"):
        start_lab(tmp_path, closed_port())


def test_a_server_that_never_answers_is_stopped(tmp_path: Path, fake_server: list[str]) -> None:
    marker = tmp_path / "still-running"
    fake_server += [
        sys.executable,
        "-c",
        f"import time; open({str(marker)!r}, 'w'); time.sleep(60)",
    ]
    started = time.monotonic()
    with pytest.raises(
        CliError, match=r"did not answer at http://127\.0\.0\.1:\d+/api/status within 2 s"
    ):
        start_lab(tmp_path, closed_port(), timeout_s=2)
    assert time.monotonic() - started < 20  # stopped by SIGTERM, not waited out
    assert marker.exists()  # it did start


@dataclass
class RunningLab:
    process: subprocess.Popen[str]
    port: int
    url: str
    token: str
    printed: list[str]

    def api(self, path: str, *, put: Any = None) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            data=None if put is None else json.dumps(put).encode(),
            method="GET" if put is None else "PUT",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())


@contextmanager
def running_lab(
    notebooks: Path, cwd: Path, log: Path, runs: Path | None = None, home: Path | None = None
) -> Iterator[RunningLab]:
    """``tierlog lab`` as a user starts it (with ``HOME`` at ``home`` when given); yields
    once it printed its URL, and checks on the way out that SIGTERM stops it (and its
    server) cleanly."""
    port = closed_port()
    args = [TIERLOG, "lab", "--port", str(port), "--notebooks-dir", str(notebooks)]
    if runs is not None:
        args += ["--runs-dir", str(runs)]
    with log.open("w") as stderr:
        process = subprocess.Popen(
            args,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **({"HOME": str(home)} if home else {})},
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        printed: list[str] = []
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not any("token=" in line for line in printed):
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                assert line is not None, f"tierlog lab exited: {printed}, {log.read_text()}"
                printed.append(line)
            url = next(line.strip() for line in printed if "token=" in line)
            yield RunningLab(process, port, url, url.split("token=", 1)[1], printed)
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=30)
        assert code == 0, log.read_text()
        while (line := lines.get(timeout=5)) is not None:
            printed.append(line)
        assert "stopping JupyterLab..." in printed
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0, "the server outlived tierlog lab"


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port`` (Linux /proc/net, hex)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def users_jupyter_home(home: Path) -> dict[str, str]:
    """A home whose ``~/.jupyter`` would break or steer a lab that read it: a server config
    that raises, and a saved workspace that opens a notebook. Returns what is in it."""
    jupyter = home / ".jupyter"
    (jupyter / "lab" / "workspaces").mkdir(parents=True)
    (jupyter / "jupyter_server_config.py").write_text(
        "raise RuntimeError('the lab read the user\\'s ~/.jupyter')\n"
    )
    (jupyter / "lab" / "workspaces" / "default-37a8.jupyterlab-workspace").write_text(
        json.dumps({"data": {"layout-restorer:data": {}}, "metadata": {"id": "default"}})
    )
    return {str(p.relative_to(home)): p.read_text() for p in home.rglob("*") if p.is_file()}


@pytest.mark.timeout(300)
def test_the_lab_in_headless_chromium(tmp_path: Path) -> None:
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for name in NOTEBOOKS:
        shutil.copy(REPO / "notebooks" / name, notebooks / name)
    shipped = {name: (notebooks / name).read_bytes() for name in NOTEBOOKS}
    # An executed notebook in the runs: the lab must reach it, and show its summary as a table.
    runs = tmp_path / "runs"
    executed = run_notebook("summary", notebooks_dir=DATA, runs_dir=runs, cwd=tmp_path, label="run")
    assert executed.ok, executed.error
    home = tmp_path / "home"
    before = users_jupyter_home(home)
    started_with = {p.name for p in tmp_path.iterdir()}

    with running_lab(notebooks, tmp_path, tmp_path / "lab.log", runs=runs, home=home) as lab:
        assert lab.url.startswith(f"http://127.0.0.1:{lab.port}/lab/tree/notebooks?token=")
        assert listening_addresses(lab.port) == {"0100007F"}  # 127.0.0.1 only
        assert any(f"kernel '{KERNEL_NAME}'" in line for line in lab.printed)

        specs = lab.api("/api/kernelspecs")["kernelspecs"]
        assert set(specs) == {KERNEL_NAME}  # only the kernel that works is offered
        assert specs[KERNEL_NAME]["spec"]["display_name"] == "tierlog"
        assert specs[KERNEL_NAME]["spec"]["argv"][0] == sys.executable
        top = {item["name"] for item in lab.api("/api/contents")["content"]}
        assert {"notebooks", "runs"} <= top
        listed = {item["name"] for item in lab.api("/api/contents/notebooks")["content"]}
        assert set(NOTEBOOKS) <= listed
        reports = {item["name"] for item in lab.api("/api/contents/runs")["content"]}
        assert {executed.output.name, executed.output.with_suffix(".html").name} <= reports

        # ?reset: JupyterLab's default workspace, not the one an earlier lab on this venv
        # saved (the lab keeps its workspaces in the venv, as Jupyter does in ~/.jupyter).
        fresh = f"{lab.url}&reset"
        dom = browser.dump_dom(fresh)
        assert 'id="main"' in dom and "jp-LabShell" in dom, dom[:2000]
        for name in NOTEBOOKS:
            assert f"<span>{name}</span>" in dom, f"{name} not in the file browser"
        assert 'class="jp-LauncherCard" title="tierlog"' in dom  # the kernel, in the launcher
        assert "Python 3 (ipykernel)" not in dom
        assert "official Jupyter news" not in dom  # no prompt to fetch news (overrides.json)
        shot = browser.screenshot(fresh, tmp_path / "lab.png")
        assert shot.shape[:2] == (900, 1280) and not browser.is_blank(shot)

        opened = (
            f"http://127.0.0.1:{lab.port}/lab/tree/runs/{executed.output.name}?token={lab.token}"
        )
        page = browser.dump_dom(opened)
        assert '<table class="tierlog-summary">' in page, "the summary is not a table"
        assert "IPython.core.display" not in page
        sessions = lab.api("/api/sessions")  # opening it started the notebook's kernel
        # Every session is that notebook's, on the one kernel offered. (Under load the lab
        # once made two sessions for the one notebook it opened.)
        assert sessions and {s["kernel"]["name"] for s in sessions} == {KERNEL_NAME}
        assert {s["path"] for s in sessions} == {f"runs/{executed.output.name}"}, sessions

        # What the lab saves after a kernel filled in language_info (its autosave of a
        # notebook a user only opened): the shipped bytes, unchanged.
        for name in NOTEBOOKS:
            model = lab.api(f"/api/contents/notebooks/{name}")
            model["content"]["metadata"]["language_info"] = {
                "name": "python",
                "version": sys.version.split()[0],
                "mimetype": "text/x-python",
                "codemirror_mode": {"name": "ipython", "version": 3},
                "pygments_lexer": "ipython3",
                "nbconvert_exporter": "python",
                "file_extension": ".py",
            }
            lab.api(
                f"/api/contents/notebooks/{name}",
                put={"type": "notebook", "format": "json", "content": model["content"]},
            )
            assert (notebooks / name).read_bytes() == shipped[name], f"saving changed {name}"

    # Nothing of the user's home was read (its config raises) or written.
    after = {str(p.relative_to(home)): p.read_text() for p in home.rglob("*") if p.is_file()}
    assert after == before
    # Nor anything in the directory it was started from (a directory named "false", from
    # an environment setting taken for a state directory, once was).
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in started_with) == [
        "lab.log",
        "lab.png",
    ]


def test_the_lab_root_holds_notebooks_and_runs_without_following_links(tmp_path: Path) -> None:
    from tierlog.tools.lab import lab_root

    (tmp_path / "elsewhere" / "notebooks").mkdir(parents=True)
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / "notebooks").symlink_to(tmp_path / "elsewhere" / "notebooks")
    assert lab_root(clone / "notebooks", clone / "runs", clone) == clone
    assert lab_root(Path("notebooks"), Path("runs"), Path.cwd()) == Path.cwd()
    assert lab_root(clone / "notebooks", tmp_path / "runs", clone) == tmp_path


@pytest.mark.timeout(240)
def test_the_server_ends_when_tierlog_lab_is_killed(tmp_path: Path) -> None:
    """SIGKILL to ``tierlog lab`` (or to its process group) leaves no JupyterLab behind
    holding the port: one left by a killed run once made the next README test's lab fail
    with "address already in use"."""
    port = closed_port()
    process = subprocess.Popen(
        [TIERLOG, "lab", "--port", str(port), "--notebooks-dir", str(REPO / "notebooks")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    printed = []
    for line in process.stdout:
        printed.append(line)
        if "token=" in line:
            break
    assert listening_addresses(port), f"the lab is not listening: {printed}"
    process.kill()
    process.wait(timeout=30)
    deadline = time.monotonic() + 60
    while listening_addresses(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not listening_addresses(port), "JupyterLab outlived a killed tierlog lab"
