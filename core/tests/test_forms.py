"""core.forms.DecimalField: trailing zeros are not precision; no input is a server error."""

from decimal import Decimal

import pytest
from django import forms

from core.forms import DecimalField, plain_decimal


@pytest.mark.parametrize(("value", "plain"), [
    ("85.000", "85"), ("0.250", "0.25"), ("1E+2", "100"), ("-1E+1", "-10"), ("0.000", "0"),
    ("12.5", "12.5")])
def test_plain_decimal(value, plain):
    assert format(plain_decimal(Decimal(value)), "f") == plain


class _Form(forms.Form):
    watermark = DecimalField(min_value=50, max_value=100, decimal_places=1)
    budget = DecimalField(min_value=0, decimal_places=2, max_digits=14, required=False)


def test_a_stored_value_with_trailing_zeros_renders_plain_and_validates():
    form = _Form(initial={"watermark": Decimal("85.000")})
    assert 'value="85"' in str(form["watermark"])
    bound = _Form({"watermark": "85.000"})
    assert bound.is_valid(), bound.errors
    assert bound.cleaned_data["watermark"] == Decimal("85")
    assert not _Form({"watermark": "85.25"}).is_valid()  # real precision still counts


@pytest.mark.parametrize("value", ["1e12", "1e40", "1e999999999", "NaN", "Infinity", "x",
                                   "9" * 400])
def test_huge_or_odd_numbers_are_field_errors(value):
    form = _Form({"watermark": "80", "budget": value})
    assert not form.is_valid()
    assert form.errors["budget"]
