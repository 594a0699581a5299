"""Kueue's scheduler baseline through the whole Trainyard stack, in real time.

The workload of ``bench/kueue_baseline.py`` (5 GPU models x 120 GPUs, 6 tenants each with
quota 20 and ceiling 100; small/medium/large jobs at their arrival times) is submitted
through the service layer into the database; the admission loop decides; PyTorchJobs are
created, un-suspended and suspended in kubesim over HTTP with the official client, whose
simulated operator, scheduler and kubelet run the pods for their run times in real time;
the observer records pods and PyTorchJobs (a relist before every cycle stands in for the
watcher: the loop reads the recorded PyTorchJobs); transitions give the figures. As
Kueue's own test runs through its API server. Prints figures beside Kueue's published
averages; asserts nothing.

    .venv/bin/python bench/kueue_stack.py [--scale 0.02]

The default scale (2% of each class: 300 jobs) keeps a run to a few minutes on a 2-core
machine; ``--scale 1`` is the full 15,000 jobs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from harness import scratch_django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _profile(scenario):  # type: ignore[no-untyped-def]
    import yaml

    from kubesim.sim import load_profile

    profile = yaml.safe_load((ROOT / "kubesim" / "profiles" / "small.yaml").read_text())
    per_model = scenario.gpus_per_model // scenario.gpus_per_node
    profile["simulation"] = {**profile.get("simulation", {}), "startup_seconds": 0.05,
                             "failure_rate": 0.0}
    base = load_profile("small")["gpu_models"]["H800"]
    profile["gpu_models"] = {model: {**base, "product": f"NVIDIA-{model}",
                                     "name": f"NVIDIA {model}"} for model in scenario.models}
    profile["pools"] = [{
        "name": model.lower(), "count": per_model, "prefix": f"{model.lower()}-",
        "zone": "zone-a", "racks": [f"rack-{model.lower()}"],
        "switches": [f"switch-{model.lower()}"], "cpu": "256", "memory": "2Ti",
        "instance_type": "bench", "gpu": {"model": model, "count": scenario.gpus_per_node},
    } for model in scenario.models]
    return load_profile(profile)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=0.02)
    args = parser.parse_args()
    scratch_django(os.environ.get("DATABASE_URL"), prefix="trainyard-kueue-")
    from decimal import Decimal

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from kueue_baseline import Record, Scenario, make_workload, print_comparison, summarise

    import jobs.selectors
    from core.models import Policy
    from jobs import services as job_services
    from jobs.models import TrainingJob
    from jobs.tasks import admission_cycle
    from k8s_sync import client as k8s_client
    from k8s_sync.observe import relist_all
    from kubesim.cluster import Cluster
    from tenants.access import access_for
    from tenants.models import Membership, Pool, QuotaGrant, Tenant
    from tenants.tasks import reconcile_cluster, reconcile_pool

    scenario = Scenario()
    workload = make_workload(scenario, args.scale)
    cluster = Cluster(profile=_profile(scenario), speed=1.0, simulate=True, tick_seconds=0.05)
    settings.TRAINYARD_CLUSTER = {"mode": "url", "url": cluster.start(), "request_timeout": 30}
    k8s_client.reset_clients()
    client = k8s_client.get_client()
    relist_all(client, ["nodes"])
    from k8s_sync.models import ObservedNode

    product = {n.gpu_model.removeprefix("NVIDIA-"): n.gpu_model for n in ObservedNode.objects.all()}
    Policy.objects.update_or_create(pk=1, defaults={
        "development_grace_seconds": 0, "batch_grace_seconds": 0,
        "overcommit_factors": {"gpu": 1, "cpu": 100, "memory": 100}, "eviction_watermark": 1})
    user = get_user_model().objects.create_user("bench")
    for model in scenario.models:
        for slug in scenario.tenants(model):
            tenant = Tenant.objects.create(slug=slug, name=slug, cost_center="b",
                                           contact_email="b@example.org",
                                           quota_mode="overcommitted",
                                           elastic_factor=Decimal(scenario.ceiling)
                                           / scenario.nominal)
            Membership.objects.create(user=user, tenant=tenant, role="member")
            pool = Pool.objects.create(tenant=tenant, kind="dev")
            QuotaGrant.objects.bulk_create([
                QuotaGrant(pool=pool, resource=f"gpu:{product[model]}", amount=scenario.nominal),
                QuotaGrant(pool=pool, resource="cpu", amount=500),
                QuotaGrant(pool=pool, resource="memory", amount=5000)])
            reconcile_pool.apply(args=[pool.pk])
    reconcile_cluster.apply()
    # Kueue's within-ClusterQueue preemption of lower priorities (see kueue_baseline.py).
    original_inputs = jobs.selectors.admission_inputs

    def inputs(now):  # type: ignore[no-untyped-def]
        from dataclasses import replace

        data = original_inputs(now)
        data["policy"] = replace(data["policy"], preempt_lower_priority_within_tenant=True)
        return data
    jobs.selectors.admission_inputs = inputs
    # The loop below runs a cycle every 100 ms (as beat would, more often); don't also run
    # one synchronously inside every submission (eager Celery would).
    job_services.kick_admission = lambda: None  # type: ignore[attr-defined]

    tenants = {t.slug: t for t in Tenant.objects.all()}
    by_name: dict[str, object] = {}
    print(f"Kueue baseline through the stack, real time: {len(workload)} jobs "
          f"(scale {args.scale}), {len(scenario.models)} models x {scenario.gpus_per_model} GPUs")
    from django.utils import timezone

    start = time.monotonic()
    origin = timezone.now().timestamp()  # workload time 0, for the transitions' times
    pending = list(workload)
    last_cycle = 0.0
    while True:
        now_ms = (time.monotonic() - start) * 1000
        while pending and pending[0].arrival_ms <= now_ms:
            w = pending.pop(0)
            tenant = tenants[w.tenant]
            job = job_services.job_submit(access=access_for(user, tenant), actor=user, pool="dev",
                                          data={
                "name": f"{w.klass}-{w.id}", "image": "bench/trainer:1", "tier": "development",
                "workers": w.replicas, "gpus_per_worker": w.gpus_per_replica,
                "gpu_model": product[w.model], "cpu_per_worker": 1, "memory_gib_per_worker": 1,
                "max_run_seconds": 3600, "expected_seconds": max(1, round(w.run_ms / 1000)),
                "annotations": {"kubesim.trainyard.io/run-seconds": str(w.run_ms / 1000)}})
            TrainingJob.objects.filter(pk=job.pk).update(priority=w.priority)
            by_name[job.name] = w
        if time.monotonic() - last_cycle >= 0.1:
            last_cycle = time.monotonic()
            relist_all(client, ["pods", "pytorchjobs"])  # what the watcher records
            admission_cycle.apply()
            if not pending and not TrainingJob.objects.exclude(
                    state__in=["succeeded", "failed", "cancelled"]).exists():
                break
        time.sleep(0.005)
    wall = time.monotonic() - start
    records = []
    for job in TrainingJob.objects.prefetch_related("transitions"):
        w = by_name[job.name]
        rec = Record(job=w)  # type: ignore[arg-type]
        running_since = None
        for t in job.transitions.all():
            ms = (t.at.timestamp() - origin) * 1000
            if t.to_state == "admitted":
                rec.admissions_ms.append(int(ms))
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
    print_comparison(s, scenario)
    lag = statistics.fmean((j.submitted_at.timestamp() - origin) * 1000
                           - by_name[j.name].arrival_ms  # type: ignore[attr-defined]
                           for j in TrainingJob.objects.only("name", "submitted_at"))
    print(f"preemptions: {int(s['preemptions'])}; unfinished: {int(s['unfinished'])}; "
          f"mean submission lag {lag:.0f} ms; loop {wall:.1f} s.")
    print("At a scale below 1 the arrival pattern is shorter, so the figures compare with "
          "Kueue's only in shape; --scale 1 runs the full scenario.")
    cluster.stop()


if __name__ == "__main__":
    main()
