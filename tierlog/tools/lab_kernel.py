"""The "tierlog" Jupyter kernel's entry point (``python -m tierlog.tools.lab_kernel -f
CONNECTION_FILE``): ipykernel, started in ``$TIERLOG_KERNEL_CWD`` when that is set.

Jupyter starts a kernel in its notebook's directory (``notebooks/``); ``tierlog lab`` sets
the variable to the directory it was started from (the repo root), so a notebook's
relative paths (``data/delta/events``) mean what they mean for ``tierlog notebook run``.
Without the variable this is ipykernel's own launcher.
"""

from __future__ import annotations

import os
import sys

KERNEL_CWD_ENV = "TIERLOG_KERNEL_CWD"


def main() -> None:
    # As ipykernel_launcher: ``-m`` put the launch directory first on sys.path, where it
    # would shadow installed modules with whatever files sit next to the notebook.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    cwd = os.environ.get(KERNEL_CWD_ENV)
    if cwd:
        os.chdir(cwd)
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
