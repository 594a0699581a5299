"""Lists as kube-apiserver serves them: resourceVersion/resourceVersionMatch, consistent
pages, expired continue tokens, remainingItemCount, field selector errors.

Sources (kubernetes/kubernetes unless said otherwise):
* docs: kubernetes.io/docs/reference/using-api/api-concepts/ ("Semantics for get and
  list", "Retrieving large results sets in chunks").
* staging/src/k8s.io/apimachinery/pkg/apis/meta/internalversion/validation/validation.go
  ValidateListOptions, answered by apiserver/pkg/endpoints/handlers/get.go ListResource as
  422 Invalid on ListOptions.meta.k8s.io; the field label conversion error there is 400.
* staging/src/k8s.io/apiserver/pkg/storage/etcd3/errors.go (expiredList,
  inconsistentContinue with a token at resourceVersion -1), etcd3/store.go GetList (a
  continue lists at the token's revision; resourceVersion with continue is 400).
* staging/src/k8s.io/apiserver/pkg/storage/errors.go NewTooLargeResourceVersionError.
"""
from __future__ import annotations

import base64
import json

import pytest

from .helpers import ROOT_CA, api_error, core, ns, own, request

pytestmark = [pytest.mark.timeout(30), pytest.mark.kubesim(simulate=False)]
CM = "/api/v1/namespaces/team-a/configmaps"


def _cm(name, **data):
    return {"metadata": {"name": name}, "data": data or {"v": "0"}}


def _get(k, query):
    status, _, raw = request(k, "GET", f"{CM}?{query}")
    return status, json.loads(raw)


