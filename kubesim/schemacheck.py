"""A compiled "is certainly valid" check of a CRD's structural schema.

``jsonschema`` (Draft 2020-12, no format checker) words the API server's 422 causes, but
walking a PyTorchJob's schema with it costs milliseconds per write. :func:`compile_check`
turns a schema into nested closures that answer one question fast: does ``jsonschema``
find no error at all? The answer is sound in one direction only, by construction:

* True: ``jsonschema`` would yield no error (the closures apply the same rules, or
  stricter ones: exact JSON types, enum members of the same type);
* False: maybe invalid; the caller asks ``jsonschema`` for the errors (and their words).

A keyword the closures do not know (``$ref``, ``oneOf``, ``multipleOf``, ...) compiles
to "never certain", so any schema stays correct, only slower. ``format``, annotations
(``description``, ``default``, ...), ``nullable`` and the ``x-kubernetes-*`` extensions
assert nothing under ``jsonschema`` without a format checker, so they are skipped here too.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"description", "default", "title", "example", "examples",
                          "format", "nullable", "readOnly", "writeOnly", "deprecated",
                          "$comment"})
#: exact JSON types per schema type (stricter than jsonschema's: no float for "integer")
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "integer": (int,),
    "number": (int, float), "boolean": (bool,), "null": (type(None),),
}
#: the Python types of decoded JSON; anything else (a subclass, a tuple) is left to jsonschema
_JSON = frozenset({dict, list, str, int, float, bool, type(None)})


def _never(_: Any) -> bool:
    return False


def _always(_: Any) -> bool:
    return True


def compile_check(schema: Any) -> Check | None:
    """The fast check of a whole CRD schema, or None when the schema picks its own
    dialect (``$schema``: the validator class would differ)."""
    if isinstance(schema, dict) and "$schema" in schema:
        return None
    return _compile(schema)


def _compile(s: Any) -> Check:
    if s is True:
        return _always
    if not isinstance(s, dict):
        return _never
    scalar: list[Check] = []
    props: dict[str, Check] | None = None
    addl: Check | None = None
    addl_false = False
    required: tuple[str, ...] = ()
    items: Check | None = None
    types: tuple[type, ...] | None = None
    for key, value in s.items():
        if key in _ANNOTATIONS or key.startswith("x-kubernetes-"):
            continue
        if key == "type":
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or any(n not in _TYPES for n in names):
                return _never
            types = tuple(t for n in names for t in _TYPES[n])
        elif key == "properties" and isinstance(value, dict):
            props = {k: _compile(sub) for k, sub in value.items()}
        elif key == "additionalProperties" and value is False:
            addl_false = True
        elif key == "additionalProperties" and isinstance(value, dict | bool):
            addl = _compile(value)
        elif key == "required" and isinstance(value, list) and all(
                isinstance(r, str) for r in value):
            required = tuple(value)
        elif key == "items" and isinstance(value, dict | bool):
            items = _compile(value)
        elif key == "anyOf" and isinstance(value, list) and value:
            scalar.append(_any_of([_compile(sub) for sub in value]))
        elif key == "enum" and isinstance(value, list):
            scalar.append(_enum(value))
        elif key in _BOUNDS and type(value) in (int, float):
            scalar.append(_BOUNDS[key](value))
        elif key in _SIZES and type(value) is int:
            scalar.append(_SIZES[key](value))
        elif key == "pattern" and isinstance(value, str):
            scalar.append(_pattern(value))
        else:
            return _never
    return _node(types, props, addl, addl_false, required, items, tuple(scalar))


def _node(types: tuple[type, ...] | None, props: dict[str, Check] | None,
          addl: Check | None, addl_false: bool, required: tuple[str, ...],
          items: Check | None, scalar: tuple[Check, ...]) -> Check:
    objectish = props is not None or addl is not None or addl_false or required
    known = props or {}

    def check(v: Any) -> bool:
        tv = type(v)
        if tv not in _JSON or (types is not None and tv not in types):
            return False
        if tv is dict:
            if objectish:
                for r in required:
                    if r not in v:
                        return False
                for k, x in v.items():
                    sub = known.get(k)
                    if sub is not None:
                        if not sub(x):
                            return False
                    elif addl_false or (addl is not None and not addl(x)):
                        return False
        elif tv is list and items is not None:
            for x in v:
                if not items(x):
                    return False
        return all(c(v) for c in scalar)
    return check


def _any_of(subs: list[Check]) -> Check:
    def check(v: Any) -> bool:
        return any(sub(v) for sub in subs)
    return check


def _enum(values: list) -> Check:
    """Members compared with their exact type (jsonschema's equal() keeps True apart from
    1); anything else (objects, lists, floats against ints) is left to jsonschema."""
    members = frozenset((type(x), x) for x in values if type(x) in (str, int, bool)
                        or x is None)

    def check(v: Any) -> bool:
        return type(v) in (str, int, bool, type(None)) and (type(v), v) in members
    return check


def _minimum(bound: float) -> Check:
    return lambda v: type(v) not in (int, float) or v >= bound


def _maximum(bound: float) -> Check:
    return lambda v: type(v) not in (int, float) or v <= bound


_BOUNDS: dict[str, Callable[[float], Check]] = {"minimum": _minimum, "maximum": _maximum}


def _size(kind: type[str | list | dict], at_least: bool) -> Callable[[int], Check]:
    def make(n: int) -> Check:
        def check(v: Any) -> bool:
            return type(v) is not kind or (len(v) >= n if at_least else len(v) <= n)
        return check
    return make


_SIZES: dict[str, Callable[[int], Check]] = {
    "minLength": _size(str, True), "maxLength": _size(str, False),
    "minItems": _size(list, True), "maxItems": _size(list, False),
    "minProperties": _size(dict, True), "maxProperties": _size(dict, False),
}


def _pattern(pattern: str) -> Check:
    try:
        search = re.compile(pattern).search
    except re.error:
        return _never

    def check(v: Any) -> bool:
        return type(v) is not str or search(v) is not None
    return check
