"""Expected failures of the command-line entry points, each turned into one line that names
the cause and the fix (``tierlog``, ``python -m pipelines.NAME``, notebook runs).

A user who runs a pipeline with no broker, or points a tool at the wrong port, has done
nothing wrong that a traceback would help with: the entry point prints
``PROG: <cause>; <fix>`` on stderr and exits 1. Tracebacks are for bugs, and for
``--verbose``. Anything not recognised is left to raise.

This module knows the failures every entry point shares (a ``CliError`` already phrased
for the user, a broker that cannot be reached); an entry point that knows more passes its
own ``explainers`` (the ``tierlog`` command's, for starting a broker, are in
``tierlog.tools.errors``). It sits at the bottom so that pipelines and notebook jobs use it
without importing the CLI.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TextIO

from tierlog.util.exceptions import causes

# Exit status of an expected failure at run time; 2 stays argparse's (and the config
# loaders') status for a bad command line or config.
EXIT_FAILED = 1
EXIT_USAGE = 2

START_BROKER_HINT = "start one with `tierlog broker start --config configs/server.properties`"


class CliError(Exception):
    """A failure already phrased for the user: printed as is, after ``PROG: ``.

    Args:
        message: the cause and the fix, one line.
        code: the exit status (1, or 2 for a usage error).
    """

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


# One cause of a failure -> its one-line form, or None when it is not one this knows.
Explainer = Callable[[BaseException], CliError | None]


def explain(exc: BaseException, explainers: Sequence[Explainer] = ()) -> CliError | None:
    """The one-line form of an expected failure, or None when ``exc`` is not one.

    Each cause of ``exc`` is looked at in turn: a ``CliError`` is the answer, then
    ``explainers`` are asked in order, then a refused connection is a broker not running.
    """
    # The causes too: an embedded broker reports its start failure as the cause of a
    # RuntimeError, Spark's driver wraps Python errors the same way.
    for cause in causes(exc):
        if isinstance(cause, CliError):
            return cause
        for explainer in explainers:
            found = explainer(cause)
            if found is not None:
                return found
        if isinstance(cause, ConnectionError) and not isinstance(cause, BrokenPipeError):
            return CliError(
                f"cannot reach a broker ({cause}); {START_BROKER_HINT}, or point this at a "
                "running one"
            )
    return None


def _host_port(server: str) -> tuple[str, int] | None:
    """``(host, port)`` of one ``bootstrap.servers`` entry (``PLAINTEXT://h:p``, ``[::1]:p``
    and ``h:p``), or None when it is not of that form."""
    server = server.strip().rpartition("://")[2]
    host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def require_listening(
    bootstrap: str, timeout_s: float = 1.0, option: str = "--bootstrap-server HOST:PORT"
) -> None:
    """Fail at once when every server of ``bootstrap`` refuses the connection.

    Kafka clients (librdkafka, Spark's) retry a refused connection until their request
    times out, 30 s by default, although the refusal arrives in a millisecond; a broker
    that is not running is the commonest mistake of all, so the entry points look first.
    A server that does not answer within ``timeout_s``, or an entry this cannot parse, is
    left to the client, whose own error names it.

    Args:
        option: how this entry point is pointed at another broker, for the message.

    Raises:
        CliError: every server refused.
    """
    addresses = [_host_port(server) for server in bootstrap.split(",")]
    if not addresses or None in addresses:
        return
    for address in addresses:
        assert address is not None
        try:
            socket.create_connection(address, timeout=timeout_s).close()
        except ConnectionRefusedError:
            continue
        except OSError:
            return
        return
    raise CliError(
        f"cannot reach a broker at {bootstrap}: connection refused (is a broker running "
        f"there?); {START_BROKER_HINT}, or pass {option}"
    )


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (poll reports an error on it)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def run_cli(
    action: Callable[[], int],
    prog: str,
    *,
    verbose: bool = False,
    err: TextIO | None = None,
    explainers: Sequence[Explainer] = (),
) -> int:
    """Run an entry point's ``action``; an expected failure prints one line on ``err``
    (with its traceback before it when ``verbose``) and returns its exit status.

    Args:
        explainers: what this entry point knows beyond the shared failures (``explain``).
    """
    err = err or sys.stderr
    try:
        return action()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        if not _stdout_gone():
            raise
        # The reader went away (``| head``): stop quietly, and keep Python's exit-time
        # flush of stdout from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        found = explain(exc, explainers)
        if found is None:
            raise
        if verbose:
            traceback.print_exc(file=err)
        print(f"{prog}: {found}", file=err)
        return found.code
