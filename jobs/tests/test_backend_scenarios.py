"""Both admission backends agree on who runs first (TRAINYARD_ADMISSION_BACKEND trainyard
and kueue, each against kubesim: Trainyard's engine, and kubesim's Kueue controller fed
the ClusterQueues Trainyard writes). One H800 node of 8 cards; tenant_a's prod and dev
pools are granted 4 each."""

import pytest

from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from jobs.tests.test_kueue_mode import _model, _submit
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.tasks import reconcile_cluster, reconcile_pool

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


@pytest.fixture(params=["trainyard", "kueue"])
def mode(request, cluster, settings, platform_admin, tenant_a,
         django_capture_on_commit_callbacks):
    settings.TRAINYARD_ADMISSION_BACKEND = request.param
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
