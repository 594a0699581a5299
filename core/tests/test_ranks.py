"""Imports run one way, from the ground up (docs/architecture.md, "Ranks").

Every non-test, non-migration module of the apps is parsed with ``ast``; every import (at
the top of the module or deferred inside a function) of a Trainyard app is mapped to that
app, and an app may import only apps at its own rank or below. ``kubesim`` imports none
of the apps and none of them imports it (it is started as a process).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Lowest first: an app may import the apps to its left, never those to its right.
RANKS = ["core", "k8s_sync", "tenants", "jobs", "billing", "portal"]
# Imports none of RANKS, and none of RANKS imports it.
APART = "kubesim"

# Upward imports that remain, as (importing module, imported module), each with its
# reason. Empty: since stored texts, exceptions and the generic API helpers live in core
# and the tenant-scoped API base in tenants.api.base, nothing reaches up. The list may
# only shrink: an entry that no longer matches an import fails the test too.
ALLOWED: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute name of a ``from`` import (relative ones resolved against ``module``)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(source: str, module: str, *, is_package: bool = False) -> Iterator[str]:
    """Every module ``source`` (the text of ``module``) imports, anywhere in it."""
    for node in ast.walk(ast.parse(source, module)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield _resolve(module, node, is_package)


def _rank(app: str) -> int | None:
    return RANKS.index(app) if app in RANKS else None


def violations(source: str, module: str, *, is_package: bool = False) -> list[tuple[str, str]]:
    """The imports of ``module`` that break the ranks, as (module, imported module)."""
    app = module.split(".")[0]
    found = []
    for imported in imports_of(source, module, is_package=is_package):
        target = imported.split(".")[0]
        if target == app:
            continue
        if APART in (app, target) and (app in RANKS or target in RANKS):
            found.append((module, imported))
            continue
        mine, theirs = _rank(app), _rank(target)
        if mine is not None and theirs is not None and theirs > mine:
            found.append((module, imported))
    return found


def _sources() -> Iterator[Path]:
    for app in [*RANKS, APART]:
        for path in sorted((ROOT / app).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "tests" in parts or "migrations" in parts:
                continue
            yield path


def _all_violations() -> list[tuple[str, str]]:
    found = []
    for path in _sources():
        found += violations(path.read_text(), _module_name(path),
                            is_package=path.name == "__init__.py")
    return found


def test_no_app_imports_a_higher_one():
    unexpected = sorted(set(_all_violations()) - set(ALLOWED))
    assert unexpected == [], "upward imports (docs/architecture.md, 'Ranks')"


def test_every_allowed_upward_import_is_still_needed():
    stale = sorted(set(ALLOWED) - set(_all_violations()))
    assert stale == [], "remove these from ALLOWED: the import is gone"


def test_core_imports_no_app():
    imported = {
        name.split(".")[0]
        for path in _sources() if _module_name(path).split(".")[0] == "core"
        for name in imports_of(path.read_text(), _module_name(path))
    }
    assert imported & {*RANKS[1:], APART} == set()


def test_the_checker_sees_every_app_module():
    modules = {_module_name(p) for p in _sources()}
    assert {"core.texts", "tenants.api.base", "jobs.selectors", "billing.services",
            "portal.settings", "k8s_sync.client", "kubesim.server"} <= modules


def test_the_checker_catches_an_upward_import():
    source = "from billing.models import Invoice\n"
    assert violations(source, "tenants.services.quota") == [
        ("tenants.services.quota", "billing.models")]


def test_the_checker_catches_deferred_and_plain_imports():
    source = (
        "import k8s_sync.client\n"
        "def f():\n"
        "    import portal.dashboards\n"
        "    from jobs import tasks\n"
        "    return tasks\n"
    )
    assert violations(source, "tenants.tasks") == [
        ("tenants.tasks", "portal.dashboards"), ("tenants.tasks", "jobs")]


def test_the_checker_allows_downward_and_own_imports():
    source = "from core.texts import message\nfrom tenants.models import Tenant\n" \
             "from . import selectors\nfrom .models import Job\n"
    assert violations(source, "jobs.services") == []
    assert violations("from tenants.models import Tenant\n", "core.texts") == [
        ("core.texts", "tenants.models")]


def test_the_checker_keeps_kubesim_apart():
    assert violations("from kubesim.testing import running\n", "portal.launcher") == [
        ("portal.launcher", "kubesim.testing")]
    assert violations("from core.texts import render\n", "kubesim.server") == [
        ("kubesim.server", "core.texts")]


def test_relative_imports_resolve_inside_the_package():
    node = ast.parse("from ..models import Job\n").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve("jobs.admission.engine", node, False) == "jobs.models"
    pkg = ast.parse("from .engine import run\n").body[0]
    assert isinstance(pkg, ast.ImportFrom)
    assert _resolve("jobs.admission", pkg, True) == "jobs.admission.engine"
