"""A pod's grace period on delete and the root CA publisher, as kube-apiserver and the
controller manager do them, through the official client (issue 20).

Sources (kubernetes/kubernetes):
- pkg/registry/core/pod/strategy.go, podStrategy.CheckGracefulDelete: the period is
  DeleteOptions.gracePeriodSeconds, else spec.terminationGracePeriodSeconds (defaulted to
  30 at create, pkg/apis/core/v1/defaults.go), else 0; an unscheduled pod (no nodeName) or
  a Succeeded/Failed one is deleted at once; a negative period becomes 1.
- staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go, BeforeDelete: a negative
  gracePeriodSeconds is 1s; a pod already being deleted takes only a shorter period, and
  one whose deletionGracePeriodSeconds is 0 is deleted at once.
- pkg/controller/certificates/rootcacertpublisher/publisher.go: ConfigMap kube-root-ca.crt
  (data ca.crt, the kubernetes.io/description annotation) in every namespace, created
  again when deleted and reset when its data is changed; not in a terminating namespace.
"""
from __future__ import annotations

import pytest

from .helpers import api_error, core, ns, pod

pytestmark = [pytest.mark.timeout(30), pytest.mark.kubesim(simulate=False)]


def _bound_pod(kubesim, name, *, grace=None, phase=None):
    c = core(kubesim)
    body = pod(name)
    if grace is not None:
        body["spec"]["terminationGracePeriodSeconds"] = grace
    c.create_namespaced_pod("team-a", body)
    kubesim.call(kubesim.store.patch, "pods", name, {"spec": {"nodeName": "a100-0"}},
                 namespace="team-a")
    if phase:
        kubesim.call(kubesim.store.patch, "pods", name, {"status": {"phase": phase}},
                     namespace="team-a", subresource="status")
    return c


def _pod_or_none(c, name):
    status, _ = api_error(c.read_namespaced_pod, name, "team-a")
    if status == 404:
        return None
    return c.read_namespaced_pod(name, "team-a")


def test_spec_grace_zero_deletes_a_bound_pod_at_once(kubesim):
    """terminationGracePeriodSeconds: 0 is a period of 0 (not the 30 s default): the
    bound, running pod is gone with the DELETE, as Trainyard's production tier has it."""
    ns(kubesim)
    c = _bound_pod(kubesim, "p0", grace=0, phase="Running")
    assert c.read_namespaced_pod("p0", "team-a").spec.termination_grace_period_seconds == 0
    c.delete_namespaced_pod("p0", "team-a")
    assert _pod_or_none(c, "p0") is None


def test_spec_grace_or_the_default_30_applies_when_delete_options_have_none(kubesim):
    ns(kubesim)
    c = _bound_pod(kubesim, "p45", grace=45, phase="Running")
    c.delete_namespaced_pod("p45", "team-a")
    assert c.read_namespaced_pod("p45", "team-a").metadata.deletion_grace_period_seconds == 45
    _bound_pod(kubesim, "pdef", phase="Running")      # defaulted to 30 at create
    assert c.read_namespaced_pod("pdef", "team-a").spec.termination_grace_period_seconds == 30
    c.delete_namespaced_pod("pdef", "team-a")
    assert c.read_namespaced_pod("pdef", "team-a").metadata.deletion_grace_period_seconds == 30


def test_delete_options_override_the_spec_and_zero_is_immediate(kubesim):
    ns(kubesim)
    c = _bound_pod(kubesim, "long", grace=600, phase="Running")
    c.delete_namespaced_pod("long", "team-a", grace_period_seconds=5)
    assert c.read_namespaced_pod("long", "team-a").metadata.deletion_grace_period_seconds == 5
    _bound_pod(kubesim, "now", grace=600, phase="Running")
    c.delete_namespaced_pod("now", "team-a", grace_period_seconds=0)
    assert _pod_or_none(c, "now") is None


