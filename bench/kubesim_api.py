"""kubesim API throughput with the official client, against the client's own ceiling.

Prints creates/s, gets/s, lists/s (a 100-item namespace) and pages/s (the first 100 of the
big namespace that holds the other objects, limit=100), with the official client and
again as raw HTTP (urllib3 alone: the servers' own cost), against
  * kubesim (simulation off), with 100, 1,000 and 10,000 other objects stored, and
  * a do-nothing aiohttp server that answers every request with a canned body (the
    official client's ceiling on this machine: pydantic + urllib3 per call).
The goal is a flat per-request cost as the store grows, close to the ceiling. Both servers
run in their own process (`python -m kubesim --no-sim`, and this file with --ceiling-server),
as the portal talks to kubesim, so client and server do not share a GIL.
Each figure is the best of --reps runs (the machine is shared; best-of filters out
other load). Figures only; nothing is asserted.

    .venv/bin/python bench/kubesim_api.py [--n 500] [--sizes 100,1000,10000]
"""
from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kubernetes
import yaml
from aiohttp import web

from kubesim.testing import make_api_client

NS = "bench"          # writes go here
LIST_NS = "bench-list"  # holds exactly LIST_SIZE objects to list
LIST_SIZE = 100


def _cm(name: str, ns: str = NS) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "bench"}},
            "data": {"key": "value" * 8}}


class Ceiling:
    """A do-nothing server: canned answers, no state."""

    def __init__(self):
        # canned bodies shaped exactly like kubesim's answers (managedFields included), so
        # the client's deserialisation cost is the same
        from kubesim.store import Store
        store = Store(default_crds=False)
        store.create("namespaces", {"metadata": {"name": NS}})
        items = [store.create("configmaps", _cm(f"c{i}"), field_manager="OpenAPI-Generator")
                 for i in range(LIST_SIZE)]
        self.item = json.dumps(items[0]).encode()
        self.list = json.dumps({"kind": "ConfigMapList", "apiVersion": "v1",
                                "metadata": {"resourceVersion": "1"}, "items": items}).encode()

    async def handle(self, request: web.Request):
        if request.method == "POST":
            await request.read()
            return web.Response(body=self.item, status=201, content_type="application/json")
        if request.path.endswith("/configmaps"):
            return web.Response(body=self.list, content_type="application/json")
        return web.Response(body=self.item, content_type="application/json")

    def serve(self, port: int) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)

        async def announce(_app):
            print("ready", flush=True)
        app.on_startup.append(announce)
        web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def _spawn(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_ceiling() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = _spawn([__file__, "--ceiling-server", str(port)])
    assert proc.stdout.readline().strip() == "ready"
    return proc, f"http://127.0.0.1:{port}"


def start_kubesim(tmp: Path) -> tuple[subprocess.Popen, str]:
    kc = tmp / "kubeconfig"
    proc = _spawn(["-m", "kubesim", "--no-sim", "--port", "0", "--kubeconfig", str(kc),
                   "--log-level", "WARNING"])
    assert proc.stdout.readline().startswith("kubesim listening")
    return proc, yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]


def fill(api, url: str, start: int, stop: int) -> None:
    """Store more objects fast: raw POSTs without the client's models."""
    pool = api.rest_client.pool_manager
    for i in range(start, stop):
        r = pool.request("POST", f"{url}/api/v1/namespaces/fill/configmaps",
                         body=json.dumps(_cm(f"f-{i}", "fill")),
                         headers={"Content-Type": "application/json"})
        assert r.status == 201, r.data


def quiet(fn):
    """Run a measurement with the client's cyclic GC off (as timeit does), so a collection
    in the bench process does not land on one server's figures."""
    def run(*args, **kwargs):
        gc.collect()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()
    return run


@quiet
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
    t = time.perf_counter()
    for _ in range(rounds):   # the first page of the big "fill" namespace
        items = core.list_namespaced_config_map("fill", limit=LIST_SIZE)
    pages = rounds / (time.perf_counter() - t)
    return {"creates/s": creates, "gets/s": gets, "lists/s": lists, "pages/s": pages}


