"""tierlog.protocol stays sans-I/O and at the bottom of the dependency graph (DESIGN.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tierlog.protocol

PACKAGE = Path(tierlog.protocol.__file__).parent
MODULES = sorted(PACKAGE.glob("*.py"))
FORBIDDEN = ("asyncio", "socket", "selectors", "fsspec", "kazoo", "tierlog.local",
             "tierlog.remote", "tierlog.broker", "tierlog.client")  # fmt: skip


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_io_or_upward_imports(path: Path) -> None:
    bad = {n for n in _imports(path) for f in FORBIDDEN if n == f or n.startswith(f + ".")}
    assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_module_docstring_and_size(path: Path) -> None:
    source = path.read_text()
    assert ast.get_docstring(ast.parse(source)), f"{path.name} has no module docstring"
    assert source.count("\n") <= 600


def test_public_api_is_exported() -> None:
    for name in tierlog.protocol.__all__:
        assert hasattr(tierlog.protocol, name), name
