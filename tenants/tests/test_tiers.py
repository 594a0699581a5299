"""The tier table: one place for each tier's graces and checkpoint interval."""

from core.models import Policy
from tenants.tiers import PRODUCTION_TERMINATION_SECONDS, tier_rules


def test_the_tier_table_follows_the_policy(db):
    policy = Policy.current()
    policy.development_grace_seconds, policy.batch_grace_seconds = 120, 10
    rules = tier_rules(policy)
    assert rules["production"].preemption_grace_seconds == 0   # never preempted
    assert rules["production"].termination_grace_seconds == PRODUCTION_TERMINATION_SECONDS
    assert (rules["development"].preemption_grace_seconds,
            rules["development"].termination_grace_seconds) == (120, 120)
    assert rules["batch"].termination_grace_seconds == 10
    assert rules["production"].checkpoint_interval_seconds > \
        rules["development"].checkpoint_interval_seconds


def test_the_engine_and_the_pods_read_the_same_table(tenant_a, platform_admin):
    from jobs.models import TrainingJob
    from jobs.selectors import admission_inputs, job_spec
    from tenants import services

    services.policy_update(actor=platform_admin, development_grace_seconds=90)
    job = TrainingJob(tenant=tenant_a, pool=tenant_a.pools.get(kind="dev"), name="t",
                      image="trainer:1", tier="development", max_run_seconds=600)
    from django.utils import timezone

    engine = admission_inputs(timezone.now())["policy"]
    assert engine.grace_seconds["development"] == job_spec(job).grace_seconds == 90
    assert job_spec(job).checkpoint_interval_seconds == 300
