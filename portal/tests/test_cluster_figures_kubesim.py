"""Against kubesim: the cluster page and the capacity page show one figure per quantity.
Pods of two tenants' pools and of a namespace no tenant owns hold whole cards, shares
and a MIG instance; a usage sample is taken before the last pod starts (the per-tenant
table once read that sample, so it said less than the table above it). Both pages read
one report: the per-model allocation is the same on both, the per-tenant rows and the
pods of no tenant add up to it, every figure carries its unit and physical cards stay
apart from shares."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.urls import reverse
from kubernetes import client as k8s

from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants.series import usage_sample

pytestmark = pytest.mark.django_db
H800, L40S, A100 = "NVIDIA-H800", "NVIDIA-L40S", "NVIDIA-A100-SXM4-80GB"


def _pod(core, namespace: str, name: str, node: str, limits: dict[str, str]) -> None:
    core.create_namespaced_pod(namespace, k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, annotations={
            "kubesim.trainyard.io/run-seconds": "3600"}),
        spec=k8s.V1PodSpec(restart_policy="Never", node_name=node, containers=[
            k8s.V1Container(name="main", image="pytorch:2", resources=k8s.V1ResourceRequirements(
                requests={"cpu": "2", "memory": "8Gi"}, limits=limits))])))


def _row(body: str, attr: str) -> str:
    match = re.search(rf"<tr [^>]*{re.escape(attr)}[^>]*>(.*?)</tr>", body, re.S)
    assert match, attr
    return match.group(1)


def _cell(row: str, field: str) -> str:
    match = re.search(rf'data-field="{field}">(.*?)</t[dh]>', row, re.S)
    assert match, field
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def _fraction(text: str) -> tuple[int, int]:
    a, b = re.search(r"(\d+) / (\d+)", text).groups()
    return int(a), int(b)


def test_cluster_and_capacity_pages_show_one_allocation(cluster, tenant_a, tenant_b,
                                                        platform_admin, login, settings):
    settings.PROMETHEUS_URL = ""
    settings.TRAINYARD_DCGM_URLS = []
    cache.clear()
    core = k8s.CoreV1Api(cluster.api_client)
    acme, globex = tenant_a.pools.get(kind="prod"), tenant_b.pools.get(kind="dev")
    for ns in (acme.namespace, globex.namespace, "research"):
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    _pod(core, acme.namespace, "a-0", "h800-0", {"nvidia.com/gpu": "2"})
    _pod(core, globex.namespace, "g-0", "shared-0", {"nvidia.com/gpu.shared": "3"})
    _pod(core, globex.namespace, "g-1", "a100-mig-0", {"nvidia.com/mig-1g.10gb": "1"})
    cluster.advance(30)
    relist_all(get_client())
    usage_sample()            # the latest sampled minute: before the next two pods
    _pod(core, acme.namespace, "a-1", "h800-0", {"nvidia.com/gpu": "4"})
    _pod(core, "research", "r-0", "a100-0", {"nvidia.com/gpu": "1"})
    cluster.advance(30)
    relist_all(get_client())
    client = login(platform_admin)
    overview = client.get(reverse("cluster")).content.decode()
    capacity = client.get(reverse("platform_capacity")).content.decode()

    # per GPU model: the same figure on both pages, with its unit
    busy = _cell(_row(overview, f'data-model="{H800}"'), "alloc")
    assert busy == "6 / 8 cards (75%)", busy
    assert _fraction(_cell(_row(capacity, f'data-model="{H800}"'), "whole")) == (6, 8)
    a100 = _fraction(_cell(_row(overview, f'data-model="{A100}"'), "alloc"))
    assert a100[0] == 1 and a100 == _fraction(
        _cell(_row(capacity, f'data-model="{A100}"'), "whole"))
    shared = _cell(_row(overview, f'data-model="{L40S}"'), "alloc")
    assert shared == "3 / 16 shares (19%) on 4 physical cards", shared   # not 16 cards
    l40s = _row(capacity, f'data-model="{L40S}"')
    assert _fraction(_cell(l40s, "shared")) == (3, 16) and _cell(l40s, "cards") == "4"

    # per tenant: the same observation, adding up to the per-model figure
    tenants = {m.group(1): m.group(2) for m in re.finditer(
        r'<tr data-tenant="([^"]+)">(.*?)</tr>', overview, re.S)}
    assert _cell(tenants["acme"], "gpu") == "6 cards"        # not the sample's 2
    assert _cell(tenants["globex"], "shared") == "3 shares"
    assert _cell(tenants["globex"], "mig") == "1 MIG instance"
    assert _cell(_row(overview, 'data-row="other"'), "gpu") == "1 card"
    total = _row(overview, 'data-row="total"')
    assert (_cell(total, "gpu"), _cell(total, "mig"), _cell(total, "shared")) == (
        "7 cards", "1 MIG instance", "3 shares")

    # per quota resource: allocated as above, every amount with its unit
    cards = _row(capacity, f'data-key="gpu:{H800}"')
    assert _cell(cards, "allocated") == "6 cards" and _cell(cards, "capacity") == "8 cards"
    assert _cell(_row(capacity, 'data-key="gpu-shared"'), "allocated") == "3 shares"
    memory = _row(capacity, 'data-key="gpu-memory"')
    assert _cell(memory, "capacity").endswith(" GiB") and _cell(memory, "in_use").endswith(
        " GiB")
    by_model = re.findall(r"[\d,.]+", _cell(_row(capacity, 'data-row="total"'), "memory"))
    figures = [re.search(r"[\d,.]+", _cell(memory, f)).group(0)
               for f in ("allocated", "capacity")]
    assert [float(x.replace(",", "")) for x in figures] == pytest.approx(
        [float(x.replace(",", "")) for x in by_model], abs=0.5)   # GiB, rounded apart
    assert _cell(_row(capacity, 'data-key="cpu"'), "allocated") == "10 cores"   # 5 pods x 2
    # one "as of" time, the same on both pages
    stamp = re.search(r"nodes last listed ([0-9: -]+)\.", overview).group(1)
    assert f"nodes last listed {stamp}." in capacity
