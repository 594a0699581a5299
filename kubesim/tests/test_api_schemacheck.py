"""The fast schema check (kubesim/schemacheck.py) never calls valid what jsonschema refuses,
and does prove ordinary objects valid (else every write would pay for jsonschema)."""
from __future__ import annotations

import random

import jsonschema
import pytest

from kubesim.resources import default_crds
from kubesim.schemacheck import compile_check
from kubesim.validation import compile_crd_schema, crd_object_errors

_WRONG = [None, True, 0, 1.5, "x", [], {}, [1], {"a": 1}]


def _schemas() -> list[tuple[str, dict]]:
    out = []
    for crd in default_crds():
        for version in crd["spec"]["versions"]:
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if schema:
                out.append((f"{crd['metadata']['name']}/{version['name']}", schema))
    return out


def _instance(schema: dict, rng: random.Random, depth: int = 0):
    """A value mostly of the schema's shape, with a wrong type, a missing required field,
    an out-of-range number or a string off its pattern or enum now and then."""
    if rng.random() < 0.04:
        return rng.choice(_WRONG)
    if "anyOf" in schema and rng.random() < 0.5:
        return _instance(rng.choice(schema["anyOf"]), rng, depth)
    if "enum" in schema:
        return rng.choice([*list(schema["enum"]), "not-a-member", 1])
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        out = {}
        props = schema.get("properties") or {}
        if depth < 6:
            for key, sub in props.items():
                if key in (schema.get("required") or []) or rng.random() < 0.3:
                    out[key] = _instance(sub, rng, depth + 1)
        if isinstance(schema.get("additionalProperties"), dict) and rng.random() < 0.5:
            out["extra"] = _instance(schema["additionalProperties"], rng, depth + 1)
        if out and rng.random() < 0.05:
            out.pop(rng.choice(list(out)))
        return out
    if kind == "array":
        sub = schema.get("items") or {}
        n = rng.choice([0, 1, 2, 3]) if depth < 6 else 0
        return [_instance(sub, rng, depth + 1) for _ in range(n)]
    if kind == "integer":
        return rng.choice([0, 1, 3, -1, 2**31, int(schema.get("minimum", 0)) - 1, 2.0])
    if kind == "number":
        return rng.choice([0, 0.5, -1.5, 7])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "string":
        if "pattern" in schema and rng.random() < 0.5:
            return rng.choice(["", "a", "A_b", "abc-def", "x" * 70, "1.2.3"])
        return rng.choice(["", "a", "abc-def", "x" * 300, "Some Text"])
    return rng.choice(_WRONG)


@pytest.mark.parametrize(("name", "schema"), _schemas(), ids=lambda x: x
                         if isinstance(x, str) else "")
def test_fast_check_is_never_laxer_than_jsonschema(name, schema):
    fast = compile_check(schema)
    assert fast is not None
    slow = jsonschema.Draft202012Validator(schema)
    rng = random.Random(name)
    proved = refused = 0
    for _ in range(300):
        obj = _instance(schema, rng)
        errors = list(slow.iter_errors(obj))
        if fast(obj):
            assert errors == [], (name, obj)
            proved += 1
        elif errors:
            refused += 1
    assert proved > 0 and refused > 0, (proved, refused)


def test_fast_check_leaves_what_it_does_not_know_to_jsonschema():
    assert compile_check({"$schema": "http://json-schema.org/draft-07/schema#"}) is None
    for schema in ({"oneOf": [{"type": "string"}]}, {"multipleOf": 2}, {"$ref": "#/a"},
                   {"type": "object", "properties": {"a": {"not": {}}}}):
        check = compile_check(schema)
        assert check is not None and check({"a": 1}) is False and check(2) is False
    check = compile_check({"type": "object", "properties": {"a": {"not": {}}}})
    assert check is not None and check({"b": 1})   # the unknown keyword is never reached
    closed = compile_check({"type": "object", "properties": {"a": {}},
                            "additionalProperties": False})
    assert closed is not None and closed({"a": 1}) and not closed({"a": 1, "b": 2})
    check = compile_check({"type": "integer", "enum": [1]})
    assert check is not None
    assert check(1) and not check(True) and not check(1.0)   # 1.0: jsonschema's to judge


def test_errors_are_worded_by_jsonschema_when_the_fast_check_fails():
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "required": ["size"],
        "properties": {"size": {"type": "integer", "minimum": 1},
                       "mode": {"type": "string", "enum": ["a", "b"]}}}}}
    compiled = compile_crd_schema(schema)
    assert crd_object_errors(compiled, {"metadata": {}, "spec": {"size": 2}}) == []
    assert crd_object_errors(compiled, {"spec": {"size": 0, "mode": "c"}}) == [
        {"field": "spec.mode", "reason": "FieldValueNotSupported",
         "message": 'Unsupported value: "c": supported values: "a", "b"'},
        {"field": "spec.size", "reason": "FieldValueInvalid",
         "message": "Invalid value: 0: 0 is less than the minimum of 1"}]
    assert crd_object_errors(compiled, {"spec": {}}) == [
        {"field": "spec.size", "reason": "FieldValueRequired", "message": "Required value"}]
