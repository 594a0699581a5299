from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0009_idle_while_waiting")]

    operations = [
        migrations.AddField(model_name="admissionstate", name="leader",
                            field=models.CharField(blank=True, max_length=200)),
        migrations.AddField(model_name="admissionstate", name="lease_until",
                            field=models.DateTimeField(blank=True, null=True)),
        migrations.AddField(model_name="admissionstate", name="drift",
                            field=models.PositiveBigIntegerField(default=0)),
    ]
