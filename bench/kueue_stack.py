"""Kueue's scheduler baseline through the whole Trainyard stack, in real time.

The workload of ``bench/kueue_baseline.py`` (5 GPU models x 120 GPUs, 6 tenants each with
quota 20 and ceiling 100; small/medium/large jobs at their arrival times) is submitted
through the service layer into the database at its arrival times; the admission loop
(``jobs.admission_cycle``, every ``--interval`` s in its own thread, as a worker runs it)
decides and applies in bulk; the cluster writes (``jobs.sync_job`` of a submission,
``jobs.sync_jobs`` of a pass) run in a k8s-worker thread, each batch in its bounded pool
(``--concurrency``); kubesim runs in its own process over HTTP (the official client),
its simulated operator, scheduler and kubelet running the pods for their run times in
real time; the watch (``k8s_sync.observe.Reflector`` of pods and PyTorchJobs, and in
Kueue mode of Kueue's Workloads, as ``manage.py k8s_watch`` runs them) records what the
loop reads. As Kueue's own test
runs through its API server.

Prints the figures of the engine-alone run beside Kueue's published averages, then
admissions per second, pass time (p50/p99), submission lag, the peak memory of each
process, and two checks made during the run: from the cluster (a watch of PyTorchJobs)
and from the database (every JobTransition, in commit order), no pool's admitted GPUs
ever exceeded its ceiling; and from the database, no job was admitted twice (each
job's transitions form one chain, every admission from the queue). Asserts nothing
but exits non-zero when a check fails.

    .venv/bin/python bench/kueue_stack.py [--scale 1] [--concurrency 8] [--interval 0.1]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard_bench_stack \
        .venv/bin/python bench/kueue_stack.py      # on Postgres (the database is recreated)

``--scale 1`` (the default, ``make bench``) is the full 15,000 jobs; ``--scale 0.05`` is
750 jobs in about a minute.

``--backend kueue`` runs the stack with ``TRAINYARD_ADMISSION_BACKEND=kueue``: the pools'
ClusterQueues, LocalQueues, flavors and cohort are written by ``tenants.tasks.reconcile_kueue``
from the grants, jobs are created suspended with Kueue's labels (``jobs.backends.kueue``),
kubesim's Kueue controller admits them, and the loop's pass (``KueueBackend.cycle``) reads
the Workloads back into job states. Bench mappings as in ``kueue_baseline.py --backend
kueue``: a WorkloadPriorityClass per job class (``kueue_job`` wrapped to label each job by
its class) and Kueue's baseline preemption on the development queues (``_preemption``
wrapped). A job's admission is dated when Trainyard recorded it (the transition's
``observed_at``): Kueue's condition times have 1 s resolution.

    .venv/bin/python bench/kueue_stack.py --backend kueue --scale 0.02
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import fresh_database, scratch_django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


PROBE_MODEL = "PROBE"
PROBE_EVERY = 5.0
"""A probe job (1 GPU, production, its own tenant and node) is submitted every
``PROBE_EVERY`` seconds of the run: nobody else may use its node (every bench tenant's
borrowing is capped, and a cap bounds a model not granted at 0), so its capacity is
always free, and its time from submission to admission is the loop's own latency."""


def _profile(scenario, probe: bool = False):  # type: ignore[no-untyped-def]
    from kueue_baseline import kubesim_profile

    profile = kubesim_profile(scenario)
    if probe:
        base = next(iter(profile["gpu_models"].values()))
        profile["gpu_models"][PROBE_MODEL] = {**base, "product": f"NVIDIA-{PROBE_MODEL}",
                                              "name": f"NVIDIA {PROBE_MODEL}"}
        profile["pools"].append({
            "name": "probe", "count": 1, "prefix": "probe-", "zone": "zone-a",
            "racks": ["rack-probe"], "switches": ["switch-probe"], "cpu": "64",
            "memory": "512Gi", "instance_type": "bench",
            "gpu": {"model": PROBE_MODEL, "count": 8}})
        from kubesim.sim import load_profile

        profile = load_profile(profile)
    return profile


KUBESIM = """
import gc, json, sys, resource
sys.path.insert(0, sys.argv[1])
from kubesim.cluster import Cluster
cluster = Cluster(profile=json.load(open(sys.argv[2])), speed=1.0, simulate=True,
                  tick_seconds=0.05)
print(cluster.start(), flush=True)
gc.freeze()
gc.set_threshold(50_000, 50, 100)
sys.stdin.read()
cluster.stop()
usage = resource.getrusage(resource.RUSAGE_SELF)
print(usage.ru_utime + usage.ru_stime, flush=True)
print(usage.ru_maxrss, flush=True)
"""
"""kubesim in its own process (as in production, the API server is not in Trainyard's
processes): serves until its stdin closes, then prints its CPU seconds and peak RSS (KiB)."""


