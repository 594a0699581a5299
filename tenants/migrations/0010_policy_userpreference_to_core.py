# Policy and UserPreference move to core (core/migrations/0001_initial.py), keeping their
# rows: the tables are renamed to core's names here and the models leave tenants' state;
# core's first migration takes them into its state without touching the database.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0009_cluster_contract'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AlterModelTable(name='policy', table='core_policy'),
                migrations.AlterModelTable(name='userpreference', table='core_userpreference'),
            ],
            state_operations=[
                migrations.DeleteModel(name='Policy'),
                migrations.DeleteModel(name='UserPreference'),
            ],
        ),
    ]
