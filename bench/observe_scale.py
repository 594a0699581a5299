"""Observing at scale: relist and watch N pods from kubesim into the database.

Prints, wall seconds and the observer's CPU seconds (its threads' own clocks, whatever
else the machine runs): the bare list over HTTP (the baseline, no database), the first
relist (every row inserted), a no-change relist (no row written), a relist after 10% of
the pods changed, the watch recording N new pods (the reflector in a thread, as
``k8s_watch`` runs it: its thread and its stream reader's), the watch recording a change
of each of them (both in large batches) and 300 changes made one after the other, each
recorded before the next (a batch, a transaction per event, as a quiet cluster's watch
sees them); for a watch, the CPU milliseconds per event. Prints figures; asserts nothing
about time.

    .venv/bin/python bench/observe_scale.py [--pods 5000]
    .venv/bin/python bench/observe_scale.py --old /path/to/older/checkout [--rounds 2]

``--old`` measures that checkout's observer and this one's in the same run, each in a
fresh process, alternately (old, new, old, new ...), and prints them side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import scratch_django

ROOT = Path(os.environ.get("TRAINYARD_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))


def _pod(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"trainyard.io/tenant": "bench", "trainyard.io/pool": "prod"}},
            "spec": {"containers": [{"name": "pytorch", "image": "pytorch:2", "resources": {
                "requests": {"cpu": "4", "memory": "32Gi"},
                "limits": {"nvidia.com/gpu": "1"}}}]}}


class WatcherClock:
    """CPU seconds of the reflector's thread and of its stream readers (``_Pump``)."""

    def __init__(self, observe_module) -> None:  # type: ignore[no-untyped-def]
        self.clocks: dict[int, int] = {}  # thread ident -> its CPU clock id
        self.finished = 0.0  # CPU of readers that ended
        self.lock = threading.Lock()
        pump, clock = observe_module._Pump, self
        original = pump.run

        def run(reader) -> None:  # type: ignore[no-untyped-def]
            clock.register()
            try:
                original(reader)
            finally:
                clock.unregister()
        pump.run = run

    def register(self) -> None:
        with self.lock:
            self.clocks[threading.get_ident()] = time.pthread_getcpuclockid(
                threading.get_ident())

    def unregister(self) -> None:
        with self.lock:
            self.clocks.pop(threading.get_ident(), None)
            self.finished += time.thread_time()

    def seconds(self) -> float:
        with self.lock:
            return self.finished + sum(time.clock_gettime(c) for c in self.clocks.values())


def measure(n: int, database_url: str) -> dict:
    scratch_django(database_url)
    from django.conf import settings
    from django.db import connection

    from k8s_sync import client as k8s_client
    from k8s_sync import observe
    from k8s_sync.models import ObservedPod
    from kubesim.cluster import Cluster

    watcher_cpu = WatcherClock(observe)
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

    def touch(names: list[str], value: str) -> None:
        def run() -> None:
            for name in names:
                store.patch("pods", name, {"metadata": {"labels": {"touched": value}}},
                            patch_type="merge", namespace=ns)
        cluster.call(run)

    started = time.perf_counter()
    create([f"p-{i:06d}" for i in range(n)])
    out: dict = {"pods": n, "vendor": connection.vendor,
                 "creating_s": time.perf_counter() - started}

    def timed(name: str, fn) -> None:  # type: ignore[no-untyped-def]
        wall, cpu = time.perf_counter(), time.thread_time()
        fn()
        out[name] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.thread_time() - cpu}

    kube.list_with_resource_version("v1", "Pod")  # warm up the connection and kubesim
    timed("bare_list", lambda: kube.list_with_resource_version("v1", "Pod"))
    timed("first_relist", lambda: observe.relist_all(kube, ["pods"]))
    timed("nochange_relist", lambda: observe.relist_all(kube, ["pods"]))
    touch([f"p-{i:06d}" for i in range(0, n, 10)], "1")
    timed("tenth_relist", lambda: observe.relist_all(kube, ["pods"]))

    freeze = getattr(observe, "freeze_heap", None)  # as k8s_watch does before its threads
    out["freeze_heap"] = freeze is not None
    if freeze is not None:
        freeze()
    reflector = observe.Reflector(kube, observe.KINDS["pods"], backoff=observe.Backoff(base=0.1),
                                  watch_timeout=60, manage_connections=True)
    clock: list[int] = []

    def run_reflector() -> None:
        clock.append(time.pthread_getcpuclockid(threading.get_ident()))
        try:
            reflector.run()
        finally:
            connection.close()
    thread = threading.Thread(target=run_reflector, daemon=True)
    thread.start()
    while reflector.lists < 1:
        time.sleep(0.01)
    time.sleep(0.2)  # the watch is open

    def watched(name: str, change, done) -> None:  # type: ignore[no-untyped-def]
        events, batches = reflector.events, reflector.batches
        cpu = time.clock_gettime(clock[0]) + watcher_cpu.seconds()
        wall = time.perf_counter()
        change()
        while not done():
            time.sleep(0.05)
        wall = time.perf_counter() - wall
        time.sleep(0.2)  # the events the kubesim scheduler sent meanwhile are recorded
        cpu = time.clock_gettime(clock[0]) + watcher_cpu.seconds() - cpu
        count = reflector.events - events
        out[name] = {"wall_s": wall, "cpu_s": cpu, "events": count,
                     "per_batch": count / max(1, reflector.batches - batches),
                     "cpu_ms_per_event": cpu * 1000 / max(1, count)}

    names = [f"w-{i:06d}" for i in range(n)]
    watched("watch_new", lambda: create(names),
            lambda: ObservedPod.objects.filter(name__startswith="w-").count() >= n)
    watched("watch_modified", lambda: touch(names, "2"),
            lambda: ObservedPod.objects.filter(name__startswith="w-",
                                               labels__touched="2").count() >= n)
    single = names[:min(n, 300)]

    def one_by_one() -> None:  # each change recorded before the next: a batch per event
        for name in single:
            touch([name], "3")
            while not ObservedPod.objects.filter(name=name, labels__touched="3").exists():
                time.sleep(0.001)
    watched("watch_one_by_one", one_by_one,
            lambda: ObservedPod.objects.filter(name__in=single,
                                               labels__touched="3").count() >= len(single))
    reflector.stop()
    thread.join(10)
    cluster.stop()
    return out


