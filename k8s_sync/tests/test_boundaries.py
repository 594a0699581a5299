"""Dependencies run one way: no domain app in k8s_sync; only client.py imports kubernetes."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
FORBIDDEN = {"tenants", "jobs", "billing", "portal", "kubesim"}


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def _sources() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "tests" not in p.relative_to(PACKAGE).parts]


def test_k8s_sync_imports_no_domain_app_and_no_kubesim():
    offenders = {str(p.relative_to(PACKAGE)): sorted(_imported_roots(p) & FORBIDDEN)
                 for p in _sources()}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_client_imports_kubernetes():
    importers = sorted(str(p.relative_to(PACKAGE)) for p in _sources()
                       if "kubernetes" in _imported_roots(p))
    assert importers == ["client.py"]


def test_the_guard_sees_imports():
    assert {"kubernetes", "urllib3"} <= _imported_roots(PACKAGE / "client.py")
