"""REST endpoints of the jobs app."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import validated
from core.exceptions import ApplicationError
from jobs import selectors, services
from jobs.api import serializers as s
from jobs.api.preview import PreviewAnswer, PreviewRefused
from jobs.choices import ACTIVE_STATES
from jobs.models import TrainingJob
from jobs.verdict import job_submit_verdict
from tenants.access import is_platform_admin
from tenants.api.base import TenantScopedViewSet


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """A tenant's training jobs: submit, follow (position, ETA, reason), cancel."""

    queryset = TrainingJob.objects.all()
    serializer_class = s.JobSerializer

    def scope_queryset(self, queryset: QuerySet) -> QuerySet:
        params = self.request.query_params
        queryset = queryset.select_related("tenant", "pool", "submitted_by")
        if params.get("state") == "active":
            queryset = queryset.filter(state__in=ACTIVE_STATES)
        elif params.get("state"):
            queryset = queryset.filter(state=params["state"])
        return queryset

    @extend_schema(request=s.JobInput, responses={201: s.JobSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        self.access.require_member()  # permission before validation
        data = validated(s.JobInput, request)
        job = services.job_submit(access=self.access, actor=request.user,
                                  pool=data.pop("pool"), data=data)
        return Response(s.JobSerializer(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.JobInput, responses={
        200: PreviewAnswer, 400: PreviewRefused, 403: PreviewRefused, 409: PreviewRefused})
    @action(detail=False, methods=["post"])
    def preview(self, request: Request, tenant_slug: str) -> Response:
        """What Submit would do with this job now, by the same check (``jobs.verdict``):
        ``verdict`` fits (where it runs: ``nodes``, ``placement``, ``switch``), waits (the
        one limit that holds it: ``reason``, ``reason_code``; the ETA: ``eta_p50``,
        ``eta_p90``) or refused (answered with Submit's status and error body, plus
        ``field``, ``message`` and ``errors``)."""
        self.access.require_member()  # permission before validation, as Submit
        data = validated(s.JobInput, request)
        verdict, _clean = job_submit_verdict(access=self.access, pool=data.pop("pool"),
                                             data=data)
        if verdict["verdict"] == "refused":
            return Response(verdict, status=verdict.pop("status"))
        return Response(verdict)

    @extend_schema(request=None, responses=s.JobSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, tenant_slug: str, pk: str) -> Response:
        job = services.job_cancel(access=self.access, actor=request.user, job=self.get_object())
        return Response(s.JobSerializer(job).data)

    @extend_schema(responses=s.JobTransitionSerializer(many=True))
    @action(detail=True, methods=["get"])
    def transitions(self, request: Request, tenant_slug: str, pk: str) -> Response:
        return Response(s.JobTransitionSerializer(
            selectors.transitions_of(self.get_object()), many=True).data)


    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, tenant_slug: str, pk: str) -> Response:
        """One of the job's pods' log: ``pod`` (a name from the job's pods), ``previous``
        (the container before its last restart), ``tail`` (lines, default 2000). What the
        cluster cannot give is named in ``problem``, with ``message`` and the cluster's
        ``detail``. Another tenant's job, or a pod not the job's: 404."""
        job = self.get_object()
        params = request.query_params
        pod = selectors.job_pod_or_404(job, params.get("pod", ""))
        raw_tail = params.get("tail", "")
        try:
            tail = int(raw_tail) if raw_tail else selectors.LOG_TAIL_LINES
            if not 0 <= tail <= 100000:
                raise ValueError
        except ValueError:
            raise ApplicationError(_("tail is a number of lines from 0 to 100000."),
                                   field="tail") from None
        log = selectors.pod_log(job, pod=pod, previous=params.get("previous") in ("1", "true"),
                                tail=tail)
        return Response({"pod": log.pod, "previous": log.previous, "text": log.text,
                         "problem": log.problem, "message": log.message, "detail": log.detail,
                         "truncated": log.truncated})


class PlatformJobViewSet(viewsets.GenericViewSet, mixins.ListModelMixin):
    """Every tenant's active jobs (platform admins): hold, release, preempt, re-prioritise."""

    serializer_class = s.JobSerializer
    queryset = TrainingJob.objects.all()  # for the schema; get_queryset decides

    def get_queryset(self) -> QuerySet:
        if not is_platform_admin(self.request.user):
            raise NotFound
        return TrainingJob.objects.filter(state__in=ACTIVE_STATES).select_related(
            "tenant", "pool", "submitted_by").order_by("position_in_model", "submitted_at")

    def _job(self, pk: str) -> TrainingJob:
        queryset = self.get_queryset()  # 404 for anyone but a platform admin
        job = queryset.filter(pk=int(pk)).first() if str(pk).isdigit() else None
        if job is None:
            raise NotFound
        return job

    @extend_schema(request=s.HoldInput, responses=s.JobSerializer)
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, pk: str) -> Response:
        return self._hold(request, pk, held=True)

    @extend_schema(request=s.HoldInput, responses=s.JobSerializer)
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str) -> Response:
        return self._hold(request, pk, held=False)

    def _hold(self, request: Request, pk: str, *, held: bool) -> Response:
        job = self._job(pk)  # permission and existence before validation
        data = validated(s.HoldInput, request)
        return Response(s.JobSerializer(services.job_hold(
            actor=request.user, job=job, held=held, reason=data["reason"])).data)

    @extend_schema(request=s.HoldInput, responses=s.JobSerializer)
    @action(detail=True, methods=["post"])
    def preempt(self, request: Request, pk: str) -> Response:
        """Preempt a running or admitted job: it stops after its tier's grace and goes back
        to the queue (by the admission backend in force); any other job is left as it is."""
        job = self._job(pk)  # permission and existence before validation
        data = validated(s.HoldInput, request)
        return Response(s.JobSerializer(services.job_preempt(
            actor=request.user, job=job, reason=data["reason"])).data)

    @extend_schema(request=s.PriorityInput, responses=s.JobSerializer)
    @action(detail=True, methods=["post"])
    def priority(self, request: Request, pk: str) -> Response:
        job = self._job(pk)  # permission and existence before validation
        data = validated(s.PriorityInput, request)
        return Response(s.JobSerializer(services.job_set_priority(
            actor=request.user, job=job, **data)).data)
