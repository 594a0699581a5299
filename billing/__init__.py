"""Billing: rate card, GPU-hour ledger, monthly invoices, idle rate (issue 8)."""
