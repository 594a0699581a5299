"""The elastic ceiling becomes the borrowing cap (issue 27: work-conserving admission).

Development and batch work borrow idle capacity by default; a platform admin may cap it
per tenant. Today's elastic factor of an overcommitted tenant is kept as its cap (it was
one); every other tenant's factor had no effect and becomes "no cap of its own".
"""

from django.db import migrations, models


def forwards(apps, schema_editor):
    Tenant = apps.get_model("tenants", "Tenant")
    Tenant.objects.exclude(quota_mode="overcommitted").update(borrowing_cap=None)


def backwards(apps, schema_editor):
    Tenant = apps.get_model("tenants", "Tenant")
    Tenant.objects.filter(borrowing_cap__isnull=True).update(borrowing_cap=1)


class Migration(migrations.Migration):

    dependencies = [
        ("tenants", "0010_policy_userpreference_to_core"),
    ]

    operations = [
        migrations.RenameField("tenant", "elastic_factor", "borrowing_cap"),
        migrations.AlterField(
            model_name="tenant", name="borrowing_cap",
            field=models.DecimalField(
                blank=True, decimal_places=2, max_digits=5, null=True,
                verbose_name="borrowing cap (x quota)",
                help_text="Development and batch jobs may borrow idle capacity up to this "
                          "many times the quota; blank: the platform's cap, or none.")),
        migrations.RunPython(forwards, backwards),
    ]
