"""Structural-schema pruning and defaulting for custom resources, as the API server
does before validation: unknown fields are dropped (unless the schema preserves them) and
missing fields with a `default` are filled in."""
from __future__ import annotations

from .jsonutil import jcopy

_META = ("apiVersion", "kind", "metadata")


def prune_and_default(schema: dict | None, obj: dict, dropped: list | None = None) -> dict:
    """In place. With a `dropped` list, pruned fields are recorded there as (chain, key)
    links (see normalize.chain_path)."""
    if schema:
        _walk(schema, obj, True, dropped, None)
    return obj


def declares(schema: dict | None, key: str) -> bool:
    """Whether the schema declares the top-level field `key` (see prune_and_default_key)."""
    return isinstance(((schema or {}).get("properties") or {}).get(key), dict)


def prune_and_default_key(schema: dict, obj: dict, key: str,
                          dropped: list | None = None) -> dict:
    """prune_and_default of one declared top-level field present in `obj`, as the whole
    object's walk does it (a status write: the rest of the object is the stored one, pruned
    and defaulted already)."""
    _walk(schema["properties"][key], obj[key], False, dropped, (None, key))
    return obj


def _walk(schema, value, root: bool, dropped: list | None, chain: tuple | None) -> None:
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
                    _walk(props[key], value[key], False, dropped, (chain, key))
            elif keep_meta and key in _META:
                continue
            elif isinstance(addl, dict):
                _walk(addl, value[key], False, dropped, (chain, key))
            elif not (addl is True or preserve):
                if dropped is not None and value[key] is not None:
                    dropped.append((chain, key))
                del value[key]
        for key, sub in props.items():
            if key not in value and isinstance(sub, dict) and "default" in sub:
                value[key] = jcopy(sub["default"])
                _walk(sub, value[key], False, None, None)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(value):
                _walk(items, v, False, dropped, (chain, i))
