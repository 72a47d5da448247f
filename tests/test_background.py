"""tests/background.py: a command started as a user's shell starts it stops on Ctrl-C, even
when the test process itself ignores or blocks SIGINT (both survive exec)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.background import Background

SLEEPER = f"{sys.executable} -c \"import time; print('ready', flush=True); time.sleep(60)\""


@pytest.fixture
def deaf_to_ctrl_c() -> Iterator[None]:
    """This process ignoring and blocking SIGINT, as a suite run once left its workers."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, previous)


@pytest.mark.timeout(60)
def test_a_command_stops_on_ctrl_c_whatever_the_test_process_ignores(
    tmp_path: Path, deaf_to_ctrl_c: None
) -> None:
    command = Background(SLEEPER, tmp_path, {}, ready="ready", log=tmp_path / "out.log")
    command.wait_ready(30)
    # Python's default Ctrl-C: KeyboardInterrupt, then it ends itself by SIGINT (as a
    # shell expects), within seconds (not 60 s).
    assert command.interrupt(timeout_s=20) == -signal.SIGINT
    assert "KeyboardInterrupt" in command.output()
