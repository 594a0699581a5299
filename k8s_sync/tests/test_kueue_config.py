"""Trainyard's recommended Kueue Configuration (``deploy/kueue/``): rendered from the
pod-start policy, equal to the file the platform team applies, and read by kubesim's
Kueue as Kueue reads it (``python -m kubesim --kueue-config``)."""

from pathlib import Path

import yaml

from k8s_sync.kueue_config import CONFIG_KEY, config_map, configuration
from kubesim.cluster import Cluster
from kubesim.sim import kueue_config as sim_config

DEPLOYED = Path(__file__).resolve().parents[2] / "deploy" / "kueue" / "kueue-manager-config.yaml"
TRAINYARD_KEYS = ("apiVersion", "kind", "waitForPodsReady", "integrations", "resources")


def _deployed() -> tuple[dict, str]:
    cm = yaml.safe_load(DEPLOYED.read_text())
    text = cm["data"][CONFIG_KEY]
    return cm, text


def test_the_deployed_file_is_the_default_policys_rendering():
    cm, text = _deployed()
    assert (cm["metadata"]["namespace"], cm["metadata"]["name"]) == (
        "kueue-system", "kueue-manager-config")
    want = configuration(pod_start_deadline_seconds=600, pod_start_attempts=3)
    got = yaml.safe_load(text)
    assert {k: got[k] for k in TRAINYARD_KEYS} == want
    assert got["integrations"]["frameworks"] == ["kubeflow.org/pytorchjob",
                                                 "trainer.kubeflow.org/trainjob"]


def test_the_deadline_and_attempts_become_timeout_and_backoff_limit():
    cfg = configuration(pod_start_deadline_seconds=90, pod_start_attempts=1)
    wfpr = cfg["waitForPodsReady"]
    assert (wfpr["timeout"], wfpr["recoveryTimeout"]) == ("1m30s", "1m30s")
    assert wfpr["requeuingStrategy"]["backoffLimitCount"] == 0  # the 1st timeout ends it
    parsed = sim_config.parse(config_map(pod_start_deadline_seconds=45,
                                         pod_start_attempts=4)["data"][CONFIG_KEY])
    assert (parsed.pods_ready.timeout, parsed.pods_ready.backoff_limit) == (45, 3)


def test_kubesims_kueue_reads_the_deployed_configuration():
    _cm, text = _deployed()
    parsed = sim_config.parse(text)
    assert not parsed.error
    pr = parsed.pods_ready
    assert (pr.enabled, pr.timeout, pr.recovery_timeout, pr.backoff_limit, pr.backoff_base,
            pr.backoff_max, pr.timestamp) == (True, 600, 600, 2, 60, 3600, "Eviction")
    # HAMi's per-card limits are not counted against quota
    assert parsed.requests({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 40960,
                            "nvidia.com/gpucores": 50}) == {"nvidia.com/gpu": 2}
    with Cluster(profile="small", deterministic=True) as cluster:
        cluster.call(sim_config.install, cluster.store, DEPLOYED.read_text())
        assert cluster.sim is not None
        assert cluster.sim.kueue.cfg == parsed
        cluster.call(sim_config.install, cluster.store, "waitForPodsReady: {timeout: 2m}\n")
        assert cluster.sim.kueue.cfg.pods_ready.timeout == 120  # re-read when it changes
