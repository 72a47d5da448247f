"""``tierlog lab``: JupyterLab on 127.0.0.1, opened on the notebooks directory, with this
venv's Python registered as the Jupyter kernel "tierlog"; prints the URL with its token.

The lab's root is the directory holding both the notebooks and the runs (``runs/``: the
executed notebooks and their HTML reports), the project's top directory as ``make lab``
starts it, so a report is a click away; the lab opens on the notebooks. Only the "tierlog"
kernel is offered (``allowed_kernelspecs``): ipykernel's own "Python 3" would start in the
notebook's directory, where the notebooks' relative paths mean nothing.

Nothing of the user's home is read or written: Jupyter's config, settings and workspaces
(``JUPYTER_CONFIG_DIR``), data (``JUPYTER_DATA_DIR``), runtime files, IPython's profile and
the npm cache (JupyterLab's start-up runs npm, which logs there) live under the venv
(``<prefix>/share/tierlog-lab``). A workspace saved by another lab in ``~/.jupyter`` used to
reopen notebooks here, whose autosave then changed them. Saving keeps
the shipped notebooks byte for byte unless a user changes them (``lab_save``).

The kernel spec goes into the venv's prefix (``.venv/share/jupyter/kernels/tierlog``),
never the user's home: another project's Jupyter does not see it, and ``make clean``
removes it with the venv. Registering is idempotent (an identical spec is left alone).

The kernel starts in the directory ``tierlog lab`` was started from (``lab_kernel``), not
in the notebook's own directory as Jupyter's kernels do, so a notebook's relative paths
(``data/delta/events``) mean in the lab what they mean for ``tierlog notebook run``.

The server is a child process in its own session: Ctrl-C reaches only this process, which
stops the server with SIGTERM (Jupyter's clean shutdown, no "Shutdown this server?" prompt)
and waits for it. The token is generated here and handed over in ``JUPYTER_TOKEN``, so it
is not in the process list.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tierlog.tools.lab_kernel import KERNEL_CWD_ENV
from tierlog.util.cli_errors import EXIT_USAGE, CliError

KERNEL_NAME = "tierlog"
HOST = "127.0.0.1"
# JupyterLab starts in 5-10 s on a small machine; past this it is stuck.
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0


def kernel_spec() -> dict[str, Any]:
    """The "tierlog" kernel.json: ipykernel's own spec on this Python, through ``lab_kernel``."""
    from ipykernel.kernelspec import get_kernel_dict

    spec = get_kernel_dict()
    spec["argv"] = [sys.executable, "-m", "tierlog.tools.lab_kernel", "-f", "{connection_file}"]
    spec["display_name"] = KERNEL_NAME
    return spec


def kernel_dir(prefix: Path) -> Path:
    return prefix / "share" / "jupyter" / "kernels" / KERNEL_NAME


def register_kernel(prefix: Path | None = None) -> tuple[Path, bool]:
    """Install the "tierlog" kernel spec under ``prefix`` (default: this venv's).

    Returns:
        The spec's directory, and whether it was written (False: it was there already).
    """
    from ipykernel.kernelspec import write_kernel_spec
    from jupyter_client.kernelspec import KernelSpecManager

    prefix = prefix or Path(sys.prefix)
    destination = kernel_dir(prefix)
    spec = kernel_spec()
    try:
        if json.loads((destination / "kernel.json").read_text()) == spec:
            return destination, False
    except (OSError, ValueError):
        pass  # missing or unreadable: (re)install
    with tempfile.TemporaryDirectory() as staging:
        # ipykernel's writer copies its logos beside kernel.json, as `ipykernel install` does.
        write_kernel_spec(Path(staging) / KERNEL_NAME, overrides=spec)
        KernelSpecManager().install_kernel_spec(
            str(Path(staging) / KERNEL_NAME), KERNEL_NAME, prefix=str(prefix)
        )
    return destination, True


# JupyterLab's defaults for this venv (its documented overrides.json): never ask about,
# or fetch, Jupyter's news feed; the lab is told not to call home (server_command).
SETTINGS_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    }
}


