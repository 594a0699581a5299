"""Issue 13, part G: guarantees that hold, and the watermark as a hard line on physical use.

Pure engine tests (no database). The rules are written in ``decide()``'s module docstring
(jobs/admission/engine.py, steps 3 and 4).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.texts import english
from jobs.admission import History, Policy, PoolQuota, decide

from .test_admission_helpers import H800, NOW, admitted, job, node, preempted, with_usage

KEY = f"gpu:{H800}"
NO_WATERMARK = Policy(watermark=1.0)


def run(nodes, jobs, quotas, *, policy=None, physical=None):
    """decide() with node usage from the running jobs and ``physical`` measured use."""
    return decide(nodes=with_usage(nodes, jobs), jobs=jobs, quotas=quotas,
                  policy=policy or Policy(), history=History(), now=NOW, physical=physical)


def over(tenant: str, nominal: int, ceiling: int, guaranteed: int, pool: str = "dev"):
    """An overcommitted-mode pool: nominal grant, elastic ceiling, guaranteed part."""
    return PoolQuota(tenant=tenant, pool=pool, nominal={KEY: nominal}, ceiling={KEY: ceiling},
                     guaranteed={KEY: guaranteed})


def static(tenant: str, nominal: int, pool: str = "dev"):
    return PoolQuota(tenant=tenant, pool=pool, nominal={KEY: nominal}, ceiling={KEY: nominal})


def borrower_jobs(n: int = 4, gpus: int = 2, tenant: str = "globex", first_id: int = 10):
    """``n`` running development jobs of ``tenant`` on n1, admitted within its nominal
    quota (not flagged borrowing), the later ids admitted more recently."""
    return [job(first_id + i, tenant=tenant, state="running", gpus=gpus, on="n1",
                admitted_at=NOW - timedelta(minutes=40 - i)) for i in range(n)]


# -- guarantees --------------------------------------------------------------------------


def test_static_tenant_within_its_guarantee_reclaims_from_an_overcommitted_borrower():
    # Capacity 8. globex (overcommitted) is granted 8 with a guaranteed part of 4 and fills
    # the cards with same-tier jobs admitted within its nominal quota; acme (static, 4) asks
    # for its 4. Before issue 13 nothing was reclaimed (globex is within nominal).
    nodes = [node("n1")]
    running = borrower_jobs()
    quotas = [static("acme", 4), over("globex", 8, 12, 4)]
    d = run(nodes, [*running, job(1, gpus=4)], quotas, policy=NO_WATERMARK)
    assert admitted(d) == {}
    assert preempted(d) == [12, 13]   # the two most recently admitted, nothing more
    assert {(p.for_job, p.grace_seconds) for p in d.preempt} == {(1, 300)}
    assert english(d.preempt[0].reason) == (
        "returning NVIDIA-H800 above your guaranteed share: acme needs its guaranteed dev "
        "quota for a development job")
    assert english(d.waiting[1].reason).startswith("waiting for 2 development jobs")
    # once the victims are gone (after their grace), the job is admitted
    rest = running[:2]
    d = run(nodes, [*rest, job(1, gpus=4)], quotas, policy=NO_WATERMARK)
    assert admitted(d) == {1: ("n1",)} and preempted(d) == []


def test_the_guarantee_rule_holds_under_the_default_watermark_too():
    nodes = [node("n1")]
    running = borrower_jobs(3)   # 6 of 8: what the watermark lets beyond the guarantee
    quotas = [static("acme", 4), over("globex", 8, 12, 4)]
    d = run(nodes, [*running, job(1, gpus=4)], quotas)
    # 2 free + 2 freed. Work within its guarantee is not held by the watermark, and the
    # watermark evicts no more: globex is back at its guarantee (4 + 4 = the capacity).
    assert preempted(d) == [12]
    assert d.preempt[0].for_job == 1


def test_a_borrower_is_never_reclaimed_below_its_own_guarantee():
    nodes = [node("n1")]
    running = borrower_jobs()     # globex holds 8, guaranteed 6: only 2 are reclaimable
    quotas = [static("acme", 4), over("globex", 8, 12, 6)]
    d = run(nodes, [*running, job(1, gpus=4)], quotas, policy=NO_WATERMARK)
    assert preempted(d) == []
    assert 1 in d.waiting


def test_a_job_beyond_its_own_guarantee_does_not_reclaim_by_it():
    # acme is overcommitted too: 2 in use, guaranteed 2, so 2 more are beyond its guarantee.
    nodes = [node("n1")]
    running = [*borrower_jobs(3), job(20, state="running", gpus=2, on="n1")]
    quotas = [over("acme", 8, 12, 2), over("globex", 8, 12, 4)]
    d = run(nodes, [*running, job(1, gpus=2)], quotas, policy=NO_WATERMARK)
    assert preempted(d) == []


def test_production_is_never_reclaimed_by_the_guarantee_rule():
    nodes = [node("n1")]
    running = [job(10 + i, tenant="globex", pool="prod", state="running", gpus=2, on="n1")
               for i in range(4)]
    quotas = [static("acme", 4), over("globex", 8, 12, 4, pool="prod")]
    d = run(nodes, [*running, job(1, gpus=4)], quotas, policy=NO_WATERMARK)
    assert preempted(d) == []


def test_batch_victims_go_before_guarantee_victims():
    nodes = [node("n1")]
    running = [*borrower_jobs(3), job(30, tenant="initech", tier="batch", state="running",
                                      gpus=2, on="n1", admitted_at=NOW - timedelta(hours=2))]
    quotas = [static("acme", 2), over("globex", 8, 12, 4), static("initech", 0)]
    quotas[-1] = PoolQuota(tenant="initech", pool="dev", nominal={KEY: 0}, ceiling={KEY: 8})
    d = run(nodes, [*running, job(1, gpus=2)], quotas, policy=NO_WATERMARK)
    assert preempted(d) == [30]


def test_work_admitted_beyond_the_guarantee_is_marked_borrowing():
    nodes = [node("n1"), node("n2")]
    quotas = [over("globex", 8, 12, 4)]
    d = run(nodes, [job(1, tenant="globex", gpus=4), job(2, tenant="globex", gpus=2)], quotas,
            policy=NO_WATERMARK)
    assert {a.job_id: a.borrowing for a in d.admit} == {1: False, 2: True}


# -- the watermark: a hard line on physical use --------------------------------------------


def batch_fill(nodes: int = 2, per: int = 2):
    """Batch jobs filling every card of ``nodes`` 8-card nodes, job i admitted i minutes ago
    (so the highest ids are the most recent)."""
    jobs = []
    i = 0
    for n in range(nodes):
        for _ in range(8 // per):
            jobs.append(job(100 + i, tenant="initech", tier="batch", state="running", gpus=per,
                            on=f"n{n + 1}", admitted_at=NOW - timedelta(minutes=60 - i)))
            i += 1
    return jobs


def test_batch_filling_every_card_is_evicted_down_to_the_watermark_with_nobody_waiting():
    nodes = [node("n1"), node("n2")]
    jobs = batch_fill()
    quotas = [PoolQuota(tenant="initech", pool="dev", nominal={KEY: 0}, ceiling={KEY: 16})]
    d = run(nodes, jobs, quotas)
    # 16 of 16 allocated, limit 13.6: the two most recent batch jobs go (16 -> 12)
    assert preempted(d) == [106, 107]
    assert all(p.for_job is None and p.grace_seconds == 30 for p in d.preempt)
    assert english(d.preempt[0].reason).startswith(
        "NVIDIA-H800 are at 100% of their physical capacity, above the 85% eviction watermark")
    # the next pass, with those two still preempting, evicts nothing more
    again = [replace(j, state="preempting", preempt_deadline=NOW + timedelta(seconds=30))
             if j.id in (106, 107) else j for j in jobs]
    assert preempted(run(nodes, again, quotas)) == []


def test_no_preemptible_job_is_admitted_above_the_watermark():
    nodes = [node("n1")]
    jobs = [job(10, state="running", gpus=6, on="n1"),                      # 6 of 8
            job(1, tenant="initech", tier="batch", gpus=1),
            job(2, tenant="globex", gpus=1),                                  # beyond guarantee
            job(3, tenant="acme", pool="prod", gpus=1)]
    quotas = [static("acme", 8), static("acme", 1, pool="prod"),
              PoolQuota(tenant="initech", pool="dev", nominal={KEY: 0}, ceiling={KEY: 8}),
              over("globex", 4, 6, 0)]
    d = run(nodes, jobs, quotas)
    assert admitted(d) == {3: ("n1",)}   # production is not gated
    for job_id in (1, 2):
        assert english(d.waiting[job_id].reason).startswith(
            "starting it would take NVIDIA-H800 to 100% of their physical capacity (88% now), "
            "above the 85% eviction watermark")
    # without the production job, 7 of 8 is above 6.8 too; without the watermark both start
    assert admitted(run(nodes, jobs[:3], quotas)) == {}
    assert set(admitted(run(nodes, jobs[:3], quotas, policy=NO_WATERMARK))) == {1, 2}


def test_work_within_its_guarantee_is_neither_gated_nor_evicted():
    nodes = [node("n1")]
    jobs = [job(10, state="running", gpus=6, on="n1"), job(1, gpus=2)]
    d = run(nodes, jobs, [static("acme", 8)])
    assert admitted(d) == {1: ("n1",)} and preempted(d) == []
    full = [job(10, state="running", gpus=6, on="n1"), job(11, state="running", gpus=2, on="n1")]
    assert preempted(run(nodes, full, [static("acme", 8)])) == []


def test_watermark_eviction_order_batch_then_above_nominal_then_above_guarantee():
    nodes = [node("n1"), node("n2")]
    jobs = [job(10, tenant="acme", state="running", gpus=8, on="n1"),          # within guarantee
            job(11, tenant="globex", state="running", gpus=2, on="n2",
                admitted_at=NOW - timedelta(minutes=1)),                        # above guarantee
            job(12, tenant="initech", state="running", gpus=2, on="n2", borrowing=True,
                admitted_at=NOW - timedelta(minutes=30)),                       # above nominal
            job(13, tenant="umbrella", tier="batch", state="running", gpus=2, on="n2",
                admitted_at=NOW - timedelta(minutes=50)),
            job(14, tenant="hooli", pool="prod", state="running", gpus=2, on="n2")]
    quotas = [static("acme", 8), over("globex", 4, 6, 0), over("initech", 0, 4, 0),
              PoolQuota(tenant="umbrella", pool="dev", nominal={KEY: 0}, ceiling={KEY: 8}),
              static("hooli", 2, pool="prod")]
    # 16 of 16, limit 13.6: batch 13 (14), then initech's borrower 12 (12)
    assert preempted(run(nodes, jobs, quotas)) == [12, 13]
    # a 60% watermark (9.6): then globex above its guarantee (10), and there it stops:
    # acme within its guarantee and hooli's production job are never evicted
    assert preempted(run(nodes, jobs, quotas, policy=Policy(watermark=0.6))) == [11, 12, 13]


def test_measured_framebuffer_use_raises_physical_use_above_the_watermark():
    # 4 of 8 cards allocated, but the cluster reports 95% of the key physically used (e.g.
    # DCGM framebuffer on shared cards): the batch job is evicted, a new one is not admitted.
    nodes = [node("n1")]
    jobs = [job(10, state="running", gpus=2, on="n1"),
            job(11, tenant="initech", tier="batch", state="running", gpus=2, on="n1"),
            job(1, tenant="initech", tier="batch", gpus=1)]
    quotas = [static("acme", 8),
              PoolQuota(tenant="initech", pool="dev", nominal={KEY: 0}, ceiling={KEY: 8})]
    plain = run(nodes, jobs, quotas)
    assert preempted(plain) == [] and admitted(plain) == {1: ("n1",)}
    d = run(nodes, jobs, quotas, physical={KEY: 0.95})
    assert preempted(d) == [11] and admitted(d) == {}
    assert "at 95% of their physical capacity" in english(d.preempt[0].reason)
    assert "(95% now)" in english(d.waiting[1].reason)
