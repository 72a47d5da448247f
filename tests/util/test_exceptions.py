"""tierlog.util.exceptions: an exception's chain of causes."""

from __future__ import annotations

from tierlog.util.exceptions import causes


def test_causes_follow_cause_then_context_and_stop_at_a_loop() -> None:
    root = OSError("disk")
    try:
        try:
            raise root
        except OSError as exc:
            raise ValueError("wrapped") from exc
    except ValueError as wrapped:
        outer = RuntimeError("start failed")
        outer.__context__ = wrapped
        assert [type(e) for e in causes(outer)] == [RuntimeError, ValueError, OSError]
    looped = KeyError("a")
    looped.__cause__ = looped
    assert list(causes(looped)) == [looped]
