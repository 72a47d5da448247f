"""The hang guard of the suite: pytest-timeout's signal method, made safe around ``compile()``.

A test that outlives its timeout fails in its own process, and its fixtures are torn down
(brokers, ZooKeeper and JVMs stopped). The thread method ended the whole test process
instead: its fixtures' processes were left running, and pytest-xdist's ``loadgroup``
scheduler, given back the crashed process's group, never handed it out again, so the run
hung until CI's limit.

The signal method raises from a SIGALRM handler wherever the main thread is. Raised while
CPython 3.11 builds an AST (``ast.parse``, ``compile()``: assertion rewriting, pyspark's
pickling, pytest's tracebacks), the exception leaves the interpreter's AST recursion counter
off for the rest of the process ("AST constructor recursion depth mismatch"), pytest then
crashes formatting the failure, and xdist ends the run. So an alarm that lands there is put
off briefly, and raised once the compile has returned."""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import Any

import pytest_timeout

# How long an alarm that landed inside an AST build waits before it is tried again, and for
# how long in all it may be put off (a test looping on ast.parse still times out).
RETRY_S = 0.2
MAX_DEFERRAL_S = 30.0

_raise_timeout = pytest_timeout.timeout_sigalrm
_deferred_s: dict[str, float] = {}


def inside_ast_build(frame: FrameType | None) -> bool:
    """Whether ``frame`` or a caller of it is in the ``ast`` module (``ast.parse``, which
    pytest's assertion rewriting and traceback formatting call): a handler, or a finalizer a
    collection ran mid-build, runs on top of the frame that called into C."""
    while frame is not None:
        if frame.f_code.co_filename.endswith(f"{os.sep}ast.py"):
            return True
        frame = frame.f_back
    return False


def timeout_sigalrm(item: Any, settings: Any) -> None:
    deferred = _deferred_s.get(item.nodeid, 0.0)
    if deferred < MAX_DEFERRAL_S and inside_ast_build(sys._getframe(1)):
        _deferred_s[item.nodeid] = deferred + RETRY_S
        signal.setitimer(signal.ITIMER_REAL, RETRY_S)
        return
    _raise_timeout(item, settings)


def install() -> None:
    """Route pytest-timeout's alarm through the check (its handler looks the function up in
    its module each time it runs)."""
    pytest_timeout.timeout_sigalrm = timeout_sigalrm