def write_settings_overrides(prefix: Path | None = None) -> Path:
    """Merge ``SETTINGS_OVERRIDES`` into ``<prefix>/share/jupyter/lab/settings/overrides.json``,
    keeping whatever else is there; unchanged contents are not rewritten."""
    path = (
        (prefix or Path(sys.prefix)) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    )
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        current = {}
    merged = {**current}
    for plugin, values in SETTINGS_OVERRIDES.items():
        merged[plugin] = {**current.get(plugin, {}), **values}
    if merged != current:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(merged, indent=2) + "\n")
    return path


def check_port_free(port: int) -> None:
    """Fail with one line when ``HOST:port`` is taken, before Jupyter says it in twenty.

    Raises:
        CliError: the port is in use.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the server will bind it: SO_REUSEADDR ignores connections in TIME_WAIT.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            raise CliError(
                f"cannot listen on {HOST}:{port}: {exc.strerror or exc} (another lab or "
                "server?); stop it, or pick another port with --port"
            ) from None


@dataclass(frozen=True)
class Lab:
    """A started server: its process, URL (with the token) and token, and the kernel spec's
    directory (``kernel_written``: False when it was registered already)."""

    process: subprocess.Popen[bytes]
    url: str
    token: str
    kernel_dir: Path
    kernel_written: bool


def _absolute(path: Path) -> Path:
    """``path`` made absolute without resolving symlinks: a notebooks directory that links
    elsewhere still sits where the user put it."""
    return Path(os.path.normpath(path.absolute()))


def lab_root(notebooks: Path, runs: Path, cwd: Path) -> Path:
    """The lab's root: the deepest directory holding the notebooks, the runs and ``cwd``."""
    return Path(os.path.commonpath([_absolute(notebooks), _absolute(runs), _absolute(cwd)]))


def lab_state_dirs(prefix: Path) -> dict[str, str]:
    """Where Jupyter and IPython keep their state for this lab: under ``prefix`` (the venv),
    never the user's home (module docstring); environment variable -> directory."""
    state = prefix / "share" / "tierlog-lab"
    return {
        "JUPYTER_CONFIG_DIR": str(state / "config"),
        "JUPYTER_DATA_DIR": str(state / "data"),
        "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
        "IPYTHONDIR": str(state / "ipython"),
        # JupyterLab runs npm at start (it asks for its version); npm logs into its cache,
        # ~/.npm by default.
        "npm_config_cache": str(state / "npm"),
    }


def lab_environment(prefix: Path) -> dict[str, str]:
    """The lab's environment: its state directories, and npm told not to look for a newer
    npm."""
    return {**lab_state_dirs(prefix), "npm_config_update_notifier": "false"}


def server_command(root: Path, port: int, start_in: str = "") -> list[str]:
    """The child's command line: JupyterLab on ``HOST:port`` rooted at ``root``, opening
    on ``start_in`` (a path under the root), offering only the "tierlog" kernel."""
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.ip={HOST}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",  # the port asked for, or fail; never a surprise one
        f"--ServerApp.root_dir={root}",
        f"--ServerApp.default_url=/lab/tree/{start_in}"
        if start_in
        else "--ServerApp.default_url=/lab",
        f"--KernelSpecManager.allowed_kernelspecs={KERNEL_NAME}",
        "--KernelSpecManager.ensure_native_kernel=False",
        "--ContentsManager.pre_save_hook=tierlog.tools.lab_save.keep_language_name",
        "--ServerApp.open_browser=False",  # the URL is printed; a headless box has no browser
        "--ServerApp.log_level=WARN",
        # No calls home: no news feed, no update check (and no pop-up asking about them).
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        # Extensions are what pyproject.toml installs; the lab does not browse a registry.
        "--LabApp.extension_manager=readonly",
        "--LabApp.log_level=WARN",
    ]
    if os.geteuid() == 0:
        # Jupyter refuses root unless told; containers commonly run as root.
        command.append("--ServerApp.allow_root=True")
    return command


