# Policy and UserPreference, moved from tenants with their rows: tenants' migration 0010
# renamed the tables (tenants_policy -> core_policy, tenants_userpreference ->
# core_userpreference), so here they only enter core's state. The content types follow,
# so permissions and admin log entries keep pointing at the same models.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ['policy', 'userpreference']


def _move_content_types(apps, old, new):
    ContentType = apps.get_model('contenttypes', 'ContentType')
    for model in MOVED:
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def content_types_to_core(apps, schema_editor):
    _move_content_types(apps, 'tenants', 'core')


def content_types_to_tenants(apps, schema_editor):
    _move_content_types(apps, 'core', 'tenants')


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('tenants', '0010_policy_userpreference_to_core'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Policy',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('overcommit_factors', models.JSONField(blank=True, default=dict)),
                        ('eviction_watermark', models.DecimalField(decimal_places=3, default=0.85, max_digits=4)),
                        ('production_grace_seconds', models.PositiveIntegerField(default=0)),
                        ('development_grace_seconds', models.PositiveIntegerField(default=300)),
                        ('batch_grace_seconds', models.PositiveIntegerField(default=30)),
                        ('default_quota', models.JSONField(blank=True, default=dict)),
                        ('dev_pvc_reclaim_days', models.PositiveIntegerField(blank=True, null=True)),
                        ('dynamic_headroom', models.DecimalField(decimal_places=2, default=0.2, max_digits=4)),
                        ('dynamic_idle_threshold', models.DecimalField(decimal_places=2, default=0.5, max_digits=4)),
                        ('egress_cidrs', models.JSONField(blank=True, default=list)),
                        ('pod_start_deadline_seconds', models.PositiveIntegerField(default=600)),
                        ('pod_start_attempts', models.PositiveIntegerField(default=3)),
                        ('topology_levels', models.JSONField(blank=True, default=list)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('updated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'verbose_name_plural': 'policy',
                    },
                ),
                migrations.CreateModel(
                    name='UserPreference',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('language', models.CharField(default='en', max_length=16, verbose_name='language')),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='preference', to=settings.AUTH_USER_MODEL)),
                    ],
                ),
            ],
        ),
        migrations.RunPython(content_types_to_core, content_types_to_tenants),
    ]
