"""Builders shared by the admission engine tests (plain data, no database)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from jobs.admission import Decisions, History, JobView, NodeView, Policy, PoolQuota, decide

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
H800 = "NVIDIA-H800"
A100 = "NVIDIA-A100-SXM4-80GB"
TIER_OF_POOL = {"prod": "production", "dev": "development"}


def node(name: str, *, model: str = H800, gpus: int = 8, used: int = 0, switch: str = "s1",
         schedulable: bool = True, dedicated_to: str = "", mig: dict[str, int] | None = None,
         mig_used: dict[str, int] | None = None) -> NodeView:
    """A node; ``used`` is held by pods outside the jobs passed to :func:`run`."""
    return NodeView(name=name, gpu_model=model, switch=switch, gpus=gpus, gpus_used=used,
                    mig=mig or {}, mig_used=mig_used or {}, schedulable=schedulable,
                    dedicated_to=dedicated_to)


def job(id: int, *, tenant: str = "acme", pool: str = "dev", tier: str | None = None,
        model: str = H800, mig: str = "", replicas: int = 1, gpus: int = 1,
        state: str = "queued", on: tuple[str, ...] | str = (), minutes_ago: float | None = None,
        **kw: Any) -> JobView:
    """A job. ``on`` is its placement (one node name per replica; a single name is repeated).

    Submitted ``minutes_ago`` (default: 60 minutes minus id seconds, so ids are in order);
    running jobs default to admitted and started 10 minutes ago with 1 hour expected.
    """
    if isinstance(on, str):
        on = (on,) * replicas
    submitted = NOW - timedelta(minutes=60) + timedelta(seconds=id)
    if minutes_ago is not None:
        submitted = NOW - timedelta(minutes=minutes_ago)
    if state in ("running", "preempting", "admitted"):
        kw.setdefault("admitted_at", NOW - timedelta(minutes=10))
    if state in ("running", "preempting"):
        kw.setdefault("started_at", NOW - timedelta(minutes=10))
        kw.setdefault("expected_seconds", 3600.0)
    return JobView(id=id, tenant=tenant, pool=pool, tier=tier or TIER_OF_POOL[pool],
                   gpu_model="" if mig else model, mig_profile=mig, replicas=replicas,
                   gpus_per_replica=gpus, state=state, submitted_at=submitted, placement=on,
                   **kw)


def quota(tenant: str = "acme", nominal: int = 8, ceiling: int | None = None, *,
          pool: str = "dev", key: str = f"gpu:{H800}", **more: tuple[int, int]) -> PoolQuota:
    """One tenant pool's quota for ``key`` (``more``: other keys as (nominal, ceiling))."""
    nom = {key: nominal}
    ceil = {key: nominal if ceiling is None else ceiling}
    for extra_key, (n, c) in more.items():
        nom[extra_key.replace("__", ":")] = n
        ceil[extra_key.replace("__", ":")] = c
    return PoolQuota(tenant=tenant, pool=pool, nominal=nom, ceiling=ceil)


def with_usage(nodes: list[NodeView], jobs: list[JobView]) -> list[NodeView]:
    """Add the GPUs of running and preempting jobs to the nodes they are placed on."""
    whole: dict[str, int] = {}
    mig: dict[str, dict[str, int]] = {}
    for j in jobs:
        if j.state not in ("running", "preempting"):
            continue
        for name in j.placement:
            if j.mig_profile:
                per = mig.setdefault(name, {})
                per[j.mig_profile] = per.get(j.mig_profile, 0) + j.gpus_per_replica
            else:
                whole[name] = whole.get(name, 0) + j.gpus_per_replica
    out = []
    for n in nodes:
        used_mig = dict(n.mig_used)
        for profile, count in mig.get(n.name, {}).items():
            used_mig[profile] = used_mig.get(profile, 0) + count
        out.append(replace(n, gpus_used=n.gpus_used + whole.get(n.name, 0), mig_used=used_mig))
    return out


def run(nodes: list[NodeView], jobs: list[JobView], quotas: list[PoolQuota], *,
        policy: Policy | None = None, history: History | None = None,
        now: datetime = NOW) -> Decisions:
    """decide() with node usage filled in from the running and preempting jobs."""
    return decide(nodes=with_usage(nodes, jobs), jobs=jobs, quotas=quotas,
                  policy=policy or Policy(), history=history or History(), now=now)


def admitted(d: Decisions) -> dict[int, tuple[str, ...]]:
    return {a.job_id: a.placement for a in d.admit}


def preempted(d: Decisions) -> list[int]:
    return [p.job_id for p in d.preempt]
