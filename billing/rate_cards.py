"""Writes of the rate card: the price rows' checks (:func:`rate_card_errors`) and a new
card (:func:`rate_card_create`). Never in a closed month; a card in effect is never edited."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from billing import months, pricebook, texts
from billing.choices import (
    GPU_PRICE_BOUNDS,
    UNIT_PRICE_MAX,
    MigPricing,
)
from billing.models import (
    DevicePrice,
    GpuPrice,
    RateCard,
    StoragePrice,
)
from core.exceptions import ApplicationError, Conflict
from core.texts import message
from tenants.access import AnyUser, require_platform_admin
from tenants.audit import record_audit

# --- the rate card ------------------------------------------------------------------------


GPU_PRICE_FIELDS = ("gpu_model", "memory_gib", "purchase_price", "depreciation_months",
                    "power_watts", "pue", "electricity_kwh", "operations_month")
STORAGE_PRICE_FIELDS = ("storage_class", "gib_month")
DEVICE_PRICE_FIELDS = ("device", "price_per_hour")
GPU_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
STORAGE_CLASS_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def _first(exc: ValidationError) -> dict[str, str]:
    return {name: str(msgs[0]) for name, msgs in exc.message_dict.items() if msgs}


EGRESS_PRICE_FIELDS = ("egress_gib", "egress_region_gib", "egress_zone_gib")


def _device_errors(devices: Iterable[Mapping]) -> dict[str, str]:
    """Problems of a card's device price overrides, keyed ``devices-<i>-<field>``: a
    device key (``billing.pricebook.Device.key``) listed once, a price per device-hour
    from 0 to :data:`~billing.choices.UNIT_PRICE_MAX`."""
    errors: dict[str, str] = {}
    seen: set[str] = set()
    for i, row in enumerate(devices):
        key = f"devices-{i}-"
        unknown = set(row) - set(DEVICE_PRICE_FIELDS)
        if unknown:
            errors[key + sorted(unknown)[0]] = _("Unknown field.")
            continue
        raw = str(row.get("device") or "").strip()
        try:
            device = pricebook.Device.from_key(raw)
            if not device.gpu_model or not GPU_MODEL_RE.match(device.gpu_model):
                raise ValueError(raw)
        except (ValueError, ZeroDivisionError):
            errors[key + "device"] = _(
                "A device as <GPU model>|<MIG profile>, <GPU model>|shared:<share> or "
                "<GPU model>|hami:<share> (a share such as 1/4), or <GPU model>| for a "
                "whole card.")
        else:
            if device.key in seen:
                errors[key + "device"] = _("Device %(d)s is listed twice.") % {"d": device.key}
            seen.add(device.key)
        try:
            price = Decimal(str(row.get("price_per_hour")))
        except ArithmeticError:
            price = None
        if price is None or not price.is_finite() or not 0 <= price <= UNIT_PRICE_MAX \
                or price != price.quantize(Decimal("0.0001")):
            errors[key + "price_per_hour"] = _(
                "A price per device-hour from 0 to %(max)s, at most 4 decimals.") % {
                "max": UNIT_PRICE_MAX}
    return errors


def rate_card_errors(*, gpus: Iterable[Mapping], storage: Iterable[Mapping] = (),
                     egress: Mapping[str, Any] | None = None,
                     devices: Iterable[Mapping] = ()) -> dict[str, str]:
    """Every problem of a rate card's price rows, keyed ``gpus-<i>-<field>``,
    ``storage-<i>-<field>`` and ``devices-<i>-<field>`` (the device price overrides:
    :func:`_device_errors`; the page's formset names; the API returns the same keys),
    and of its egress prices per destination class (``egress``: ``egress_gib`` to the
    internet, ``egress_region_gib``, ``egress_zone_gib``; keyed by those names).
    The one validation of a rate card's rows: the page and the API both get it from
    :func:`rate_card_create`. Writes nothing."""
    errors: dict[str, str] = _device_errors(devices)
    egress = dict(egress or {})
    for name in sorted(set(egress) - set(EGRESS_PRICE_FIELDS)):
        errors[name] = _("Unknown field.")
    prices = {name: egress[name] for name in EGRESS_PRICE_FIELDS if name in egress}
    try:
        RateCard(**prices).clean_fields(
            exclude=[f.name for f in RateCard._meta.fields if f.name not in prices])
    except ValidationError as exc:
        errors.update(_first(exc))
    for name, value in prices.items():
        if name not in errors and (value is None or Decimal(value) < 0):
            errors[name] = _("Enter zero or more.")
    seen: set[str] = set()
    for i, row in enumerate(gpus):
        key = f"gpus-{i}-"
        unknown = set(row) - set(GPU_PRICE_FIELDS)
        if unknown:
            errors[key + sorted(unknown)[0]] = _("Unknown field.")
            continue
        model = str(row.get("gpu_model") or "").strip()
        price = GpuPrice(**{**row, "gpu_model": model})
        try:
            price.full_clean(exclude=["card"], validate_unique=False)
        except ValidationError as exc:
            errors.update({key + name: msg for name, msg in _first(exc).items()})
        if model and not GPU_MODEL_RE.match(model):
            errors.setdefault(key + "gpu_model", _(
                "A GPU model as the cluster names it (nvidia.com/gpu.product), e.g. "
                "NVIDIA-A100-SXM4-80GB."))
        elif model in seen:
            errors.setdefault(key + "gpu_model", _("GPU model %(m)s is listed twice.")
                              % {"m": model})
        seen.add(model)
        wording = {
            "depreciation_months": _("The depreciation period must be between 1 and 240 "
                                     "months."),
            "pue": _("PUE is between 1 and 3."),
            "power_watts": _("Power draw is between 0 and 5,000 W per card."),
            "memory_gib": _("Card memory is between 1 and 1,024 GiB (empty: as the cluster "
                            "reports it)."),
        }
        for name, (low, high) in GPU_PRICE_BOUNDS.items():
            value = getattr(price, name)
            if key + name in errors or value is None or not isinstance(value, int | Decimal):
                continue
            if value < low or value > high:
                # the money fields' upper bound is their column's width (full_clean says so)
                errors[key + name] = wording.get(name, _("Enter zero or more."))
    names: set[str] = set()
    for i, row in enumerate(storage):
        key = f"storage-{i}-"
        cls = str(row.get("storage_class") or "").strip()
        sp = StoragePrice(storage_class=cls, gib_month=row.get("gib_month"))  # type: ignore[misc]
        try:
            sp.full_clean(exclude=["card"], validate_unique=False)
        except ValidationError as exc:
            errors.update({key + name: msg for name, msg in _first(exc).items()})
        if cls and not STORAGE_CLASS_RE.match(cls):
            errors.setdefault(key + "storage_class", _("Not a StorageClass name."))
        elif cls in names:
            errors.setdefault(key + "storage_class", _("StorageClass %(c)s is listed twice.")
                              % {"c": cls})
        names.add(cls)
        if isinstance(sp.gib_month, Decimal) and sp.gib_month < 0 and \
                key + "gib_month" not in errors:
            errors[key + "gib_month"] = _("Enter zero or more.")
    return errors


def rate_card_create(*, actor: AnyUser, effective_from: dt.date, gpus: Iterable[Mapping],
                     storage: Iterable[Mapping] = (), egress_gib: Decimal = Decimal(0),
                     egress_region_gib: Decimal = Decimal(0),
                     egress_zone_gib: Decimal = Decimal(0),
                     cpu_core_hour: Decimal | None = None,
                     memory_gib_hour: Decimal | None = None,
                     mig_pricing: str = MigPricing.MEMORY, note: str = "",
                     devices: Iterable[Mapping] = ()) -> RateCard:
    """A new rate card from ``effective_from`` (00:00 local). Never in a closed month; a
    card in effect is never edited, a new one replaces it from its day. A problem with a
    price row is an ApplicationError whose ``extra["errors"]`` names every field
    (:func:`rate_card_errors`); nothing is written then. Egress is priced per GiB by
    destination: ``egress_gib`` to the internet (and every byte of a source that cannot
    tell destinations apart), ``egress_region_gib`` to other regions, ``egress_zone_gib``
    to other zones; traffic within the zone is free."""
    require_platform_admin(actor)
    months.require_open(effective_from)
    if MigPricing(mig_pricing) is None:  # pragma: no cover - ValueError first
        raise ApplicationError(_("Unknown MIG pricing."))
    gpus = [{k: (v.strip() if k == "gpu_model" and isinstance(v, str) else v)
             for k, v in g.items()} for g in gpus]
    storage = list(storage)
    devices = [dict(d) for d in devices]
    if not gpus:
        raise ApplicationError(_("Price at least one GPU model."), field="gpus")
    egress = {"egress_gib": egress_gib, "egress_region_gib": egress_region_gib,
              "egress_zone_gib": egress_zone_gib}
    errors = rate_card_errors(gpus=gpus, storage=storage, egress=egress, devices=devices)
    if errors:
        first = next(iter(errors))
        raise ApplicationError(errors[first], field=first, extra={"errors": errors})
    with transaction.atomic():
        try:
            card = RateCard.objects.create(
                effective_from=effective_from, **egress,
                cpu_core_hour=cpu_core_hour or None, memory_gib_hour=memory_gib_hour or None,
                mig_pricing=mig_pricing, note=note, created_by=actor)
        except IntegrityError:
            raise Conflict(_("A rate card already starts on %(day)s.")
                           % {"day": effective_from.isoformat()}, field="effective_from") from None
        GpuPrice.objects.bulk_create(GpuPrice(card=card, **g) for g in gpus)
        StoragePrice.objects.bulk_create(StoragePrice(card=card, **st) for st in storage)
        DevicePrice.objects.bulk_create(
            DevicePrice(card=card, device=pricebook.Device.from_key(str(d["device"]).strip()).key,
                        price_per_hour=Decimal(str(d["price_per_hour"]))) for d in devices)
        record_audit(actor=actor, action="billing.rate_card.create",
                     text=message(texts.AUDIT_RATE_CARD, day=str(effective_from)), card=card.pk)
    return card
