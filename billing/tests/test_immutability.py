"""Issued invoices and their lines cannot be changed in the database either: raw SQL
UPDATE, DELETE and INSERT are refused by triggers (SQLite and Postgres alike); drafts,
issuing, credit notes and deleting the user who issued stay possible."""

from __future__ import annotations

import importlib
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction

from billing import services
from billing.choices import InvoiceStatus
from billing.models import Invoice, InvoiceLine
from billing.tests.conftest import at, make_job, run

OCT = "2026-10-01"


def _latest_triggers():
    """The migration that last wrote the SQLite trigger's columns (found by content)."""
    import pkgutil

    import billing.migrations

    found = None
    for info in sorted(pkgutil.iter_modules(billing.migrations.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"billing.migrations.{info.name}")
        if hasattr(module, "SQLITE_INVOICE_COLUMNS"):
            found = module
    return found


TRIGGERS = _latest_triggers()


def _refused(sql: str, params: list) -> None:
    with pytest.raises(IntegrityError, match="issued invoice"), transaction.atomic(), \
            connection.cursor() as cursor:
        cursor.execute(sql, params)


def _execute(sql: str, params: list) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@pytest.fixture
def issued(tenant_a, rate_card, finance_user):
    make_job(tenant_a, run(at("2026-10-10", "10:00"), at("2026-10-10", "12:00")), gpus=2)
    services.month_close(actor=finance_user, period=at(OCT).date(), now=at("2026-11-01", "01:00"))
    invoice = Invoice.objects.get(tenant=tenant_a, period=OCT)
    assert invoice.is_issued and invoice.lines.count() == 1
    return invoice


def test_raw_sql_cannot_change_or_delete_an_issued_invoice_or_its_lines(issued):
    line = issued.lines.get()
    _refused("UPDATE billing_invoice SET total = 0 WHERE id = %s", [issued.pk])
    _refused("UPDATE billing_invoice SET status = 'draft' WHERE id = %s", [issued.pk])
    # clearing the issuer is allowed only as the whole change
    _refused("UPDATE billing_invoice SET issued_by_id = NULL, reason = 'x' WHERE id = %s",
             [issued.pk])
    _refused("DELETE FROM billing_invoice WHERE id = %s", [issued.pk])
    _refused("UPDATE billing_invoiceline SET amount = 0 WHERE id = %s", [line.pk])
    _refused("DELETE FROM billing_invoiceline WHERE id = %s", [line.pk])
    _refused("INSERT INTO billing_invoiceline (invoice_id, position, kind, description, text,"
             " resource, quantity, unit, unit_price, amount) VALUES (%s, 9, 'adjustment',"
             " 'extra', '\"extra\"', '', 1, '', 5, 5)", [issued.pk])
    issued.refresh_from_db()
    line.refresh_from_db()
    assert (issued.status, issued.total, line.amount) == (InvoiceStatus.ISSUED, Decimal("6.60"),
                                                          Decimal("6.60"))


def test_drafts_credit_notes_and_the_issuers_deletion_still_work(issued, tenant_a,
                                                                 finance_user):
    make_job(tenant_a, run(at("2026-11-10", "10:00"), at("2026-11-10", "11:00")))
    draft = services.invoice_draft_refresh(tenant=tenant_a, now=at("2026-11-12"))
    assert draft is not None and not draft.is_issued
    assert _execute("UPDATE billing_invoiceline SET position = 3 WHERE invoice_id = %s",
                    [draft.pk]) == 1
    assert _execute("UPDATE billing_invoice SET reason = 'x' WHERE id = %s", [draft.pk]) == 1
    note = services.credit_note_issue(actor=finance_user, invoice=issued,
                                      amount=Decimal("1.00"), reason="outage")
    assert note.is_issued and note.lines.count() == 1
    _refused("DELETE FROM billing_invoiceline WHERE invoice_id = %s", [note.pk])
    _execute("DELETE FROM billing_invoiceline WHERE invoice_id = %s", [draft.pk])
    assert _execute("DELETE FROM billing_invoice WHERE id = %s", [draft.pk]) == 1
    finance_user.delete()  # issued_by is SET_NULL: the one change allowed
    issued.refresh_from_db()
    assert issued.issued_by is None and issued.is_issued and issued.total == Decimal("6.60")
    assert InvoiceLine.objects.filter(invoice=issued).count() == 1


def test_the_sqlite_trigger_names_every_column_but_the_issuer():
    """A column added to Invoice must be added to the SQLite trigger (and the trigger
    created again): this fails until it is."""
    columns = [f.column for f in Invoice._meta.concrete_fields]
    assert sorted([*TRIGGERS.SQLITE_INVOICE_COLUMNS, "issued_by_id"]) == sorted(columns)
