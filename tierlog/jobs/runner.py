"""Run one notebook with papermill and keep the executed copy under ``runs/``.

A run is a papermill execution of ``<notebooks dir>/NAME.ipynb`` with parameters injected
after its ``parameters`` cell, written to ``<runs dir>/LABEL-YYYYmmddTHHMMSSZ.ipynb`` (UTC;
LABEL is the notebook name unless the scheduler names the job). The output is written as
cells finish, so a failing or timed-out run keeps everything up to the failure. When the
run ends, ok or not, an HTML copy is written beside it (``report``), to read in a browser.
A caller that wants progress gets a line as each code cell starts (``CellProgress``): a
notebook that runs for minutes is not minutes of silence.

The kernel is ipykernel on the interpreter running tierlog, whatever ``python3`` kernel
spec Jupyter would otherwise find (a user-level one may point at another Python without
tierlog or pyspark installed). It starts in ``cwd`` (the repo root when run from there) so
relative paths such as ``data/`` mean what they mean for the CLI.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import zmq
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpec

NOTEBOOKS_DIR_ENV = "TIERLOG_NOTEBOOKS_DIR"
RUNS_DIR_ENV = "TIERLOG_RUNS_DIR"
DEFAULT_NOTEBOOKS_DIR = Path("notebooks")
DEFAULT_RUNS_DIR = Path("runs")
SUFFIX = ".ipynb"
# papermill's own default: a kernel that takes longer than this to start has failed.
KERNEL_START_TIMEOUT_S = 60

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NotebookRun:
    """The result of one run; ``output`` exists whether or not it succeeded, and ``html``
    (its HTML copy) unless the conversion failed."""

    name: str
    notebook: Path
    output: Path
    parameters: Mapping[str, Any]
    started: datetime
    duration_s: float
    ok: bool
    error: str | None = None
    html: Path | None = None


class SameInterpreterKernelManager(AsyncKernelManager):
    """A kernel manager whose ``python3`` is ipykernel on ``sys.executable``.

    The spec is ipykernel's own (``python -m ipykernel_launcher``, the one it installs as
    ``python3``), never looked up on the Jupyter path. Its metadata declares CurveZMQ
    support, so with ``transport_encryption="auto"`` the kernel's local TCP sockets are
    encrypted instead of warning about plain text on every run.
    """

    # Where the kernel's own stdout/stderr go (Spark's JVM logs there too); None: inherited.
    kernel_log: Path | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if zmq.has("curve"):
            self.transport_encryption = "auto"

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        if self.kernel_log is None:
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        # The provisioner closes the process's pipes when it is reaped; this handle is ours.
        with open(self.kernel_log, "ab") as log:
            kw.setdefault("stdout", log)
            kw.setdefault("stderr", log)
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    @property
    def kernel_spec(self) -> KernelSpec:
        from ipykernel.kernelspec import get_kernel_dict

        spec = get_kernel_dict()
        spec["argv"][0] = sys.executable
        return KernelSpec(resource_dir="", **spec)


def notebooks_dir(explicit: str | Path | None = None) -> Path:
    """``explicit``, else ``$TIERLOG_NOTEBOOKS_DIR``, else ``./notebooks``."""
    return Path(explicit or os.environ.get(NOTEBOOKS_DIR_ENV) or DEFAULT_NOTEBOOKS_DIR)


def runs_dir(explicit: str | Path | None = None) -> Path:
    """``explicit``, else ``$TIERLOG_RUNS_DIR``, else ``./runs``."""
    return Path(explicit or os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)


def display_path(path: Path) -> Path:
    """``path`` relative to the working directory when it is under it (``runs/x.ipynb``)."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def resolve_notebook(name: str, directory: Path) -> Path:
    """The notebook file NAME refers to: ``directory/NAME.ipynb`` (NAME may carry the
    suffix), or NAME itself when it is a path (it contains a ``/``, as ``./x`` does).

    Raises:
        FileNotFoundError: no such notebook; the message lists the ones there are.
    """
    if not name.strip():
        raise ValueError("a notebook name must not be empty")
    given = Path(name)
    if "/" in name or os.sep in name:
        candidate = given if given.suffix == SUFFIX else given.with_name(given.name + SUFFIX)
        if candidate.is_file():
            return candidate
        raise FileNotFoundError(f"no notebook at {given}")
    file_name = name if name.endswith(SUFFIX) else name + SUFFIX
    candidate = directory / file_name
    if candidate.is_file():
        return candidate
    known = sorted(p.stem for p in directory.glob("*" + SUFFIX)) if directory.is_dir() else []
    available = f"; available: {', '.join(known)}" if known else " (it has no notebooks)"
    raise FileNotFoundError(f"no notebook {name!r} in {directory}{available}")


