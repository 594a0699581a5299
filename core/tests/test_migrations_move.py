"""Policy and UserPreference moved from tenants to core with their rows.

``tenants/migrations/0010_policy_userpreference_to_core`` renames the tables and drops the
models from tenants' state; ``core/migrations/0001_initial`` takes them into core's state
(no database operation) and moves their content types, so permissions and admin log
entries follow. Both ways keep every row.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core.models import Policy, UserPreference

BEFORE = [("tenants", "0009_cluster_contract")]


def _migrate(targets: list[tuple[str, str]] | None = None) -> MigrationExecutor:
    """Migrate to ``targets`` (every app's latest when None); the executor that did it."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    return executor


def _tables() -> set[str]:
    return {t for t in connection.introspection.table_names()
            if t.endswith(("_policy", "_userpreference"))}


def _content_types() -> dict[tuple[str, str], int]:
    return {(ct.app_label, ct.model): ct.pk for ct in ContentType.objects.filter(
        model__in=["policy", "userpreference"])}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_move_keeps_the_rows_forward_and_backward():
    dora = get_user_model().objects.create(username="dora")
    types = _content_types()
    assert set(types) == {("core", "policy"), ("core", "userpreference")}

    try:
        executor = _migrate(BEFORE)
        assert _tables() == {"tenants_policy", "tenants_userpreference"}
        assert _content_types() == {("tenants", model): pk for (_, model), pk in types.items()}
        old = executor.loader.project_state(BEFORE).apps
        old.get_model("tenants", "Policy").objects.create(
            pk=1, eviction_watermark=Decimal("0.9"), egress_cidrs=["10.0.0.0/8"],
            topology_levels=["rack", "switch"], pod_start_attempts=5, updated_by_id=dora.pk)
        old.get_model("tenants", "UserPreference").objects.create(user_id=dora.pk,
                                                                  language="zh-hans")

        _migrate()
        assert _tables() == {"core_policy", "core_userpreference"}
        assert _content_types() == types
        policy = Policy.current()
        assert (policy.pk, policy.eviction_watermark, policy.egress_cidrs,
                policy.topology_levels, policy.pod_start_attempts, policy.updated_by) == (
            1, Decimal("0.900"), ["10.0.0.0/8"], ["rack", "switch"], 5, dora)
        assert Policy.objects.count() == 1
        assert get_user_model().objects.get(pk=dora.pk).preference.language == "zh-hans"

        executor = _migrate(BEFORE)
        assert _tables() == {"tenants_policy", "tenants_userpreference"}
        old = executor.loader.project_state(BEFORE).apps
        row = old.get_model("tenants", "Policy").objects.get()
        assert (row.pk, row.eviction_watermark, row.topology_levels, row.updated_by_id) == (
            1, Decimal("0.900"), ["rack", "switch"], dora.pk)
        assert old.get_model("tenants", "UserPreference").objects.get().language == "zh-hans"
    finally:
        _migrate()

    assert _tables() == {"core_policy", "core_userpreference"}
    assert UserPreference.objects.get(user=dora).language == "zh-hans"
