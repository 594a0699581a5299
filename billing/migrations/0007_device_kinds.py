"""The ledger records what each device is (whole card, MIG instance, time-sliced/MPS
share, HAMi vGPU) and its share of a card; rate cards gain per-device price overrides.

Existing rows: a whole card unless their job says otherwise (a MIG profile: ``mig``; a
shared GPU: ``shared`` at 1/replicas of the sharing nodes of its model, else 1; a HAMi
memory limit: ``hami`` at limit / card memory, else 1), by the rule of
``billing.pricebook`` as it stands (a migration keeps its own copy)."""

from decimal import Decimal
from fractions import Fraction

import django.db.models.deletion
from django.db import migrations, models


def kinds_from_jobs(apps, schema_editor):
    GpuUsage = apps.get_model("billing", "GpuUsage")
    ObservedNode = apps.get_model("k8s_sync", "ObservedNode")
    memory: dict[str, int] = {}
    replicas: dict[str, int] = {}
    for model, mib, strategy, count in ObservedNode.objects.exclude(gpu_model="").values_list(
        "gpu_model", "gpu_memory_mib", "sharing_strategy", "gpu_replicas"
    ):
        if mib:
            memory[model] = max(memory.get(model, 0), mib)
        if strategy not in ("", "none"):
            replicas[model] = max(replicas.get(model, 0), count or 1)
    GpuUsage.objects.exclude(mig_profile="").update(device_kind="mig")
    jobs = (
        GpuUsage.objects.filter(mig_profile="")
        .filter(models.Q(job__gpu_shared=True) | models.Q(job__gpu_memory_gib_per_card__gt=0))
        .values_list("job_id", "job__gpu_model", "job__gpu_shared", "job__gpu_memory_gib_per_card")
        .distinct()
    )
    for job_id, model, shared, limit in jobs:
        if shared:
            kind, share = "shared", Fraction(1, max(1, replicas.get(model) or 1))
        else:
            card = memory.get(model)
            share = (
                min(Fraction(1), Fraction(Decimal(limit)) * 1024 / card) if card else Fraction(1)
            )
            kind = "hami"
        GpuUsage.objects.filter(job_id=job_id, mig_profile="").update(
            device_kind=kind, share_num=share.numerator, share_den=share.denominator
        )


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0006_usage_fewer_indexes"),
        ("jobs", "0013_job_progress"),
        ("k8s_sync", "0005_observed_kueue_workload"),
    ]

    operations = [
        migrations.AddField(
            model_name="gpuusage",
            name="device_kind",
            field=models.CharField(default="whole", max_length=8),
        ),
        migrations.AddField(
            model_name="gpuusage",
            name="share_den",
            field=models.PositiveBigIntegerField(default=1),
        ),
        migrations.AddField(
            model_name="gpuusage",
            name="share_num",
            field=models.PositiveBigIntegerField(default=1),
        ),
        migrations.CreateModel(
            name="DevicePrice",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("device", models.CharField(max_length=300, verbose_name="device")),
                (
                    "price_per_hour",
                    models.DecimalField(
                        decimal_places=4, max_digits=12, verbose_name="price per device-hour"
                    ),
                ),
                (
                    "card",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="device_prices",
                        to="billing.ratecard",
                    ),
                ),
            ],
            options={
                "ordering": ["device"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("card", "device"), name="billing_device_price_unique"
                    )
                ],
            },
        ),
        migrations.RunPython(kinds_from_jobs, migrations.RunPython.noop),
    ]
