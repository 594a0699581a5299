"""The pytest fixture itself: isolation between tests, options, the factory."""
from __future__ import annotations

import time

import kubernetes
import pytest

from .helpers import api_error, core, ns, pod

pytestmark = pytest.mark.timeout(30)


def test_first_writes_things(kubesim):
    ns(kubesim, "leak")
    kubesim.faults.add(path_regex="/api/v1/nodes", status=500)
    kubesim.advance(30)


def test_second_sees_a_fresh_cluster(kubesim):
    c = core(kubesim)
    assert api_error(c.read_namespace, "leak")[0] == 404
    assert kubesim.faults.rules() == []
    assert {n.metadata.name for n in c.list_namespace().items} == {
        "default", "kube-system", "kube-public", "kube-node-lease"}
    assert c.list_node().items                      # the small profile's nodes
    assert kubesim.sim is not None and kubesim.cluster.clock.deterministic
    assert kubesim.kubeconfig.exists()
    cfg = kubernetes.config.load_kube_config(config_file=str(kubesim.kubeconfig),
                                             client_configuration=(
                                                 conf := kubernetes.client.Configuration()))
    assert cfg is None and conf.host == kubesim.url


@pytest.mark.kubesim(simulate=False)
def test_marker_without_simulation(kubesim):
    assert kubesim.sim is None
    assert core(kubesim).list_node().items == []


def test_simulation_runs_by_itself_when_not_deterministic(kubesim_factory):
    k = kubesim_factory(deterministic=False, speed=20, tick_seconds=0.05)
    c = core(k)
    ns(k)
    c.create_namespaced_pod("team-a", pod("p"))
    deadline = time.monotonic() + 10
    while c.read_namespaced_pod("p", "team-a").status.phase != "Running":
        assert time.monotonic() < deadline, "pod never ran"
        time.sleep(0.05)
