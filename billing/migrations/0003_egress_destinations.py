"""Egress by destination: each EgressSample counts the bytes a pod sent to one
destination class; rows recorded before (every byte sent, whatever its destination) are
``unclassified`` and keep being priced as the internet. The rate card gets a price per
GiB to other regions and to other zones beside the internet's (``egress_gib``).
The receive counter (ingress is free) is no longer recorded."""

from decimal import Decimal
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0002_invoice_line_text'),
        ('tenants', '0010_policy_userpreference_to_core'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='egresssample',
            options={'ordering': ['namespace', 'pod', 'destination', 'at']},
        ),
        migrations.RemoveConstraint(
            model_name='egresssample',
            name='billing_egress_sample_key',
        ),
        migrations.RemoveField(
            model_name='egresssample',
            name='receive_total',
        ),
        migrations.AddField(
            model_name='egresssample',
            name='destination',
            field=models.CharField(choices=[('internet', 'to the internet'), ('cross_region', 'to other regions'), ('cross_zone', 'to other zones'), ('in_cluster', 'within the zone (in the cluster, free)'), ('unclassified', 'all traffic sent (destination unknown)')], default='unclassified', max_length=16),
        ),
        migrations.AddField(
            model_name='ratecard',
            name='egress_region_gib',
            field=models.DecimalField(decimal_places=6, default=Decimal('0'), max_digits=12, verbose_name='price per GiB of egress to other regions'),
        ),
        migrations.AddField(
            model_name='ratecard',
            name='egress_zone_gib',
            field=models.DecimalField(decimal_places=6, default=Decimal('0'), max_digits=12, verbose_name='price per GiB of egress to other zones'),
        ),
        migrations.AlterField(
            model_name='ratecard',
            name='egress_gib',
            field=models.DecimalField(decimal_places=6, default=Decimal('0'), max_digits=12, verbose_name='price per GiB of egress to the internet'),
        ),
        migrations.AddConstraint(
            model_name='egresssample',
            constraint=models.UniqueConstraint(fields=('namespace', 'pod', 'destination', 'at'), name='billing_egress_sample_key'),
        ),
    ]
