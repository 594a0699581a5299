"""kubesim API throughput with the official client, against the client's own ceiling.

Prints creates/s, gets/s and lists/s (a 100-item namespace) against
  * kubesim (simulation off), with 100, 1,000 and 10,000 other objects stored, and
  * a do-nothing aiohttp server that answers every request with a canned body (the
    official client's ceiling on this machine: pydantic + urllib3 per call).
The goal is a flat per-request cost as the store grows, close to the ceiling.
Each figure is the best of --reps runs (the machine is shared; best-of filters out
other load). Figures only; nothing is asserted.

    .venv/bin/python bench/kubesim_api.py [--n 500] [--sizes 100,1000,10000]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from concurrent.futures import Future

import kubernetes
from aiohttp import web

from kubesim.cluster import Cluster
from kubesim.testing import make_api_client

NS = "bench"          # writes go here
LIST_NS = "bench-list"  # holds exactly LIST_SIZE objects to list
LIST_SIZE = 100


def _cm(name: str, ns: str = NS) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "bench"}},
            "data": {"key": "value" * 8}}


def _stored(name: str, rv: int = 1) -> dict:
    obj = _cm(name)
    obj["metadata"].update({"uid": "00000000-0000-4000-8000-000000000000",
                            "resourceVersion": str(rv),
                            "creationTimestamp": "2026-01-01T00:00:00Z"})
    return obj


class Ceiling:
    """A do-nothing server: canned answers, no state."""

    def __init__(self):
        item = json.dumps(_stored("canned")).encode()
        lst = json.dumps({"kind": "ConfigMapList", "apiVersion": "v1",
                          "metadata": {"resourceVersion": "1"},
                          "items": [_stored(f"c{i}") for i in range(LIST_SIZE)]}).encode()
        self.item, self.list = item, lst

    async def handle(self, request: web.Request):
        if request.method == "POST":
            await request.read()
            return web.Response(body=self.item, status=201, content_type="application/json")
        if request.path.endswith("/configmaps"):
            return web.Response(body=self.list, content_type="application/json")
        return web.Response(body=self.item, content_type="application/json")

    def start(self) -> str:
        ready: Future = Future()

        def run():
            loop = asyncio.new_event_loop()
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self.handle)
            runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            ready.set_result(site._server.sockets[0].getsockname()[1])
            loop.run_forever()
        threading.Thread(target=run, daemon=True).start()
        return f"http://127.0.0.1:{ready.result(timeout=10)}"


def measure(core, n: int, prefix: str) -> dict:
    t = time.perf_counter()
    for i in range(n):
        core.create_namespaced_config_map(NS, _cm(f"{prefix}-{i}"))
    creates = n / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(n):
        core.read_namespaced_config_map(f"r-{i % LIST_SIZE}", LIST_NS)
    gets = n / (time.perf_counter() - t)
    rounds = max(5, n // 20)
    t = time.perf_counter()
    for _ in range(rounds):
        items = core.list_namespaced_config_map(LIST_NS, label_selector="app=bench")
        assert len(items.items) == LIST_SIZE
    lists = rounds / (time.perf_counter() - t)
    return {"creates/s": creates, "gets/s": gets, "lists/s": lists}


def best(runs: list[dict]) -> dict:
    return {k: max(r[k] for r in runs) for k in runs[0]}


def fmt(r: dict, ceiling: dict | None = None) -> str:
    parts = []
    for k, v in r.items():
        extra = f" ({100 * v / ceiling[k]:3.0f}%)" if ceiling else ""
        parts.append(f"{k:>10} {v:7.0f}{extra} = {1000 / v:5.2f} ms/req")
    return "   ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500, help="creates and gets per measurement")
    ap.add_argument("--sizes", default="100,1000,10000", help="other objects stored")
    ap.add_argument("--reps", type=int, default=3, help="runs per figure (best is shown)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    ceiling_url = Ceiling().start()
    core = kubernetes.client.CoreV1Api(make_api_client(ceiling_url, timeout=30))
    measure(core, 20, "warm")
    ceiling = best([measure(core, args.n, "c") for _ in range(args.reps)])
    print(f"official client {kubernetes.__version__}, {args.n} requests each, lists of "
          f"{LIST_SIZE} ConfigMaps")
    print(f"{'do-nothing server':>26}: {fmt(ceiling)}")

    cluster = Cluster(profile=None, simulate=False, deterministic=True)
    url = cluster.start()
    core = kubernetes.client.CoreV1Api(make_api_client(url, timeout=30))
    for name in (NS, LIST_NS, "fill"):
        core.create_namespace({"metadata": {"name": name}})
    for i in range(LIST_SIZE):
        core.create_namespaced_config_map(LIST_NS, _cm(f"r-{i}", LIST_NS))
    measure(core, 20, "warm")
    filled = 0
    for size in sizes:
        def fill(upto=size, start=filled):
            for i in range(start, upto):
                cluster.store.create("configmaps", _cm(f"f-{i}", "fill"))
        cluster.call(fill)
        filled = size
        runs = []
        for rep in range(args.reps):
            runs.append(measure(core, args.n, f"s{size}-{rep}"))
            cluster.call(lambda p=f"s{size}-{rep}": [
                cluster.store.delete("configmaps", f"{p}-{i}", namespace=NS)
                for i in range(args.n)])
        print(f"{f'kubesim, {size:>6} stored':>26}: {fmt(best(runs), ceiling)}")
    cluster.stop()


if __name__ == "__main__":
    main()
