"""Unit tests of the pure pieces: quantities, selectors, patches, clock, managedFields."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubesim.apply import field_set, from_fields_v1, to_fields_v1
from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.patch import json_patch, merge_patch, strategic_merge
from kubesim.quantity import QuantityError, canonical, parse_quantity
from kubesim.selectors import parse_field_selector, parse_label_selector


@pytest.mark.parametrize("given,expected", [
    ("1", "1"), (2, "2"), (0.5, "500m"), ("1024Mi", "1Gi"), ("1000m", "1"), ("1.5", "1500m"),
    ("1000", "1k"), ("1536Mi", "1536Mi"), ("1.5Gi", "1536Mi"), ("0", "0"), ("100m", "100m"),
    ("1e3", "1e3"), ("128974848", "128974848"), ("2Ti", "2Ti"), ("0.1", "100m"),
])
def test_canonical_quantities(given, expected):
    assert canonical(given) == expected


def test_quantity_errors_and_values():
    assert parse_quantity("1Ki") == 1024
    assert parse_quantity("250m") * 4 == 1
    for bad in ("1.2.3", "abc", "1 Gi", True):
        with pytest.raises(QuantityError):
            parse_quantity(bad)


def _obj(labels=None, **fields):
    return {"metadata": {"name": "n", "labels": labels or {}}, **fields}


def test_label_selector_operators():
    o = _obj({"a": "1", "b": "2"})
    cases = {"a=1": True, "a==1": True, "a!=1": False, "a in (1,3)": True, "a notin (1)": False,
             "c notin (1)": True, "a": True, "!a": False, "!c": True, "a=1,b=3": False,
             "a in (1), b in (2)": True}
    for sel, expected in cases.items():
        assert parse_label_selector(sel)(o) is expected, sel
    with pytest.raises(ApiError):
        parse_label_selector("a in (1")


def test_field_selector():
    pod = _obj(spec={"nodeName": "n1"}, status={"phase": "Running"})
    assert parse_field_selector("spec.nodeName=n1,status.phase!=Failed")(pod)
    assert not parse_field_selector("spec.nodeName=n2")(pod)
    assert parse_field_selector("spec.nodeName=")(_obj(spec={}))
    with pytest.raises(ApiError):
        parse_field_selector("spec.other=1", {"spec.nodeName"})


def test_json_patch_is_atomic_and_complete():
    doc = {"a": [1, 2], "b": {"c": 1}}
    out = json_patch(doc, [{"op": "add", "path": "/a/-", "value": 3},
                           {"op": "move", "from": "/b/c", "path": "/d"},
                           {"op": "copy", "from": "/d", "path": "/e"},
                           {"op": "test", "path": "/e", "value": 1}])
    assert out == {"a": [1, 2, 3], "b": {}, "d": 1, "e": 1}
    assert doc == {"a": [1, 2], "b": {"c": 1}}
    with pytest.raises(ApiError):
        json_patch(doc, [{"op": "replace", "path": "/zz", "value": 1}])


def test_merge_and_strategic_merge():
    assert merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}) == {"a": {"c": 2,
                                                                                      "d": 3}}
    doc = {"spec": {"containers": [{"name": "a", "image": "1", "env": [{"name": "X"}]}],
                    "tolerations": [{"key": "x"}]},
           "metadata": {"finalizers": ["f1"]}}
    out = strategic_merge(doc, {"spec": {"containers": [{"name": "a", "env": [{"name": "Y"}]},
                                                        {"name": "b", "image": "2"}],
                                         "tolerations": [{"key": "y"}]},
                                "metadata": {"finalizers": ["f2"]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["a", "b"]
    assert [e["name"] for e in out["spec"]["containers"][0]["env"]] == ["X", "Y"]
    assert out["spec"]["tolerations"] == [{"key": "y"}]       # no merge key: replaced
    assert out["metadata"]["finalizers"] == ["f1", "f2"]      # merged primitive list
    out = strategic_merge(out, {"spec": {"containers": [{"name": "a", "$patch": "delete"}]},
                                "$deleteFromPrimitiveList/metadata": None})
    assert [c["name"] for c in out["spec"]["containers"]] == ["b"]
    out = strategic_merge(doc, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}})
    assert out["metadata"]["finalizers"] == []


def test_fields_v1_round_trip():
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    fs = field_set(obj)
    assert ("f:spec", "f:containers", 'k:{"name":"c"}', "f:image") in fs
    v1 = to_fields_v1(fs)
    assert v1["f:spec"]["f:containers"]['k:{"name":"c"}']["."] == {}
    assert from_fields_v1(v1) == fs


def test_clock_modes():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    c = Clock(deterministic=True, start=start)
    assert c.now() == start and c.timestamp() == "2026-01-01T00:00:00Z"
    c.advance(90)
    assert c.timestamp() == "2026-01-01T00:01:30Z"
    with pytest.raises(ValueError):
        c.advance(-1)
    fast = Clock(speed=1000, start=start)
    assert fast.now() >= start


@pytest.mark.parametrize("seconds,expected", [
    (5, "5s"), (119, "119s"), (125, "2m5s"), (600, "10m"), (3 * 3600, "3h"),
    (3 * 3600 + 120, "3h2m"), (30 * 3600, "30h"), (3 * 86400 + 3600, "3d1h"), (40 * 86400, "40d"),
])
def test_table_ages_like_kubectl(seconds, expected):
    from kubesim.tables import human_duration
    assert human_duration(seconds) == expected


def test_printer_column_json_path():
    from kubesim.tables import json_path
    obj = {"status": {"conditions": [{"type": "Created"}, {"type": "Running"}]},
           "spec": {"a": {"b": 3}}}
    assert json_path(obj, ".status.conditions[-1:].type") == "Running"
    assert json_path(obj, ".status.conditions[0].type") == "Created"
    assert json_path(obj, ".spec.a.b") == 3
    assert json_path(obj, ".spec.missing.b") is None


def test_times_are_normalised_like_the_api_server():
    from kubesim.normalize import normalizer
    ev = normalizer("CoreV1Event")({
        "metadata": {"name": "e"}, "involvedObject": {},
        "firstTimestamp": "2026-01-01T10:00:00.123+02:00",
        "eventTime": "2026-01-01T08:00:00Z", "series": {"lastObservedTime":
                                                     "2026-01-01T08:00:01.5Z"}})
    assert ev["firstTimestamp"] == "2026-01-01T08:00:00Z"        # metav1.Time: seconds
    assert ev["eventTime"] == "2026-01-01T08:00:00.000000Z"      # MicroTime
    assert ev["series"]["lastObservedTime"] == "2026-01-01T08:00:01.500000Z"
    with pytest.raises(ApiError) as ei:
        normalizer("CoreV1Event")({"metadata": {}, "lastTimestamp": "yesterday"})
    assert ei.value.code == 400 and ei.value.message.startswith("lastTimestamp:")
