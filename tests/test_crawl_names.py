"""The crawl's check of names (issue 32, item 4): logged in as a member of one tenant, no
page or API response it can reach names another tenant's StorageClasses.

Both tenants have IOPS grants, and the cluster still holds per-pool IOPS StorageClasses
``ty-<tenant>-<pool>-<class>-<n>iops`` of each (as an older Trainyard made them, labelled
``trainyard.io/tenant``; the pool reconcile prunes them). The world and the URL list are
the crawl's (``tests/test_crawl.py``); every real URL is fetched as each tenant's member,
and the job form's submissions that list classes (a preview and a submit naming a class
the tenant may not see) are posted too.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from k8s_sync import naming
from k8s_sync.models import ObservedStorageClass
from tenants import services as tenant_services
from tenants.selectors import effective_grants

from .test_crawl import SKIP_PREFIXES, Crawl, _clients, _fill, _patterns, world  # noqa: F401

#: a class name derived from a tenant's slug: its pools' namespaces, then the class
OWN_CLASS = re.compile(r"ty-(?P<slug>[a-z0-9-]+?)-(?:prod|dev)-[a-z0-9.-]+?-\d+iops")


def _seed_classes(w, platform_admin) -> dict[str, list[str]]:
    now = timezone.now()
    ObservedStorageClass.objects.create(
        name="fast-ssd", uid="sc-fast", resource_version="1", observed_at=now,
        is_default=True, provisioner="local.csi.kubesim.trainyard.io")
    owned: dict[str, list[str]] = {}
    for tenant in (w["a"], w["b"]):
        for pool in tenant.pools.all():
            current = {k: str(v) for k, v in effective_grants(pool).items()}
            tenant_services.quota_set(actor=platform_admin, pool=pool, reason="names",
                                      amounts={**current, "iops:fast-ssd": 6000,
                                               "storage:fast-ssd": 100})
            name = f"{pool.namespace}-fast-ssd-3000iops"
            ObservedStorageClass.objects.create(
                name=name, uid=f"sc-{name}", resource_version="1", observed_at=now,
                provisioner="local.csi.kubesim.trainyard.io",
                labels=naming.pool_labels(tenant.slug, pool.kind))
            owned.setdefault(tenant.slug, []).append(name)
    return owned


def _leaks(body: str, slug: str) -> set[str]:
    return {m.group(0) for m in OWN_CLASS.finditer(body) if m.group("slug") != slug}


@pytest.mark.slow
def test_a_member_never_sees_another_tenants_storage_class_names(world, platform_admin):  # noqa: F811
    owned = _seed_classes(world, platform_admin)
    crawl = Crawl()
    crawl.clients = _clients(world)
    members = {"bob": world["a"].slug, "charlie": world["b"].slug}
    leaks: list[str] = []
    seen_own = set()
    for route, _pattern in _patterns():
        if route.startswith(SKIP_PREFIXES) or route.startswith("api/schema"):
            continue
        for url, real in _fill(route, world):
            if not real:
                continue
            for role, slug in members.items():
                page, api, _user = crawl.clients[role]
                client = api if route.startswith("api/") else page
                response = crawl.request(client, role, "get", url, note="names")
                if response is None or response.get("Content-Type", "").startswith(
                        ("application/pdf", "application/zip")):
                    continue
                body = response.content.decode(errors="replace")
                leaks += [f"GET {url} as {role}: {name}" for name in _leaks(body, slug)]
                seen_own |= {m.group(0) for m in OWN_CLASS.finditer(body)
                             if m.group("slug") == slug}
    # what lists the classes when a submission names one the tenant may not see
    for role, slug in members.items():
        other = next(name for s, names in owned.items() if s != slug for name in names)
        page, api, _user = crawl.clients[role]
        form = {"name": "names", "image": "registry.example.org/a/b:1", "pool": "dev",
                "tier": "development", "workers": 1, "gpus_per_worker": 0, "gpu_model": "",
                "cpu_per_worker": 1, "memory_gib_per_worker": 1, "max_run_hours": 1,
                "checkpoint_path": "/checkpoints", "checkpoint_storage_class": other,
                "checkpoint_size_gib": 10}
        body = {**form, "max_run_seconds": 3600}
        # another tenant's class is refused as one the cluster does not have (the answer
        # echoes the name sent, and lists only what the member may see); an unknown name
        # gets the same list of choices
        for sent in (other, "gold"):
            for client, url, data, kind in (
                    (page, f"/t/{slug}/jobs/new/", form, None),
                    (page, f"/t/{slug}/jobs/preview/", form, None),
                    (api, f"/api/v1/tenants/{slug}/jobs/", body, "json"),
                    (api, f"/api/v1/tenants/{slug}/jobs/preview/", body, "json")):
                data = {**data, "checkpoint_storage_class": sent}
                response = crawl.request(client, role, "post", url, data=data,
                                         content_type="application/json" if kind else None,
                                         note=f"class {sent}")
                if response is None:
                    continue
                text = response.content.decode(errors="replace")
                assert response.status_code != 201, (url, text[:300])
                assert "checkpoint_storage_class" in text, (url, text[:300])
                leaks += [f"POST {url} as {role}: {name}"
                          for name in _leaks(text.replace(sent, ""), slug)]
        response = crawl.request(page, role, "get", f"/t/{slug}/jobs/new/?"
                                 + urlencode({"template": ""}), note="form")
        form_page = response.content.decode()
        assert 'value="fast-ssd"' in form_page
        assert all(f'value="{name}"' in form_page for name in owned[slug])
        assert other not in form_page
    assert not crawl.failures, "\n".join(sorted(set(crawl.failures)))
    assert not leaks, "another tenant's StorageClass names reached a member:\n" + "\n".join(
        sorted(set(leaks)))
    assert seen_own  # the member's own classes are shown (the form at least)
