"""Reasons and transition messages become stored texts (``core.texts``): JSON columns.

Every existing row keeps its text as a plain JSON string (shown as it is); new rows get
``{"code": ..., "args": {...}}`` values rendered in the reader's language. One statement
per column (Postgres: ``USING to_jsonb(...)``; SQLite: ``json_quote``), so a large
transition table converts without loading rows into Python.
"""

from django.db import migrations, models

COLUMNS = [("jobs_trainingjob", "hold_reason"), ("jobs_trainingjob", "preempt_reason"),
           ("jobs_trainingjob", "wait_reason"), ("jobs_jobtransition", "message")]
MODELS = {"jobs_trainingjob": "TrainingJob", "jobs_jobtransition": "JobTransition"}


def _to_json(apps, schema_editor):  # type: ignore[no-untyped-def]
    connection = schema_editor.connection
    quote = schema_editor.quote_name
    for table, column in COLUMNS:
        t, c = quote(table), quote(column)
        if connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE {t} ALTER COLUMN {c} TYPE jsonb "
                                  f"USING to_jsonb({c})")
        elif connection.vendor == "sqlite":
            schema_editor.execute(f"UPDATE {t} SET {c} = json_quote({c})")
        else:
            raise NotImplementedError(f"stored-text migration for {connection.vendor}")


def _to_text(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Back to text: plain strings as they were, coded texts as their JSON."""
    connection = schema_editor.connection
    rebuilt: set[str] = set()
    quote = schema_editor.quote_name
    for table, column in COLUMNS:
        t, c = quote(table), quote(column)
        if connection.vendor == "postgresql":
            schema_editor.execute(
                f"ALTER TABLE {t} ALTER COLUMN {c} TYPE text USING (CASE WHEN "
                f"jsonb_typeof({c}) = 'string' THEN {c} #>> '{{}}' ELSE {c}::text END)")
        elif connection.vendor == "sqlite":
            if table not in rebuilt:
                # A later migration may have rebuilt the table with JSON_VALID checks on
                # these columns (SQLite rebuilds a table on most schema changes): rebuild it
                # as the text columns of the state before this migration first.
                schema_editor._remake_table(apps.get_model("jobs", MODELS[table]))
                rebuilt.add(table)
            schema_editor.execute(
                f"UPDATE {t} SET {c} = CASE WHEN json_valid({c}) AND json_type({c}) = 'text' "
                f"THEN json_extract({c}, '$') ELSE {c} END")
        else:
            raise NotImplementedError(f"stored-text migration for {connection.vendor}")


def _json_field() -> models.JSONField:
    return models.JSONField(blank=True, default=str)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0002_maintenance_window"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(_to_json, _to_text)],
            state_operations=[
                migrations.AlterField(model_name="trainingjob", name="hold_reason",
                                      field=_json_field()),
                migrations.AlterField(model_name="trainingjob", name="preempt_reason",
                                      field=_json_field()),
                migrations.AlterField(model_name="trainingjob", name="wait_reason",
                                      field=_json_field()),
                migrations.AlterField(model_name="jobtransition", name="message",
                                      field=_json_field()),
            ],
        ),
    ]
