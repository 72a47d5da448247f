"""The HTML copy of an executed notebook, written beside it (``runs/NAME-TIME.html`` next to
``runs/NAME-TIME.ipynb``), so a run, a scheduled one included, can be read in a browser.

nbconvert's ``lab`` template, as ``jupyter nbconvert --to html`` writes it: plots are
embedded as data URIs and the styles are inline, so the file stands alone. Two scripts the
template loads from a CDN are left out: require.js (for widgets, which these notebooks do
not use) and MathJax (for LaTeX, which they do not contain); a report opened offline, or
from a machine without internet access, then renders without waiting on the network.
"""

from __future__ import annotations

import logging
from pathlib import Path

from tierlog.util.atomic_files import atomic_write

SUFFIX = ".html"
# nbconvert warns "Alternative text is missing on N image(s)" for every plot it converts
# (and then gives each a generic one): on every `notebook run` with a plot, a warning
# nobody reading or running the report can act on. Its exporter logs here instead, where
# only errors pass.
_EXPORTER_LOG = logging.getLogger(__name__ + ".nbconvert")
_EXPORTER_LOG.setLevel(logging.ERROR)
_TEMPLATE_NAME = "tierlog_report.html.j2"
_TEMPLATE = """\
{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
"""


def html_path(notebook: Path) -> Path:
    """Where the HTML copy of ``notebook`` goes: the same name with ``.html``."""
    return notebook.with_suffix(SUFFIX)


def render_html(notebook: Path) -> str:
    """The notebook (with its outputs) as one standalone HTML page."""
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        extra_loaders=[DictLoader({_TEMPLATE_NAME: _TEMPLATE})],
        template_file=_TEMPLATE_NAME,
        log=_EXPORTER_LOG,
    )
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    return str(body)


def write_html(notebook: Path) -> Path:
    """Write the HTML copy of ``notebook`` beside it (atomically: a reader never sees half
    a page) and return its path."""
    path = html_path(notebook)
    atomic_write(path, render_html(notebook).encode())
    return path
