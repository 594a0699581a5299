"""No import cycles between the modules of one app (docs/architecture.md, "Ranks").

The rank test (``test_ranks.py``) keeps imports between apps one way; this one keeps them
one way inside each app. Every non-test, non-migration module is parsed with ``ast``; every
import of a module of the same app, at the top or deferred inside a function, is an edge
(``from jobs import selectors`` is an edge to ``jobs.selectors`` when that is a module,
else to ``jobs``). Importing a submodule also runs its package's ``__init__``; that
implicit edge is not counted, so a package's ``__init__`` may re-export its submodules;
nor is an import under ``if TYPE_CHECKING:`` (for annotations only, never run).
A strongly connected component of more than one module is a cycle, and fails the test
unless :data:`ALLOWED` names it with its reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

from core.tests.test_ranks import APART, RANKS, ROOT, _module_name, _resolve

# Cycles that remain, each as the sorted tuple of its modules, with its reason. Empty:
# jobs enqueues its tasks by name (jobs/enqueue.py), and so do the tenants services. The
# list may only shrink: an entry that no longer matches a cycle fails the test too.
ALLOWED: dict[tuple[str, ...], str] = {}


def _app_modules(app: str) -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / app).rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if "tests" in parts or "migrations" in parts:
            continue
        found[_module_name(path)] = path
    return found


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None) if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if _type_checking(node):
            stack.extend(getattr(node, "orelse", []))
            continue
        stack.extend(ast.iter_child_nodes(node))


def edges_of(source: str, module: str, modules: Iterable[str], *,
             is_package: bool = False) -> set[str]:
    """The modules of ``modules`` that ``source`` (the text of ``module``) imports."""
    known = set(modules)
    found: set[str] = set()

    def add(name: str) -> None:
        # the longest known module the name starts with (``a.b.c`` of ``a.b`` names ``a.b``)
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)

    for node in _runtime_nodes(ast.parse(source, module)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node, is_package)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in known else base)
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        item = stack.pop()
                        on_stack.discard(item)
                        component.append(item)
                        if item == node:
                            break
                    out.append(sorted(component))
    return out


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The import cycles of ``graph``: its components of more than one module."""
    return sorted(tuple(c) for c in strongly_connected(graph) if len(c) > 1)


def app_graph(app: str) -> dict[str, set[str]]:
    """Each module of ``app`` -> the modules of ``app`` it imports (itself left out)."""
    modules = _app_modules(app)
    return {name: edges_of(path.read_text(), name, modules,
                           is_package=path.name == "__init__.py") - {name}
            for name, path in modules.items()}


def _all_cycles() -> list[tuple[str, ...]]:
    return [c for app in [*RANKS, APART] for c in cycles(app_graph(app))]


def test_no_import_cycle_inside_an_app():
    unexpected = sorted(set(_all_cycles()) - set(ALLOWED))
    assert unexpected == [], "import cycles inside an app (docs/architecture.md, 'Ranks')"


def test_every_allowed_cycle_is_still_there():
    stale = sorted(set(ALLOWED) - set(_all_cycles()))
    assert stale == [], "remove these from ALLOWED: the cycle is gone"


def test_the_checker_finds_a_cycle_held_by_a_deferred_import():
    modules = ["jobs", "jobs.services", "jobs.tasks", "jobs.models"]
    graph = {
        "jobs.services": edges_of("from jobs.models import Job\n"
                                  "def kick():\n    from jobs.tasks import cycle\n",
                                  "jobs.services", modules),
        "jobs.tasks": edges_of("from jobs import services\n", "jobs.tasks", modules),
        "jobs.models": set(),
    }
    assert graph["jobs.services"] == {"jobs.models", "jobs.tasks"}
    assert graph["jobs.tasks"] == {"jobs.services"}
    assert cycles(graph) == [("jobs.services", "jobs.tasks")]


def test_the_checker_resolves_relative_and_package_imports():
    modules = ["jobs", "jobs.selectors", "jobs.selectors.spec", "jobs.models"]
    assert edges_of("from .spec import job_spec\nfrom ..models import Job\n",
                    "jobs.selectors", modules, is_package=True) == {
        "jobs.selectors.spec", "jobs.models"}
    assert edges_of("from jobs import selectors\nimport jobs.models\n", "jobs.tasks",
                    modules) == {"jobs.selectors", "jobs.models"}
    assert cycles({"a": {"b"}, "b": set(), "c": {"a"}}) == []


def test_imports_for_annotations_only_are_no_edge():
    modules = ["kubesim", "kubesim.store", "kubesim.policy"]
    source = ("from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from .store import Store\n"
              "else:\n    from . import policy\n")
    assert edges_of(source, "kubesim.watch", modules) == {"kubesim.policy"}