PHASES = [("bare_list", "bare list over HTTP (baseline)"), ("first_relist", "first relist"),
          ("nochange_relist", "no-change relist"), ("tenth_relist", "relist, 10% changed"),
          ("watch_new", "watch, N new pods"), ("watch_modified", "watch, N pods modified"),
          ("watch_one_by_one", "watch, 300 changes one by one")]


def report(out: dict) -> None:
    print(f"observe_scale: {out['pods']} pods (kubesim 'default' profile, {out['vendor']})")
    for key, label in PHASES:
        p = out[key]
        extra = (f"  {p['events']} events, {p['per_batch']:.0f}/transaction, "
                 f"{p['cpu_ms_per_event']:.3f} CPU ms/event" if "events" in p else "")
        print(f"  {label:32s} {p['wall_s']:6.2f} s wall, {p['cpu_s']:6.2f} s CPU{extra}")


def compare(old: str, args: argparse.Namespace) -> None:
    """Old and new, alternately, each in a fresh process; the medians side by side."""
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    here = str(Path(__file__).resolve().parent.parent)
    for _ in range(args.rounds):
        for label, root in (("old", old), ("new", here)):
            env = {**os.environ, "TRAINYARD_ROOT": root}
            done = subprocess.run(
                [sys.executable, __file__, "--pods", str(args.pods), "--json",
                 "--database-url", args.database_url], env=env, check=True,
                capture_output=True, text=True)
            runs[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"observe_scale: {args.pods} pods, old ({old}) vs new ({here}), medians of "
          f"{args.rounds} alternate runs; load average {os.getloadavg()[0]:.1f}")
    print(f"  {'':32s} {'old wall':>9s} {'new wall':>9s} {'old CPU':>9s} {'new CPU':>9s}"
          f" {'old ms/ev':>9s} {'new ms/ev':>9s}")
    for key, label in PHASES:
        def med(side: str, field: str, key: str = key) -> float:
            return statistics.median(r[key].get(field, 0.0) for r in runs[side])
        row = (f"  {label:32s} {med('old', 'wall_s'):9.2f} {med('new', 'wall_s'):9.2f} "
               f"{med('old', 'cpu_s'):9.2f} {med('new', 'cpu_s'):9.2f}")
        if "events" in runs["old"][0][key]:
            row += (f" {med('old', 'cpu_ms_per_event'):9.3f} "
                    f"{med('new', 'cpu_ms_per_event'):9.3f}")
        print(row)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--database-url", default="",
                        help="e.g. postgres://... (default: a fresh SQLite file)")
    parser.add_argument("--old", default="", help="another checkout to measure alongside")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.old:
        compare(args.old, args)
        return
    out = measure(args.pods, args.database_url)
    if args.json:
        print(json.dumps(out))
    else:
        report(out)


if __name__ == "__main__":
    main()
