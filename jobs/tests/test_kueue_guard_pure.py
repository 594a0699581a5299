"""Issue 31, the watermark and guarantees below a grant in Kueue mode: the pure parts.

* :func:`jobs.admission.watermark.watermark_plan` is the engine's own watermark: the same
  victims, in the same order, with the same reasons as ``decide``; the queued jobs it
  gates are the ones the engine keeps out, with its words.
* :func:`tenants.kueue.queue_limits` / ``guaranteed_part``: an overcommitted-mode pool's
  queue has its guaranteed part as nominal quota and the rest of its grant as borrowing;
  ``k8s_sync.kueue`` renders it (production's ``borrowingLimit`` is that rest, never a
  ``lendingLimit``), and the cohort's nominal quotas add up to no more than the cluster.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from core.texts import english, text_code
from jobs.admission import History, Policy, decide
from jobs.admission.watermark import watermark_plan
from k8s_sync import kueue
from k8s_sync.kueue import KueueSpec, QueueSpec
from tenants.kueue import guaranteed_part, queue_limits

from .test_admission_helpers import H800, NOW, job, node, quota, with_usage

GPU = f"gpu:{H800}"


def _both(nodes, jobs, quotas, policy=None, physical=None):
    args = {"nodes": with_usage(nodes, jobs), "jobs": jobs, "quotas": quotas,
            "policy": policy or Policy(), "history": History(), "now": NOW,
            "physical": physical}
    return decide(**args), watermark_plan(**args)


def test_the_plan_evicts_as_the_engine_does_in_its_order_with_its_words():
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, tenant="globex", state="running", gpus=6, on="n1"),
            job(11, tenant="initech", state="running", gpus=1, on="n1",
                admitted_at=NOW - timedelta(minutes=1)),
            job(12, tenant="initech", state="running", gpus=1, on="n1",
                admitted_at=NOW - timedelta(minutes=30)),
            job(13, tenant="initech", tier="batch", state="running", gpus=1, on="n2",
                admitted_at=NOW - timedelta(minutes=60)),
            job(14, tenant="globex", state="running", gpus=6, on="n2"),
            job(15, tenant="acme", pool="prod", state="running", gpus=1, on="n2")]
    quotas = [quota("globex", 12), quota("initech", 0, 8), quota("acme", 1, pool="prod")]
    # 16/16 cards allocated on shared-as-measured cards (physical 1.0): limit 13.6
    engine, plan = _both(nodes, jobs, quotas, physical={GPU: 1.0})
    # the engine's order of eviction (batch, then the most recent borrower first); its
    # decisions list them by id
    assert [p.job_id for p in plan.evict] == [13, 11, 12]
    assert {p.job_id: (p.reason, p.grace_seconds) for p in plan.evict} == {
        p.job_id: (p.reason, p.grace_seconds) for p in engine.preempt}
    assert all(p.for_job is None for p in plan.evict)
    assert english(plan.evict[0].reason).startswith(
        "NVIDIA-H800 are at 100% of their physical capacity, above the 85% eviction watermark")


def test_below_the_line_nothing_is_evicted_and_nothing_gated():
    nodes = [node("n1")]
    jobs = [job(10, tier="batch", state="running", gpus=4, on="n1"),
            job(1, tier="batch", gpus=2)]
    _engine, plan = _both(nodes, jobs, [quota("acme", 4)], physical={GPU: 0.5})
    assert plan.evict == () and dict(plan.gated) == {}


def test_gated_queued_jobs_are_the_ones_the_engine_keeps_out_and_say_why():
    """80% measured on 8 cards (6.4 of them): a batch job of 2 would take use to 105%;
    production, and development within its guarantee, are never gated; held jobs are
    held, not gated."""
    nodes = [node("n1")]
    jobs = [job(10, tenant="globex", state="running", gpus=4, on="n1"),
            job(1, tier="batch", gpus=2),
            job(2, pool="prod", gpus=2),
            job(3, gpus=2),                      # acme dev within its grant of 2
            job(4, tenant="globex", gpus=2),     # globex dev above its grant of 4
            job(5, tier="batch", gpus=1, held=True)]
    quotas = [quota("acme", 2), quota("acme", 2, pool="prod"), quota("globex", 4, 8)]
    engine, plan = _both(nodes, jobs, quotas, physical={GPU: 0.8})
    assert sorted(plan.gated) == [1, 4]
    assert text_code(plan.gated[1]) == "jobs.wait.watermark"
    assert english(plan.gated[1]).startswith(
        "starting it would take NVIDIA-H800 to 105% of their physical capacity (80% now)")
    # the engine says the same of the jobs it keeps out
    assert {j for j, w in engine.waiting.items()
            if text_code(w.reason) == "jobs.wait.watermark"} <= set(plan.gated)


# -- guarantees below a grant: nominal, borrowing, no lending limit ------------------------


def test_a_static_pool_has_its_grant_as_nominal_and_production_borrows_nothing():
    grants = {GPU: Decimal(4), "cpu": Decimal(64)}
    assert queue_limits(grants, grants, role="prod", factor=None) == (
        grants, {GPU: 0, "cpu": 0})
    assert queue_limits(grants, grants, role="dev", factor=None) == (grants, None)
    assert queue_limits(grants, grants, role="dev", factor=Decimal("1.5")) == (
        grants, {GPU: 2, "cpu": 32})


def test_an_overcommitted_pool_has_its_guarantee_as_nominal_and_borrows_the_rest():
    grants = {GPU: Decimal(8), "cpu": Decimal(100)}
    guaranteed = guaranteed_part(grants, {GPU: Decimal("0.5"), "cpu": Decimal("0.3333")})
    assert guaranteed == {GPU: 4, "cpu": Decimal("33.330")}   # whole cards, rounded down
    nominal, borrowing = queue_limits(grants, guaranteed, role="prod", factor=None)
    assert nominal == guaranteed
    assert borrowing == {GPU: 4, "cpu": Decimal("66.670")}    # up to its grant, no more
    assert queue_limits(grants, guaranteed, role="dev", factor=None) == (guaranteed, None)
    # under a borrowing cap of 1.5: up to the ceiling (12 cards) from the guarantee (4)
    assert queue_limits(grants, guaranteed, role="dev", factor=Decimal("1.5"))[1][GPU] == 8
    # no share known: all of it guaranteed
    assert guaranteed_part(grants, {}) == grants


def _quota(cq, resource="nvidia.com/gpu"):
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            if flavor["name"] == kueue.gpu_flavor_name(H800):
                for item in flavor["resources"]:
                    if item["name"] == resource:
                        return item
    raise AssertionError("no H800 quota")


def test_the_queues_render_nominal_and_borrowing_and_no_lending_limit():
    """acme static 4 (dev), globex overcommitted 8 in prod and dev with 2 of each
    guaranteed, on 8 cards: nominal quotas add up to 8, and the cohort owns nothing more;
    globex's production borrows up to its grant, never beyond; nobody has a lendingLimit
    (idle guaranteed cards stay usable by everyone, reclaimed when needed)."""
    g_nominal, g_prod = queue_limits({GPU: Decimal(8)}, {GPU: Decimal(2)}, role="prod",
                                     factor=None)
    _n, g_dev = queue_limits({GPU: Decimal(8)}, {GPU: Decimal(2)}, role="dev", factor=None)
    spec = KueueSpec(queues=(
        QueueSpec("acme", "dev", "dev", nominal={GPU: Decimal(4)}, borrowing=None),
        QueueSpec("globex", "prod", "prod", nominal=g_nominal, borrowing=g_prod),
        QueueSpec("globex", "dev", "dev", nominal=g_nominal, borrowing=g_dev)),
        capacity={GPU: Decimal(8), "cpu": Decimal(64), "memory": Decimal(256)})
    objects = {o["metadata"]["name"]: o for o in kueue.desired_kueue_objects(spec)
               if o["kind"] == "ClusterQueue"}
    assert _quota(objects["ty-globex-prod"]) == {
        "name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "6"}
    assert _quota(objects["ty-globex-dev"]) == {"name": "nvidia.com/gpu", "nominalQuota": "2"}
    assert _quota(objects["ty-acme-dev"]) == {"name": "nvidia.com/gpu", "nominalQuota": "4"}
    for cq in objects.values():
        assert "lendingLimit" not in repr(cq)
    nominal_sum = sum(int(_quota(cq)["nominalQuota"]) for cq in objects.values())
    assert nominal_sum == 8 and kueue.cohort_quota(spec)[GPU] == 0
