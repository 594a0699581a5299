"""Egress billed by destination, end to end: kubesim's network-costs metrics over HTTP,
the ``billing.record_egress`` task, the ledger and the draft invoice with its drill-down.

Hand-computed: a 2-node job whose two pods exchange 1 TiB (512 GiB each way, NCCL
all-reduce) and send 10 GiB to the internet (5 GiB each) in 1,024 s is billed for the
10 GiB: 10 x 0.08 = 0.80. The 1 TiB stays within the zone (both nodes are in zone-a) and
is free; it shows in the drill-down."""

from __future__ import annotations

from decimal import Decimal

import pytest

from billing import services, tasks
from billing.choices import LineKind
from billing.models import EgressSample
from billing.tests.conftest import at
from core.texts import english
from k8s_sync.client import get_client
from k8s_sync.tests.observe_helpers import namespace, pytorchjob

GIB = 1024**3
SECONDS = 1024
INTERNET_PER_POD = 5 * GIB // SECONDS      # 5 GiB per pod in 1,024 s
PEER_PER_POD = 512 * GIB // SECONDS        # 512 GiB per pod: 1 TiB between the two


@pytest.fixture
def metrics_from_kubesim(cluster, settings):
    settings.PROMETHEUS_URL = ""
    settings.TRAINYARD_DCGM_URLS = []
    settings.TRAINYARD_EGRESS_METRICS = "network-costs"
    return cluster


def test_a_two_node_job_pays_for_its_internet_traffic_not_its_gradients(
        metrics_from_kubesim, frozen_clock, tenant_a, rate_card, alice, client):
    cluster = metrics_from_kubesim
    ns = namespace(get_client(), tenant_a.pools.get(kind="prod").namespace)
    job = pytorchjob("llama", gpus=8, worker_replicas=1, namespace=ns)
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        template = replica["template"]
        template["metadata"]["annotations"] = {
            "kubesim.trainyard.io/run-seconds": "7200",
            "kubesim.trainyard.io/egress-bytes-per-second": str(INTERNET_PER_POD),
            "kubesim.trainyard.io/peer-bytes-per-second": str(PEER_PER_POD)}
        template["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    get_client().apply(job)
    cluster.advance(10)

    # the last reading of October, then 1,024 s later the first of November: November's
    # invoice bills what the counters grew by in between
    frozen_clock.move_to(at("2026-10-31", "23:59:00"))
    assert tasks.record_egress() == 4  # two pods x (internet, within the zone)
    cluster.advance(SECONDS, step=128)
    frozen_clock.move_to(at("2026-11-01", "00:16:04"))
    assert tasks.record_egress() == 4
    november = EgressSample.objects.filter(at__gte=at("2026-11-01"))
    sent = {(s.pod, s.destination): s.transmit_delta for s in november}
    assert len({pod for pod, _ in sent}) == 2  # the master and the worker, on two nodes
    assert sum(v for (_, d), v in sent.items() if d == "internet") == pytest.approx(
        10 * GIB, abs=4)
    assert sum(v for (_, d), v in sent.items() if d == "in_cluster") == pytest.approx(
        1024 * GIB, abs=4)

    invoice = services.invoice_draft_refresh(tenant=tenant_a, now=at("2026-11-01", "01:00"),
                                             ingest=False)
    [line] = invoice.lines.filter(kind=LineKind.EGRESS)
    assert (line.resource, english(line.text)) == ("internet", "Egress to the internet")
    assert (line.quantity, line.unit_price, line.amount) == (
        Decimal("10"), Decimal("0.08"), Decimal("0.80"))

    client.force_login(alice)
    page = client.get(f"/t/acme/invoices/{invoice.pk}/?line={line.pk}")
    html = page.content.decode()
    assert page.status_code == 200 and html.count('data-destination="internet"') == 2
    assert html.count('data-destination="in_cluster"') == 2
    assert "512" in html and "within the zone" in html
    api = client.get(f"/api/v1/tenants/acme/invoices/{invoice.pk}/lines/{line.pk}/details/")
    assert api.status_code == 200
    assert [Decimal(d["gib_by_destination"]["in_cluster"]) for d in api.json()] == [512, 512]
    assert sum(Decimal(d["quantity"]) for d in api.json()) == 10
