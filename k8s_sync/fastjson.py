"""JSON as the cluster speaks it, decoded and encoded with orjson (about 2x the standard
library's speed to decode a watch line, 5x to encode a row's ``raw``: measured in
``bench/observe_scale.py``, issue 28).

The same values as the standard library's ``json`` for what the Kubernetes API sends
(its integers are int64): what orjson refuses and ``json`` accepts (``NaN``, dict keys
that are not strings, integers past 64 bits when encoding) falls back to ``json``, so
nothing that decoded or encoded before fails now. Two differences outside the API's
JSON: orjson decodes an integer past 64 bits as a float, and encodes ``NaN`` as ``null``.
Used by the client (responses, watch lines) and the observers (the JSON columns they
write).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["dumps", "dumps_bytes", "loads"]


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON; raises ``ValueError`` (a ``json.JSONDecodeError``) when it is not."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # orjson refuses NaN/Infinity, which json reads (or raises its own
        # JSONDecodeError, as before).
        return json.loads(bytes(data) if isinstance(data, memoryview) else data)


def dumps_bytes(value: Any) -> bytes:
    """Compact UTF-8 JSON of ``value`` (plain JSON types; a stdlib fallback for the rest
    orjson refuses: integers past 64 bits, keys that are not strings)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value).encode()


def dumps(value: Any) -> str:
    """:func:`dumps_bytes` as text."""
    return dumps_bytes(value).decode()