def parse_parameter(value: str) -> Any:
    """Type a ``-p`` value as papermill's CLI does: int, float, bool, None, else str.

    papermill matches only ``True``/``False``/``None``; the lower-case spellings are
    accepted too because they are what TOML, YAML and shell users type.
    """
    if value in ("True", "true"):
        return True
    if value in ("False", "false"):
        return False
    if value in ("None", "none"):
        return None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


class UnknownParameterError(ValueError):
    """A parameter the notebook's ``parameters`` cell does not declare (a typo, most
    likely): papermill would only warn and run on with the defaults."""


# The parameter the pipelines' notebooks name their cluster by.
BOOTSTRAP_PARAMETER = "bootstrap_servers"


def check_parameters(notebook: Path, values: Mapping[str, Any]) -> None:
    """Refuse parameters ``notebook`` does not declare in its ``parameters`` cell, and fail
    at once when the cluster it reads (``bootstrap_servers``, given or its default) refuses
    connections: otherwise the run finds out a minute later, after Spark's start-up.

    Raises:
        UnknownParameterError: naming the unknown ones, the closest declared names and
            every declared one.
        CliError: every server of ``bootstrap_servers`` refused the connection.
    """
    import ast

    from tierlog.util.cli_errors import require_listening

    papermill = _import_papermill()

    declared = papermill.inspect_notebook(str(notebook))
    _check_names(notebook, list(values), list(declared))
    bootstrap = values.get(BOOTSTRAP_PARAMETER)
    if bootstrap is None and BOOTSTRAP_PARAMETER in declared:
        try:
            bootstrap = ast.literal_eval(declared[BOOTSTRAP_PARAMETER]["default"])
        except (ValueError, SyntaxError):
            bootstrap = None  # computed in the cell: the notebook will say
    if isinstance(bootstrap, str) and bootstrap:
        require_listening(bootstrap, option=f"-p {BOOTSTRAP_PARAMETER} HOST:PORT")


def _import_papermill() -> Any:
    """papermill, imported without ``rfc3987_syntax``.

    papermill imports nbformat, which imports jsonschema, whose format checkers import
    ``rfc3987_syntax`` when it is installed (JupyterLab's dependencies install it) and
    compile its 38 grammars: 0.7 s of every ``notebook run``'s 1 s import, for the
    ``iri`` formats, which no notebook schema uses. Marking the module missing in this
    process skips only those two checkers."""
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    import papermill

    return papermill


def _check_names(notebook: Path, given: list[str], declared: list[str]) -> None:
    import difflib

    if not given:
        return
    unknown = [name for name in given if name not in declared]
    if not unknown:
        return
    if not declared:
        raise UnknownParameterError(
            f"notebook {notebook.stem} takes no parameters (it has no cell tagged "
            f"'parameters'), got {', '.join(unknown)}"
        )
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, declared, n=1)
        hints.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    raise UnknownParameterError(
        f"notebook {notebook.stem} has no parameter {', '.join(hints)}; its parameters: "
        f"{', '.join(declared)}"
    )


