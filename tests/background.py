"""A long-running command (a broker, a cluster) run as a user runs it in another shell:
started, waited for until its output says it is ready, stopped with Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType

READY_TIMEOUT_S = 90.0
# A broker stops in a second or two; a cluster hands its leaderships over first.
STOP_TIMEOUT_S = 60.0


class Background:
    """``command`` (a shell command line) run by bash in ``cwd``, output to ``log``.

    Args:
        ready: text its output prints once it serves (``started on port 9092``).
    """

    def __init__(self, command: str, cwd: Path, env: dict[str, str], ready: str, log: Path) -> None:
        self.command = command
        self.ready = ready
        self.log = log
        with open(log, "wb") as out:
            # Its own process group: Ctrl-C in a terminal signals the foreground group.
            self.proc = subprocess.Popen(
                ["bash", "-c", f"exec {command}"],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_as_a_shell_starts_it,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until the output shows ``ready``.

        Raises:
            AssertionError: it exited first, or did not get ready in time (then it is
                killed).
        """
        deadline = time.monotonic() + timeout_s
        while self.ready not in self.output():
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"`{self.command}` exited ({self.proc.returncode}) before it said "
                    f"{self.ready!r}:\n{self.output()[-3000:]}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(
                    f"`{self.command}` did not say {self.ready!r} in {timeout_s:.0f} s:\n"
                    f"{self.output()[-3000:]}"
                )
            time.sleep(0.2)

    def interrupt(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """Ctrl-C: SIGINT to its process group; its exit status (killed if it hangs)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            signals = signal_masks(self.proc.pid)
            self.kill()
            raise AssertionError(
                f"`{self.command}` did not stop within {timeout_s:.0f} s of Ctrl-C "
                f"(its signals then: {signals}):\n{self.output()[-3000:]}"
            ) from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> Background:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Whatever happened in between: nothing keeps running after the test.
        if self.proc.poll() is None:
            with contextlib.suppress(AssertionError):  # it was killed, and the test failed
                self.interrupt()


def _as_a_shell_starts_it() -> None:
    """In the child before it runs the command: Ctrl-C's signal neither ignored nor blocked,
    as an interactive shell starts a command. A test process may have inherited either (a
    suite run once left its children deaf to SIGINT, so `tierlog lab` could not be stopped);
    both survive exec, and a shell cannot undo an ignored signal itself."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def signal_masks(pid: int) -> str:
    """The ignored, blocked and caught signal masks of ``pid`` (from /proc), to tell why a
    process did not stop on a signal."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return "gone"
    return ", ".join(
        line.replace("\t", " ") for line in lines if line.startswith(("SigIgn", "SigBlk", "SigCgt"))
    )
