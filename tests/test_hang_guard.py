"""The suite's hang guard (tests/hang_guard.py)."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import hang_guard

ROOT = Path(__file__).resolve().parent.parent


class _AlarmInVisit(ast.NodeVisitor):
    """Runs the guard's alarm handler from a frame the ast module called."""

    def visit_Name(self, node: ast.Name) -> None:
        hang_guard.timeout_sigalrm(SimpleNamespace(nodeid="t"), None)


def test_an_alarm_inside_the_ast_module_is_put_off_and_one_outside_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raised: list[object] = []
    monkeypatch.setattr(hang_guard, "_raise_timeout", lambda item, settings: raised.append(item))
    monkeypatch.setattr(hang_guard, "_deferred_s", {})
    previous = signal.signal(signal.SIGALRM, signal.SIG_IGN)
    try:
        _AlarmInVisit().visit(ast.parse("x"))
        assert raised == []
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= hang_guard.RETRY_S
        hang_guard.timeout_sigalrm(SimpleNamespace(nodeid="t"), None)
        assert len(raised) == 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_an_alarm_put_off_for_too_long_raises_even_inside_the_ast_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raised: list[object] = []
    monkeypatch.setattr(hang_guard, "_raise_timeout", lambda item, settings: raised.append(item))
    monkeypatch.setattr(hang_guard, "_deferred_s", {"t": hang_guard.MAX_DEFERRAL_S})
    _AlarmInVisit().visit(ast.parse("x"))
    assert len(raised) == 1


@pytest.mark.timeout(120)
def test_a_test_past_its_timeout_fails_and_the_next_one_in_its_process_runs(
    tmp_path: Path,
) -> None:
    """The signal method: the timed-out test fails in its process (its fixtures are torn
    down), and the next test, which parses, still runs there."""
    (tmp_path / "conftest.py").write_text("from tests import hang_guard\nhang_guard.install()\n")
    (tmp_path / "test_parse.py").write_text(
        textwrap.dedent(
            """
            import ast
            import pytest

            SOURCE = "\\n".join(f"def f{i}(a):\\n    return [a * {i}]" for i in range(300))
            torn_down = []

            @pytest.fixture
            def resource():
                yield
                torn_down.append(True)

            @pytest.mark.timeout(2)
            def test_parses_until_its_timeout(resource):
                while True:
                    ast.parse(SOURCE)

            def test_runs_after():
                assert torn_down == [True]
                assert len(ast.parse(SOURCE).body) == 300
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
    )
    out = run.stdout + run.stderr
    assert "Timeout" in out, out
    assert "test_parses_until_its_timeout" in out and "1 failed" in out, out
    assert "1 failed, 1 passed" in out, out
