"""Both admission backends agree on who runs first (TRAINYARD_ADMISSION_BACKEND trainyard
and kueue, each against kubesim: Trainyard's engine, and kubesim's Kueue controller fed
the ClusterQueues and the cohort Trainyard writes). One H800 node of 8 cards; tenant_a's
prod and dev pools are granted 4 each; nobody is granted the A100 cards.

Admission is work-conserving (issue 27): development and batch work borrow any idle
capacity, granted to another pool or to nobody (Kueue: the cohort's own quota), unless a
platform admin capped it; production never borrows; borrowed work is reclaimed with its
tier's grace when its owner needs its quota back. A scenario whose point is exact quota
behaviour caps the tenant at its grant (``borrowing_cap = 1``) and says so."""

import datetime as dt
from decimal import Decimal

import pytest

from core.texts import english, text_code
from jobs import services as job_services
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from jobs.tests.test_kueue_mode import _model, _submit, kueue_configured
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.tasks import reconcile_cluster, reconcile_pool

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


@pytest.fixture(params=["trainyard", "kueue"])
def mode(request, cluster, settings, platform_admin, tenant_a,
         django_capture_on_commit_callbacks):
    settings.TRAINYARD_ADMISSION_BACKEND = request.param
    if request.param == "kueue":
        kueue_configured(cluster)
    reconcile_cluster.apply().get()
    relist_all(get_client())
    h800 = _model(cluster, "H800")
    for pool in tenant_a.pools.all():
        tenant_services.quota_set(actor=platform_admin, pool=pool, reason="test", amounts={
            f"gpu:{h800}": 4, "cpu": 128, "memory": 1024})
        reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client(), kinds=["quotas"])
    return {"h800": h800, "capture": django_capture_on_commit_callbacks,
            "backend": request.param}


def _cap(mode, admin, tenant, factor):
    """A platform admin caps what the tenant's development and batch work may borrow, as
    a factor of its grants (the pools and Kueue's queues are synced on commit)."""
    with mode["capture"](execute=True):
        tenant_services.tenant_update(access=access_for(admin, tenant), actor=admin,
                                      borrowing_cap=Decimal(factor))
    relist_all(get_client(), kinds=["quotas"])


