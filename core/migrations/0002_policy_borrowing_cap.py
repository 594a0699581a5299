from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("core", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="policy", name="borrowing_cap",
            field=models.DecimalField(blank=True, decimal_places=2, max_digits=5, null=True)),
    ]
