"""Against kubesim: a GPU pod runs, the sampler reads real DCGM-style metrics over HTTP
and writes utilisation rows; the dashboard then shows them."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse
from kubernetes import client as k8s

from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants.models import JobUtilisation, QuotaGrant, UsageSeries
from tenants.series import usage_sample

pytestmark = pytest.mark.django_db

H800 = "NVIDIA-H800"


def test_sampler_records_dcgm_utilisation_of_a_running_pod(cluster, settings, tenant_a, alice,
                                                           login):
    settings.PROMETHEUS_URL = ""
    settings.TRAINYARD_DCGM_URLS = []
    cache.clear()
    pool = tenant_a.pools.get(kind="prod")
    QuotaGrant.objects.create(pool=pool, resource=f"gpu:{H800}", amount=4)
    core = k8s.CoreV1Api(cluster.api_client)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=pool.namespace)))
    core.create_namespaced_pod(pool.namespace, k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(
            name="ft-master-0",
            labels={"trainyard.io/tenant": "acme", "trainyard.io/pool": "prod",
                    "trainyard.io/job": "42"},
            annotations={"kubesim.trainyard.io/gpu-util": "70",
                         "kubesim.trainyard.io/gpu-mem-gib": "30",
                         "kubesim.trainyard.io/run-seconds": "3600"}),
        spec=k8s.V1PodSpec(
            restart_policy="Never", node_selector={"nvidia.com/gpu.product": H800},
            containers=[k8s.V1Container(
                name="pytorch", image="pytorch:2",
                resources=k8s.V1ResourceRequirements(
                    requests={"cpu": "4", "memory": "16Gi"},
                    limits={"nvidia.com/gpu": "2"}))])))
    cluster.advance(30)
    relist_all(get_client())  # what the watcher would have recorded
    assert usage_sample() > 0
    row = UsageSeries.objects.get(pool=pool, resource=f"gpu:{H800}", resolution="m")
    assert row.allocated == 2 and row.quota == 4
    assert row.utilised == pytest.approx(1.4, abs=0.15)  # two cards at ~70%
    mem = UsageSeries.objects.get(pool=pool, resource="gpu-memory", resolution="m")
    assert mem.utilised == pytest.approx(60, abs=0.5)  # 2 x 30 GiB framebuffer
    job = JobUtilisation.objects.get(namespace=pool.namespace, job="42")
    assert job.gpu_samples == 2 and 60 <= job.mean_util <= 80
    assert UsageSeries.objects.filter(pool=pool, resolution="h").exists()
    response = login(alice).get(reverse("tenant_dashboard_trends", kwargs={"slug": "acme"}))
    (trend,) = [t for t in response.json()["trends"] if t["key"] == f"gpu:{H800}"]
    utilised = trend["figure"]["data"][1]["y"]
    assert utilised and utilised[-1] == pytest.approx(1.4, abs=0.15)