@pytest.mark.parametrize("query,message", [
    ("resourceVersionMatch=NotOlderThan",
     'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
     'resourceVersionMatch is forbidden unless resourceVersion is provided'),
    ("resourceVersionMatch=Bogus",
     'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: '
     'resourceVersionMatch is forbidden unless resourceVersion is provided, '
     'resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", '
     '"NotOlderThan", ""]'),
    ("resourceVersion=0&resourceVersionMatch=Exact",
     'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
     'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
    ("sendInitialEvents=true",
     'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: '
     'sendInitialEvents is forbidden for list'),
    ("watch=true&resourceVersionMatch=NotOlderThan",
     'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
     'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided'),
    ("watch=true&sendInitialEvents=true",
     'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
     'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan'),
])
def test_list_options_validation(kubesim, query, message):
    ns(kubesim)
    status, out = _get(kubesim, query)
    assert (status, out["reason"], out["message"]) == (422, "Invalid", message)
    assert out["details"]["group"] == "meta.k8s.io" and out["details"]["kind"] == "ListOptions"


def test_exact_and_not_older_than(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", _cm("a", v="1"))
    c.create_namespaced_config_map("team-a", _cm("b"))
    then = c.list_namespaced_config_map("team-a").metadata.resource_version
    c.patch_namespaced_config_map("a", "team-a", {"data": {"v": "2"}})
    c.delete_namespaced_config_map("b", "team-a")
    c.create_namespaced_config_map("team-a", _cm("c"))
    old = c.list_namespaced_config_map("team-a", resource_version=then,
                                       resource_version_match="Exact")
    assert old.metadata.resource_version == then
    assert [(i.metadata.name, i.data["v"]) for i in own(old.items)] == [("a", "1"), ("b", "0")]
    new = c.list_namespaced_config_map("team-a", resource_version=then,
                                       resource_version_match="NotOlderThan")
    assert int(new.metadata.resource_version) > int(then)
    assert [(i.metadata.name, i.data["v"]) for i in own(new.items)] == [("a", "2"), ("c", "0")]
    # a resourceVersion with a limit and no match is Exact (the table in api-concepts)
    legacy = c.list_namespaced_config_map("team-a", resource_version=then, limit=10)
    assert [i.metadata.name for i in own(legacy.items)] == ["a", "b"]
    future = int(new.metadata.resource_version) + 100
    status, out = _get(kubesim, f"resourceVersion={future}&resourceVersionMatch=NotOlderThan")
    assert (status, out["reason"]) == (504, "Timeout")
    assert out["message"] == (f"Timeout: Too large resource version: {future}, current: "
                              f"{new.metadata.resource_version}")
    assert out["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


@pytest.mark.kubesim(simulate=False, watch_cache_size=3)
def test_exact_older_than_the_history_is_expired(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", _cm("a"))
    then = c.list_namespaced_config_map("team-a").metadata.resource_version
    for i in range(1, 5):
        c.patch_namespaced_config_map("a", "team-a", {"data": {"v": str(i)}})
    status, out = _get(kubesim, f"resourceVersion={then}&resourceVersionMatch=Exact")
    assert (status, out["reason"], out["message"]) == (
        410, "Expired", "The resourceVersion for the provided list is too old.")


def test_pages_show_the_snapshot_of_the_first_page(kubesim):
    c = core(kubesim)
    ns(kubesim)
    for i in range(1, 6):
        c.create_namespaced_config_map("team-a", _cm(f"c{i}"))
    first = c.list_namespaced_config_map("team-a", limit=2)
    assert [i.metadata.name for i in first.items] == ["c1", "c2"]
    # c3, c4, c5 and the cluster's own kube-root-ca.crt (last by name)
    assert first.metadata.remaining_item_count == 4
    # the collection changes between pages
    c.delete_namespaced_config_map("c3", "team-a")
    c.patch_namespaced_config_map("c4", "team-a", {"data": {"v": "changed"}})
    c.create_namespaced_config_map("team-a", _cm("c2a"))
    c.create_namespaced_config_map("team-a", _cm("c9"))
    second = c.list_namespaced_config_map("team-a", limit=2, _continue=first.metadata._continue)
    assert [(i.metadata.name, i.data["v"]) for i in second.items] == [("c3", "0"), ("c4", "0")]
    assert second.metadata.resource_version == first.metadata.resource_version
    assert second.metadata.remaining_item_count == 2
    third = c.list_namespaced_config_map("team-a", limit=2, _continue=second.metadata._continue)
    assert [i.metadata.name for i in third.items] == ["c5", ROOT_CA]
    assert not third.metadata._continue
    # a new list sees the changes
    now = c.list_namespaced_config_map("team-a")
    assert [i.metadata.name for i in own(now.items)] == ["c1", "c2", "c2a", "c4", "c5", "c9"]


def test_remaining_item_count_only_without_selectors(kubesim):
    c = core(kubesim)
    ns(kubesim)
    for i in range(4):
        c.create_namespaced_config_map("team-a", {"metadata": {"name": f"c{i}",
                                                               "labels": {"app": "x"}}})
    page = c.list_namespaced_config_map("team-a", limit=1)
    assert page.metadata.remaining_item_count == 4     # with the cluster's kube-root-ca.crt
    page = c.list_namespaced_config_map("team-a", limit=1, label_selector="app=x")
    assert page.metadata._continue and page.metadata.remaining_item_count is None


@pytest.mark.kubesim(simulate=False, watch_cache_size=3)
def test_an_expired_continue_token_gets_410_and_a_token_for_the_rest(kubesim):
    c = core(kubesim)
    ns(kubesim)
    for i in range(1, 4):
        c.create_namespaced_config_map("team-a", _cm(f"c{i}"))
    first = c.list_namespaced_config_map("team-a", limit=1)
    for i in range(1, 5):  # push the first page's version out of the 3-event history
        c.patch_namespaced_config_map("c3", "team-a", {"data": {"v": str(i)}})
    status, out = _get(kubesim, f"limit=1&continue={first.metadata._continue}")
    assert (status, out["reason"], out["code"]) == (410, "Expired", 410)
    assert out["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result. "
        "You can start a new list without the continue parameter, or use the continue "
        "token in this response to retrieve the remainder of the results.")
    token = out["metadata"]["continue"]
    assert json.loads(base64.urlsafe_b64decode(token))["rv"] == -1
    rest = c.list_namespaced_config_map("team-a", _continue=token)
    assert [(i.metadata.name, i.data["v"]) for i in own(rest.items)] == [("c2", "0"), ("c3", "4")]


def test_resource_version_with_continue_is_a_bad_request(kubesim):
    c = core(kubesim)
    ns(kubesim)
    for i in range(3):
        c.create_namespaced_config_map("team-a", _cm(f"c{i}"))
    first = c.list_namespaced_config_map("team-a", limit=1)
    status, out = _get(kubesim, f"limit=1&resourceVersion={first.metadata.resource_version}"
                                f"&continue={first.metadata._continue}")
    assert (status, out["message"]) == (
        400, "specifying resource version is not allowed when using continue")


def test_field_selector_errors(kubesim):
    c = core(kubesim)
    ns(kubesim)
    status, body = api_error(c.list_namespaced_config_map, "team-a", field_selector="data.v=1")
    assert (status, body["reason"], body["message"]) == (
        400, "BadRequest", "field label not supported: data.v")
    status, body = api_error(c.list_namespaced_pod, "team-a", field_selector="status.phase")
    assert status == 400 and body["message"].startswith("invalid selector")
    assert c.list_namespaced_pod("team-a", field_selector="status.phase=Running").items == []


def test_custom_resources_select_on_metadata_and_their_selectable_fields_only(kubesim):
    from .helpers import custom
    ns(kubesim)
    co = custom(kubesim)
    status, body = api_error(co.list_namespaced_custom_object, "kubeflow.org", "v1", "team-a",
                             "pytorchjobs", field_selector="spec.runPolicy.suspend=true")
    assert (status, body["message"]) == (
        400, "field label not supported: spec.runPolicy.suspend")
    assert co.list_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs",
                                            field_selector="metadata.name=j")["items"] == []
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "selectableFields": [{"jsonPath": ".spec.color"}],
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "properties": {
                                          "color": {"type": "string"}}}}}}}]}}
    request(kubesim, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    for name, color in (("a", "red"), ("b", "blue")):
        co.create_namespaced_custom_object("example.com", "v1", "team-a", "widgets", {
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"color": color}})
    got = co.list_namespaced_custom_object("example.com", "v1", "team-a", "widgets",
                                           field_selector="spec.color=blue")
    assert [i["metadata"]["name"] for i in got["items"]] == ["b"]
