"""Structural-schema pruning and defaulting for custom resources, as the API server
does before validation: unknown fields are dropped (unless the schema preserves them) and
missing fields with a `default` are filled in."""
from __future__ import annotations

from .jsonutil import jcopy

_META = ("apiVersion", "kind", "metadata")


def prune_and_default(schema: dict | None, obj: dict) -> dict:
    if schema:
        _walk(schema, obj, root=True)
    return obj


def _walk(schema, value, root: bool = False) -> None:
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
        keep_meta = root or schema.get("x-kubernetes-embedded-resource", False)
        for key in list(value):
            if key in props:
                if not (root and key == "metadata"):   # ObjectMeta is the server's business
                    _walk(props[key], value[key])
            elif keep_meta and key in _META:
                continue
            elif isinstance(addl, dict):
                _walk(addl, value[key])
            elif not (addl is True or preserve):
                del value[key]
        for key, sub in props.items():
            if key not in value and isinstance(sub, dict) and "default" in sub:
                value[key] = jcopy(sub["default"])
                _walk(sub, value[key])
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for v in value:
                _walk(items, v)


def dropped_fields(before, after, path: str = "") -> list[str]:
    """Paths of the map keys present in `before` but gone from `after`."""
    out: list[str] = []
    if isinstance(before, dict) and isinstance(after, dict):
        for k, v in before.items():
            p = f"{path}.{k}" if path else k
            if k not in after:
                if v is not None:   # explicit nulls are not unknown fields
                    out.append(p)
            else:
                out.extend(dropped_fields(v, after[k], p))
    elif isinstance(before, list) and isinstance(after, list):
        for i, (a, b) in enumerate(zip(before, after, strict=False)):
            out.extend(dropped_fields(a, b, f"{path}[{i}]"))
    return out