def reserve_output(directory: Path, label: str, started: datetime) -> Path:
    """Create ``directory/LABEL-<UTC timestamp>.ipynb`` empty and return it; if that file
    exists, ``-1``, ``-2``, ... is added. Creating with O_EXCL claims the name, so two
    runs started in the same second never write to one file."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{label}-{started.astimezone(UTC):%Y%m%dT%H%M%SZ}"
    attempt = 0
    while True:
        path = directory / f"{stem}{f'-{attempt}' if attempt else ''}{SUFFIX}"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            attempt += 1
            continue
        return path


def _utc_now() -> datetime:
    return datetime.now(UTC)


class CellProgress:
    """nbclient hooks that report each code cell as it starts, as one line:
    ``cell 3 of 9 (Ingest): started = time.monotonic()`` (the section is the last ``##``
    or deeper markdown heading above the cell; a ``#`` heading is the notebook's title).
    The caller's ``report`` adds the time (``Phases.done``).

    A line as a cell starts, not as it ends: the long cell (Spark's start-up, a job) is
    then named while it runs. papermill's own progress bar (tqdm) counts cells but rewrites
    one line with carriage returns, which a log file or a pipe keeps as one long line.
    """

    def __init__(self, report: Callable[[str], None]) -> None:
        self.report = report
        self._labels: dict[int, str] = {}

    def notebook_start(self, notebook: Any, **_: Any) -> None:
        """nbclient's ``on_notebook_start``: number the code cells (parameters included)."""
        code = [
            i
            for i, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and cell.source.strip()
        ]
        section = ""
        for i, cell in enumerate(notebook.cells):
            if cell.cell_type == "markdown":
                headings = [ln for ln in cell.source.splitlines() if ln.startswith("##")]
                if headings:
                    section = headings[-1].lstrip("#").strip()
            elif i in code:
                where = f" ({section})" if section else ""
                self._labels[i] = (
                    f"cell {code.index(i) + 1} of {len(code)}{where}: {_first_line(cell.source)}"
                )

    def cell_execute(self, cell: Any, cell_index: int, **_: Any) -> None:
        """nbclient's ``on_cell_execute``: called just before a code cell runs."""
        self.report(self._labels.get(cell_index) or f"cell {cell_index + 1}")

    def hooks(self) -> dict[str, Callable[..., None]]:
        """The keyword arguments that install these hooks through papermill into nbclient."""
        return {"on_notebook_start": self.notebook_start, "on_cell_execute": self.cell_execute}


def _first_line(source: str, width: int = 60) -> str:
    """The cell's first line that says something (not a comment, not a lone bracket)."""
    for line in source.splitlines():
        text = line.strip()
        if text and not text.startswith("#") and any(c.isalnum() for c in text):
            return text if len(text) <= width else text[: width - 3] + "..."
    return source.strip().splitlines()[0][:width]


def run_notebook(
    name: str,
    parameters: Mapping[str, Any] | None = None,
    *,
    notebooks_dir: Path,
    runs_dir: Path,
    cwd: Path | None = None,
    label: str | None = None,
    timeout_s: float | None = None,
    clock: Callable[[], datetime] = _utc_now,
    progress: Callable[[str], None] | None = None,
) -> NotebookRun:
    """Execute a notebook and keep the executed copy.

    Args:
        name: ``NAME``, ``NAME.ipynb`` (in ``notebooks_dir``) or a path to a notebook.
        parameters: injected after the notebook's ``parameters`` cell.
        cwd: the kernel's working directory; default: this process's.
        label: the output file's name prefix; default: the notebook's name.
        timeout_s: longest a single cell may run (papermill's ``execution_timeout``);
            None: no limit.
        clock: the UTC time in the output's name.
        progress: called with a line as each code cell starts (``CellProgress``); None:
            silent.

    Returns:
        The run; ``ok`` is False, with ``error`` saying which cell raised what, when a cell
        failed, timed out or killed the kernel.

    Raises:
        FileNotFoundError: no such notebook.
        UnknownParameterError: a parameter the notebook does not declare; nothing ran.
        CliError: its ``bootstrap_servers`` refuse connections; nothing ran.
    """
    papermill = _import_papermill()  # first: it imports nbformat without rfc3987_syntax
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    notebook = resolve_notebook(name, notebooks_dir).resolve()
    values = dict(parameters or {})
    check_parameters(notebook, values)
    started = clock()
    output = reserve_output(runs_dir, label or notebook.stem, started).resolve()
    # The kernel's (and Spark's) console chatter goes beside the executed notebook, not
    # into the caller's terminal: the notebook is the record, the log the fine print.
    kernel_log = output.with_suffix(".log")
    manager_class = type(
        "LoggedKernelManager", (SameInterpreterKernelManager,), {"kernel_log": kernel_log}
    )
    hooks = CellProgress(progress).hooks() if progress is not None else {}
    error: str | None = None
    begin = time.monotonic()
    try:
        papermill.execute_notebook(
            notebook,
            output,
            parameters=values,
            kernel_name="python3",
            language="python",
            kernel_manager_class=manager_class,
            # papermill chdirs this whole process for the run (threads included); with the
            # default that is a no-op, and every path it is given is absolute.
            cwd=(cwd or Path.cwd()).resolve(),
            progress_bar=False,
            start_timeout=KERNEL_START_TIMEOUT_S,
            execution_timeout=timeout_s,
            **hooks,
        )
    except papermill.PapermillExecutionError as exc:
        error = f"In [{exc.exec_count}] raised {exc.ename}: {exc.evalue}"
    except CellTimeoutError:
        error = f"a cell ran longer than the {timeout_s} s timeout and was interrupted"
    except DeadKernelError as exc:
        error = f"the kernel died: {exc}"
    except BaseException:
        # Nothing ran (an unreadable notebook, a kernel that never started): do not leave
        # the reserved name behind as an empty file that looks like a run.
        if output.stat().st_size == 0:
            output.unlink()
            kernel_log.unlink(missing_ok=True)
        raise
    duration_s = time.monotonic() - begin
    return NotebookRun(
        name=notebook.stem,
        notebook=notebook,
        output=output,
        parameters=values,
        started=started,
        duration_s=duration_s,
        ok=error is None,
        error=error,
        html=_html_copy(output),
    )


def _html_copy(output: Path) -> Path | None:
    """Write the run's HTML copy; a conversion that fails is logged, not the run's failure
    (the executed notebook is the record, the HTML a convenience)."""
    from tierlog.jobs.report import write_html

    try:
        return write_html(output)
    except Exception as exc:
        log.warning("no HTML copy of %s: %s: %s", display_path(output), type(exc).__name__, exc)
        return None
