"""Deletion as kube-apiserver answers it, through the official client (issue 20).

Sources (kubernetes/kubernetes):
- staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go (Delete,
  deletionFinalizersForGarbageCollection, markAsDeleting, finalizeDelete/ReturnDeletedObject)
- staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go (BeforeDelete preconditions)
- staging/src/k8s.io/apiserver/pkg/endpoints/handlers/delete.go (200, 202 when kept and
  orphanDependents=false)
- staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go (ValidateNoNewFinalizers)
- pkg/controller/garbagecollector/garbagecollector.go (foreground waits for
  blockOwnerDeletion dependents, orphan strips references)
- pkg/registry/core/namespace/storage/storage.go and pkg/controller/namespace/deletion/
  (Terminating, the 409 on a second delete, conditions, /finalize)
"""
from __future__ import annotations

import json

import pytest

from .helpers import api_error, core, ns, pod, request

pytestmark = [pytest.mark.timeout(30), pytest.mark.kubesim(simulate=False)]


def _owner_ref(owner, block=True):
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name,
            "uid": owner.metadata.uid, "blockOwnerDeletion": block}


def _cm(name, *, refs=None, finalizers=None):
    meta = {"name": name}
    if refs:
        meta["ownerReferences"] = refs
    if finalizers:
        meta["finalizers"] = finalizers
    return {"metadata": meta}


def _exists(c, name, namespace="team-a"):
    try:
        return c.read_namespaced_config_map(name, namespace)
    except Exception:
        return None


def test_immediate_delete_answers_status_for_configmaps_and_the_object_for_pods(kubesim):
    """finalizeDelete: Status{Success, details{name, kind: <resource>, uid}} unless the
    registry sets ReturnDeletedObject (pods do: pkg/registry/core/pod/storage/storage.go)."""
    c = core(kubesim)
    ns(kubesim)
    cm = c.create_namespaced_config_map("team-a", _cm("plain"))
    status, _, body = request(kubesim, "DELETE", "/api/v1/namespaces/team-a/configmaps/plain")
    out = json.loads(body)
    assert status == 200
    assert out["kind"] == "Status" and out["status"] == "Success"
    assert out["details"] == {"name": "plain", "kind": "configmaps", "uid": cm.metadata.uid}
    c.create_namespaced_pod("team-a", pod("p"))
    status, _, body = request(kubesim, "DELETE", "/api/v1/namespaces/team-a/pods/p")
    assert status == 200 and json.loads(body)["kind"] == "Pod"


