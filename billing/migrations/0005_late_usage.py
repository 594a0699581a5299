"""Late usage: GpuUsage rows carry the month whose invoice bills them (a day of a closed
month found later is a late row billed on the next open invoice); seconds may be negative
on a late row (a correction); StorageSnapshot rows carry the first month that bills them."""

import datetime as dt

from django.db import migrations, models


def backfill(apps, schema_editor):
    usage = apps.get_model("billing", "GpuUsage")
    for month in usage.objects.dates("day", "month"):
        nxt = (month.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        usage.objects.filter(day__gte=month, day__lt=nxt).update(billed_period=month)


class Migration(migrations.Migration):

    dependencies = [
        ("billing", "0004_issued_invoices_immutable"),
    ]

    operations = [
        migrations.AddField(
            model_name="gpuusage", name="billed_period",
            field=models.DateField(null=True),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="gpuusage", name="billed_period", field=models.DateField(),
        ),
        migrations.AlterField(
            model_name="gpuusage", name="seconds", field=models.IntegerField(),
        ),
        migrations.RemoveConstraint(model_name="gpuusage", name="billing_gpu_usage_job_day"),
        migrations.AddConstraint(
            model_name="gpuusage",
            constraint=models.UniqueConstraint(fields=("job", "day", "billed_period"),
                                               name="billing_gpu_usage_job_day_billed"),
        ),
        migrations.AddIndex(
            model_name="gpuusage",
            index=models.Index(fields=["billed_period", "tenant"],
                               name="billing_gpu_billed__9e0b9f_idx"),
        ),
        migrations.AddField(
            model_name="storagesnapshot", name="billed_period",
            field=models.DateField(blank=True, null=True),
        ),
    ]
