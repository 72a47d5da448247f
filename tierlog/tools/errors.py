"""Expected failures of the command-line entry points, each turned into one line that names
the cause and the fix (``tierlog``, ``python -m pipelines.NAME``).

A user who starts a broker twice, picks a taken port or runs a pipeline with no broker has
done nothing wrong that a traceback would help with: the entry point prints
``PROG: <cause>; <fix>`` on stderr and exits 1. Tracebacks are for bugs, and for
``--verbose``. Anything this module does not recognise is left to raise.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import sys
import traceback
from collections.abc import Callable
from typing import TextIO

from tierlog.util.exceptions import causes

# Exit status of an expected failure at run time; 2 stays argparse's (and the config
# loaders') status for a bad command line or config.
EXIT_FAILED = 1
EXIT_USAGE = 2

START_BROKER_HINT = "start one with `tierlog broker start --config configs/server.properties`"
_BIND_ADDRESS = re.compile(r"\('([^']*)', (\d+)\)")


class CliError(Exception):
    """A failure already phrased for the user: printed as is, after ``PROG: ``.

    Args:
        message: the cause and the fix, one line.
        code: the exit status (1, or 2 for a usage error).
    """

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def explain(exc: BaseException) -> CliError | None:
    """The one-line form of an expected failure, or None when ``exc`` is not one."""
    from tierlog.broker.coordination.zk_errors import BrokerIdInUseError
    from tierlog.broker.meta_properties import InconsistentMetaError
    from tierlog.local.errors import DiskFullError
    from tierlog.local.log_manager import LogDirInUseError

    # The causes too: an embedded broker reports its start failure as the cause of a
    # RuntimeError, Spark's driver wraps Python errors the same way.
    for cause in causes(exc):
        if isinstance(cause, CliError):
            return cause
        if isinstance(cause, DiskFullError | BrokerIdInUseError):
            return CliError(str(cause))  # already one line with the way out
        if isinstance(cause, LogDirInUseError):
            return CliError(
                f"{cause}: a broker is already running on this data dir; stop it first, or "
                "give this one another directory (--override log.dirs=DIR)"
            )
        if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
            found = _BIND_ADDRESS.search(str(cause))
            where = f"{found[1]}:{found[2]}" if found else "the listener's port"
            return CliError(
                f"cannot listen on {where}: the address is already in use (another broker?); "
                "stop that process, or pick a free port "
                "(--override listeners=PLAINTEXT://127.0.0.1:PORT)"
            )
        if isinstance(cause, InconsistentMetaError):
            return CliError(
                f"{cause}: this data dir belongs to another cluster; start the broker with the "
                "cluster it was created in, or use an empty data dir"
            )
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
    action: Callable[[], int], prog: str, *, verbose: bool = False, err: TextIO | None = None
) -> int:
    """Run an entry point's ``action``; an expected failure prints one line on ``err``
    (with its traceback before it when ``verbose``) and returns its exit status."""
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
        found = explain(exc)
        if found is None:
            raise
        if verbose:
            traceback.print_exc(file=err)
        print(f"{prog}: {found}", file=err)
        return found.code
