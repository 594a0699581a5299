"""Fast deep copy for JSON-shaped data (dict/list/scalars)."""
from __future__ import annotations


def jcopy(v):
    if isinstance(v, dict):
        return {k: jcopy(x) if isinstance(x, dict | list) else x for k, x in v.items()}
    if isinstance(v, list):
        return [jcopy(x) if isinstance(x, dict | list) else x for x in v]
    return v
