"""What every notebook's cells share: the kinds of cell, the notebooks' metadata, and the
two cells most of them end with."""

from __future__ import annotations

# The kernel `tierlog lab` registers (tierlog.tools.lab): the venv's Python, started in the
# directory the lab was started from, so relative paths mean what they mean for the CLI.
# `tierlog notebook run` names its own kernel and ignores this.
METADATA = {
    "kernelspec": {"name": "tierlog", "display_name": "tierlog", "language": "python"},
    "language_info": {"name": "python"},
}


def md(text: str) -> tuple[str, str]:
    return "markdown", text


def code(text: str) -> tuple[str, str]:
    return "code", text


def parameters(text: str) -> tuple[str, str]:
    return "parameters", text


# Stopping Spark before the kernel exits lets the JVM shut down on its own terms: a JVM
# torn down with the kernel races its own temp-dir cleanup and prints a stack trace.
STOP_SPARK = "spark.stop()  # a headless run ends here; re-run the set-up cell to go on"

SUMMARY = """\
from tierlog.jobs.summary import show_summary

show_summary(summary)
"""
