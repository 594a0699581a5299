"""``GET /metrics``: Trainyard's own state in the Prometheus text format.

Served to a client presenting ``Authorization: Bearer <TRAINYARD_METRICS_TOKEN>`` or
coming from an address in ``TRAINYARD_METRICS_ALLOW`` (IPs or CIDR networks, checked
against ``REMOTE_ADDR``: put the allow-list on the proxy's address when behind one).
With neither configured the endpoint answers 404; a wrong or missing token 401.

Families (all gauges, computed at scrape time by a custom collector over a fresh
registry, a constant number of queries):

* ``trainyard_quota_hard{tenant,pool,resource}`` - effective quota (grants, loans);
* ``trainyard_quota_used{tenant,pool,resource}`` - allocated now (observed pods);
* ``trainyard_queue_length{tenant,gpu_model,tier}`` - queued jobs;
* ``trainyard_queue_oldest_wait_seconds{tenant,gpu_model}`` - the longest wait now;
* ``trainyard_job_wait_seconds{gpu_model,quantile}`` - submission to first start, jobs
  submitted in the last 24 h (quantiles 0.5 and 0.9);
* ``trainyard_jobs{tenant,state}`` - jobs by state;
* ``trainyard_pool_sync_error{tenant,pool}`` - 1 when the last sync of the pool failed;
* ``trainyard_observer_failing{kind}`` - 1 when the watcher's last error is newer than
  its last successful list; ``trainyard_jobs_with_errors{tenant}``;
* ``trainyard_gpu_allocatable{gpu_model}``, ``trainyard_gpu_allocated{gpu_model}``;
* ``trainyard_usage_sample_timestamp_seconds`` - the latest usage-series minute;
* ``trainyard_watchdog_flagged{kind,subject,reason}`` - 1 per job, pool sync or month
  close the progress watchdog (``portal.watchdog``) retried without effect;
  ``trainyard_watchdog_overdue{kind,status}`` and
  ``trainyard_watchdog_last_run_timestamp_seconds``;
* the utilisation figures (``tenants.utilisation``, ``billing.selectors.
  utilisation_figures``) of this month so far, per tenant and GPU kind:
  ``trainyard_gpu_quota_held_hours{tenant,kind}``,
  ``trainyard_gpu_allocated_hours{tenant,kind,quota}`` (``quota`` "within" or
  "borrowed"), ``trainyard_gpu_busy_hours{tenant,kind}``,
  ``trainyard_gpu_quota_use{tenant,kind}`` and ``trainyard_gpu_idle_rate{tenant,kind}``
  (shares; absent when undefined);
* ``trainyard_billed_month_to_date{tenant,kind,device}`` - this month's draft invoices
  (``billing.selectors.draft_amounts``: the invoice lines of ``billing.pricebook``, a GPU
  line per device, whole card, MIG profile, share or vGPU, each by its share of the card).

And one counter: ``trainyard_gpu_idle_while_waiting_seconds_total{key,cause}`` - unit-seconds
(GPU-seconds of ``gpu:<model>``, instance-seconds of ``mig:<profile>``, share-seconds of
``shared:<model>``) idle while a waiting job that fits them waited, by cause
(``jobs.admission.waste``; recorded by the admission loop, ``jobs.idle_waiting``).

And the admission loop's own state (``jobs.models.AdmissionState``):
``trainyard_admission_drift_total`` (counter: active jobs the admission service's memory
held differently from the database, found by its full reads and healed: ``jobs.live``),
``trainyard_admission_service_leading`` (1 while an admission service holds the lease,
with its ``identity``), ``trainyard_admission_last_pass_timestamp_seconds`` and
``trainyard_admission_last_pass_seconds`` (the last pass's time and duration).
"""

from __future__ import annotations

import datetime as dt
import hmac
import ipaddress
import statistics
from collections import defaultdict
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Max, Min
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from billing.selectors import currency, draft_amounts, utilisation_figures
from jobs import idle_waiting
from jobs.choices import ACTIVE_STATES, JobState
from jobs.models import AdmissionState, TrainingJob
from k8s_sync.selectors import capacity_report, observer_status
from portal import watchdog
from portal.dashboards import wait_times
from tenants.capacity import capacity_by_resource
from tenants.choices import TenantStatus
from tenants.models import Pool, Tenant, UsageSeries
from tenants.series import effective_quota_all, tracked
from tenants.usage import in_use_by_pool
from tenants.utilisation import FIGURES


