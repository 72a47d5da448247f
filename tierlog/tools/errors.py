"""The ``tierlog`` command's expected failures beyond those every entry point shares
(``tierlog.util.cli_errors``): starting a broker, each turned into one line naming the
cause and the fix.

A user who starts a broker twice (or restarts one whose ZooKeeper registration is still
held), picks a taken port, fills the disk, gives a read-only data dir or points a broker at
another cluster's data dir gets ``tierlog: <cause>; <fix>`` and exit status 1, no traceback
(``--verbose`` adds it).
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable
from typing import TextIO

from tierlog.util import cli_errors
from tierlog.util.cli_errors import CliError

_BIND_ADDRESS = re.compile(r"\('([^']*)', (\d+)\)")


def explain_broker_start(cause: BaseException) -> CliError | None:
    """The one-line form of a broker's start failure, or None when ``cause`` is not one."""
    from tierlog.broker.coordination.zk_errors import BrokerIdInUseError
    from tierlog.broker.meta_properties import InconsistentMetaError
    from tierlog.local.errors import DiskFullError
    from tierlog.local.log_manager import LogDirInUseError

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
    if (
        isinstance(cause, OSError)
        and cause.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
        and cause.filename
    ):
        # A data dir (or a file in it) that became read-only after the start-up checks
        # (``BrokerConfig.check_environment``) looked at it.
        return CliError(
            f"cannot write {cause.filename}: {cause.strerror or cause}; make it "
            "writable by this user, or use another directory"
        )
    if isinstance(cause, InconsistentMetaError):
        return CliError(
            f"{cause}: this data dir belongs to another cluster; start the broker with the "
            "cluster it was created in, or use an empty data dir"
        )
    return None


def run_cli(
    action: Callable[[], int], prog: str, *, verbose: bool = False, err: TextIO | None = None
) -> int:
    """``tierlog.util.cli_errors.run_cli`` that also explains a broker's start failures."""
    return cli_errors.run_cli(
        action, prog, verbose=verbose, err=err, explainers=(explain_broker_start,)
    )