def test_delete_kept_by_finalizers_answers_the_object_with_deletion_timestamp(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", _cm("held", finalizers=["example.com/x"]))
    status, _, body = request(kubesim, "DELETE", "/api/v1/namespaces/team-a/configmaps/held")
    out = json.loads(body)
    assert status == 200 and out["kind"] == "ConfigMap"
    assert out["metadata"]["deletionTimestamp"]
    assert out["metadata"]["deletionGracePeriodSeconds"] == 0   # markAsDeleting


def test_no_new_finalizers_while_deleting(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", _cm("held", finalizers=["example.com/x"]))
    c.delete_namespaced_config_map("held", "team-a")
    status, body = api_error(c.patch_namespaced_config_map, "held", "team-a",
                             {"metadata": {"finalizers": ["example.com/x", "example.com/y"]}})
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == (
        'ConfigMap "held" is invalid: metadata.finalizers: Forbidden: no new finalizers can be '
        'added if the object is being deleted, found new finalizers []string{"example.com/y"}')
    assert body["details"]["causes"][0]["reason"] == "FieldValueForbidden"
    # removing one is fine, and removing the last one completes the deletion
    c.patch_namespaced_config_map("held", "team-a", {"metadata": {"finalizers": None}})
    assert _exists(c, "held") is None


def test_foreground_waits_for_blocking_dependents(kubesim):
    c = core(kubesim)
    ns(kubesim)
    owner = c.create_namespaced_config_map("team-a", _cm("owner"))
    c.create_namespaced_config_map("team-a", _cm("dep-held", refs=[_owner_ref(owner)],
                                                 finalizers=["example.com/hold"]))
    c.create_namespaced_config_map("team-a", _cm("dep-free", refs=[_owner_ref(owner)]))
    status, _, body = request(kubesim, "DELETE", "/api/v1/namespaces/team-a/configmaps/owner",
                              {"propagationPolicy": "Foreground"})
    out = json.loads(body)
    assert status == 200 and out["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert out["metadata"]["deletionTimestamp"]
    # the collector deleted both dependents; the held one waits on its own finalizer,
    # and blocks the owner (blockOwnerDeletion)
    assert _exists(c, "dep-free") is None
    held = c.read_namespaced_config_map("dep-held", "team-a")
    assert held.metadata.deletion_timestamp is not None
    assert c.read_namespaced_config_map("owner", "team-a").metadata.finalizers == [
        "foregroundDeletion"]
    c.patch_namespaced_config_map("dep-held", "team-a", {"metadata": {"finalizers": None}})
    assert _exists(c, "dep-held") is None and _exists(c, "owner") is None


def test_foreground_does_not_wait_for_non_blocking_dependents(kubesim):
    c = core(kubesim)
    ns(kubesim)
    owner = c.create_namespaced_config_map("team-a", _cm("owner"))
    c.create_namespaced_config_map("team-a", _cm("dep", refs=[_owner_ref(owner, block=False)],
                                                 finalizers=["example.com/hold"]))
    c.delete_namespaced_config_map("owner", "team-a", propagation_policy="Foreground")
    assert _exists(c, "owner") is None
    assert c.read_namespaced_config_map("dep", "team-a").metadata.deletion_timestamp


def test_orphan_strips_owner_references_and_keeps_dependents(kubesim):
    c = core(kubesim)
    ns(kubesim)
    owner = c.create_namespaced_config_map("team-a", _cm("owner", finalizers=["example.com/x"]))
    other = c.create_namespaced_config_map("team-a", _cm("other"))
    c.create_namespaced_config_map("team-a", _cm("dep", refs=[_owner_ref(owner),
                                                              _owner_ref(other)]))
    # query parameter, as kubectl --cascade=orphan sends it
    status, _, body = request(
        kubesim, "DELETE", "/api/v1/namespaces/team-a/configmaps/owner?propagationPolicy=Orphan")
    assert status == 200
    assert json.loads(body)["metadata"]["finalizers"] == ["example.com/x", "orphan"]
    dep = c.read_namespaced_config_map("dep", "team-a")
    assert [r.name for r in dep.metadata.owner_references] == ["other"]
    # the collector dropped `orphan`; the owner's own finalizer still holds it
    assert c.read_namespaced_config_map("owner", "team-a").metadata.finalizers == [
        "example.com/x"]


def test_background_collects_dependents_after_the_owner_is_gone(kubesim):
    c = core(kubesim)
    ns(kubesim)
    owner = c.create_namespaced_config_map("team-a", _cm("owner"))
    survivor = c.create_namespaced_config_map("team-a", _cm("survivor"))
    c.create_namespaced_config_map("team-a", _cm("dep", refs=[_owner_ref(owner)]))
    c.create_namespaced_config_map("team-a", _cm("shared", refs=[_owner_ref(owner),
                                                                 _owner_ref(survivor)]))
    c.delete_namespaced_config_map("owner", "team-a", propagation_policy="Background")
    assert _exists(c, "owner") is None and _exists(c, "dep") is None
    shared = c.read_namespaced_config_map("shared", "team-a")   # still has a live owner
    assert [r.name for r in shared.metadata.owner_references] == ["survivor"]


def test_orphan_dependents_false_answers_202_while_kept(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", _cm("held", finalizers=["example.com/x"]))
    status, _, _ = request(kubesim, "DELETE", "/api/v1/namespaces/team-a/configmaps/held",
                           {"orphanDependents": False})
    assert status == 202


def test_invalid_propagation_policy_is_422(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", _cm("x"))
    status, body = api_error(c.delete_namespaced_config_map, "x", "team-a",
                             propagation_policy="Sideways")
    assert status == 422
    assert body["message"] == ('DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: '
                               'Unsupported value: "Sideways": supported values: "Foreground", '
                               '"Background", "Orphan", "nil"')


def test_preconditions_conflict_with_the_real_messages(kubesim):
    c = core(kubesim)
    ns(kubesim)
    cm = c.create_namespaced_config_map("team-a", _cm("x"))
    status, body = api_error(c.delete_namespaced_config_map, "x", "team-a",
                             body={"preconditions": {"uid": "nope"}})
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        f'Operation cannot be fulfilled on ConfigMap "x": the UID in the precondition (nope) '
        f'does not match the UID in record ({cm.metadata.uid}). The object might have been '
        'deleted and then recreated')
    status, body = api_error(c.delete_namespaced_config_map, "x", "team-a",
                             body={"preconditions": {"resourceVersion": "1"}})
    assert status == 409 and "The object might have been modified" in body["message"]
    c.delete_namespaced_config_map("x", "team-a", body={"preconditions": {
        "uid": cm.metadata.uid, "resourceVersion": cm.metadata.resource_version}})
    assert _exists(c, "x") is None


def test_pod_grace_period_may_only_be_shortened(kubesim):
    """rest.BeforeDelete: once a graceful deletion started only a shorter period applies;
    deletionTimestamp moves with it."""
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_pod("team-a", pod("p"))
    kubesim.call(kubesim.store.patch, "pods", "p", {"spec": {"nodeName": "a100-0"}},
                 namespace="team-a")
    c.delete_namespaced_pod("p", "team-a", grace_period_seconds=60)
    first = c.read_namespaced_pod("p", "team-a").metadata
    c.delete_namespaced_pod("p", "team-a", grace_period_seconds=90)
    assert c.read_namespaced_pod("p", "team-a").metadata.deletion_grace_period_seconds == 60
    c.delete_namespaced_pod("p", "team-a", grace_period_seconds=10)
    now = c.read_namespaced_pod("p", "team-a").metadata
    assert now.deletion_grace_period_seconds == 10
    assert (first.deletion_timestamp - now.deletion_timestamp).total_seconds() == 50


def test_namespace_lifecycle_finalizer_conditions_and_second_delete(kubesim):
    c = core(kubesim)
    ns(kubesim)
    assert c.read_namespace("team-a").spec.finalizers == ["kubernetes"]
    c.create_namespaced_config_map("team-a", _cm("held", finalizers=["example.com/x"]))
    status, _, body = request(kubesim, "DELETE", "/api/v1/namespaces/team-a")
    out = json.loads(body)
    assert status == 200 and out["kind"] == "Namespace"
    assert out["status"]["phase"] == "Terminating" and out["metadata"]["deletionTimestamp"]
    n = c.read_namespace("team-a")
    conds = {x.type: x for x in n.status.conditions}
    assert conds["NamespaceContentRemaining"].status == "True"
    assert conds["NamespaceContentRemaining"].reason == "SomeResourcesRemain"
    assert conds["NamespaceContentRemaining"].message == (
        "Some resources are remaining: configmaps. has 1 resource instances")
    assert conds["NamespaceFinalizersRemaining"].message == (
        "Some content in the namespace has finalizers remaining: example.com/x in 1 "
        "resource instances")
    assert conds["NamespaceDeletionDiscoveryFailure"].status == "False"
    status, body = api_error(c.delete_namespace, "team-a")
    assert status == 409 and body["message"] == (
        'Operation cannot be fulfilled on namespaces "team-a": The system is ensuring all '
        'content is removed from this namespace.  Upon completion, this namespace will '
        'automatically be purged by the system.')
    status, body = api_error(c.create_namespaced_config_map, "team-a", _cm("new"))
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('configmaps "new" is forbidden: unable to create new content '
                               'in namespace team-a because it is being terminated')
    c.patch_namespaced_config_map("held", "team-a", {"metadata": {"finalizers": None}})
    assert api_error(c.read_namespace, "team-a")[0] == 404


def test_spec_finalizers_change_only_through_finalize(kubesim):
    """namespaceStrategy.PrepareForUpdate keeps spec.finalizers; PUT .../finalize changes
    them, and emptying them on a terminating namespace deletes it (ShouldDeleteDuringUpdate)."""
    c = core(kubesim)
    ns(kubesim)
    c.patch_namespace("team-a", {"spec": {"finalizers": []}})
    assert c.read_namespace("team-a").spec.finalizers == ["kubernetes"]
    body = c.read_namespace("team-a").to_dict()
    body["spec"]["finalizers"] = ["kubernetes", "example.com/ns"]
    out = c.replace_namespace_finalize("team-a", body)
    assert out.spec.finalizers == ["kubernetes", "example.com/ns"]
    c.delete_namespace("team-a")
    n = c.read_namespace("team-a")          # content gone, our finalizer still there
    assert n.spec.finalizers == ["example.com/ns"] and n.status.phase == "Terminating"
    body = n.to_dict()
    body["spec"]["finalizers"] = []
    c.replace_namespace_finalize("team-a", body)
    assert api_error(c.read_namespace, "team-a")[0] == 404


def test_delete_collection_passes_the_propagation_policy(kubesim):
    """registry/store.go DeleteCollection calls Delete with the same DeleteOptions."""
    c = core(kubesim)
    ns(kubesim)
    owner = c.create_namespaced_config_map("team-a", {"metadata": {
        "name": "owner", "labels": {"grp": "x"}}})
    c.create_namespaced_config_map("team-a", _cm("dep", refs=[_owner_ref(owner)]))
    c.delete_collection_namespaced_config_map("team-a", label_selector="grp=x",
                                              propagation_policy="Orphan")
    assert _exists(c, "owner") is None
    assert c.read_namespaced_config_map("dep", "team-a").metadata.owner_references is None
