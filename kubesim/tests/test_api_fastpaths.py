"""kubesim's shortcuts give the answers of the long way: managedFields' changed paths
without walking equal subtrees, status writes sharing the stored object, cached quantities."""
from __future__ import annotations

import copy
import random

from kubesim.apply import changed_fields, field_set, value_at
from kubesim.clock import Clock
from kubesim.jsonutil import jcopy
from kubesim.quantity import canonical, parse_quantity
from kubesim.store import Store


def _pod(rng: random.Random) -> dict:
    containers = [{"name": rng.choice(["a", "b", "c"]), "image": rng.choice(["x:1", "x:2"]),
                   "ports": [{"containerPort": rng.choice([80, 81])}],
                   "env": [{"name": "E", "value": rng.choice(["1", "2"])}]}
                  for _ in range(rng.randint(0, 3))]   # duplicate names now and then
    spec: dict = {"containers": containers,
                  "tolerations": [{"key": "k", "value": rng.choice(["1", "2"])}]}
    if rng.random() < 0.5:
        spec["nodeSelector"] = {"n": rng.choice(["1", "2"]), "m": {"deep": rng.choice([1, 2])}}
    return {"metadata": {"labels": {"a": rng.choice(["1", "2"])},
                         **({"finalizers": ["f"]} if rng.random() < 0.5 else {})},
            "spec": spec, "status": {"phase": rng.choice(["A", "B"])}}


def test_changed_fields_matches_the_path_by_path_definition():
    rng = random.Random(7)
    seen = 0
    for _ in range(400):
        old, new = _pod(rng), _pod(rng)
        if rng.random() < 0.3:
            new = copy.deepcopy(old)
            new["spec"]["containers"].append({"name": "z", "image": "y"})
        want = {p for p in field_set(new) if value_at(old, p) != value_at(new, p)}
        assert changed_fields(old, new) == want
        seen += bool(want)
    assert seen > 100


def _store_with_pod() -> tuple[Store, dict]:
    store = Store(Clock(deterministic=True))
    store.create("namespaces", {"metadata": {"name": "ns"}})
    store.create("pods", {"metadata": {"name": "p", "namespace": "ns"}, "spec": {
        "containers": [{"name": "c", "image": "i:1", "resources": {
            "limits": {"cpu": "0.5", "memory": "1024Mi"}}}]}})
    return store, store.raw(store.rt("pods"), "p", "ns")


def test_a_status_write_leaves_the_stored_object_untouched_and_shapes_the_status():
    store, before = _store_with_pod()
    frozen = jcopy(before)
    out = store.patch("pods", "p", {"status": {"phase": "Running", "hostIP": 10,
                                               "unknown": 1}},
                      namespace="ns", subresource="status", field_validation="Warn",
                      copy=False)
    assert before == frozen                        # the previous object was not mutated
    assert out["spec"] == frozen["spec"] and out["status"]["phase"] == "Running"
    assert out["status"]["hostIP"] == "10"         # normalised as the whole object would be
    assert "unknown" not in out["status"] and store.warnings == ['unknown field "status.unknown"']
    assert out["metadata"]["resourceVersion"] != frozen["metadata"]["resourceVersion"]
    assert store.get("pods", "p", namespace="ns") == out
    assert store.get("pods", "p", namespace="ns") is not out   # get still copies


def test_a_custom_resource_status_write_prunes_the_status_only():
    store = Store(Clock(deterministic=True))
    store.create("namespaces", {"metadata": {"name": "ns"}})
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "j", "namespace": "ns"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {
               "spec": {"containers": [{"name": "pytorch", "image": "i"}]}}}}}}
    store.create("pytorchjobs.kubeflow.org", job)
    before = store.raw(store.rt("pytorchjobs.kubeflow.org"), "j", "ns")
    frozen = jcopy(before)
    out = store.patch("pytorchjobs.kubeflow.org", "j",
                      {"status": {"conditions": [], "bogus": 1}}, namespace="ns",
                      subresource="status", field_validation="Warn")
    assert before == frozen
    assert out["status"] == {"conditions": []} and out["spec"] == frozen["spec"]
    assert store.warnings == ['unknown field "status.bogus"']


def test_cached_quantities_keep_their_types_apart():
    assert canonical("0.5") == "500m" and canonical("1024Mi") == "1Gi"
    assert canonical(2) == "2" and canonical("2") == "2"
    assert parse_quantity("1Ki") == 1024
    for bad in (True, "1x"):
        try:
            canonical(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
