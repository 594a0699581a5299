"""One format per unit (core.numbers and its template filters): no exponent ever, memory in
GiB with one decimal, money with two decimals and the currency, in English and Chinese."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.template import Context, Template
from django.utils import translation

from core import numbers


@pytest.mark.parametrize(("value", "expected"), [
    (Decimal("1E+2"), "100"), (Decimal("-1E+1"), "-10"), (Decimal("85.000"), "85"),
    (Decimal("0.250"), "0.25"), (Decimal("1234567.5"), "1,234,567.5"),
    (Decimal("0.0004"), "0"), (Decimal("-0.0004"), "0"), (Decimal("2.0005"), "2.001"),
    (3, "3"), (0.1, "0.1"), ("12E3", "12,000"), (None, "—"), ("lots", "—"),
    (Decimal("NaN"), "—"),
])
def test_quantity_never_has_an_exponent(value, expected):
    assert numbers.quantity(value) == expected


@pytest.mark.parametrize(("value", "people", "machines"), [
    (Decimal("738.90061"), "738.9006", "738.9006"), (Decimal("24.0000"), "24", "24"),
    (Decimal("1474.2800"), "1,474.28", "1474.28"), (Decimal("0.00005"), "0.0001", "0.0001"),
    (Decimal("-1.5"), "-1.5", "-1.5"), (Decimal("1E+3"), "1,000", "1000"), (None, "—", ""),
])
def test_a_billed_quantity_has_one_set_of_digits(value, people, machines):
    """Issue 30: the page and PDF (grouped) and the CSV and API (plain) write the same
    digits: up to 4 decimals, trailing zeros dropped."""
    assert numbers.billed_quantity(value) == people
    assert numbers.billed_quantity(value, group=False) == machines


def test_unit_prices_and_money_for_machines_match_what_people_see():
    for price in (Decimal("1.650000"), Decimal("2"), Decimal("0.012500"), Decimal("0.2063")):
        assert numbers.unit_price(price, "USD") == f"{numbers.unit_price_plain(price)} USD"
    assert [numbers.money_plain(v) for v in (Decimal("39.6"), Decimal("-10"), 0)] == [
        "39.60", "-10.00", "0.00"]


@pytest.mark.parametrize(("value", "expected"), [
    (Decimal("8948.719"), "8,948.7 GiB"), (Decimal("1E+3"), "1,000 GiB"),
    (Decimal("0.05"), "0.1 GiB"), (80, "80 GiB"),
])
def test_memory_is_gib_with_one_decimal(value, expected):
    assert numbers.gib(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (Decimal("1234.5"), "1,234.50 EUR"), (Decimal("1E+2"), "100.00 EUR"),
    (Decimal("-0.004"), "0.00 EUR"), (Decimal("0.005"), "0.01 EUR"),
])
def test_money_has_two_decimals_and_the_currency(value, expected):
    assert numbers.money(value, "EUR") == expected


def test_unit_prices_keep_their_decimals_and_the_default_currency(settings):
    settings.TRAINYARD_CURRENCY = "CNY"
    assert numbers.unit_price(Decimal("0.012500")) == "0.0125 CNY"
    assert numbers.unit_price(Decimal("1.6500")) == "1.65 CNY"
    assert numbers.money_amount(Decimal("7")) == "7.00"


@pytest.mark.parametrize(("value", "expected"), [
    (Decimal("1E+2"), "100"), (Decimal("-1E+1"), "-10"), (Decimal("0.1250"), "0.125"),
    (Decimal("1234567.5"), "1234567.5"), (None, ""),
])
def test_api_decimals_are_plain(value, expected):
    assert numbers.api_decimal(value) == expected


def test_the_filters_in_chinese():
    template = Template("{% load portal_numbers %}{{ q|quantity }}|{{ m|gib }}|"
                        "{{ c|money:'CNY' }}|{{ q|decimal_input }}")
    with translation.override("zh-hans"):
        text = template.render(Context({"q": Decimal("1.2E+4"), "m": Decimal("8948.719"),
                                        "c": Decimal("1234.5")}))
    assert text == ('12,000|8,948.7 GiB|1,234.50&nbsp;<span translate="no">CNY</span>|'
                    '12000')


def test_quota_amounts_follow_their_units_rule():
    template = Template("{% load quota_amounts %}{{ m|amount:'memory' }}|"
                        "{{ m|amount:'storage:fast-ssd' }}|{{ c|amount:'cpu' }}|"
                        "{{ g|amount:'gpu:NVIDIA-H800' }}")
    text = template.render(Context({"m": Decimal("8948.719"), "c": Decimal("0.250"),
                                    "g": Decimal("1E+2")}))
    assert text == "8,948.7|8,948.7|0.25|100"
