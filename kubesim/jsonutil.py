"""JSON helpers: fast deep copies and (de)serialisation with orjson."""
from __future__ import annotations

import orjson

loads = orjson.loads


def dumps(obj) -> bytes:
    return orjson.dumps(obj)


def jcopy(v):
    """Deep copy of JSON-shaped data (dict/list/str/number/bool/None)."""
    if isinstance(v, dict | list):
        return orjson.loads(orjson.dumps(v))
    return v
