"""The entry points' shared failures (tierlog/util/cli_errors.py): a CliError anywhere in the
cause chain is the answer, an entry point's own explainers come next, a refused connection
means no broker; anything else raises. The processes' side is tests/tools/test_cli_errors.py."""

from __future__ import annotations

import io
import socket

import pytest

from tierlog.util.cli_errors import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    explain,
    require_listening,
    run_cli,
)


def test_a_cli_error_among_the_causes_is_printed_as_is() -> None:
    def start() -> int:
        try:
            raise CliError("no such topic; create it first", EXIT_USAGE)
        except CliError as inner:
            raise RuntimeError("the embedded broker failed") from inner

    err = io.StringIO()
    assert run_cli(start, "tierlog", err=err) == EXIT_USAGE
    assert err.getvalue() == "tierlog: no such topic; create it first\n"


def test_explainers_are_asked_for_each_cause_before_a_refused_connection() -> None:
    asked: list[str] = []

    def disk(cause: BaseException) -> CliError | None:
        asked.append(type(cause).__name__)
        return CliError("disk full") if isinstance(cause, ConnectionRefusedError) else None

    found = explain(ConnectionRefusedError("refused"), [disk])
    assert found is not None and str(found) == "disk full"
    assert asked == ["ConnectionRefusedError"]
    plain = explain(ConnectionRefusedError("refused"))
    assert plain is not None and str(plain).startswith("cannot reach a broker (refused)")


def test_anything_else_raises_with_its_traceback() -> None:
    with pytest.raises(ZeroDivisionError):
        run_cli(lambda: 1 // 0, "tierlog", err=io.StringIO())


def test_a_refused_bootstrap_server_fails_at_once() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(CliError, match=f"cannot reach a broker at 127.0.0.1:{port}") as info:
            require_listening(f"127.0.0.1:{port}", option="--set bootstrap_servers=HOST:PORT")
    assert info.value.code == EXIT_FAILED
    assert "--set bootstrap_servers=HOST:PORT" in str(info.value)
