"""The OpenAPI schema's view of bounded fields (drf-spectacular extensions).

Every numeric field of the API has a documented range in ``/api/schema/`` (issue 16):

* drf-spectacular writes a decimal sent as a string (``COERCE_DECIMAL_TO_STRING``) as a
  ``pattern`` only and drops a DecimalField's ``min_value``/``max_value``; the extension
  below adds them as ``minimum``/``maximum``;
* where a service is the one validation of a field (its messages and error keys are the
  API's, e.g. a rate card's ``gpus-<i>-<field>``), the serializer does not enforce the
  range a second time but states it: :func:`documented` marks the field, and the schema
  shows the range as if the serializer checked it.

Loaded by :class:`core.apps.CoreConfig`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, TypeVar

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

F = TypeVar("F", bound=serializers.Field)


def documented(field: F, low: Any, high: Any) -> F:
    """``field`` with the range ``low`` to ``high`` (inclusive; None: open) stated in the
    schema only: the service that takes the value checks it and names the field."""
    # a subclass carries the range: DRF copies a declared field by calling its class again
    field.__class__ = type(type(field).__name__, (type(field),),
                           {"documented_range": (low, high)})
    return field


def _number(value: Any) -> int | float:
    value = Decimal(str(value))
    return int(value) if value == value.to_integral_value() else float(value)


class _BoundedNumber(OpenApiSerializerFieldExtension):
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema = auto_schema._map_serializer_field(self.target, direction,
                                                   bypass_extensions=True)
        field = self.target
        low, high = getattr(field, "documented_range", (None, None))
        if field.min_value is not None:
            low = field.min_value if low is None else max(low, field.min_value)
        if field.max_value is not None:
            high = field.max_value if high is None else min(high, field.max_value)
        if low is not None:
            schema["minimum"] = _number(low)
            schema.pop("exclusiveMinimum", None)
        if high is not None:
            schema["maximum"] = _number(high)
            schema.pop("exclusiveMaximum", None)
        return schema


class BoundedDecimalFieldExtension(_BoundedNumber):
    target_class = serializers.DecimalField


class BoundedIntegerFieldExtension(_BoundedNumber):
    target_class = serializers.IntegerField
