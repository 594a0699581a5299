from decimal import Decimal

import pytest

from k8s_sync.quantity import format_decimal, parse_quantity


@pytest.mark.parametrize(("text", "value"), [
    ("500m", Decimal("0.5")), ("2", Decimal(2)), ("1Gi", Decimal(2**30)),
    ("100Ki", Decimal(102400)), ("1e3", Decimal(1000)), ("12M", Decimal(12_000_000)),
    ("1.5", Decimal("1.5")), (".5", Decimal("0.5")), (8, Decimal(8)),
])
def test_it_parses_kubernetes_quantities(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "1GB", "abc", "1.2.3", "Gi"])
def test_it_refuses_what_the_api_server_would(bad):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(bad)


@pytest.mark.parametrize(("value", "text"), [
    (Decimal("0.500"), "0.5"), (Decimal("1E+3"), "1000"), (Decimal(8), "8")])
def test_it_formats_plain_decimals(value, text):
    assert format_decimal(value) == text
