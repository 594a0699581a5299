"""Server-side apply and fieldValidation answered as kube-apiserver answers them.

Sources (kubernetes/kubernetes):
* staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go: an apply that creates
  answers 201 (wasCreated); dryRun stores nothing; strict decoding of json, merge and
  strategic patches ("strict decoding error: unknown field ...", 400), Warn as
  `Warning: 299 - "..."` headers; fieldValidation defaults to Warn on every verb.
* staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go:
  ValidatePatchOptions (force only with apply), ValidateFieldValidation, ValidateDryRun; the
  handlers wrap them as 422 Invalid on PatchOptions/CreateOptions.meta.k8s.io.
* staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/conflict.go: the 409
  conflict message and causes; internal/structuredmerge.go: an applied configuration with
  a field outside the schema fails its typed conversion ("field not declared in schema").
* docs: kubernetes.io/docs/reference/using-api/server-side-apply/ (managers per
  subresource, conflicts) and api-concepts/#field-validation.
"""
from __future__ import annotations

import json

import pytest

from .helpers import core, custom, ns, own, request

pytestmark = [pytest.mark.timeout(30), pytest.mark.kubesim(simulate=False)]
APPLY = "application/apply-patch+yaml"
CM = "/api/v1/namespaces/team-a/configmaps"
RQ = "/api/v1/namespaces/team-a/resourcequotas"
JOBS = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs"


