"""The invoice document (issue 30): an issued invoice keeps its issuer, bill-to, issue and
due dates, payment terms and tax (``billing.document.stamp``).

Issued invoices stay immutable (``0004_issued_invoices_immutable``): Postgres' trigger
compares the whole row, so the new columns are covered as they are. SQLite's update
trigger lists the columns, and adding a column with a default rebuilds the table (which
drops its triggers): the triggers are dropped first and created again with the new
columns (:data:`SQLITE_INVOICE_COLUMNS`; ``billing/tests/test_immutability.py`` and the
root ``conftest.py`` use the latest migration that defines it).
"""

import importlib

from django.db import migrations, models

IMMUTABLE = importlib.import_module("billing.migrations.0004_issued_invoices_immutable")

SQLITE_INVOICE_COLUMNS = (*IMMUTABLE.SQLITE_INVOICE_COLUMNS, "issuer_name", "issuer_address",
                          "issuer_tax_id", "bill_to_contact", "bill_to_email",
                          "bill_to_address", "issue_date", "due_date", "payment_terms_days",
                          "tax_rate", "tax_amount")
_UNCHANGED = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in SQLITE_INVOICE_COLUMNS)
SQLITE_CREATE = [
    f"""CREATE TRIGGER billing_invoice_issued_update BEFORE UPDATE ON billing_invoice
    FOR EACH ROW WHEN OLD.status = 'issued' AND NOT (NEW.issued_by_id IS NULL AND {_UNCHANGED})
    BEGIN SELECT RAISE(ABORT, 'billing: an issued invoice cannot be changed'); END""",
    *IMMUTABLE.SQLITE_CREATE[1:],
]


def create(connection) -> None:
    """Create the immutability triggers on ``connection`` (this migration's columns)."""
    if connection.vendor != "sqlite":
        IMMUTABLE.create(connection)
        return
    with connection.cursor() as cursor:
        for sql in SQLITE_CREATE:
            cursor.execute(sql)


def drop(connection) -> None:
    IMMUTABLE.drop(connection)


def _drop_sqlite(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        drop(schema_editor.connection)


def _create_sqlite(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        create(schema_editor.connection)


def _create_old_sqlite(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        IMMUTABLE.create(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0007_device_kinds'),
    ]

    operations = [
        migrations.RunPython(_drop_sqlite, _create_old_sqlite),
        migrations.AddField(
            model_name='invoice',
            name='bill_to_address',
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name='invoice',
            name='bill_to_contact',
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name='invoice',
            name='bill_to_email',
            field=models.CharField(blank=True, max_length=254),
        ),
        migrations.AddField(
            model_name='invoice',
            name='due_date',
            field=models.DateField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='invoice',
            name='issue_date',
            field=models.DateField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='invoice',
            name='issuer_address',
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name='invoice',
            name='issuer_name',
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name='invoice',
            name='issuer_tax_id',
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name='invoice',
            name='payment_terms_days',
            field=models.PositiveSmallIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='invoice',
            name='tax_amount',
            field=models.DecimalField(blank=True, decimal_places=2, max_digits=14, null=True),
        ),
        migrations.AddField(
            model_name='invoice',
            name='tax_rate',
            field=models.DecimalField(blank=True, decimal_places=4, max_digits=7, null=True),
        ),
        migrations.RunPython(_create_sqlite, _drop_sqlite),
    ]
