"""Cluster sync at scale: 500 tenants with two pools each, against kubesim over HTTP.

Prints, for the first reconcile from empty and for a no-change resync, the seconds taken
and the API calls made (reads, writes) beside the minimum: one write per object for the
first, zero writes for the second. Prints figures; asserts nothing about time.

    .venv/bin/python bench/sync_scale.py [--tenants 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from harness import scratch_django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", type=int, default=500)
    args = parser.parse_args()

    scratch_django()
    from django.conf import settings

    from core.choices import PoolKind
    from k8s_sync import client as k8s_client
    from kubesim.cluster import Cluster
    from tenants.models import Pool, QuotaGrant, Tenant
    from tenants.tasks import reconcile_pool, resync_pools

    cluster = Cluster(simulate=False)
    url = cluster.start()
    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": url, "request_timeout": 30}
    k8s_client.reset_clients()

    tenants = Tenant.objects.bulk_create(
        Tenant(slug=f"team-{i:04d}", name=f"Team {i}", cost_center="CC", contact_email="t@x.org")
        for i in range(args.tenants))
    pools = Pool.objects.bulk_create(Pool(tenant=t, kind=k) for t in tenants
                                     for k in PoolKind.values)
    QuotaGrant.objects.bulk_create(
        QuotaGrant(pool=p, resource=r, amount=a) for p in pools
        for r, a in (("cpu", 64), ("memory", 256), ("gpu:NVIDIA-H800", 8), ("pvcs", 10)))

    calls: Counter[str] = Counter()
    kube = k8s_client.get_client()
    original = kube._request

    def counting(method, path, **kw):  # type: ignore[no-untyped-def]
        calls[method] += 1
        return original(method, path, **kw)

    kube._request = counting  # type: ignore[method-assign]

    objects_per_pool = 7
    start = time.perf_counter()
    for pool in pools:
        reconcile_pool.apply(args=[pool.pk]).get()
    first = time.perf_counter() - start
    first_calls = dict(calls)
    calls.clear()

    start = time.perf_counter()
    outcome = resync_pools.apply().get()
    resync = time.perf_counter() - start
    resync_calls = dict(calls)

    n_objects = len(pools) * objects_per_pool
    writes_first = first_calls.get("PATCH", 0)
    print(f"sync_scale: {args.tenants} tenants, {len(pools)} pools, {n_objects} objects")
    print(f"  first reconcile from empty: {first:7.2f} s  {sum(first_calls.values()):6d} calls "
          f"({writes_first} writes, {first_calls.get('GET', 0)} reads)  "
          f"minimum {n_objects} writes  -> {writes_first / n_objects:.2f}x the minimum  "
          f"({n_objects / first:.0f} objects/s)")
    writes_resync = sum(v for k, v in resync_calls.items() if k != "GET")
    print(f"  no-change resync:           {resync:7.2f} s  {sum(resync_calls.values()):6d} calls "
          f"({writes_resync} writes, {resync_calls.get('GET', 0)} list pages)  minimum 0 writes"
          f"  -> {outcome}")
    cluster.stop()


if __name__ == "__main__":
    main()
