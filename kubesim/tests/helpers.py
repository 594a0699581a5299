"""Small helpers shared by the kubesim API tests."""
from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException


def core(k):
    return kubernetes.client.CoreV1Api(k.api_client)


def custom(k):
    return kubernetes.client.CustomObjectsApi(k.api_client)


def dyn(k):
    return kubernetes.dynamic.DynamicClient(k.api_client)


#: the root CA publisher's ConfigMap, in every namespace of a real cluster as of kubesim
#: (pkg/controller/certificates/rootcacertpublisher/publisher.go)
ROOT_CA = "kube-root-ca.crt"


def own(items):
    """The items a test created: without the cluster's own kube-root-ca.crt (typed client
    objects or dicts)."""
    return [i for i in items if (i["metadata"]["name"] if isinstance(i, dict)
                                 else i.metadata.name) != ROOT_CA]


def ns(k, name="team-a", labels=None):
    core(k).create_namespace({"metadata": {"name": name, "labels": labels or {}}})
    return name


def pod(name, *, limits=None, requests=None, labels=None, priority_class=None, image="busybox:1",
        containers=None):
    res = {}
    if limits:
        res["limits"] = limits
    if requests:
        res["requests"] = requests
    spec = {"containers": containers or [{"name": "main", "image": image, "resources": res}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def api_error(fn, *args, **kwargs) -> tuple[int, dict]:
    """Call fn expecting an ApiException; return (status, parsed Status body)."""
    with pytest.raises(ApiException) as ei:
        fn(*args, **kwargs)
    return ei.value.status, json.loads(ei.value.body)


def request(k, method, path, body=None, content_type="application/json", headers=None):
    """A raw request through the official client's REST layer: (status, headers, body bytes)."""
    h = {"Content-Type": content_type, **(headers or {})}
    data = body
    if body is not None and not isinstance(body, bytes | str):
        data = json.dumps(body)
    resp = k.api_client.rest_client.pool_manager.request(
        method, k.url + path, body=data, headers=h, timeout=10, retries=False)
    return resp.status, resp.headers, resp.data
