"""Observing at scale: relist and watch N pods from kubesim into the database.

Prints seconds for: the bare list over HTTP (the baseline, no database), the first relist
(every row inserted), a no-change relist (no row written), a relist after 10% of the pods
changed, and the watch recording N new pods one event at a time (the reflector in a
thread, as ``k8s_watch`` runs it). Prints figures; asserts nothing about time.

    .venv/bin/python bench/observe_scale.py [--pods 5000]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from harness import scratch_django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _pod(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"trainyard.io/tenant": "bench", "trainyard.io/pool": "prod"}},
            "spec": {"containers": [{"name": "pytorch", "image": "pytorch:2", "resources": {
                "requests": {"cpu": "4", "memory": "32Gi"},
                "limits": {"nvidia.com/gpu": "1"}}}]}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--database-url", default="",
                        help="e.g. postgres://... (default: a fresh SQLite file)")
    args = parser.parse_args()

    scratch_django(args.database_url)
    from django.conf import settings
    from django.db import connection

    from k8s_sync import client as k8s_client
    from k8s_sync.models import ObservedPod
    from k8s_sync.observe import KINDS, Backoff, Reflector, relist_all
    from kubesim.cluster import Cluster

    cluster = Cluster(profile="default", deterministic=True, simulate=True)
    url = cluster.start()
    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": url, "request_timeout": 60}
    k8s_client.reset_clients()
    kube = k8s_client.get_client()
    store = cluster.store
    ns = "ty-bench-prod"
    cluster.call(store.create, "namespaces", {"metadata": {"name": ns}})

    def create(names: list[str]) -> None:
        def run() -> None:
            for name in names:
                store.create("pods", _pod(name, ns), namespace=ns)
        cluster.call(run)

    n = args.pods
    started = time.perf_counter()
    create([f"p-{i:06d}" for i in range(n)])
    creating = time.perf_counter() - started

    def timed(fn):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    kube.list_with_resource_version("v1", "Pod")  # warm up the connection and kubesim
    baseline = timed(lambda: kube.list_with_resource_version("v1", "Pod"))
    first = timed(lambda: relist_all(kube, ["pods"]))
    again = timed(lambda: relist_all(kube, ["pods"]))

    def touch() -> None:
        for i in range(0, n, 10):
            store.patch("pods", f"p-{i:06d}", {"metadata": {"labels": {"touched": "1"}}},
                        patch_type="merge", namespace=ns)
    cluster.call(touch)
    tenth = timed(lambda: relist_all(kube, ["pods"]))

    reflector = Reflector(kube, KINDS["pods"], backoff=Backoff(base=0.1), watch_timeout=60,
                          manage_connections=True)

    def run_reflector() -> None:
        try:
            reflector.run()
        finally:
            connection.close()
    thread = threading.Thread(target=run_reflector, daemon=True)
    thread.start()
    while reflector.lists < 1:
        time.sleep(0.01)
    time.sleep(0.2)  # the watch is open
    start = time.perf_counter()
    create([f"w-{i:06d}" for i in range(n)])
    while ObservedPod.objects.filter(name__startswith="w-").count() < n:
        time.sleep(0.05)
    watched = time.perf_counter() - start
    reflector.stop()
    thread.join(10)

    print(f"observe_scale: {n} pods (kubesim 'default' profile, {connection.vendor})")
    print(f"  kubesim creating {n} pods:      {creating:6.2f} s  (part of the watch figure)")
    print(f"  bare list over HTTP (baseline): {baseline:6.2f} s")
    print(f"  first relist (insert {n}):     {first:6.2f} s  ({n / first:,.0f} pods/s, "
          f"{first / baseline:.1f}x the bare list)")
    print(f"  no-change relist (0 writes):    {again:6.2f} s  "
          f"({again / baseline:.1f}x the bare list)")
    print(f"  relist, 10% changed:            {tenth:6.2f} s")
    print(f"  watch, {n} new pods one event each: {watched:6.2f} s  ({n / watched:,.0f} events/s; "
          f"{reflector.events / max(1, reflector.batches):.0f} events per transaction)")
    cluster.stop()


if __name__ == "__main__":
    main()