def _start_kubesim(profile: dict, tmp: Path) -> tuple[subprocess.Popen, str]:
    path = tmp / "profile.json"
    path.write_text(json.dumps(profile))
    proc = subprocess.Popen([sys.executable, "-c", KUBESIM, str(ROOT), str(path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _stop_kubesim(proc: subprocess.Popen) -> tuple[float, int]:
    """(CPU seconds, peak RSS KiB) of kubesim's process."""
    out, _ = proc.communicate(timeout=60)
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    try:
        return float(lines[-2]), int(lines[-1])
    except (IndexError, ValueError):
        return 0.0, 0


def _machine_cpu_seconds() -> float:
    """CPU seconds the whole machine has been busy (every core, /proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(f) for f in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _sqlite_for_threads() -> None:
    """The bench's threads share the SQLite file as ``make run``'s processes do: wait for
    locks (IMMEDIATE transactions, a timeout), and WAL so readers never block a writer."""
    from django.conf import settings
    from django.db import connection
    from django.db.backends.signals import connection_created

    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.sqlite3":
        return
    db.setdefault("OPTIONS", {}).update(timeout=30, transaction_mode="IMMEDIATE")
    connection.close()

    def wal(sender, connection, **kwargs):  # type: ignore[no-untyped-def]
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
    connection_created.connect(wal, weak=False)


class ClusterCeilingCheck(threading.Thread):
    """From the cluster: a watch of PyTorchJobs; after every event, the GPUs of each
    namespace's un-suspended, unfinished PyTorchJobs (what the cluster was told to run),
    and the most each namespace ever had."""

    def __init__(self, client) -> None:  # type: ignore[no-untyped-def]
        super().__init__(name="ceiling-check", daemon=True)
        self.client = client
        self.stopped = threading.Event()
        self.holding: dict[tuple[str, str], int] = {}
        self.per_ns: dict[str, int] = defaultdict(int)
        self.peak: dict[str, int] = defaultdict(int)
        self.events = 0
        self.stream = None

    @staticmethod
    def gpus(obj: dict) -> int:
        spec = obj.get("spec") or {}
        if (spec.get("runPolicy") or {}).get("suspend"):
            return 0
        done = {c.get("type") for c in (obj.get("status") or {}).get("conditions") or []
                if c.get("status") == "True"}
        if done & {"Succeeded", "Failed"}:
            return 0
        total = 0
        for replica in (spec.get("pytorchReplicaSpecs") or {}).values():
            for container in ((replica.get("template") or {}).get("spec") or {}).get(
                    "containers") or []:
                limits = (container.get("resources") or {}).get("limits") or {}
                total += int(replica.get("replicas") or 1) * int(
                    limits.get("nvidia.com/gpu") or 0)
        return total

    def apply(self, kind: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        new = 0 if kind == "DELETED" else self.gpus(obj)
        old = self.holding.pop(key, 0)
        if new:
            self.holding[key] = new
        ns = key[0]
        self.per_ns[ns] += new - old
        self.peak[ns] = max(self.peak[ns], self.per_ns[ns])
        self.events += 1

    def run(self) -> None:
        version = ""
        while not self.stopped.is_set():
            try:
                if not version:
                    items, version = self.client.list_with_resource_version(
                        "kubeflow.org/v1", "PyTorchJob")
                    self.holding.clear()
                    self.per_ns.clear()
                    for obj in items:
                        self.apply("ADDED", obj)
                self.stream = self.client.watch("kubeflow.org/v1", "PyTorchJob",
                                                resource_version=version, timeout_seconds=60)
                for kind, obj in self.stream:
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if kind != "BOOKMARK":
                        self.apply(kind, obj)
                    if self.stopped.is_set():
                        break
            except Exception:  # 410 or a dropped stream: relist
                version = ""
                time.sleep(0.2)

    def stop(self) -> None:
        self.stopped.set()
        if self.stream is not None:
            self.stream.close()


#: Reasons of a transition in the job's own state: an eviction Kueue made and undid between
#: two of Trainyard's passes, recorded from the Workload's eviction counts
#: (``jobs.backends.kueue_evictions.record_new``), not a second admission.
BETWEEN_PASSES = frozenset({"Preempted", "Evicted", "NotStarted"})


def database_checks(ceilings: dict[str, int]) -> tuple[dict[str, int], list[str]]:
    """From the database: replay every JobTransition in commit order (``observed_at``,
    id). Returns the peak admitted GPUs per pool (namespace) and the problems found: a
    transition that does not continue its job's chain (a decision applied twice, or
    from a state the job was not in), an admission not from the queue."""
    from jobs.models import JobTransition, TrainingJob

    holding_states = {"admitted", "running", "preempting"}
    jobs = {j.pk: j for j in TrainingJob.objects.select_related("pool__tenant").only(
        "id", "workers", "gpus_per_worker", "pool__kind", "pool__tenant__slug")}
    state: dict[int, str] = {}
    used: dict[str, int] = defaultdict(int)
    peak: dict[str, int] = defaultdict(int)
    problems: list[str] = []
    rows = JobTransition.objects.order_by("observed_at", "id").values_list(
        "job_id", "from_state", "to_state", "reason").iterator(chunk_size=5000)
    for job_id, before, after, reason in rows:
        was = state.get(job_id, "")
        if before != was:
            problems.append(f"job {job_id}: {before or '-'} -> {after} while {was or '-'}")
        if before == after == was and reason in BETWEEN_PASSES:
            continue   # Kueue mode: an eviction undone between two passes, recorded
        if after == "admitted" and before != "queued":
            problems.append(f"job {job_id}: admitted from {before or '-'}")
        job = jobs[job_id]
        ns = job.pool.namespace
        gpus = job.workers * job.gpus_per_worker
        used[ns] += gpus * ((after in holding_states) - (was in holding_states))
        peak[ns] = max(peak[ns], used[ns])
        if peak[ns] > ceilings.get(ns, 0) and used[ns] == peak[ns]:
            problems.append(f"{ns}: {used[ns]} GPUs admitted, ceiling {ceilings.get(ns)}")
        state[job_id] = after
    return dict(peak), problems


def _k8s_worker() -> tuple[queue.Queue[int | None], list[int], threading.Thread]:
    """What a Celery worker of the "k8s" queue does with ``jobs.sync_job`` and
    ``jobs.sync_jobs`` tasks, in a thread: the on-commit enqueues of this process go to
    a queue, and every id waiting is converged in one ``sync_jobs`` batch (its calls
    within the bounded pool; in Kueue mode, where ``sync_jobs`` hands each id to a
    ``sync_job`` task, those tasks in a pool of the same size). ``None`` on the queue
    ends it."""
    from concurrent.futures import ThreadPoolExecutor

    from django.conf import settings
    from django.db import connection

    import jobs.tasks
    from jobs.backends import get_backend

    concurrency = max(1, int(getattr(settings, "TRAINYARD_SYNC_CONCURRENCY", 8)))

    def one(job_id: int) -> None:
        try:
            jobs.tasks.sync_job.apply(args=[job_id])
        finally:
            connection.close()  # this thread's own connection

    work: queue.Queue[int | None] = queue.Queue()
    jobs.tasks.sync_job.delay = lambda job_id: work.put(job_id)
    jobs.tasks.sync_jobs.delay = lambda ids: [work.put(i) for i in ids]
    batches: list[int] = []

    def run() -> None:
        done = False
        while not done:
            ids = [work.get()]
            while True:
                try:
                    ids.append(work.get_nowait())
                except queue.Empty:
                    break
            done = None in ids
            todo = [i for i in ids if i is not None]
            if todo:
                batches.append(len(todo))
                if get_backend().name == "trainyard":
                    jobs.tasks.sync_jobs(todo)
                else:  # sync_jobs hands each id to its own sync_job task: run them here
                    with ThreadPoolExecutor(max_workers=min(len(todo), concurrency),
                                            thread_name_prefix="sync-job") as pool:
                        list(pool.map(one, todo))
        connection.close()
    thread = threading.Thread(target=run, name="k8s-worker", daemon=True)
    thread.start()
    return work, batches, thread


def _kueue_mappings(scenario) -> None:  # type: ignore[no-untyped-def]
    """Kueue mode's bench mappings (see the module docstring), in this process before
    anything is written (the forked worker and watcher inherit them)."""
    from kueue_baseline import BENCH_PRIORITY, bench_preemption, class_of_gpus

    from k8s_sync import kueue

    build_preemption, build_job = kueue._preemption, kueue.kueue_job

    def preemption(queue, spec):  # type: ignore[no-untyped-def]
        return build_preemption(queue, spec) if queue.role == "batch" else bench_preemption()

    def kueue_job(manifest, **kwargs):  # type: ignore[no-untyped-def]
        job = build_job(manifest, **kwargs)
        gpus = 0
        for replica in (job["spec"].get("pytorchReplicaSpecs") or {}).values():
            for container in replica["template"]["spec"]["containers"]:
                gpus += int(replica.get("replicas") or 1) * int(
                    (container.get("resources") or {}).get("limits", {}).get(
                        "nvidia.com/gpu") or 0)
        job["metadata"]["labels"][kueue.LABEL_PRIORITY_CLASS] = BENCH_PRIORITY.format(
            class_of_gpus(scenario, gpus).name)
        return job
    kueue._preemption = preemption
    kueue.kueue_job = kueue_job


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0,
                        help="fraction of each class's count (1: the full 15,000 jobs)")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="cluster writes in flight per sync batch")
    parser.add_argument("--interval", type=float, default=0.1,
                        help="seconds between the starts of two admission passes")
    parser.add_argument("--explain-every", type=float, default=2.0,
                        help="TRAINYARD_EXPLAIN_SECONDS: seconds between passes that explain "
                             "the queue (production's default; 0: every pass)")
    parser.add_argument("--history-every", type=float, default=60.0,
                        help="TRAINYARD_HISTORY_SECONDS: seconds the loop keeps the jobs' "
                             "history (production's default; 0: read every pass)")
    parser.add_argument("--loop", choices=("service", "celery"), default="service",
                        help="who runs the trainyard engine's passes in the worker process: "
                             "the admission service (manage.py admission_service, its queue "
                             "in memory, passes on changes) or the Celery pass "
                             "(jobs.admission_cycle every --interval s)")
    parser.add_argument("--backend", choices=("trainyard", "kueue"), default="trainyard",
                        help="TRAINYARD_ADMISSION_BACKEND: Trainyard's engine admits, or "
                             "Kueue (kubesim's Kueue controller)")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL")
    if url:
        fresh_database(url)
    scratch_django(url, prefix="trainyard-kueue-", TRAINYARD_ADMISSION_BACKEND=args.backend)
    _sqlite_for_threads()
    import tempfile

    if not os.environ.get("REDIS_URL"):
        # The processes share one cache, as make run's file cache (or Redis) is shared: the
        # nudges of submissions and of the watcher reach the admission service.
        from django.conf import settings as django_settings
        from django.core.cache import caches

        django_settings.CACHES = {"default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": tempfile.mkdtemp(prefix="trainyard-bench-cache-")}}
        caches.__dict__.pop("settings", None)
    from decimal import Decimal

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection, connections, transaction
    from django.utils import timezone
    from kueue_baseline import Record, Scenario, make_workload, print_comparison, summarise

    import jobs.selectors
    import jobs.tasks
    from core.models import Policy
    from jobs import services as job_services
    from jobs.models import JobTransition, TrainingJob
    from jobs.tasks import admission_cycle
    from k8s_sync import client as k8s_client
    from k8s_sync.models import ObservedNode
    from k8s_sync.observe import KINDS, Reflector, relist_all
    from tenants.access import access_for
    from tenants.demand import elastic_ceiling
    from tenants.models import Membership, Pool, QuotaGrant, Tenant
    from tenants.tasks import reconcile_cluster, reconcile_pool

    scenario = Scenario()
    workload = make_workload(scenario, args.scale)
    kueue_mode = args.backend == "kueue"
    if kueue_mode:
        _kueue_mappings(scenario)
    probing = not kueue_mode
    kubesim, cluster_url = _start_kubesim(_profile(scenario, probe=probing),
                                          Path(tempfile.mkdtemp(prefix="trainyard-kubesim-")))
    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": cluster_url, "request_timeout": 30}
    settings.TRAINYARD_SYNC_CONCURRENCY = args.concurrency
    settings.TRAINYARD_EXPLAIN_SECONDS = args.explain_every
    settings.TRAINYARD_HISTORY_SECONDS = args.history_every
    k8s_client.reset_clients()
    client = k8s_client.get_client()
    relist_all(client, ["nodes"])
    product = {n.gpu_model.removeprefix("NVIDIA-"): n.gpu_model for n in ObservedNode.objects.all()}
    Policy.objects.update_or_create(pk=1, defaults={
        "development_grace_seconds": 0, "batch_grace_seconds": 0,
        "overcommit_factors": {"gpu": 1, "cpu": 100, "memory": 100}, "eviction_watermark": 1})
    user = get_user_model().objects.create_user("bench")
    ceilings: dict[str, int] = {}
    for model in scenario.models:
        for slug in scenario.tenants(model):
            tenant = Tenant.objects.create(slug=slug, name=slug, cost_center="b",
                                           contact_email="b@example.org",
                                           quota_mode="overcommitted",
                                           borrowing_cap=Decimal(scenario.ceiling)
                                           / scenario.nominal)
            Membership.objects.create(user=user, tenant=tenant, role="member")
            pool = Pool.objects.create(tenant=tenant, kind="dev")
            key = f"gpu:{product[model]}"
            QuotaGrant.objects.bulk_create([
                QuotaGrant(pool=pool, resource=key, amount=scenario.nominal),
                QuotaGrant(pool=pool, resource="cpu", amount=500),
                QuotaGrant(pool=pool, resource="memory", amount=5000)])
            reconcile_pool.apply(args=[pool.pk])
            pool = Pool.objects.select_related("tenant").get(pk=pool.pk)
            ceilings[pool.namespace] = int(elastic_ceiling(key, scenario.nominal,
                                                           pool.tenant.borrowing_cap))
    probe_tenant = None
    if probing:
        probe_tenant = Tenant.objects.create(slug="probe", name="probe", cost_center="b",
                                             contact_email="b@example.org")
        Membership.objects.create(user=user, tenant=probe_tenant, role="member")
        pool = Pool.objects.create(tenant=probe_tenant, kind="prod")
        QuotaGrant.objects.bulk_create([
            QuotaGrant(pool=pool, resource=f"gpu:{product[PROBE_MODEL]}", amount=8),
            QuotaGrant(pool=pool, resource="cpu", amount=64),
            QuotaGrant(pool=pool, resource="memory", amount=512)])
        reconcile_pool.apply(args=[pool.pk])
        ceilings[pool.namespace] = 8
    reconcile_cluster.apply()
    if kueue_mode:
        from kueue_baseline import bench_priority_classes

        from tenants.tasks import reconcile_kueue

        print(f"Kueue objects: {reconcile_kueue.apply().get()}", flush=True)
        for obj in bench_priority_classes(scenario):
            client.create_if_absent(obj)
    relist_all(client, ["quotas"])  # the pools are in the cluster, as the watcher records
    # Kueue's within-ClusterQueue preemption of lower priorities (see kueue_baseline.py).
    original_inputs = jobs.selectors.admission_inputs

    def inputs(now, **kwargs):  # type: ignore[no-untyped-def]
        from dataclasses import replace

        data = original_inputs(now, **kwargs)
        data["policy"] = replace(data["policy"], preempt_lower_priority_within_tenant=True)
        return data
    jobs.selectors.admission_inputs = inputs
    # Passes run on their own every --interval (as beat would, more often); a submission
    # does not also run one synchronously (eager Celery would).
    try:  # jobs.enqueue: every caller enqueues through it (older checkouts: the services)
        from jobs import enqueue as job_enqueue
    except ImportError:
        job_enqueue = job_services
    job_enqueue.kick_admission = lambda: None  # type: ignore[attr-defined]
    if args.loop == "service" and not kueue_mode:
        # The admission service passes on its own: a submission only nudges it.
        job_enqueue.kick_admission = (  # type: ignore[attr-defined]
            lambda: transaction.on_commit(job_enqueue.nudge))

    # The k8s worker: what sync_job / sync_jobs tasks would do in a Celery worker of the
    # "k8s" queue, fed by the on-commit enqueues of submissions and passes.
    tenants = {t.slug: t for t in Tenant.objects.all()}
    by_name: dict[str, object] = {}
    print(f"Kueue baseline through the stack, real time, admitted by "
          f"{'Kueue (kubesim)' if kueue_mode else 'Trainyard'}: {len(workload)} jobs "
          f"(scale {args.scale}), {len(scenario.models)} models x {scenario.gpus_per_model} GPUs; "
          f"database {connection.vendor}; sync concurrency {args.concurrency}, a pass every "
          f"{args.interval} s; kubesim at {cluster_url}", flush=True)
    # Three processes, as a deployment runs them: this one submits (the web), a worker
    # runs the passes and their cluster writes (Celery), a watcher records the cluster
    # (``manage.py k8s_watch``); kubesim is a fourth.
    ctx = multiprocessing.get_context("fork")
    submitted, stop_watch = ctx.Event(), ctx.Event()
    results: Any = ctx.Queue()
    connections.close_all()

    def child(name: str, body: Callable[[], dict[str, Any]]) -> Any:
        def run() -> None:
            k8s_client.reset_clients()  # no connection pool shared across the fork
            try:
                out = body()
                out["rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                out["cpu_s"] = _cpu_seconds()
                results.put((name, out))
            except BaseException:
                import traceback

                results.put((name, {"error": traceback.format_exc()}))
            finally:
                connections.close_all()
        return ctx.Process(target=run, name=name, daemon=True)

    def service_body() -> dict[str, Any]:
        from jobs.service import AdmissionService, Timing

        service = AdmissionService(identity="bench", timing=Timing(
            poll_seconds=0.02, min_pass_seconds=args.interval, idle_seconds=0.5,
            verify_seconds=60.0, lease_seconds=30.0))
        stop = threading.Event()

        def until_done() -> None:  # in a thread: the loop runs in this process's main one
            try:
                while not (submitted.is_set() and not TrainingJob.objects.exclude(
                        state__in=["succeeded", "failed", "cancelled"]).exists()):
                    time.sleep(0.2)
            finally:
                connection.close()
                stop.set()
        threading.Thread(target=until_done, name="until-done", daemon=True).start()
        profiler = None
        if os.environ.get("BENCH_PROFILE") == "worker":  # the loop's thread (its CPU)
            import cProfile

            profiler = cProfile.Profile(time.thread_time)
            profiler.enable()
        service.run(stop)
        if profiler is not None:
            import pstats

            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(60)
        f = service.figures
        return {"pass_ms": list(f.pass_ms), "pass_cpu_ms": list(f.pass_cpu_ms), "batches": [],
                "explained": [False] * len(f.pass_ms), "explain_ms": list(f.explain_ms),
                "drift": service.live.drift, "reads": service.live.reads}

    def worker_body() -> dict[str, Any]:
        work, batches, worker = _k8s_worker()
        pass_ms: list[float] = []
        pass_cpu_ms: list[float] = []
        explained: list[bool] = []   # the pass also explained the queue (positions, ETAs)
        profiler = None
        if os.environ.get("BENCH_PROFILE") == "worker":  # where a pass's CPU goes
            import cProfile

            profiler = cProfile.Profile(time.thread_time)
        while True:
            if profiler is not None:
                profiler.enable()
            began, cpu = time.monotonic(), time.thread_time()
            outcome = admission_cycle.apply().get()
            pass_ms.append((time.monotonic() - began) * 1000)
            pass_cpu_ms.append((time.thread_time() - cpu) * 1000)
            explained.append(isinstance(outcome, dict) and outcome.get("waiting") is not None)
            if profiler is not None:
                profiler.disable()
            if submitted.is_set() and not TrainingJob.objects.exclude(
                    state__in=["succeeded", "failed", "cancelled"]).exists():
                break
            time.sleep(max(0.0, args.interval - (time.monotonic() - began)))
        work.put(None)
        worker.join()
        if profiler is not None:
            import pstats

            pstats.Stats(profiler).sort_stats("cumulative").print_stats(60)
        return {"pass_ms": pass_ms, "pass_cpu_ms": pass_cpu_ms, "batches": batches,
                "explained": explained}

    # Kueue mode reads Kueue's decisions from the Workloads the watcher records
    watched_kueue = ("kueueworkloads",) if kueue_mode and "kueueworkloads" in KINDS else ()

    def watch_body() -> dict[str, Any]:
        watch_client = k8s_client.get_client()
        try:  # as k8s_watch runs them (older checkouts: no such step)
            from k8s_sync.observe import freeze_heap

            freeze_heap()
        except ImportError:
            pass
        reflectors = [Reflector(client=watch_client, spec=KINDS[kind], manage_connections=True,
                                watch_timeout=60, relist_interval=3600.0)
                      for kind in ("pytorchjobs", "pods", *watched_kueue)]
        threads = [threading.Thread(target=r.run, daemon=True) for r in reflectors]
        for t in threads:
            t.start()
        stop_watch.wait()
        for r in reflectors:
            r.stop()
        for t in threads:
            t.join(10)
        return {"events": {r.spec.name: r.events for r in reflectors}}

    service_loop = args.loop == "service" and not kueue_mode
    processes = [child("worker", service_body if service_loop else worker_body),
                 child("watch", watch_body)]
    for proc in processes:
        proc.start()
    client = k8s_client.get_client()
    work, submit_batches, submit_worker = _k8s_worker()  # the submissions' sync_job tasks
    check = ClusterCeilingCheck(client)
    check.start()
    start = time.monotonic()
    machine_cpu, own_cpu = _machine_cpu_seconds(), _cpu_seconds()
    origin = timezone.now().timestamp()  # workload time 0, for the transitions' times
    lags: list[float] = []
    submit_cpu_ms: list[float] = []
    profiler = None
    if os.environ.get("BENCH_PROFILE") in ("submit", "submit-wall"):  # the submitting thread
        import cProfile

        profiler = (cProfile.Profile(time.thread_time)  # its CPU, not its waits
                    if os.environ["BENCH_PROFILE"] == "submit" else cProfile.Profile())
        profiler.enable()
    probes_done = threading.Event()

    def probe() -> None:
        n = 0
        try:
            while not probes_done.wait(PROBE_EVERY):
                n += 1
                job_services.job_submit(
                    access=access_for(user, probe_tenant), actor=user, pool="prod", data={
                        "name": f"probe-{n}", "image": "bench/trainer:1",
                        "tier": "production", "workers": 1, "gpus_per_worker": 1,
                        "gpu_model": product[PROBE_MODEL], "cpu_per_worker": 1,
                        "memory_gib_per_worker": 1, "max_run_seconds": 3600,
                        "expected_seconds": 1,
                        "annotations": {"kubesim.trainyard.io/run-seconds": "1"}})
        finally:
            connection.close()
    prober = threading.Thread(target=probe, name="probe", daemon=True)
    if probing:
        prober.start()
    for w in workload:
        wait = w.arrival_ms / 1000 - (time.monotonic() - start)
        if wait > 0:
            time.sleep(wait)
        tenant = tenants[w.tenant]
        cpu = time.thread_time()
        with transaction.atomic():  # the class's priority commits with the submission
            job = job_services.job_submit(access=access_for(user, tenant), actor=user, pool="dev",
                                          data={
                "name": f"{w.klass}-{w.id}", "image": "bench/trainer:1", "tier": "development",
                "workers": w.replicas, "gpus_per_worker": w.gpus_per_replica,
                "gpu_model": product[w.model], "cpu_per_worker": 1, "memory_gib_per_worker": 1,
                "max_run_seconds": 3600, "expected_seconds": max(1, round(w.run_ms / 1000)),
                "annotations": {"kubesim.trainyard.io/run-seconds": str(w.run_ms / 1000)}})
            TrainingJob.objects.filter(pk=job.pk).update(priority=w.priority)
        submit_cpu_ms.append((time.thread_time() - cpu) * 1000)
        lags.append((job.submitted_at.timestamp() - origin) * 1000 - w.arrival_ms)
        by_name[job.name] = w
        if len(lags) % 1000 == 0:
            print(f"  {len(lags)} submitted at {time.monotonic() - start:.0f} s, lag "
                  f"{lags[-1] / 1000:.1f} s", flush=True)
    submit_s = time.monotonic() - start
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
    probes_done.set()
    if probing:
        prober.join(30)
    submitted.set()
    report: dict[str, Any] = {}
    name, out = results.get()  # the worker: every job finished
    report[name] = out
    wall = time.monotonic() - start
    machine_cpu, own_cpu = _machine_cpu_seconds() - machine_cpu, _cpu_seconds() - own_cpu
    stop_watch.set()
    name, out = results.get()
    report[name] = out
    for proc in processes:
        proc.join(30)
    work.put(None)
    submit_worker.join(60)
    check.stop()
    failed = {k: v["error"] for k, v in report.items() if "error" in v}
    if failed:
        raise SystemExit("\n".join(f"{k}: {v}" for k, v in failed.items()))
    pass_ms = report["worker"]["pass_ms"]
    sync_batches = report["worker"]["batches"] + submit_batches

    records = []
    admissions_at: list[float] = []
    probe_ms: list[float] = []
    for job in TrainingJob.objects.prefetch_related("transitions"):
        if job.name not in by_name:  # a probe: its submission to its first admission
            first = next((t for t in job.transitions.all() if t.to_state == "admitted"), None)
            if first is not None:
                probe_ms.append(((first.observed_at or first.at) - job.submitted_at)
                                .total_seconds() * 1000)
            continue
        w = by_name[job.name]
        rec = Record(job=w)  # type: ignore[arg-type]
        running_since = None
        for t in job.transitions.all():
            ms = (t.at.timestamp() - origin) * 1000
            if t.to_state == "admitted" and kueue_mode and t.observed_at is not None:
                ms = (t.observed_at.timestamp() - origin) * 1000
            if t.to_state == "admitted":
                rec.admissions_ms.append(int(ms))
                admissions_at.append(ms / 1000)
            elif t.to_state == "running":
                running_since = ms
            elif running_since is not None:
                rec.runs_ms.append((int(running_since), int(ms)))
                running_since = None
            if t.to_state == "preempting":
                rec.preemptions += 1
            if t.to_state == "succeeded":
                rec.finished_ms = int(ms)
        records.append(rec)
    s = summarise(records, scenario)
    print_comparison(s, scenario, label="Kueue mode" if kueue_mode else "Trainyard")
    per_second: dict[int, int] = defaultdict(int)
    for at in admissions_at:
        per_second[int(at)] += 1
    span = (max(admissions_at) - min(admissions_at)) if admissions_at else 0
    window = [sum(per_second.get(i + k, 0) for k in range(5)) / 5
              for i in range(int(span) + 1)] if admissions_at else [0]
    print(f"admissions: {len(admissions_at)}, {len(admissions_at) / span if span else 0:.0f}/s "
          f"over the run ({span:.1f} s from first to last), best 5 s {max(window):.0f}/s")
    pass_cpu = report["worker"]["pass_cpu_ms"]
    explained = report["worker"]["explained"]
    for label, wanted in (("deciding only", False), ("also explaining the queue", True)):
        took = [ms for ms, e in zip(pass_ms, explained, strict=True) if e == wanted]
        cpu = [ms for ms, e in zip(pass_cpu, explained, strict=True) if e == wanted]
        if not took:
            continue
        print(f"admission passes {label}: {len(took)}, p50 {_percentile(took, 0.5):.0f} ms, "
              f"p99 {_percentile(took, 0.99):.0f} ms, max {max(took):.0f} ms; CPU of a pass "
              f"(its thread, whatever the machine's load) p50 {_percentile(cpu, 0.5):.0f} ms, "
              f"p99 {_percentile(cpu, 0.99):.0f} ms")
    if service_loop:
        explain_ms = report["worker"]["explain_ms"]
        print(f"admission service: {len(pass_ms)} deciding passes; {len(explain_ms)} "
              f"explanations beside them, p50 {_percentile(explain_ms or [0], 0.5):.0f} ms; "
              f"rows read again after a change {report['worker']['reads']}; drift found "
              f"{report['worker']['drift']}")
    print(f"all passes: {len(pass_ms)}, p50 {_percentile(pass_ms, 0.5):.0f} ms, "
          f"p99 {_percentile(pass_ms, 0.99):.0f} ms (explaining every "
          f"{settings.TRAINYARD_EXPLAIN_SECONDS:g} s at most)")
    if probe_ms:
        print(f"submission to admission with free capacity (a probe every {PROBE_EVERY:g} s, "
              f"{len(probe_ms)} probes): p50 {_percentile(probe_ms, 0.5):.0f} ms, p99 "
              f"{_percentile(probe_ms, 0.99):.0f} ms, max {max(probe_ms):.0f} ms")
    print(f"CPU of a submission (service layer, its thread): mean "
          f"{statistics.fmean(submit_cpu_ms):.1f} ms, p99 {_percentile(submit_cpu_ms, 0.99):.1f}"
          f" ms: at most {1000 / statistics.fmean(submit_cpu_ms):.0f} submissions/s per core")
    print(f"submission lag: mean {statistics.fmean(lags):.0f} ms, p99 "
          f"{_percentile(lags, 0.99):.0f} ms (all {len(lags)} submitted in {submit_s:.1f} s, "
          f"arrivals over {workload[-1].arrival_ms / 1000:.1f} s)")
    mean_batch = statistics.fmean(sync_batches or [0])
    print(f"cluster writes: {len(sync_batches)} sync batches, mean {mean_batch:.1f} "
          f"jobs; watch events recorded: "
          + ", ".join(f"{k} {v}" for k, v in report["watch"]["events"].items()))
    print(f"preemptions: {int(s['preemptions'])}; unfinished: {int(s['unfinished'])}; "
          f"loop {wall:.1f} s.")
    kubesim_cpu, kubesim_kib = _stop_kubesim(kubesim)
    own_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak memory (RSS): submissions {own_kib / 1024:.0f} MiB, worker (passes, cluster "
          f"writes) {report['worker']['rss_kib'] / 1024:.0f} MiB, watcher "
          f"{report['watch']['rss_kib'] / 1024:.0f} MiB, kubesim {kubesim_kib / 1024:.0f} MiB")
    parts = {"submissions (and their cluster writes)": own_cpu,
             "worker (passes, cluster writes)": report["worker"]["cpu_s"],
             "watcher": report["watch"]["cpu_s"], "kubesim": kubesim_cpu}
    rest = machine_cpu - sum(parts.values())
    print(f"CPU over the run ({wall:.1f} s, {os.cpu_count()} cores: {machine_cpu:.1f} s busy, "
          f"{machine_cpu / wall / (os.cpu_count() or 1):.0%}): "
          + ", ".join(f"{k} {v:.1f} s" for k, v in parts.items())
          + f", the database server and the rest of the machine {max(rest, 0):.1f} s")
    peak_db, problems = database_checks(ceilings)
    over_cluster = {ns: n for ns, n in check.peak.items() if n > ceilings.get(ns, 0)}
    twice = [p for p in problems if "GPUs admitted" not in p]
    over_db = [p for p in problems if "GPUs admitted" in p]
    print(f"check, database: peak admitted GPUs per pool {max(peak_db.values() or [0])} "
          f"(ceiling {max(ceilings.values())}); over a ceiling: {len(over_db)}; "
          f"transitions out of chain (a job admitted twice, or from a wrong state): {len(twice)}")
    print(f"check, cluster: peak un-suspended GPUs per namespace {max(check.peak.values() or [0])} "
          f"over {check.events} PyTorchJob events; over a ceiling: {len(over_cluster)}")
    admitted_per_job = JobTransition.objects.filter(to_state="admitted").exclude(
        from_state="admitted").count()
    requeues = JobTransition.objects.filter(to_state="queued", from_state="preempting").count()
    returns = JobTransition.objects.filter(to_state="queued", from_state="admitted").count()
    between = sum(JobTransition.objects.filter(
        from_state=s, to_state=s, reason__in=BETWEEN_PASSES).count()
        for s in ("queued", "admitted", "running", "preempting"))
    print(f"admissions {admitted_per_job} = jobs {TrainingJob.objects.count()} + requeues "
          f"{requeues} + returns {returns}; evictions undone between two passes, recorded "
          f"in the job's state: {between}")
    for problem in (over_db + twice)[:10]:
        print("  ", problem)
    print("At a scale below 1 the arrival pattern is shorter, so the figures compare with "
          "Kueue's only in shape; --scale 1 runs the full scenario.")
    if problems or over_cluster:
        sys.exit(1)


if __name__ == "__main__":
    main()