class TrainyardCollector(Collector):
    """Reads the database at collect time; registered on a per-request registry."""

    def collect(self) -> Iterator[Metric]:
        yield from self._quota()
        yield from self._queue()
        yield from self._jobs()
        yield from self._errors()
        yield from self._capacity()
        yield from self._watchdog()
        yield from self._idle_waiting()
        yield from self._utilisation()
        yield from self._billed()
        yield from self._admission()

    def _admission(self) -> Iterator[Metric]:
        state = AdmissionState.objects.filter(pk=1).first()
        drift = CounterMetricFamily(
            "trainyard_admission_drift",
            "Active jobs the admission service held differently from the database, found "
            "by its full reads and healed")
        drift.add_metric([], float(state.drift if state else 0))
        yield drift
        leading = GaugeMetricFamily(
            "trainyard_admission_service_leading",
            "1 while an admission service holds the lease and decides", labels=["identity"])
        now = timezone.now()
        if state and state.lease_until and state.lease_until > now:
            leading.add_metric([state.leader], 1.0)
        yield leading
        last = GaugeMetricFamily("trainyard_admission_last_pass_timestamp_seconds",
                                 "When the last admission pass applied (0: never)")
        last.add_metric([], state.last_cycle_at.timestamp()
                        if state and state.last_cycle_at else 0.0)
        yield last
        took = GaugeMetricFamily("trainyard_admission_last_pass_seconds",
                                 "How long the last admission pass took")
        took.add_metric([], (state.last_cycle_ms if state else 0.0) / 1000)
        yield took

    def _idle_waiting(self) -> Iterator[Metric]:
        counter = CounterMetricFamily(
            "trainyard_gpu_idle_while_waiting_seconds",
            "Unit-seconds of a resource key (GPUs, MIG instances, GPU shares) idle while a "
            "waiting job that fits them waited, by cause", labels=["key", "cause"])
        for (key, cause), seconds in sorted(idle_waiting.counter_totals().items()):
            counter.add_metric([key, cause], seconds)
        yield counter

    def _utilisation(self) -> Iterator[Metric]:
        labels = ["tenant", "kind"]
        held = GaugeMetricFamily("trainyard_gpu_quota_held_hours", str(
            FIGURES["quota_held"].definition) + " This month so far.", labels=labels)
        allocated = GaugeMetricFamily("trainyard_gpu_allocated_hours", str(
            FIGURES["allocated"].definition) + " This month so far.",
            labels=[*labels, "quota"])
        busy = GaugeMetricFamily("trainyard_gpu_busy_hours", str(
            FIGURES["busy"].definition) + " This month so far.", labels=labels)
        use = GaugeMetricFamily("trainyard_gpu_quota_use", str(
            FIGURES["quota_use"].definition) + " This month so far.", labels=labels)
        idle = GaugeMetricFamily("trainyard_gpu_idle_rate", str(
            FIGURES["idle_rate"].definition) + " This month so far.", labels=labels)
        today = timezone.localdate()
        figures = utilisation_figures(today.replace(day=1), today + dt.timedelta(days=1))
        slugs = dict(Tenant.objects.filter(pk__in=list(figures)).values_list("pk", "slug"))
        for tenant_id, kinds in sorted(figures.items(), key=lambda t: slugs.get(t[0], "")):
            for kind, f in sorted(kinds.items()):
                slug = slugs.get(tenant_id, str(tenant_id))
                held.add_metric([slug, kind], float(f.quota_held_hours))
                allocated.add_metric([slug, kind, "within"], float(f.within_quota_hours))
                allocated.add_metric([slug, kind, "borrowed"], float(f.borrowed_hours))
                busy.add_metric([slug, kind], float(f.busy_hours))
                if f.quota_use is not None:
                    use.add_metric([slug, kind], float(f.quota_use))
                if f.idle_rate is not None:
                    idle.add_metric([slug, kind], float(f.idle_rate))
        yield from (held, allocated, busy, use, idle)

    def _billed(self) -> Iterator[Metric]:
        billed = GaugeMetricFamily(
            "trainyard_billed_month_to_date",
            f"This month's draft invoices so far in {currency()}, per line kind and device "
            "(a GPU line's device key: whole card, MIG profile, share or vGPU, each priced "
            "by its share of the card)", labels=["tenant", "kind", "device"])
        for (slug, kind, device), amount in sorted(draft_amounts().items()):
            billed.add_metric([slug, kind, device], float(amount))
        yield billed

    def _quota(self) -> Iterator[Metric]:
        hard = GaugeMetricFamily("trainyard_quota_hard", "Effective quota of a tenant pool",
                                 labels=["tenant", "pool", "resource"])
        used = GaugeMetricFamily("trainyard_quota_used",
                                 "In use now by a tenant pool (its admitted, running and "
                                 "preempting jobs' demand; storage of its volumes)",
                                 labels=["tenant", "pool", "resource"])
        rows = list(Pool.objects.exclude(tenant__status=TenantStatus.DELETED)
                    .select_related("tenant"))
        pools = [(p.pk, p.tenant.slug, p.kind) for p in rows]
        quotas = effective_quota_all()
        in_use = in_use_by_pool(rows)
        for pool_id, slug, kind in pools:
            q = quotas.get(pool_id, {})
            u = in_use.get(pool_id, {})
            for key in sorted(set(q) | set(u)):
                if key in q:
                    hard.add_metric([slug, kind, key], q[key])
                if key in u or tracked(key):
                    used.add_metric([slug, kind, key], float(u.get(key, 0)))
        yield hard
        yield used

    def _queue(self) -> Iterator[Metric]:
        now = timezone.now()
        length = GaugeMetricFamily("trainyard_queue_length", "Queued jobs",
                                   labels=["tenant", "gpu_model", "tier"])
        oldest = GaugeMetricFamily("trainyard_queue_oldest_wait_seconds",
                                   "How long the longest-waiting queued job has waited",
                                   labels=["tenant", "gpu_model"])
        oldest_at: dict[tuple[str, str], dt.datetime] = {}
        for row in (TrainingJob.objects.filter(state=JobState.QUEUED)
                    .values("tenant__slug", "gpu_model", "tier")
                    .annotate(n=Count("id"), first=Min("submitted_at"))):
            key = (row["tenant__slug"], row["gpu_model"] or "cpu")
            length.add_metric([*key, row["tier"]], row["n"])
            prev = oldest_at.get(key)
            oldest_at[key] = row["first"] if prev is None else min(prev, row["first"])
        for key, first in sorted(oldest_at.items()):
            oldest.add_metric(list(key), max(0.0, (now - first).total_seconds()))
        waits = GaugeMetricFamily("trainyard_job_wait_seconds",
                                  "Submission to first start, jobs submitted in the last 24 h",
                                  labels=["gpu_model", "quantile"])
        by_model: dict[str, list[float]] = defaultdict(list)
        for model, minutes in wait_times(days=1, now=now):
            by_model[model or "cpu"].append(minutes * 60)
        for model, values in sorted(by_model.items()):
            values.sort()
            waits.add_metric([model, "0.5"], statistics.median(values))
            waits.add_metric([model, "0.9"], values[min(len(values) - 1,
                                                        int(0.9 * len(values)))])
        yield length
        yield oldest
        yield waits

    def _jobs(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("trainyard_jobs", "Jobs by state", labels=["tenant", "state"])
        for row in TrainingJob.objects.values("tenant__slug", "state").annotate(n=Count("id")):
            jobs.add_metric([row["tenant__slug"], row["state"]], row["n"])
        yield jobs
        errors = GaugeMetricFamily("trainyard_jobs_with_errors",
                                   "Active jobs whose last cluster operation failed",
                                   labels=["tenant"])
        for slug, n in (TrainingJob.objects.filter(state__in=ACTIVE_STATES).exclude(last_error="")
                        .values("tenant__slug").annotate(n=Count("id"))
                        .values_list("tenant__slug", "n")):
            errors.add_metric([slug], n)
        yield errors

    def _errors(self) -> Iterator[Metric]:
        sync = GaugeMetricFamily("trainyard_pool_sync_error",
                                 "1 when the last sync of the pool to the cluster failed",
                                 labels=["tenant", "pool"])
        for slug, kind, error in (Pool.objects.exclude(tenant__status=TenantStatus.DELETED)
                                  .values_list("tenant__slug", "kind", "sync_error")):
            sync.add_metric([slug, kind], 1.0 if error else 0.0)
        yield sync
        observer = GaugeMetricFamily("trainyard_observer_failing",
                                     "1 when the cluster watcher's last error is newer than "
                                     "its last successful list", labels=["kind"])
        for status in observer_status({}):
            observer.add_metric([status.kind], 1.0 if status.failing else 0.0)
        yield observer

    def _watchdog(self) -> Iterator[Metric]:
        report = watchdog.report()
        flagged = GaugeMetricFamily(
            "trainyard_watchdog_flagged",
            "1 per job, pool sync or month close still overdue after the watchdog retried it",
            labels=["kind", "subject", "reason"])
        overdue = GaugeMetricFamily("trainyard_watchdog_overdue",
                                    "Overdue subjects by kind and status (retrying, flagged)",
                                    labels=["kind", "status"])
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for finding in report.findings:
            counts[(finding["kind"], finding["status"])] += 1
            if finding["status"] == watchdog.Status.FLAGGED:
                flagged.add_metric([finding["kind"], finding["label"], finding["reason"]], 1.0)
        for kind in watchdog.Kind:
            for status in watchdog.Status:
                overdue.add_metric([kind, status], float(counts[(kind, status)]))
        last = GaugeMetricFamily("trainyard_watchdog_last_run_timestamp_seconds",
                                 "When the watchdog last ran (0: never)")
        last.add_metric([], report.at.timestamp() if report.at else 0.0)
        yield flagged
        yield overdue
        yield last

    def _capacity(self) -> Iterator[Metric]:
        allocatable = GaugeMetricFamily("trainyard_gpu_allocatable",
                                        "Whole GPUs, MIG instances and shared replicas",
                                        labels=["gpu_model"])
        allocated = GaugeMetricFamily("trainyard_gpu_allocated",
                                      "Whole GPUs, MIG instances and shared replicas allocated",
                                      labels=["gpu_model"])
        report = capacity_report()
        for m in report.models:
            allocatable.add_metric([m.gpu_model], m.whole_allocatable + m.shared_allocatable
                                   + sum(x.allocatable for x in m.mig))
            allocated.add_metric([m.gpu_model], m.whole_allocated + m.shared_allocated
                                 + sum(x.allocated for x in m.mig))
        yield allocatable
        yield allocated
        capacity = GaugeMetricFamily("trainyard_capacity",
                                     "Capacity per quota resource: allocatable on every "
                                     "observed node", labels=["resource"])
        for key, amount in capacity_by_resource(report).items():
            capacity.add_metric([key], float(amount))
        yield capacity
        latest = UsageSeries.objects.filter(resolution=UsageSeries.MINUTE).aggregate(
            t=Max("start"))["t"]
        sample = GaugeMetricFamily("trainyard_usage_sample_timestamp_seconds",
                                   "Start of the latest usage-series minute")
        sample.add_metric([], latest.timestamp() if latest else 0.0)
        yield sample


def _allowed(request: HttpRequest) -> bool:
    token = getattr(settings, "TRAINYARD_METRICS_TOKEN", "") or ""
    allow = getattr(settings, "TRAINYARD_METRICS_ALLOW", []) or []
    if not token and not allow:
        raise Http404
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(
            header.removeprefix("Bearer ").strip().encode(), token.encode()):
        return True
    try:
        remote = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    for entry in allow:
        try:
            if remote in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        response = HttpResponse("unauthorized\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="trainyard-metrics"'
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TrainyardCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
