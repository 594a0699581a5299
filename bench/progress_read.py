"""What reading the running jobs' progress costs (``jobs.progress.read_progress``, the
beat's ``jobs.read_progress`` every minute).

N running PyTorchJobs on kubesim (profile "large", over HTTP, its simulation running each
job's training script's log), recorded as the watcher records them; then passes of the
reader, each after a minute of simulated training. Prints, per N: log requests per pass
(= per minute, the beat's cadence), the pass's wall seconds and the reader's CPU seconds
(this thread's clock: parsing, the client, the database), kubesim's CPU seconds serving
the logs (its server threads, the process's CPU less the reader's), rows written, and
what an admission pass pays for the fresh reports of N running jobs (one query after a
report was stored, else a cache read), and
the same for TrainJob-style jobs whose status the watcher recorded (no request: the
baseline the log path is compared with). Asserts nothing about time.

    .venv/bin/python bench/progress_read.py [--jobs 50 200 500] [--passes 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from harness import scratch_django

ROOT = Path(os.environ.get("TRAINYARD_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[50, 200, 500])
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    scratch_django()
    from django.conf import settings
    from django.utils import timezone

    from jobs import progress
    from jobs.models import TrainingJob
    from k8s_sync import client as k8s_client
    from k8s_sync.observe import relist_all
    from kubesim.cluster import Cluster
    from kubesim.sim.harness import make_job
    from tenants.models import Pool, Tenant

    cluster = Cluster(profile="large", deterministic=True, simulate=True)
    url = cluster.start()
    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": url, "request_timeout": 60}
    k8s_client.reset_clients()
    kube = k8s_client.get_client()
    tenant = Tenant.objects.create(slug="bench", name="bench", cost_center="b",
                                   contact_email="b@example.org")
    pool = Pool.objects.create(tenant=tenant, kind="prod")
    ns = pool.namespace
    cluster.call(cluster.store.create, "namespaces", {"metadata": {"name": ns}})
    print(f"{'running jobs':>12} {'requests/min':>12} {'pass wall s':>11} {'reader CPU s':>12} "
          f"{'kubesim CPU s':>13} {'written':>7} {'per job ms':>10}")
    made = 0
    for n in sorted(args.jobs):
        jobs = []
        for i in range(made, n):
            job = TrainingJob.objects.create(
                tenant=tenant, pool=pool, name=f"j{i}", k8s_name=f"tj-{i}", tier="production",
                image="train:1", workers=1, gpus_per_worker=1, max_run_seconds=86400,
                state="running", started_at=timezone.now())
            body = make_job(job.k8s_name, gpus=1, workers=0, run_seconds=86400)
            body["metadata"]["namespace"] = ns
            labels = body["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"][
                "labels"]
            labels.update({"trainyard.io/job": str(job.pk), "trainyard.io/tenant": "bench",
                           "trainyard.io/pool": "prod"})
            cluster.call(cluster.store.create, "pytorchjobs.kubeflow.org", body, namespace=ns)
            jobs.append(job)
        made = n
        cluster.advance(60, step=5)
        relist_all(kube, kinds=["pods"])
        rows = []
        for _ in range(args.passes):
            cluster.advance(60, step=10)  # a minute of training: a new progress line each
            cpu0, wall0, proc0 = time.thread_time(), time.perf_counter(), time.process_time()
            counts = progress.read_progress(timezone.now(), client=kube)
            wall = time.perf_counter() - wall0
            reader = time.thread_time() - cpu0
            kubesim = time.process_time() - proc0 - reader
            rows.append((counts, wall, reader, kubesim))
        counts = rows[-1][0]
        wall = statistics.median(r[1] for r in rows)
        reader = statistics.median(r[2] for r in rows)
        kubesim = statistics.median(r[3] for r in rows)
        print(f"{n:>12} {counts['logs']:>12} {wall:>11.2f} {reader:>12.2f} {kubesim:>13.2f} "
              f"{counts['written']:>7} {1000 * (reader + kubesim) / max(n, 1):>10.1f}")
        assert counts["found"] == counts["logs"] == n, counts  # every job read and reported
    # what an admission pass pays for the reports: one query of the running jobs' fresh ones
    from jobs.selectors.admission import _reported_remaining, active_rows

    rows_now = active_rows()
    read, kept = [], []
    for _ in range(10):
        progress._stamp_changed()  # a report was stored: the next pass reads them
        started = time.perf_counter()
        fresh = _reported_remaining(rows_now, timezone.now())
        read.append(time.perf_counter() - started)
        started = time.perf_counter()
        _reported_remaining(rows_now, timezone.now())
        kept.append(time.perf_counter() - started)
    print(f"an admission pass and {len(fresh)} running jobs' fresh reports: "
          f"{1000 * statistics.median(read):.1f} ms after a new report (one query), "
          f"{1000 * statistics.median(kept):.1f} ms otherwise (medians of 10)")
    # the baseline: the same jobs as TrainJobs whose trainerStatus the watcher recorded
    TrainingJob.objects.update(kind="trainjob")
    from k8s_sync.models import ObservedWorkload

    stamp = timezone.now().isoformat()
    ObservedWorkload.objects.bulk_create(ObservedWorkload(
        api_version="trainer.kubeflow.org/v1alpha1", kind="TrainJob", namespace=ns,
        name=j.k8s_name, uid=str(j.pk), resource_version="1", observed_at=timezone.now(),
        raw={"status": {"trainerStatus": {"progressPercentage": 40,
                                          "estimatedRemainingSeconds": 600,
                                          "lastUpdatedTime": stamp}}})
        for j in TrainingJob.objects.all())
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    counts = progress.read_progress(timezone.now(), client=kube)
    print(f"baseline, {made} TrainJobs reporting trainerStatus: {counts['logs']} requests, "
          f"{time.perf_counter() - wall0:.2f} s wall, {time.thread_time() - cpu0:.2f} s CPU, "
          f"{counts['written']} written")
    cluster.stop()


if __name__ == "__main__":
    main()
