"""Every element id is unique on a page (a label's ``for``, a script's lookup and a
browser test's locator all find the one element): the main pages of each role, rendered
with a tenant holding quota and a node with GPUs, parsed with ``html.parser``."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from django.utils import timezone

from k8s_sync.models import ObservedNode
from tenants.models import QuotaGrant


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: Counter[str] = Counter()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids[value] += 1


def duplicate_ids(html: str) -> list[str]:
    parser = _Ids()
    parser.feed(html)
    return sorted(i for i, n in parser.ids.items() if n > 1)


def test_the_parser_finds_a_duplicate() -> None:
    assert duplicate_ids('<p id="a"></p><select id="id_pool"></select><i id="id_pool">') \
        == ["id_pool"]
    assert duplicate_ids('<p id="a"></p><p id="b"></p>') == []


TENANT_PAGES = ["/t/acme/dashboard/", "/t/acme/quota/", "/t/acme/jobs/new/", "/t/acme/",
                "/t/acme/jobs/", "/t/acme/members/", "/t/acme/invoices/", "/cluster/"]
PLATFORM_PAGES = ["/cluster/", "/platform/capacity/", "/platform/cluster/",
                  "/platform/policy/", "/platform/tenants/", "/platform/quota-requests/",
                  "/platform/queue/", "/t/acme/pools/prod/", "/t/acme/edit/", "/catalog/"]
FINANCE_PAGES = ["/billing/", "/billing/rates/"]


@pytest.fixture
def world(tenant_a, platform_admin, finance_user):
    ObservedNode.objects.create(
        name="h800-0", gpu_product="NVIDIA-H800", gpu_model="NVIDIA-H800", gpu_count=8,
        gpu_memory_mib=81920, allocatable={"nvidia.com/gpu": "8", "cpu": "96",
                                           "memory": "1024Gi"},
        observed_at=timezone.now())
    for kind, key, amount in [("prod", "gpu:NVIDIA-H800", 4), ("prod", "cpu", 64),
                              ("dev", "memory", 256)]:
        QuotaGrant.objects.create(pool=tenant_a.pools.get(kind=kind), resource=key,
                                  amount=Decimal(amount), granted_by=platform_admin)


@pytest.mark.parametrize("who,pages", [("alice", TENANT_PAGES), ("pat", PLATFORM_PAGES),
                                       ("fran", FINANCE_PAGES)])
def test_no_page_repeats_an_element_id(login, world, alice, platform_admin, finance_user,
                                       who, pages):
    user = {"alice": alice, "pat": platform_admin, "fran": finance_user}[who]
    client = login(user)
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert duplicate_ids(response.content.decode()) == [], url
