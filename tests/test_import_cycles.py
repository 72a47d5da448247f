"""No import cycle inside ``tierlog/`` (issue 21, item 10), whether at run time, in a
function or under ``TYPE_CHECKING``, and counting what Python runs implicitly: importing
``a.b.c`` first runs ``a/b/__init__.py``. A cycle through a package's ``__init__`` makes
whether the broker imports at all depend on which module is imported first.

The layer rules themselves are import-linter's contracts (``[tool.importlinter]`` in
pyproject.toml, ``make lint``); this is the part of them import-linter cannot say.
"""

from __future__ import annotations

import grimp


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def import_cycles(package: str) -> list[frozenset[str]]:
    """The strongly connected groups of more than one module in ``package``'s imports."""
    graph = grimp.build_graph(package, cache_dir=None)
    edges: dict[str, set[str]] = {module: set() for module in graph.modules}
    for module in graph.modules:
        own = set(_ancestors(module))
        for imported in graph.find_modules_directly_imported_by(module):
            # Importing a module runs its packages' __init__ first; the importer's own
            # packages are already being run, which is no cycle.
            for target in (imported, *_ancestors(imported)):
                if target != module and target not in own:
                    edges[module].add(target)
    return _strongly_connected(edges)


def _strongly_connected(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    # Tarjan's algorithm, iteratively (the graph has a few hundred modules).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(frozenset(group))
    return found


def test_the_cycle_finder_sees_a_cycle_through_an_init() -> None:
    # a.x imports b.y; b/__init__ imports b.z, which imports a.x: a cycle only through
    # the __init__ Python runs implicitly.
    edges = {"a.x": {"b.y", "b"}, "b": {"b.z"}, "b.y": set(), "b.z": {"a.x", "a"}, "a": set()}
    assert _strongly_connected(edges) == [frozenset({"a.x", "b", "b.z"})]


def test_no_import_cycles_inside_tierlog() -> None:
    assert [sorted(cycle) for cycle in import_cycles("tierlog")] == []
