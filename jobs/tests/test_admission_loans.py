"""Admission and quota loans (issue 17), pure: which loan a job is admitted on, and a job
whose loan has ended is reclaimed for whoever needs the room, with its tier's grace."""

from __future__ import annotations

from dataclasses import replace

from core.texts import english
from jobs.admission import Policy

from .test_admission_helpers import H800, job, node, preempted, quota, run

KEY = f"gpu:{H800}"


def test_a_job_above_the_pools_own_grant_is_marked_with_the_loan_its_top_falls_in():
    # globex owns 2 cards and borrows 2 (loan 7, ends last) and 2 (loan 9, ends first)
    borrower = replace(quota("globex", nominal=6), loans_in={KEY: ((7, 2), (9, 2))})
    jobs = [job(1, tenant="globex", gpus=2), job(2, tenant="globex", gpus=1),
            job(3, tenant="globex", gpus=2), job(4, tenant="globex", gpus=1, tier="batch")]
    d = run([node("n1")], jobs, [borrower])
    loans = {a.job_id: a.loan for a in d.admit}
    # use 2 (own), then 3 (loan 7), then 5 (loan 9); batch holds no quota: no loan
    assert loans == {1: None, 2: 7, 3: 9, 4: None}


def test_an_ended_loans_job_is_reclaimed_by_the_lender_with_its_grace_and_the_reason():
    # 16 cards, 8 held by globex on acme's loan (half: below the eviction watermark)
    on_loan = job(1, tenant="globex", gpus=8, state="running", on="n1", minutes_ago=30,
                  loan=5, loan_lender="acme/dev")
    lender = job(2, tenant="acme", gpus=12)
    policy = Policy(grace_seconds={"development": 300})
    during = [quota("acme", nominal=8), quota("globex", nominal=8)]
    d = run([node("n1", gpus=16)], [on_loan, lender], during, policy=policy)
    assert preempted(d) == []          # the loan runs: its work is not reclaimable
    after = [quota("acme", nominal=16), quota("globex", nominal=0)]
    d = run([node("n1", gpus=16)], [replace(on_loan, loan_ended=True), lender], after,
            policy=policy)
    assert preempted(d) == [1]
    assert d.preempt[0].grace_seconds == 300 and d.preempt[0].for_job == 2
    assert english(d.preempt[0].reason).startswith("the loan from acme/dev ended")
    # without the loan mark (as before issue 17) the same job was never given back
    d = run([node("n1", gpus=16)], [on_loan, lender], after, policy=policy)
    assert preempted(d) == []
    # a pool back within its own quota keeps its work, loan or no loan
    d = run([node("n1", gpus=16)], [replace(on_loan, loan_ended=True), lender],
            [quota("acme", nominal=16), quota("globex", nominal=8)], policy=policy)
    assert preempted(d) == []
