"""Issued invoices are immutable in the database too, not only in Django.

Triggers refuse, for an invoice whose stored status is ``issued``:

* any UPDATE of its row, except the one change Django itself makes to an issued invoice:
  ``issued_by`` set to NULL when that user is deleted (``on_delete=SET_NULL``). Issuing
  (a draft's row becoming ``issued``, in ``month_close`` and ``credit_note_issue``) is an
  update of a row that is still a draft, so it passes; nothing else changes an issued
  invoice today (a credit note is a new row that points at it);
* a DELETE of its row;
* an INSERT, UPDATE or DELETE of its lines (a line moved onto or off it included).

Postgres: two PL/pgSQL functions and their row triggers; the invoice's check compares the
whole row (``NEW IS NOT DISTINCT FROM OLD`` with ``issued_by_id`` cleared), so a column
added later is covered. SQLite: one trigger per statement kind (``RAISE(ABORT)``), the
invoice's columns listed as they are now: a migration that adds a column to
``billing_invoice`` must recreate ``billing_invoice_issued_update`` with it, and on SQLite
any migration that rebuilds the table (AlterField) drops its triggers, which must then be
created again. ``billing/tests/test_immutability.py`` fails when either happens. Both
raise an IntegrityError in Django.

Postgres' TRUNCATE (the test database's flush) fires no row triggers; SQLite's flush
deletes rows, so the test suite's ``conftest.py`` removes issued invoices with the
triggers dropped (:func:`drop`, :func:`create`) before a transactional test's flush.
"""

from django.db import migrations

SQLITE_INVOICE_COLUMNS = ("id", "tenant_id", "period", "kind", "status", "number",
                          "tenant_name", "cost_center", "currency", "total", "credits_id",
                          "reason", "computed_at", "issued_at")
_LINE_ISSUED = "(SELECT status FROM billing_invoice WHERE id = {row}.invoice_id) = 'issued'"
_UNCHANGED = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in SQLITE_INVOICE_COLUMNS)

SQLITE_CREATE = [
    f"""CREATE TRIGGER billing_invoice_issued_update BEFORE UPDATE ON billing_invoice
    FOR EACH ROW WHEN OLD.status = 'issued' AND NOT (NEW.issued_by_id IS NULL AND {_UNCHANGED})
    BEGIN SELECT RAISE(ABORT, 'billing: an issued invoice cannot be changed'); END""",
    """CREATE TRIGGER billing_invoice_issued_delete BEFORE DELETE ON billing_invoice
    FOR EACH ROW WHEN OLD.status = 'issued'
    BEGIN SELECT RAISE(ABORT, 'billing: an issued invoice cannot be deleted'); END""",
    f"""CREATE TRIGGER billing_invoiceline_issued_insert BEFORE INSERT ON billing_invoiceline
    FOR EACH ROW WHEN {_LINE_ISSUED.format(row="NEW")}
    BEGIN SELECT RAISE(ABORT, 'billing: the lines of an issued invoice cannot be changed'); END""",
    f"""CREATE TRIGGER billing_invoiceline_issued_update BEFORE UPDATE ON billing_invoiceline
    FOR EACH ROW WHEN {_LINE_ISSUED.format(row="OLD")} OR {_LINE_ISSUED.format(row="NEW")}
    BEGIN SELECT RAISE(ABORT, 'billing: the lines of an issued invoice cannot be changed'); END""",
    f"""CREATE TRIGGER billing_invoiceline_issued_delete BEFORE DELETE ON billing_invoiceline
    FOR EACH ROW WHEN {_LINE_ISSUED.format(row="OLD")}
    BEGIN SELECT RAISE(ABORT, 'billing: the lines of an issued invoice cannot be changed'); END""",
]
SQLITE_DROP = [f"DROP TRIGGER IF EXISTS {name}" for name in (
    "billing_invoice_issued_update", "billing_invoice_issued_delete",
    "billing_invoiceline_issued_insert", "billing_invoiceline_issued_update",
    "billing_invoiceline_issued_delete")]

POSTGRES_CREATE = [
    """CREATE FUNCTION billing_invoice_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        allowed billing_invoice;
    BEGIN
        IF TG_OP = 'DELETE' THEN
            RAISE EXCEPTION 'billing: issued invoice % cannot be deleted', OLD.number
                USING ERRCODE = 'restrict_violation';
        END IF;
        allowed := OLD;
        allowed.issued_by_id := NULL;  -- the issuer's user deleted (on_delete=SET_NULL)
        IF NEW IS NOT DISTINCT FROM allowed THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'billing: issued invoice % cannot be changed', OLD.number
            USING ERRCODE = 'restrict_violation';
    END $$""",
    """CREATE TRIGGER billing_invoice_immutable BEFORE UPDATE OR DELETE ON billing_invoice
    FOR EACH ROW WHEN (OLD.status = 'issued') EXECUTE FUNCTION billing_invoice_immutable()""",
    """CREATE FUNCTION billing_invoiceline_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF (TG_OP <> 'INSERT' AND EXISTS (SELECT 1 FROM billing_invoice
                                         WHERE id = OLD.invoice_id AND status = 'issued'))
           OR (TG_OP <> 'DELETE' AND EXISTS (SELECT 1 FROM billing_invoice
                                            WHERE id = NEW.invoice_id AND status = 'issued'))
        THEN
            RAISE EXCEPTION 'billing: the lines of an issued invoice cannot be changed'
                USING ERRCODE = 'restrict_violation';
        END IF;
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER billing_invoiceline_immutable
    BEFORE INSERT OR UPDATE OR DELETE ON billing_invoiceline
    FOR EACH ROW EXECUTE FUNCTION billing_invoiceline_immutable()""",
]
POSTGRES_DROP = [
    "DROP TRIGGER IF EXISTS billing_invoiceline_immutable ON billing_invoiceline",
    "DROP FUNCTION IF EXISTS billing_invoiceline_immutable()",
    "DROP TRIGGER IF EXISTS billing_invoice_immutable ON billing_invoice",
    "DROP FUNCTION IF EXISTS billing_invoice_immutable()",
]


def _statements(vendor: str, *, create: bool) -> list[str]:
    if vendor == "postgresql":
        return POSTGRES_CREATE if create else POSTGRES_DROP
    if vendor == "sqlite":
        return SQLITE_CREATE if create else SQLITE_DROP
    raise NotImplementedError(f"no immutability triggers for {vendor}")


def create(connection) -> None:
    """Create the triggers on ``connection``."""
    with connection.cursor() as cursor:
        for sql in _statements(connection.vendor, create=True):
            cursor.execute(sql)


def drop(connection) -> None:
    """Drop the triggers on ``connection``."""
    with connection.cursor() as cursor:
        for sql in _statements(connection.vendor, create=False):
            cursor.execute(sql)


def forwards(apps, schema_editor) -> None:
    create(schema_editor.connection)


def backwards(apps, schema_editor) -> None:
    drop(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ("billing", "0003_egress_destinations"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
