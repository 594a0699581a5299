"""The demo: accounts and tenants with quota, and 30 days of history with invoices."""

from decimal import Decimal

import pytest
from django.core.management import call_command

from jobs.models import TrainingJob
from jobs.timeline import running_seconds
from tenants.models import PlatformRole, QuotaGrant, Tenant, UsageSeries


def test_seed_demo_and_history_make_a_living_demo(db, capsys):
    call_command("seed_demo")
    first = capsys.readouterr().out
    assert "platform" in first and "finance" in first
    call_command("seed_demo")
    assert "exist already" in capsys.readouterr().out  # passwords shown once
    assert set(Tenant.objects.values_list("slug", flat=True)) == {"vision", "nlp", "speech"}
    assert QuotaGrant.objects.filter(resource="gpu:NVIDIA-H800").exists()
    assert PlatformRole.objects.filter(role="finance").exists()
    # one tenant in every quota mode, and a policy that lets GPU grants overcommit
    assert dict(Tenant.objects.values_list("slug", "quota_mode")) == {
        "vision": "static", "nlp": "overcommitted", "speech": "dynamic"}
    # no borrowing cap: development and batch jobs borrow any idle capacity (issue 27)
    assert set(Tenant.objects.values_list("borrowing_cap", flat=True)) == {None}
    from core.models import Policy

    assert Policy.current().overcommit_factors == {"gpu": 1.5}
    assert "admin of vision" in first and "member of vision" in first

    call_command("seed_history")
    jobs = TrainingJob.objects.all()
    count_jobs = jobs.count()
    assert count_jobs > 300 and set(jobs.values_list("state", flat=True)) == {"succeeded"}
    job = jobs.filter(restart_count=1).first()
    assert job is not None  # some were preempted and resumed
    steps = [(t.to_state, t.at) for t in job.transitions.all()]
    assert [s for s, _ in steps].count("running") == 2
    assert running_seconds(steps, job.finished_at) > 0
    assert UsageSeries.objects.filter(resolution="d").count() >= 30
    # every history job has its measured GPU use, so the dashboards' mean is never "—"
    from tenants.models import JobUtilisation

    means = [u.mean_util for u in JobUtilisation.objects.all()]
    assert len(means) == count_jobs and all(0 < m <= 100 for m in means)
    from billing.models import Invoice

    assert Invoice.objects.filter(status="issued", number__isnull=False).exists()  # by finance
    # every ended month with charges is closed, in order: none is left for finance to
    # close out of order (issue 30: October was closable after November)
    from django.utils import timezone

    from billing.months import first_open_month_with_charges

    assert first_open_month_with_charges(timezone.localdate().replace(day=1)) is None
    count = jobs.count()
    call_command("seed_history")
    assert TrainingJob.objects.count() == count


@pytest.mark.slow
def test_the_seeded_history_gives_believable_utilisation_figures(db, capsys):
    """A few days of the demo's history (``seed_history``'s own function, small scale):
    the grants cover the seeded days, so every GPU kind with jobs shows quota held above
    what ran within it (quota use below 100%), and an idle rate from the jobs' measured
    utilisation (issue 27: the demo showed 0.37 quota-held GPU-hours and 100% used)."""
    import datetime as dt

    from django.utils import timezone

    from billing import selectors, services
    from portal.management.commands.seed_history import Command
    from tenants.models import JobUtilisation

    call_command("seed_demo")
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    days = 3
    jobs, _series = Command().history(now=now, days=days, seed=7)
    assert jobs > 0
    services.ledger_ingest_gpu(now=now)
    today = timezone.localdate(now)
    figures = selectors.utilisation_figures(today - dt.timedelta(days=days), today
                                            + dt.timedelta(days=1), now=now)
    checked = 0
    for tenant_id, kinds in figures.items():
        namespaces = [p.namespace for p in Tenant.objects.get(pk=tenant_id).pools.all()]
        means = [u.mean_util for u in JobUtilisation.objects.filter(namespace__in=namespaces)]
        for kind, f in kinds.items():
            assert f.quota_held_hours > 0, kind
            if not f.allocated_hours:
                continue
            checked += 1
            # the grants held all the seeded days: at least 3 days of the grant
            assert f.quota_held_hours >= f.within_quota_hours, kind
            assert f.quota_use is not None and f.quota_use < 1, kind
            # every seeded job was measured; the idle rate lies within its jobs' range
            assert abs(f.measured_hours - f.allocated_hours) <= Decimal("0.02"), kind
            assert 1 - Decimal(max(means)) / 100 <= f.idle_rate <= 1 - Decimal(
                min(means)) / 100, kind
    assert checked >= 3