def _submit_model(mode, user, tenant, name, tier, pool, model, gpus, run_seconds=3600):
    with mode["capture"](execute=True):
        return job_services.job_submit(
            access=access_for(user, tenant), actor=user, pool=pool, data={
                "name": name, "image": "registry.example.org/ml/trainer:1", "tier": tier,
                "workers": 1, "gpus_per_worker": gpus, "gpu_model": model,
                "cpu_per_worker": 8, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
                "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds)}})


def _until(world, cluster, jobs, wanted, rounds=30, seconds=10):
    for _ in range(rounds):
        _cycle(world, cluster, seconds)
        if _states(*jobs) == wanted:
            break
    return _states(*jobs)


def test_within_quota_first_come_first_served_and_the_next_starts_when_one_ends(
        mode, cluster, alice, bob, tenant_a):
    a = _submit(mode, bob, tenant_a, "dev-a", "development", "dev", run_seconds=300)
    b = _submit(mode, bob, tenant_a, "dev-b", "development", "dev", run_seconds=300)
    p = _submit(mode, alice, tenant_a, "prod-p", "production", "prod", run_seconds=3600)
    # dev-b could borrow the production pool's idle cards, but prod-p, queued in the same
    # pass within its quota, needs them: production first (Kueue: a head that does not
    # borrow before one that does), and dev-b waits for dev-a's cards
    assert _until(mode, cluster, [a, b, p], ["running", "queued", "running"], rounds=10) == [
        "running", "queued", "running"], mode["backend"]
    assert _until(mode, cluster, [a, b, p], ["succeeded", "running", "running"],
                  rounds=40, seconds=20) == ["succeeded", "running", "running"], mode["backend"]


def test_batch_runs_on_idle_capacity_and_yields_to_jobs_within_their_quota(
        mode, cluster, alice, bob, tenant_a):
    x = _submit(mode, bob, tenant_a, "sweep", "batch", "dev", run_seconds=7200)
    assert _until(mode, cluster, [x], ["running"], rounds=10) == ["running"], mode["backend"]
    p = _submit(mode, alice, tenant_a, "prod-p", "production", "prod", run_seconds=3600)
    d = _submit(mode, bob, tenant_a, "dev-d", "development", "dev", run_seconds=3600)
    assert _until(mode, cluster, [p, d, x], ["running", "running", "queued"], rounds=40,
                  seconds=20) == ["running", "running", "queued"], mode["backend"]
    x.refresh_from_db()
    assert x.restart_count == 1


def test_a_quota_approval_takes_effect_and_the_waiting_job_starts(
        mode, cluster, platform_admin, bob, tenant_a):
    # exact quota behaviour: capped at its grant, else dev-b would borrow the 4 idle cards
    # of the production pool and not wait for the approval
    _cap(mode, platform_admin, tenant_a, 1)
    a = _submit(mode, bob, tenant_a, "dev-a", "development", "dev", gpus=4, run_seconds=7200)
    b = _submit(mode, bob, tenant_a, "dev-b", "development", "dev", gpus=2, run_seconds=7200)
    assert _until(mode, cluster, [a, b], ["running", "queued"], rounds=10) == [
        "running", "queued"], mode["backend"]
    b.refresh_from_db()
    assert b.wait_reason, mode["backend"]
    with mode["capture"](execute=True):  # prod gives 2 cards up, dev gets them
        for kind, cards in (("prod", 2), ("dev", 6)):
            tenant_services.quota_set(
                actor=platform_admin, pool=tenant_a.pools.get(kind=kind), reason="approved",
                amounts={f"gpu:{mode['h800']}": cards, "cpu": 128, "memory": 1024})
    assert _until(mode, cluster, [a, b], ["running", "running"], rounds=10) == [
        "running", "running"], mode["backend"]


def test_an_admin_preempts_through_the_api_and_the_job_resumes(
        mode, cluster, api, alice, bob, platform_admin, tenant_a):
    job = _submit(mode, bob, tenant_a, "dev-long", "development", "dev", run_seconds=7200)
    assert _until(mode, cluster, [job], ["running"], rounds=10) == ["running"], mode["backend"]
    url = f"/api/v1/jobs/{job.pk}/preempt/"
    assert api(alice).post(url, {"reason": "x"}, format="json").status_code == 404
    assert api(platform_admin).post(url, {"reason": ""}, format="json").status_code == 400
    with mode["capture"](execute=True):
        answer = api(platform_admin).post(url, {"reason": "node maintenance"}, format="json")
    assert answer.status_code == 200 and answer.json()["state"] == "preempting"
    assert "node maintenance" in answer.json()["preempt_reason"]
    for _ in range(40):  # its grace, then back in the queue (restarted), then running
        _cycle(mode, cluster, 20)
        job.refresh_from_db()
        if job.restart_count == 1 and job.state == "running":
            break
    assert (job.state, job.restart_count) == ("running", 1), mode["backend"]
    assert list(job.transitions.values_list("to_state", flat=True))[3:5] == [
        "preempting", "queued"]
    assert job.transitions.filter(reason="Preempted", actor=platform_admin).exists()


def test_a_loan_lets_the_borrowers_waiting_job_start(
        mode, cluster, platform_admin, alice, charlie, tenant_a, tenant_b):
    import datetime as dt

    from django.utils import timezone

    from tenants.access import access_for
    from tenants.choices import MembershipRole

    tenant_b.memberships.filter(user=charlie).update(role=MembershipRole.ADMIN)
    # exact quota behaviour: globex is capped at its grant, else b-second would borrow
    # the idle cards at once and not wait for the loan
    _cap(mode, platform_admin, tenant_b, 1)
    h800 = f"gpu:{mode['h800']}"
    with mode["capture"](execute=True):
        tenant_services.quota_set(actor=platform_admin, pool=tenant_a.pools.get(kind="prod"),
                                  reason="t", amounts={h800: 2, "cpu": 128, "memory": 1024})
        for pool in tenant_b.pools.all():
            tenant_services.quota_set(actor=platform_admin, pool=pool, reason="t", amounts={
                h800: 2 if pool.kind == "dev" else 0, "cpu": 128, "memory": 1024})
            reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client(), kinds=["quotas"])
    first = _submit(mode, charlie, tenant_b, "b-first", "development", "dev", gpus=2,
                    run_seconds=7200)
    second = _submit(mode, charlie, tenant_b, "b-second", "development", "dev", gpus=2,
                     run_seconds=7200)
    assert _until(mode, cluster, [first, second], ["running", "queued"], rounds=10) == [
        "running", "queued"], mode["backend"]
    loan = tenant_services.loan_propose(
        access=access_for(alice, tenant_a), actor=alice,
        lender_pool=tenant_a.pools.get(kind="dev"), borrower="globex", borrower_pool="dev",
        resource=h800, amount=2, ends_at=timezone.now() + dt.timedelta(days=7))
    with mode["capture"](execute=True):
        tenant_services.loan_decide(access=access_for(charlie, tenant_b), actor=charlie,
                                    loan=loan, accept=True)
    relist_all(get_client(), kinds=["quotas"])
    assert _until(mode, cluster, [first, second], ["running", "running"], rounds=10) == [
        "running", "running"], mode["backend"]


def test_a_loan_is_guaranteed_until_it_ends_then_the_lender_reclaims(
        mode, cluster, platform_admin, alice, charlie, tenant_a, tenant_b):
    """A loan is a transfer for its term: the lender's queue cannot take the loaned cards
    back while it lasts (Kueue: the borrower runs within its nominal quota, so it is no
    reclaim candidate; with a lendingLimit instead, the lender would reclaim at once).
    Once the loan ends, the borrower's job on it stays until the lender needs the room,
    then it is reclaimed with its grace (Kueue: ``InCohortReclamation``)."""
    import datetime as dt

    from django.utils import timezone

    from core.texts import english
    from tenants.access import access_for
    from tenants.choices import MembershipRole

    tenant_b.memberships.filter(user=charlie).update(role=MembershipRole.ADMIN)
    h800 = f"gpu:{mode['h800']}"
    with mode["capture"](execute=True):
        for pool in tenant_b.pools.all():
            tenant_services.quota_set(actor=platform_admin, pool=pool, reason="t", amounts={
                h800: 0, "cpu": 128, "memory": 1024})
            reconcile_pool.apply(args=[pool.pk]).get()
        loan = tenant_services.loan_propose(
            access=access_for(alice, tenant_a), actor=alice,
            lender_pool=tenant_a.pools.get(kind="dev"), borrower="globex",
            borrower_pool="dev", resource=h800, amount=2,
            ends_at=timezone.now() + dt.timedelta(days=7))
        tenant_services.loan_decide(access=access_for(charlie, tenant_b), actor=charlie,
                                    loan=loan, accept=True)
    relist_all(get_client(), kinds=["quotas"])
    g = _submit(mode, charlie, tenant_b, "on-loan", "development", "dev", gpus=2,
                run_seconds=7200)
    a1 = _submit(mode, alice, tenant_a, "dev-a1", "development", "dev", gpus=2,
                 run_seconds=7200)
    p = _submit(mode, alice, tenant_a, "prod-p", "production", "prod", gpus=4,
                run_seconds=7200)
    assert _until(mode, cluster, [g, a1, p], ["running"] * 3, rounds=10) == [
        "running"] * 3, mode["backend"]
    a2 = _submit(mode, alice, tenant_a, "dev-a2", "development", "dev", gpus=2,
                 run_seconds=600)
    for _ in range(4):  # the lender's pool is at its quota: the loaned cards are not its
        _cycle(mode, cluster, 20)
    assert _states(g, a1, p, a2) == ["running", "running", "running", "queued"], \
        mode["backend"]
    a2.refresh_from_db()
    assert a2.wait_reason, mode["backend"]

    with mode["capture"](execute=True):
        tenant_services.loan_end(loan=loan, actor=alice, access=access_for(alice, tenant_a))
    relist_all(get_client(), kinds=["quotas"])
    assert _until(mode, cluster, [g, a2], ["queued", "running"], rounds=40,
                  seconds=20) == [
        "queued", "running"], mode["backend"]
    g.refresh_from_db()
    preempted = g.transitions.get(to_state="preempting")
    if mode["backend"] == "kueue":
        assert "InCohortReclamation" in english(preempted.message), english(preempted.message)
    assert g.restart_count == 1 and _states(a1, p) == ["running", "running"]


# -- work-conserving admission (issue 27): both backends lend idle capacity alike ----------


def test_idle_capacity_is_lent_to_development_and_batch(mode, cluster, bob, tenant_a):
    """A development job above its pool's grant takes every H800 card, the production
    pool's idle ones included (the engine's eviction watermark counts no allocation on
    exclusive cards, so both backends lend all of them); a batch job runs on A100 cards
    nobody was granted (Kueue: the cohort's own quota)."""
    a100 = _model(cluster, "A100")
    big = _submit(mode, bob, tenant_a, "dev-big", "development", "dev", gpus=8,
                  run_seconds=3600)
    sweep = _submit_model(mode, bob, tenant_a, "sweep", "batch", "dev", a100, gpus=8)
    assert _until(mode, cluster, [big, sweep], ["running", "running"], rounds=10) == [
        "running", "running"], mode["backend"]
    if mode["backend"] == "kueue":
        from k8s_sync import kueue

        views = kueue.workloads_by_job(get_client().list_objects(
            kueue.KUEUE_API, "Workload"))
        big.refresh_from_db()
        sweep.refresh_from_db()
        assert views[("ty-acme-dev", big.k8s_name)].cluster_queue == "ty-acme-dev"
        assert views[("ty-acme-dev", sweep.k8s_name)].cluster_queue == "ty-acme-dev-batch"
        assert kueue.gpu_flavor_name(a100) in views[("ty-acme-dev", sweep.k8s_name)].flavors


def test_the_owner_gets_its_quota_back_within_the_borrowers_grace(
        mode, cluster, alice, bob, tenant_a):
    """The borrower (6 cards: 2 of them the production pool's) is preempted with the
    development tier's grace (300 s) when production needs its 4 cards, and the owner's
    job runs once the borrower's cards are free."""
    big = _submit(mode, bob, tenant_a, "dev-big", "development", "dev", gpus=6,
                  run_seconds=7200)
    assert _until(mode, cluster, [big], ["running"], rounds=10) == ["running"], (
        mode["backend"], english(type(big).objects.get(pk=big.pk).wait_reason))
    p = _submit(mode, alice, tenant_a, "prod-p", "production", "prod", gpus=4,
                run_seconds=7200)
    assert _until(mode, cluster, [big], ["preempting"], rounds=5, seconds=5) == [
        "preempting"], mode["backend"]
    big.refresh_from_db()
    preempted = big.transitions.get(to_state="preempting")
    grace = (big.preempt_deadline - preempted.at).total_seconds()
    assert 240 < grace <= 300, (mode["backend"], grace)   # development's grace
    assert _states(p) == ["queued"], mode["backend"]   # not before the borrower stops
    assert _until(mode, cluster, [big, p], ["queued", "running"], rounds=40,
                  seconds=20) == ["queued", "running"], mode["backend"]
    big.refresh_from_db()
    assert big.restart_count == 1
    started = p.transitions.filter(to_state="running").get()
    assert started.at >= preempted.at
    if mode["backend"] == "kueue":   # prod is within its nominal quota: it reclaims
        assert "InCohortReclamation" in english(preempted.message), english(
            preempted.message)


def test_production_never_borrows(mode, cluster, alice, tenant_a):
    """Production above its grant waits although the development pool's cards are idle,
    with a reason naming its quota."""
    first = _submit(mode, alice, tenant_a, "prod-1", "production", "prod", gpus=4,
                    run_seconds=7200)
    second = _submit(mode, alice, tenant_a, "prod-2", "production", "prod", gpus=4,
                     run_seconds=7200)
    assert _until(mode, cluster, [first, second], ["running", "queued"], rounds=10) == [
        "running", "queued"], mode["backend"]
    for _ in range(3):   # and keeps waiting, 4 cards idle
        _cycle(mode, cluster, 20)
    assert _states(first, second) == ["running", "queued"], mode["backend"]
    second.refresh_from_db()
    reason = english(second.wait_reason)
    if mode["backend"] == "trainyard":
        # as a batch job it would run on the 4 idle cards, so the reason says so
        assert text_code(second.wait_reason) == "jobs.wait.over_quota", reason
        assert "quota of 4" in reason and "batch tier" in reason, reason
    else:   # Kueue: the production queue has no borrowing limit left (borrowingLimit 0)
        assert "ty-acme-prod" in reason and "insufficient unused quota" in reason, reason


def test_a_capped_tenant_waits_with_the_cap_named(mode, cluster, platform_admin, bob,
                                                  tenant_a):
    """Capped at its grant (``borrowing_cap = 1``), development work above it waits
    although the production pool's cards are idle."""
    _cap(mode, platform_admin, tenant_a, 1)
    first = _submit(mode, bob, tenant_a, "dev-1", "development", "dev", gpus=4,
                    run_seconds=7200)
    # the second once the first runs: two Workloads created in the same second are
    # ordered by Kueue at random (a tie of creation times), so the test would be too
    assert _until(mode, cluster, [first], ["running"], rounds=10) == ["running"]
    second = _submit(mode, bob, tenant_a, "dev-2", "development", "dev", gpus=2,
                     run_seconds=7200)
    assert _until(mode, cluster, [first, second], ["running", "queued"], rounds=10) == [
        "running", "queued"], mode["backend"]
    for _ in range(3):
        _cycle(mode, cluster, 20)
    assert _states(first, second) == ["running", "queued"], mode["backend"]
    second.refresh_from_db()
    reason = english(second.wait_reason)
    if mode["backend"] == "trainyard":
        assert text_code(second.wait_reason) == "jobs.wait.borrow_cap", reason
        assert "borrowing cap" in reason, reason
    else:   # Kueue does not know why a borrowingLimit is 0: "insufficient unused quota"
        assert "ty-acme-dev" in reason and "insufficient unused quota" in reason, reason
    # the idle cards the waiting job fits are measured in both modes, under the cap
    from django.utils import timezone

    from jobs.idle_waiting import window_totals

    now = timezone.now()
    totals = window_totals(now - dt.timedelta(hours=1), now + dt.timedelta(minutes=1))
    by_cause = {c["cause"]: c["hours"] for c in totals["causes"]}
    assert by_cause["cap"] > 0, (mode["backend"], by_cause)
    assert by_cause["soft_limit"] == 0, (mode["backend"], by_cause)