@quiet
def measure_raw(api, url: str, n: int, prefix: str) -> dict:
    """The same requests as raw HTTP (urllib3, no client models): the server's own cost."""
    pool, headers = api.rest_client.pool_manager, {"Content-Type": "application/json"}
    t = time.perf_counter()
    for i in range(n):
        pool.request("POST", f"{url}/api/v1/namespaces/{NS}/configmaps", headers=headers,
                     body=json.dumps(_cm(f"{prefix}-{i}")))
    creates = n / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(n):
        pool.request("GET", f"{url}/api/v1/namespaces/{LIST_NS}/configmaps/r-{i % LIST_SIZE}")
    gets = n / (time.perf_counter() - t)
    rounds = max(5, n // 5)
    t = time.perf_counter()
    for _ in range(rounds):
        pool.request("GET", f"{url}/api/v1/namespaces/{LIST_NS}/configmaps?"
                            "labelSelector=app%3Dbench")
    lists = rounds / (time.perf_counter() - t)
    t = time.perf_counter()
    for _ in range(rounds):
        pool.request("GET", f"{url}/api/v1/namespaces/fill/configmaps?limit={LIST_SIZE}")
    pages = rounds / (time.perf_counter() - t)
    return {"creates/s": creates, "gets/s": gets, "lists/s": lists, "pages/s": pages}


def best(runs: list[dict]) -> dict:
    return {k: max(r[k] for r in runs) for k in runs[0]}


def fmt(r: dict, ceiling: dict | None = None) -> str:
    parts = []
    for k, v in r.items():
        extra = f" ({100 * v / ceiling[k]:3.0f}%)" if ceiling else ""
        parts.append(f"{k} {v:5.0f}{extra} {1000 / v:4.2f}ms")
    return "  ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500, help="creates and gets per measurement")
    ap.add_argument("--sizes", default="100,1000,10000", help="other objects stored")
    ap.add_argument("--reps", type=int, default=3, help="runs per figure (best is shown)")
    ap.add_argument("--ceiling-server", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ceiling_server:
        Ceiling().serve(args.ceiling_server)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    procs = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            proc, ceiling_url = start_ceiling()
            procs.append(proc)
            proc, url = start_kubesim(Path(tmp))
            procs.append(proc)
            capi = make_api_client(ceiling_url, timeout=30)
            ccore = kubernetes.client.CoreV1Api(capi)
            api = make_api_client(url, timeout=30)
            core = kubernetes.client.CoreV1Api(api)
            for name in (NS, LIST_NS, "fill"):
                core.create_namespace({"metadata": {"name": name}})
            for i in range(LIST_SIZE):
                core.create_namespaced_config_map(LIST_NS, _cm(f"r-{i}", LIST_NS))
            measure(ccore, 20, "warm")
            measure(core, 20, "warm")
            core.delete_collection_namespaced_config_map(NS)
            # ceiling and kubesim runs alternate, so both see the same background load
            ceiling: list[dict] = []
            raw_ceiling: list[dict] = []
            rows = []
            filled = 0
            for size in sizes:
                fill(api, url, filled, size)
                filled = size
                runs, raw = [], []
                for rep in range(args.reps):
                    ceiling.append(measure(ccore, args.n, "c"))
                    runs.append(measure(core, args.n, f"s{size}-{rep}"))
                    core.delete_collection_namespaced_config_map(NS)
                    raw_ceiling.append(measure_raw(capi, ceiling_url, args.n, "c"))
                    raw.append(measure_raw(api, url, args.n, f"raw{size}-{rep}"))
                    core.delete_collection_namespaced_config_map(NS)
                rows.append((size, best(runs), best(raw)))
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
    c, rc = best(ceiling), best(raw_ceiling)
    print(f"official client {kubernetes.__version__}, {args.n} requests each, lists of "
          f"{LIST_SIZE} ConfigMaps; best of {args.reps} runs (ceiling: of all its runs)")
    print(f"{'do-nothing server':>26}: {fmt(c)}")
    for size, r, _ in rows:
        print(f"{f'kubesim, {size:>6} stored':>26}: {fmt(r, c)}")
    print("raw HTTP (urllib3, no client models): the servers' own cost")
    print(f"{'do-nothing server':>26}: {fmt(rc)}")
    for size, _, r in rows:
        print(f"{f'kubesim, {size:>6} stored':>26}: {fmt(r, rc)}")


if __name__ == "__main__":
    main()
