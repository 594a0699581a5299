from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0012_loan_terms'),
    ]

    operations = [
        migrations.AddField(
            model_name='tenant',
            name='billing_address',
            field=models.TextField(blank=True, help_text="The postal address printed on this tenant's invoices; blank: none.", max_length=1000, verbose_name='billing address'),
        ),
    ]