def _cm(name="c", **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": data}


def _job(name="j"):
    tmpl = {"spec": {"containers": [{"name": "pytorch", "image": "img:1"}]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": tmpl}}}}


def test_an_apply_that_creates_answers_201_then_200(kubesim):
    ns(kubesim)
    status, _, body = request(kubesim, "PATCH", f"{CM}/c?fieldManager=portal",
                              _cm(a="1"), content_type=APPLY)
    assert status == 201 and json.loads(body)["data"] == {"a": "1"}
    status, _, body = request(kubesim, "PATCH", f"{CM}/c?fieldManager=portal",
                              _cm(a="2"), content_type=APPLY)
    assert status == 200 and json.loads(body)["data"] == {"a": "2"}


def test_dry_run_apply_answers_as_real_and_stores_nothing(kubesim):
    c = core(kubesim)
    ns(kubesim)
    status, _, body = request(kubesim, "PATCH", f"{CM}/c?fieldManager=portal&dryRun=All",
                              _cm(a="1"), content_type=APPLY)
    out = json.loads(body)
    assert status == 201 and out["data"] == {"a": "1"}
    assert out["metadata"]["managedFields"][0]["manager"] == "portal"
    # registry/generic/dryrun.go: the object as it would be created, never versioned
    assert out["metadata"]["uid"] and "resourceVersion" not in out["metadata"]
    assert not own(c.list_namespaced_config_map("team-a").items)  # nothing stored
    c.create_namespaced_config_map("team-a", _cm(a="1"))
    rv = c.read_namespaced_config_map("c", "team-a").metadata.resource_version
    status, _, body = request(kubesim, "PATCH", f"{CM}/c?fieldManager=portal&dryRun=All"
                              "&force=true", _cm(a="9"), content_type=APPLY)
    assert status == 200 and json.loads(body)["data"] == {"a": "9"}
    stored = c.read_namespaced_config_map("c", "team-a")
    assert stored.data == {"a": "1"} and stored.metadata.resource_version == rv


@pytest.mark.parametrize("validation", ["Strict", "Warn", "Ignore"])
def test_apply_of_a_field_outside_the_schema_fails_whatever_field_validation(kubesim,
                                                                            validation):
    ns(kubesim)
    body = {**_cm(a="1"), "spec": {"foo": 1}}
    status, _, raw = request(kubesim, "PATCH", f"{CM}/c?fieldManager=portal&fieldValidation="
                             f"{validation}", body, content_type=APPLY)
    out = json.loads(raw)
    assert status == 500 and "reason" not in out
    assert out["message"] == ("failed to create typed patch object (team-a/c; /v1, "
                              "Kind=ConfigMap): .spec: field not declared in schema")
    assert own(core(kubesim).list_namespaced_config_map("team-a").items) == []


def test_force_on_a_non_apply_patch_is_invalid(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", _cm(a="1"))
    for ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        status, _, raw = request(kubesim, "PATCH", f"{CM}/c?force=false",
                                 {"data": {"a": "2"}}, content_type=ctype)
        out = json.loads(raw)
        assert (status, out["reason"]) == (422, "Invalid")
        assert out["message"] == ('PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: '
                                  'may not be specified for non-apply patch')
        assert out["details"]["causes"][0]["field"] == "force"
    assert c.read_namespaced_config_map("c", "team-a").data == {"a": "1"}


def test_unsupported_field_validation_and_dry_run_values_are_invalid(kubesim):
    ns(kubesim)
    status, _, raw = request(kubesim, "POST", f"{CM}?fieldValidation=Loose", _cm())
    assert status == 422 and json.loads(raw)["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
        '"Loose": supported values: "", "Ignore", "Strict", "Warn"')
    status, _, raw = request(kubesim, "POST", f"{CM}?dryRun=Some", _cm())
    assert status == 422 and json.loads(raw)["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
        '[]string{"Some"}: supported values: "All"')


def test_conflict_messages_name_each_manager_as_the_apiserver_prints_them(kubesim):
    ns(kubesim)
    request(kubesim, "PATCH", f"{CM}/c?fieldManager=portal", _cm(c="1"), content_type=APPLY)
    request(kubesim, "PATCH", f"{CM}/c?fieldManager=human", {"data": {"a": "1", "b": "1"}},
            content_type="application/merge-patch+json")
    status, _, raw = request(kubesim, "PATCH", f"{CM}/c?fieldManager=third",
                             _cm(a="2", b="2", c="2"), content_type=APPLY)
    out = json.loads(raw)
    assert (status, out["reason"]) == (409, "Conflict")
    # several conflicts: grouped by manager, updaters with their apiVersion, appliers bare
    assert out["message"] == ('Apply failed with 3 conflicts: conflicts with "human" using v1:\n'
                              '- .data.a\n- .data.b\nconflicts with "portal":\n- .data.c')
    assert {(c["reason"], c["message"], c["field"]) for c in out["details"]["causes"]} == {
        ("FieldManagerConflict", 'conflict with "human" using v1', ".data.a"),
        ("FieldManagerConflict", 'conflict with "human" using v1', ".data.b"),
        ("FieldManagerConflict", 'conflict with "portal"', ".data.c")}


def test_status_apply_is_owned_in_a_status_subresource_entry(kubesim):
    ns(kubesim)
    co = custom(kubesim)
    co.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", _job())
    status_cfg = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                  "metadata": {"name": "j"},
                  "status": {"replicaStatuses": {"Master": {"active": 1}}},
                  "spec": {"runPolicy": {"suspend": True}}}       # ignored on /status
    status, _, raw = request(kubesim, "PATCH", f"{JOBS}/j/status?fieldManager=operator",
                             status_cfg, content_type=APPLY)
    out = json.loads(raw)
    assert status == 200 and out["status"]["replicaStatuses"] == {"Master": {"active": 1}}
    assert "runPolicy" not in out["spec"]
    entry = next(e for e in out["metadata"]["managedFields"] if e["manager"] == "operator")
    assert (entry["operation"], entry["subresource"]) == ("Apply", "status")
    assert entry["fieldsV1"] == {"f:status": {"f:replicaStatuses": {"f:Master": {
        "f:active": {}}}}}
    # another applier of the same status field conflicts with the status manager
    status_cfg["status"]["replicaStatuses"]["Master"]["active"] = 2
    status, _, raw = request(kubesim, "PATCH", f"{JOBS}/j/status?fieldManager=other",
                             status_cfg, content_type=APPLY)
    assert status == 409 and json.loads(raw)["message"] == (
        'Apply failed with 1 conflict: conflict with "operator" with subresource "status": '
        '.status.replicaStatuses.Master.active')
    # an apply to the main resource owns no status field
    status, _, raw = request(kubesim, "PATCH", f"{JOBS}/j?fieldManager=portal", _job(),
                             content_type=APPLY)
    entries = {(e["manager"], e.get("subresource")) for e in
               json.loads(raw)["metadata"]["managedFields"]}
    assert ("operator", "status") in entries and ("portal", None) in entries


def _quota(**spec):
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
            "spec": {"hard": {"pods": "1"}, **spec}}


@pytest.mark.parametrize("verb", ["create", "update", "json", "merge", "strategic"])
def test_field_validation_on_each_verb(kubesim, verb):
    ns(kubesim)
    if verb != "create":
        request(kubesim, "POST", RQ, _quota())
    bad = _quota(foo=1, bar=2)

    def send(validation: str | None):
        qs = f"?fieldValidation={validation}" if validation else ""
        if verb == "create":
            return request(kubesim, "DELETE", f"{RQ}/q") and request(
                kubesim, "POST", RQ + qs, bad)
        if verb == "update":
            return request(kubesim, "PUT", f"{RQ}/q{qs}", bad)
        if verb == "json":
            return request(kubesim, "PATCH", f"{RQ}/q{qs}",
                           [{"op": "add", "path": "/spec/foo", "value": 1},
                            {"op": "add", "path": "/spec/bar", "value": 2}],
                           content_type="application/json-patch+json")
        return request(kubesim, "PATCH", f"{RQ}/q{qs}", {"spec": {"foo": 1, "bar": 2}},
                       content_type=f"application/{verb}-patch+json"
                       if verb == "merge" else "application/strategic-merge-patch+json")
    ok = 201 if verb == "create" else 200
    status, _, raw = send("Strict")
    assert (status, json.loads(raw)["reason"]) == (400, "BadRequest")
    assert json.loads(raw)["message"] == ('strict decoding error: unknown field "spec.bar", '
                                          'unknown field "spec.foo"')
    for validation in ("Warn", None):            # Warn is the default over HTTP
        status, headers, raw = send(validation)
        assert status == ok and "foo" not in json.loads(raw)["spec"]
        assert headers.getlist("Warning") == ['299 - "unknown field \\"spec.bar\\""',
                                              '299 - "unknown field \\"spec.foo\\""']
    status, headers, raw = send("Ignore")
    assert status == ok and "Warning" not in headers


def test_applying_into_a_map_applied_empty_before_keeps_the_new_keys(kubesim):
    ns(kubesim)
    body = {**_cm(a="1"), "metadata": {"name": "c", "labels": {}}}
    request(kubesim, "PATCH", f"{CM}/c?fieldManager=portal", body, content_type=APPLY)
    body["metadata"]["labels"] = {"moved": "y"}
    status, _, raw = request(kubesim, "PATCH", f"{CM}/c?fieldManager=portal", body,
                             content_type=APPLY)
    assert status == 200 and json.loads(raw)["metadata"]["labels"] == {"moved": "y"}
