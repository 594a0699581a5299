"""The tenant-scoped API base class: the one place that isolates tenants in the API.

Every resource under ``/api/v1/tenants/{tenant_slug}/...`` is served by a subclass of
:class:`TenantScopedViewSet`. The base class resolves the tenant from the URL for the
requesting user (404 when the user may not see it, so other teams' slugs and ids do
not leak) and always filters the queryset by that tenant *after* the subclass's own
narrowing. Subclasses may only narrow, through :meth:`scope_queryset`; overriding
``get_queryset``, ``get_object`` or ``initial`` raises ``TypeError`` at import time.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.models import Q, QuerySet
from rest_framework import viewsets
from rest_framework.request import Request

from tenants.access import TenantAccess
from tenants.selectors import tenant_access_or_404

_SEALED = ("get_queryset", "get_object", "initial", "get_tenant_access")


class TenantScopedViewSet(viewsets.GenericViewSet):
    """Base for every tenant-owned API resource.

    Subclasses set ``queryset`` (or ``model``) and ``tenant_field`` (the lookup path
    from the model to its Tenant, ``"tenant"`` by default), and may override
    :meth:`scope_queryset` to narrow the rows. ``self.access`` (a TenantAccess) is
    available in every handler.
    """

    # The lookup path from the model to its Tenant; a tuple means "any of these" (a loan
    # belongs to both its lender and its borrower).
    tenant_field: ClassVar[str | tuple[str, ...]] = "tenant"
    access: TenantAccess

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _SEALED:
            if name in cls.__dict__:
                raise TypeError(
                    f"{cls.__name__} overrides {name}(); tenant-scoped views may only narrow "
                    "rows through scope_queryset()"
                )

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.access = tenant_access_or_404(request.user, self.kwargs["tenant_slug"])

    def get_tenant_access(self) -> TenantAccess:
        return self.access

    def scope_queryset(self, queryset: QuerySet) -> QuerySet:
        """Narrow the tenant's rows (filters, select_related); never widen."""
        return queryset

    def get_queryset(self) -> QuerySet:
        base = super().get_queryset()
        narrowed = self.scope_queryset(base)
        # Applied last, so whatever scope_queryset returned is cut to this tenant.
        fields = (self.tenant_field,) if isinstance(self.tenant_field, str) else self.tenant_field
        condition = Q()
        for field in fields:
            condition |= Q(**{field: self.access.tenant})
        return narrowed.filter(condition).distinct() if len(fields) > 1 else \
            narrowed.filter(condition)

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if hasattr(self, "access"):
            context["access"] = self.access
        return context