def test_negative_period_becomes_one_second(kubesim):
    ns(kubesim)
    c = _bound_pod(kubesim, "neg", phase="Running")
    c.delete_namespaced_pod("neg", "team-a", grace_period_seconds=-5)
    assert c.read_namespaced_pod("neg", "team-a").metadata.deletion_grace_period_seconds == 1


def test_unscheduled_or_finished_pods_go_at_once_whatever_the_period(kubesim):
    ns(kubesim)
    c = core(kubesim)
    c.create_namespaced_pod("team-a", pod("pending"))       # no nodeName
    c.delete_namespaced_pod("pending", "team-a", grace_period_seconds=120)
    assert _pod_or_none(c, "pending") is None
    for phase in ("Succeeded", "Failed"):
        name = phase.lower()
        _bound_pod(kubesim, name, grace=300, phase=phase)
        c.delete_namespaced_pod(name, "team-a")
        assert _pod_or_none(c, name) is None, phase


def test_a_pod_already_deleting_takes_only_a_shorter_period_and_zero_ends_it(kubesim):
    ns(kubesim)
    c = _bound_pod(kubesim, "p", grace=0, phase="Running")
    _bound_pod(kubesim, "q", grace=60, phase="Running")
    c.delete_namespaced_pod("q", "team-a")
    c.delete_namespaced_pod("q", "team-a")                # no period: pending, unchanged
    assert c.read_namespaced_pod("q", "team-a").metadata.deletion_grace_period_seconds == 60
    c.delete_namespaced_pod("q", "team-a", grace_period_seconds=120)
    assert c.read_namespaced_pod("q", "team-a").metadata.deletion_grace_period_seconds == 60
    c.delete_namespaced_pod("q", "team-a", grace_period_seconds=0)   # force
    assert _pod_or_none(c, "q") is None


# ---- the root CA publisher ----------------------------------------------------------------

def test_every_namespace_gets_kube_root_ca_crt(kubesim):
    c = core(kubesim)
    ns(kubesim)
    cm = c.read_namespaced_config_map("kube-root-ca.crt", "team-a")
    assert set(cm.data) == {"ca.crt"}
    assert cm.data["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    assert cm.metadata.annotations["kubernetes.io/description"]
    # the token volume ServiceAccount admission adds names exactly this ConfigMap and key
    created = c.create_namespaced_pod("team-a", pod("p"))
    projected = next(v.projected for v in created.spec.volumes
                     if v.name.startswith("kube-api-access-"))
    refs = [s.config_map for s in projected.sources if s.config_map]
    assert [(r.name, [i.key for i in r.items]) for r in refs] == [
        ("kube-root-ca.crt", ["ca.crt"])]


def test_kube_root_ca_crt_comes_back_when_deleted_and_resets_when_changed(kubesim):
    c = core(kubesim)
    ns(kubesim)
    first = c.read_namespaced_config_map("kube-root-ca.crt", "team-a")
    c.delete_namespaced_config_map("kube-root-ca.crt", "team-a")
    again = c.read_namespaced_config_map("kube-root-ca.crt", "team-a")
    assert again.metadata.uid != first.metadata.uid and again.data == first.data
    c.patch_namespaced_config_map("kube-root-ca.crt", "team-a",
                                  {"data": {"ca.crt": "tampered", "extra": "x"}})
    assert c.read_namespaced_config_map("kube-root-ca.crt", "team-a").data == first.data


def test_a_terminating_namespace_does_not_get_it_back(kubesim):
    c = core(kubesim)
    ns(kubesim)
    c.create_namespaced_config_map("team-a", {"metadata": {
        "name": "held", "finalizers": ["example.com/x"]}})
    c.delete_namespace("team-a")
    assert c.read_namespace("team-a").status.phase == "Terminating"
    names = [m.metadata.name for m in c.list_namespaced_config_map("team-a").items]
    assert names == ["held"]
