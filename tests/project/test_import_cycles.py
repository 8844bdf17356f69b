"""No import cycles among the package's modules, counting every import the source holds.

lint-imports checks cycles between sibling packages and leaves out imports under `if TYPE_CHECKING:`;
this reads every import of every module (at the top, under `TYPE_CHECKING`, inside functions) and
checks the graph of module -> module, so that each module can be read, typed and imported on its own.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "autotune"


def module_files(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of `package` under `root`, by dotted name (a package by its own name, for its `__init__`)."""
    modules: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module a `from ... import` reads from, with a relative one resolved against `module`."""
    if node.level == 0:
        return node.module or ""
    # `from . import x` in a package's __init__ is relative to the package itself, elsewhere to the module's package.
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """`name`, or the longest of its prefixes that is a module of the package; None outside it."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imported(module: str, source: str, modules: Mapping[str, Path]) -> set[str]:
    """The package's modules that `module` imports anywhere in `source`.

    `import a.b.c` is an edge to `a.b.c`; `from a.b import name` is an edge to `a.b.name` where that is a
    module, else to `a.b` (its `__init__`, which must run to give `name`).
    """
    is_package = modules[module].name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(filter(None, (_known(alias.name, modules) for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, is_package, node)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target) if target in modules else found.update(filter(None, [_known(base, modules)]))
    found.discard(module)
    return found


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """Each module of `package` under `root` with the package's modules it imports."""
    modules = module_files(root, package)
    return {name: imported(name, path.read_text(), modules) for name, path in modules.items()}


def _components(graph: Mapping[str, set[str]]) -> Iterator[list[str]]:
    """The strongly connected components of `graph` (Tarjan's algorithm, iterative: the package is deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                yield sorted(component)


def _shortest_cycle(graph: Mapping[str, set[str]], members: list[str]) -> list[str]:
    """The shortest cycle through the first of `members` inside them, as the modules in order, back to the first."""
    first, inside = members[0], set(members)
    came: dict[str, str] = {}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for step in sorted(graph[node] & inside):
                if step == first:
                    path = [node]
                    while path[-1] != first:
                        path.append(came[path[-1]])
                    return [first, *reversed(path[:-1]), first]
                if step not in came:
                    came[step] = node
                    following.append(step)
        frontier = following
    return members


def cycles(graph: Mapping[str, set[str]]) -> list[str]:
    """One cycle of each knot of modules that import each other, as 'a -> b -> a'."""
    return [" -> ".join(_shortest_cycle(graph, c)) for c in _components(graph) if len(c) > 1]


def test_no_module_of_the_package_is_part_of_an_import_cycle() -> None:
    found = cycles(import_graph(ROOT))
    assert not found, "import cycles (import from the module that defines the name):\n" + "\n".join(found)


def _package(tmp_path: Path, files: Mapping[str, str]) -> dict[str, set[str]]:
    for name, source in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return import_graph(tmp_path, "pkg")


def test_every_kind_of_import_is_an_edge_to_the_module_it_names(tmp_path: Path) -> None:
    graph = _package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg._a import A\nfrom . import sub\n",
            "pkg/_a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import B\nA = 1\n",
            "pkg/sub/__init__.py": "from ._b import B\n",
            "pkg/sub/_b.py": "def f():\n    import pkg.sub._c\n    from .. import _a\nB = 2\n",
            "pkg/sub/_c.py": "from pkg.sub import B\nfrom os import path\n",
        },
    )
    assert graph == {
        "pkg": {"pkg._a", "pkg.sub"},
        "pkg._a": {"pkg.sub"},
        "pkg.sub": {"pkg.sub._b"},
        "pkg.sub._b": {"pkg.sub._c", "pkg._a"},
        "pkg.sub._c": {"pkg.sub"},
    }


def test_a_cycle_is_named_module_by_module_including_a_package_and_its_own_submodule(tmp_path: Path) -> None:
    graph = _package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg._a import A\n",
            "pkg/_a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg._b import B\nA = 1\n",
            "pkg/_b.py": "from pkg import A\nB = 2\n",
            "pkg/_c.py": "from pkg._a import A\n",
        },
    )
    assert cycles(graph) == ["pkg -> pkg._a -> pkg._b -> pkg"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
