"""A broker loads the compiled record walk only when asked (``TIERLOG_JIT=1``): numba and
LLVM would double its RSS (tierlog/records/walk_jit.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tierlog.broker.embedded import EmbeddedBroker
from tierlog.records import record_walk

LOAD_TIMEOUT_S = 60.0  # ~0.3 s from numba's cache; a first compile on a loaded box is more


@pytest.fixture
def fresh_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    """record_walk as if nothing in this process had loaded the compiled walk (restored
    afterwards, so the other tests of this worker keep what they had)."""
    monkeypatch.setattr(record_walk, "_jit_walk", None)
    monkeypatch.setattr(record_walk, "_jit_tried", False)


def test_a_broker_walks_in_python_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_loader: None
) -> None:
    monkeypatch.delenv("TIERLOG_JIT", raising=False)
    with EmbeddedBroker({"log.dirs": str(tmp_path)}):
        assert record_walk._jit_tried is False
        assert record_walk._jit_walk is None


def test_a_broker_with_tierlog_jit_1_loads_the_compiled_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_loader: None
) -> None:
    monkeypatch.setenv("TIERLOG_JIT", "1")
    with EmbeddedBroker({"log.dirs": str(tmp_path)}):
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while record_walk._jit_walk is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert record_walk._jit_walk is not None
