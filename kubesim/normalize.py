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

# Node kinds: ("model", fields) fields = {json: (node, required)}; ("list", n); ("map", n);
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
        return ("list", _node(typing.get_args(ann)[0]))
    if origin in (dict, typing.Dict):  # noqa: UP006
        return ("map", _node(typing.get_args(ann)[1]))
    if ann is str:
        return ("str",)
    if ann is bool:
        return ("bool",)
    if ann is int:
        return ("int",)
    if ann is float:
        return ("float",)
    if ann is _dt.datetime:
        return ("str",)
    if isinstance(ann, type) and hasattr(ann, "model_fields"):
        return model_node(ann)
    return ("any",)


def model_node(cls) -> tuple:
    if cls in _cache:
        return _cache[cls]
    fields: dict[str, tuple] = {}
    node = ("model", fields)
    _cache[cls] = node
    for name, f in cls.model_fields.items():
        json_name = f.serialization_alias or name
        fields[json_name] = (_node(f.annotation), f.is_required())
    return node


def _zero(node: tuple):
    kind = node[0]
    if kind == "model":
        return complete(node, {}, "")
    return {"str": "", "int": 0, "float": 0.0, "bool": False, "list": [], "map": {}}.get(kind)


def _qty(value, path: str):
    try:
        return canonical(value)
    except QuantityError as e:
        raise ApiError(400, "BadRequest", f"{path}: {e}") from None


def complete(node: tuple, value: Any, path: str, qctx: bool = False) -> Any:
    kind = node[0]
    if kind == "model":
        if not isinstance(value, dict):
            raise ApiError(400, "BadRequest",
                           f"{path or 'body'}: expected an object, got {type(value).__name__}")
        fields = node[1]
        for key in [k for k in value if k not in fields]:
            del value[key]
        for key, (sub, required) in fields.items():
            if key in value:
                v = value[key]
                if v is None:
                    if required:
                        value[key] = _zero(sub)
                    else:
                        del value[key]
                    continue
                value[key] = complete(sub, v, f"{path}.{key}" if path else key,
                                      key in QUANTITY_MAPS or key in QUANTITY_SCALARS)
            elif required:
                value[key] = _zero(sub)
        return value
    if kind == "list":
        if not isinstance(value, list):
            raise ApiError(400, "BadRequest", f"{path}: expected a list")
        sub = node[1]
        return [complete(sub, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if kind == "map":
        if not isinstance(value, dict):
            raise ApiError(400, "BadRequest", f"{path}: expected a map")
        sub = node[1]
        for k in list(value):
            value[k] = complete(sub, value[k], f"{path}[{k}]", qctx)
        return value
    if kind == "str":
        if qctx:
            return _qty(value, path)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return str(value)
        return value
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ApiError(400, "BadRequest", f"{path}: expected an integer, got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ApiError(400, "BadRequest", f"{path}: expected a boolean, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        raise ApiError(400, "BadRequest", f"{path}: expected a number, got {value!r}")
    return value


def normalizer(model_name: str):
    """A function obj -> obj (in place) for the client model `model_name`."""
    from kubernetes.client import models
    node = model_node(getattr(models, model_name))

    def run(obj: dict) -> dict:
        return complete(node, obj, "")
    return run
