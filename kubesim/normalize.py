"""Make built-in objects look like the real API server stores them.

A schema tree is derived once per kind from the official client's pydantic models
(field names, required fields, scalar types). Each write walks the object once:
unknown fields are pruned (the server's default fieldValidation=Warn drops them),
numbers in string fields become strings, quantities become canonical strings
("0.5" -> "500m", 2 -> "2", "1024Mi" -> "1Gi"), and required fields that are
missing get their zero value, so every object round-trips through the client's
strict models.
"""
from __future__ import annotations

import datetime as _dt
import types
import typing
from typing import Any

from .errors import ApiError
from .quantity import QuantityError, canonical

QUANTITY_MAPS = frozenset({
    "limits", "requests", "capacity", "allocatable", "hard", "used", "default",
    "defaultRequest", "max", "min", "maxLimitRequestRatio", "overhead",
    "allocatedResources",
})
QUANTITY_SCALARS = frozenset({"sizeLimit"})
MICRO_TIMES = frozenset({"eventTime", "lastObservedTime", "renewTime", "acquireTime"})


def _time(value, micro: bool) -> str:
    """metav1.Time as the server writes it: RFC3339 in UTC, seconds (MicroTime: micros)."""
    if not isinstance(value, str):
        raise _FieldError([], f"expected an RFC3339 time, got {value!r}")
    if len(value) == (27 if micro else 20) and value[-1] == "Z" and value[10] == "T":
        return value   # already canonical (the common case)
    try:
        t = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _FieldError([], f"invalid time {value!r}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    t = t.astimezone(_dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")

# Node kinds: ("model", {json: (node, required, quantity, fast)}, [required names]);
# ("list", n, fast); ("map", n, fast);
# ("str",); ("int",); ("float",); ("bool",); ("any",)
_cache: dict[type, tuple] = {}


def _strip(ann):
    """Unwrap Optional/Annotated; return (origin, args, base)."""
    while True:
        origin = typing.get_origin(ann)
        if origin is typing.Annotated:
            ann = typing.get_args(ann)[0]
            continue
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            if len(args) == 1:
                ann = args[0]
                continue
            return ("any",)
        return ann


def _node(ann) -> tuple:
    ann = _strip(ann)
    if isinstance(ann, tuple):
        return ann
    origin = typing.get_origin(ann)
    if origin in (list, typing.List):  # noqa: UP006
        sub = _node(typing.get_args(ann)[0])
        return ("list", sub, _fast(sub))
    if origin in (dict, typing.Dict):  # noqa: UP006
        sub = _node(typing.get_args(ann)[1])
        return ("map", sub, _fast(sub))
    if ann is str:
        return ("str",)
    if ann is bool:
        return ("bool",)
    if ann is int:
        return ("int",)
    if ann is float:
        return ("float",)
    if ann is _dt.datetime:
        return ("time",)
    if isinstance(ann, type) and hasattr(ann, "model_fields"):
        return model_node(ann)
    return ("any",)


def _fast(node: tuple) -> type | None:
    """The Python type a value of `node` keeps as it is (outside a quantity context):
    complete() skips it without a call."""
    return _FAST.get(node[0])


_FAST: dict[str, type] = {"str": str, "int": int, "bool": bool, "float": float}


def model_node(cls) -> tuple:
    if cls in _cache:
        return _cache[cls]
    fields: dict[str, tuple] = {}
    required: list[str] = []
    node = ("model", fields, required)
    _cache[cls] = node
    for name, f in cls.model_fields.items():
        json_name = f.serialization_alias or name
        # the third slot is a flag for the child: a quantity map/scalar, or a MicroTime;
        # the fourth the type kept as it is (_fast), None under the flag
        child = _node(f.annotation)
        flag = (json_name in QUANTITY_MAPS or json_name in QUANTITY_SCALARS
                or json_name in MICRO_TIMES)
        fields[json_name] = (child, f.is_required(), flag, None if flag else _fast(child))
        if f.is_required():
            required.append(json_name)
    return node


