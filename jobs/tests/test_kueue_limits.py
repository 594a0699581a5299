"""GPU memory and HAMi's limits in Kueue mode, against kubesim's Kueue over HTTP.

* What Kueue can express: HAMi's per-card limits (``nvidia.com/gpumem``,
  ``nvidia.com/gpucores``) are not quota; Trainyard's recommended Configuration
  (``deploy/kueue/``) transforms them away, so a HAMi job is admitted on its cards'
  quota; without it Kueue refuses the resource no ClusterQueue covers.
* What it cannot: the pool's GPU-memory grant (a whole card's memory per model) is
  Trainyard's check at submission in Kueue mode, naming the field to change; Trainyard
  mode queues the same job (``test_quota_dims_cluster.test_gpu_memory_quota_binds``)."""

from decimal import Decimal

import pytest
from kubernetes import client as k8s

from core.exceptions import ApplicationError
from jobs.models import TrainingJob
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.test_kueue_mode import kueue_configured
from jobs.tests.test_quota_dims_cluster import _job, _submit, world  # noqa: F401
from k8s_sync.kueue_config import CONFIG_KEY, config_map
from kubesim.sim.kueue_config import install
from kubesim.tests.test_sim_kueue import cond, cq, lq, workload

pytestmark = pytest.mark.timeout(180)
K, V = "kueue.x-k8s.io", "v1beta2"


def _hami_job(co, name, ns):
    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {f"{K}/queue-name": "lq"}},
            "spec": {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": {"Master": {
                "replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {
                    "containers": [{"name": "pytorch", "image": "r.example/t:1",
                                    "resources": {"limits": {
                                        "nvidia.com/gpu": 1, "nvidia.com/gpumem": 20480,
                                        "nvidia.com/gpucores": 50, "cpu": "2",
                                        "memory": "8Gi"}}}]}}}}}}
    return co.create_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", body)


def test_hami_limits_are_transformed_away_by_the_recommended_configuration(kubesim):
    core = k8s.CoreV1Api(kubesim.api_client)
    co = k8s.CustomObjectsApi(kubesim.api_client)
    core.create_namespace({"metadata": {"name": "team-h"}})
    co.create_cluster_custom_object(K, V, "resourceflavors", {
        "apiVersion": f"{K}/{V}", "kind": "ResourceFlavor", "metadata": {"name": "a100"},
        "spec": {}})
    cq(co, "cq-h", 4)
    lq(co, "team-h", "lq", "cq-h")
    _hami_job(co, "before", "team-h")
    kubesim.advance(3)
    qr = cond(workload(co, "before", "team-h"), "QuotaReserved")
    # Kueue's defaults: every requested resource must be covered
    assert qr["status"] == "False" and \
        "resource nvidia.com/gpumem unavailable in ClusterQueue" in qr["message"]
    text = config_map(pod_start_deadline_seconds=600, pod_start_attempts=3)["data"][CONFIG_KEY]
    kubesim.cluster.call(install, kubesim.cluster.store, text)
    kubesim.advance(3)
    wl = workload(co, "before", "team-h")
    assert cond(wl, "Admitted")["status"] == "True"
    usage = wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]
    assert usage["nvidia.com/gpu"] == "1" and "nvidia.com/gpumem" not in usage


def test_gpu_memory_quota_is_checked_at_submission_in_kueue_mode(
        world, cluster, settings, bob, tenant_a):  # noqa: F811
    settings.TRAINYARD_ADMISSION_BACKEND = "kueue"
    kueue_configured(cluster)
    three = int(3 * world["card_gib"]) + 1
    world["grant"](**{"gpu-memory": three})   # three cards' memory
    first = _submit(world, bob, tenant_a, "first", gpus=2)
    for _ in range(6):
        _cycle(world, cluster, 10)
        if _job(first).state == "running":
            break
    assert _job(first).state == "running"
    with pytest.raises(ApplicationError) as refused:
        _submit(world, bob, tenant_a, "second", gpus=2)   # 4 cards: within the GPU quota
    assert refused.value.field == "gpus_per_worker"
    two = (2 * world["card_gib"]).quantize(Decimal("0.001"))
    message = str(refused.value)
    assert "cannot count GPU memory" in message and f"{three} GiB it may hold" in message
    assert f"{two.normalize():f}".rstrip("0").rstrip(".") in message
    assert not TrainingJob.objects.filter(name="second").exists()
    # one card fits: 2 + 1 cards' memory is within three
    assert _submit(world, bob, tenant_a, "third", gpus=1).state == "queued"
