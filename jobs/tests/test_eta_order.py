"""Within one pool's queue and tier, ETAs do not go back as the position grows, unless the
row says why (a smaller job backfills, the job ahead waits for other cards or its own
tenant's quota): an example, and a property over random clusters and queues."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.texts import english
from jobs.admission import Decisions, JobView

from .test_admission_helpers import job, node, quota, run
from .test_admission_properties import random_case

SOONER = {"jobs.wait.backfill", "jobs.wait.backfill_smaller", "jobs.wait.sooner_other_cards",
          "jobs.wait.sooner_quota"}


def _codes(reason) -> set[str]:
    parts = reason if isinstance(reason, list) else [reason]
    return {p["code"] for p in parts if isinstance(p, dict)}


def check_order(jobs: list[JobView], d: Decisions) -> int:
    """The invariant; returns how many rows carried a reason for an earlier ETA."""
    by_id = {j.id: j for j in jobs}
    rows: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for job_id, w in d.waiting.items():
        rows[(by_id[job_id].pool, by_id[job_id].tier)].append((w.position_in_pool, job_id))
    noted = 0
    for queue in rows.values():
        latest = None
        for _position, job_id in sorted(queue):
            w = d.waiting[job_id]
            said = bool(_codes(w.reason) & SOONER)
            if w.eta_p50 is None:
                assert not said
                continue
            if latest is not None and w.eta_p50 < latest:
                assert said, (job_id, w)
                noted += 1
            else:
                assert not said, (job_id, w)
            latest = w.eta_p50 if latest is None else max(latest, w.eta_p50)
    return noted


def test_a_smaller_job_that_backfills_says_so():
    """The issue's queue: a whole-node job waits for a node to free; 1-GPU jobs behind it
    start sooner in the cards free until then, and say why."""
    nodes = [node("n1"), node("n2")]
    jobs = [job(1, state="running", gpus=8, on="n1", expected_seconds=1800.0 + 600),
            job(2, state="running", gpus=4, on="n2", expected_seconds=600.0 + 600),
            job(3, state="running", gpus=4, on="n2", expected_seconds=3600.0 + 600),
            job(4, gpus=8, expected_seconds=600.0), job(5, gpus=1, expected_seconds=600.0)]
    d = run(nodes, jobs, [quota(nominal=32)])
    head, small = d.waiting[4], d.waiting[5]
    assert small.position_in_pool > head.position_in_pool
    assert small.eta_p50 is not None and head.eta_p50 is not None
    assert small.eta_p50 < head.eta_p50
    assert ("a smaller job: it can start in the gap before the 1st in the queue needs the "
            "cards") in english(small.reason)
    assert "gap" not in english(head.reason)
    assert check_order(jobs, d) == 1


def test_a_job_ahead_on_other_cards_is_named():
    from .test_admission_helpers import A100, H800
    nodes = [node("h1", model=H800), node("a1", model=A100)]
    jobs = [job(1, state="running", gpus=8, on="h1", expected_seconds=3600.0),
            job(2, gpus=8, model=H800), job(3, gpus=8, model=A100, state="running", on="a1",
                                             expected_seconds=600.0),
            job(4, gpus=8, model=A100)]
    quotas = [quota(nominal=16, **{f"gpu__{A100}": (16, 16)})]
    d = run(nodes, jobs, quotas)
    assert d.waiting[4].eta_p50 < d.waiting[2].eta_p50
    assert "which waits for other cards" in english(d.waiting[4].reason)
    check_order(jobs, d)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**6))
def test_etas_ascend_with_the_position_or_the_row_says_why(seed):
    nodes, jobs, quotas, policy = random_case(seed)
    check_order(jobs, run(nodes, jobs, quotas, policy=policy))


def test_random_queues_do_carry_such_rows():
    """Guard against a generator that never has a job overtake one ahead."""
    noted = 0
    for seed in range(200):
        nodes, jobs, quotas, policy = random_case(seed)
        noted += check_order(jobs, run(nodes, jobs, quotas, policy=policy))
    assert noted > 0


def test_each_reason_names_the_job_ahead():
    """Which reason a row gets, by what holds the job ahead of it."""
    from jobs.admission.explain import sooner

    from .test_admission_helpers import A100

    ahead = job(1, gpus=8)
    over = {"code": "jobs.wait.over_quota", "args": {}}
    capacity = {"code": "jobs.wait.capacity", "args": {}}
    cases = [
        (job(2, gpus=8, model=A100), capacity, "which waits for other cards"),
        (job(2, gpus=8, tenant="globex"), over, "which waits for its own tenant's quota"),
        (job(2, gpus=1, tenant="globex"), capacity, "a smaller job: it can start in the gap"),
        (job(2, replicas=2, gpus=4), capacity, "it fits in the room that is free until"),
    ]
    for row, held, words in cases:
        said = english(sooner(row, 4, ahead, held))
        assert words in said and "4th in the queue" in said, said