class _FieldError(Exception):
    """A type error at a field; the path is assembled on the way up (only on errors)."""

    def __init__(self, path: list[str], message: str):
        self.path, self.message = path, message


def _zero(node: tuple):
    kind = node[0]
    if kind == "model":
        return complete(node, {})
    return {"str": "", "int": 0, "float": 0.0, "bool": False, "list": [], "map": {},
            "time": "1970-01-01T00:00:00Z"}.get(kind)


def complete(node: tuple, value: Any, qctx: bool = False, dropped: list | None = None,
             chain: tuple | None = None, only: tuple[str, ...] | None = None) -> Any:
    """Normalise `value` in place. With a `dropped` list, the paths of pruned unknown fields
    are collected there (as (chain, key) links; see chain_path). `only`: of an object,
    normalise these keys alone (the rest is known to be normalised already)."""
    kind = node[0]
    if kind == "model":
        if not isinstance(value, dict):
            raise _FieldError([], f"expected an object, got {type(value).__name__}")
        fields = node[1]
        for key in list(value) if only is None else [k for k in only if k in value]:
            spec = fields.get(key)
            if spec is None:
                if dropped is not None and value[key] is not None:
                    dropped.append((chain, key))
                del value[key]
                continue
            v = value[key]
            if v is None:
                if spec[1]:
                    value[key] = _zero(spec[0])
                else:
                    del value[key]
                continue
            if type(v) is spec[3]:
                continue
            try:
                value[key] = complete(spec[0], v, spec[2], dropped,
                                      None if dropped is None else (chain, key))
            except _FieldError as e:
                e.path.append("." + key)
                raise
        for key in node[2]:
            if key not in value:
                value[key] = _zero(fields[key][0])
        return value
    if kind == "list":
        if not isinstance(value, list):
            raise _FieldError([], "expected a list")
        sub, fast = node[1], node[2]
        for i, v in enumerate(value):
            if type(v) is fast:
                continue
            try:
                value[i] = complete(sub, v, False, dropped,
                                    None if dropped is None else (chain, i))
            except _FieldError as e:
                e.path.append(f"[{i}]")
                raise
        return value
    if kind == "map":
        if not isinstance(value, dict):
            raise _FieldError([], "expected a map")
        sub, fast = node[1], None if qctx else node[2]
        for k, v in value.items():
            if type(v) is fast:
                continue
            try:
                value[k] = complete(sub, v, qctx, dropped,
                                    None if dropped is None else (chain, k))
            except _FieldError as e:
                e.path.append(f"[{k}]")
                raise
        return value
    if kind == "str":
        if qctx:
            try:
                return canonical(value)
            except QuantityError as e:
                raise _FieldError([], str(e)) from None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return str(value)
        return value
    if kind == "time":
        return _time(value, qctx)
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise _FieldError([], f"expected an integer, got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise _FieldError([], f"expected a boolean, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        raise _FieldError([], f"expected a number, got {value!r}")
    return value


def normalizer(model_name: str):
    """A function (obj, dropped=None, only=None) -> obj (in place) for the client model
    `model_name`; `only`: normalise these top-level keys alone (a status write)."""
    # deferred: the client's ~700 model classes load when a registry is built, not
    # whenever a kubesim module is imported (the pytest plugin, the benchmarks)
    from kubernetes.client import models

    node = model_node(getattr(models, model_name))

    def run(obj: dict, dropped: list | None = None, only: tuple[str, ...] | None = None
            ) -> dict:
        try:
            return complete(node, obj, False, dropped, None, only)
        except _FieldError as e:
            path = "".join(reversed(e.path)).lstrip(".") or "body"
            raise ApiError(400, "BadRequest", f"{path}: {e.message}") from None
    return run


def chain_path(chain: tuple | None, key) -> str:
    """'spec.containers[0].name' from the (parent, key) links complete() records."""
    parts = [key]
    while chain is not None:
        chain, k = chain
        parts.append(k)
    out = ""
    for p in reversed(parts):
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out