def start_lab(
    notebooks: Path,
    port: int,
    *,
    runs: Path | None = None,
    timeout_s: float = READY_TIMEOUT_S,
) -> Lab:
    """Register the kernel, start JupyterLab and wait until it answers.

    Raises:
        FileNotFoundError: ``notebooks`` is not a directory.
        CliError: the port is taken, JupyterLab is not installed, or the server exited or
            did not answer within ``timeout_s``.
    """
    import importlib.util

    if not notebooks.is_dir():
        raise FileNotFoundError(f"no notebooks directory at {notebooks} (--notebooks-dir)")
    if importlib.util.find_spec("jupyterlab") is None:
        raise CliError(
            "JupyterLab is not installed in this Python; run `make lab` (it installs the "
            "'spark' extra: pip install -e '.[spark]')"
        )
    check_port_free(port)
    spec_dir, written = register_kernel()
    write_settings_overrides()
    token = secrets.token_hex(24)
    cwd = Path.cwd()
    root = lab_root(notebooks, runs or notebooks, cwd)
    start_in = _absolute(notebooks).relative_to(root).as_posix()
    start_in = "" if start_in == "." else start_in
    environment = lab_environment(Path(sys.prefix))
    for directory in lab_state_dirs(Path(sys.prefix)).values():
        Path(directory).mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        server_command(root, port, start_in),
        env={
            **os.environ,
            **environment,
            "JUPYTER_TOKEN": token,
            KERNEL_CWD_ENV: str(cwd),
        },
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_end_with_parent,
    )
    base = f"http://{HOST}:{port}"
    try:
        _wait_ready(process, f"{base}/api/status", token, timeout_s)
    except BaseException:
        stop_lab(process)
        raise
    where = f"/lab/tree/{start_in}" if start_in else "/lab"
    return Lab(process, f"{base}{where}?token={token}", token, spec_dir, written)


def _wait_ready(
    process: subprocess.Popen[bytes], status_url: str, token: str, timeout_s: float
) -> None:
    request = urllib.request.Request(status_url, headers={"Authorization": f"token {token}"})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code = process.poll()
        if code is not None:
            raise CliError(
                f"JupyterLab exited with status {code} before it was ready (its messages are above)"
            )
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # not listening yet
        time.sleep(0.25)
    raise CliError(f"JupyterLab did not answer at {status_url} within {timeout_s:.0f} s")


def stop_lab(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM (Jupyter shuts its kernels down and exits), SIGKILL if it hangs."""
    if process.poll() is None:
        process.terminate()
        try:
            return process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


def run_lab(notebooks: Path, port: int, out: TextIO, runs: Path | None = None) -> int:
    """``tierlog lab``: register the kernel, start the lab, print its URL, serve until
    Ctrl-C (or SIGTERM); returns the exit status."""
    if not 0 < port < 65536:
        raise CliError(f"--port must be 1-65535, got {port}", EXIT_USAGE)
    lab = start_lab(notebooks, port, runs=runs)
    state = "registered" if lab.kernel_written else "already registered"
    print(f"kernel {KERNEL_NAME!r} {state} in {_relative(lab.kernel_dir)}", file=out)
    root = lab_root(notebooks, runs or notebooks, Path.cwd())
    print(
        f"JupyterLab on {_relative(notebooks.resolve())}/ (and the runs: the lab's root is "
        f"{_relative(root)}/; Ctrl-C stops it):",
        file=out,
    )
    print(f"    {lab.url}", file=out, flush=True)
    # SIGTERM (kill, systemd, a test's cleanup) stops the server as Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = lab.process.wait()
    except KeyboardInterrupt:
        print("stopping JupyterLab...", file=out, flush=True)
        stop_lab(lab.process)
        return 0
    if code != 0:
        raise CliError(f"JupyterLab exited with status {code} (its messages are above)")
    return 0


# Linux's prctl(2) option: the signal this process gets when its parent ends.
_PR_SET_PDEATHSIG = 1


def _end_with_parent() -> None:
    """In the JupyterLab child before it starts: SIGTERM when ``tierlog lab`` ends, however
    it ends. The child has a session of its own (Ctrl-C reaches ``tierlog lab`` alone,
    which stops the server in order), so killing ``tierlog lab`` with SIGKILL, or its
    process group, left the server running and holding its port. Linux only; elsewhere
    nothing changes."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _relative(path: Path) -> Path:
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path
