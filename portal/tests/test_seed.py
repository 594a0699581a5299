"""The demo: accounts and tenants with quota, and 30 days of history with invoices."""

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
    count = jobs.count()
    call_command("seed_history")
    assert TrainingJob.objects.count() == count
