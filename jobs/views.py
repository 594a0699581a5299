"""Job pages: list, submit (with a live preview), detail, cancel, clone; the platform
admins' view of every queue with hold, release and re-prioritise. Thin views."""

from __future__ import annotations

import datetime as dt
import shlex
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from core.choices import PoolKind, Tier
from core.exceptions import ApplicationError
from jobs import progress, selectors, services
from jobs.choices import ACTIVE_STATES, JobState
from jobs.forms import JobForm, template_initial, template_values
from jobs.models import MaintenanceWindow
from jobs.selectors.spec import worker_resources, worker_resources_text
from jobs.timeline import running_seconds
from jobs.verdict import job_submit_verdict, refused
from tenants.access import is_platform_admin, platform_admin_or_404
from tenants.selectors import tenant_access_or_404


@require_safe
@login_required
def job_list(request: HttpRequest, slug: str) -> HttpResponse:
    access = tenant_access_or_404(request.user, slug)
    filters = {k: request.GET.get(k, "") for k in ("state", "tier", "pool", "q")}
    jobs = selectors.jobs_for_tenant(access.tenant, state=filters["state"],
                                     tier=filters["tier"], pool=filters["pool"],
                                     query=filters["q"])
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    mean_util = selectors.mean_gpu_utilisation(list(page))
    for job in page:
        job.mean_util = mean_util.get(job.pk)  # type: ignore[attr-defined]
    return render(request, "jobs/list.html", {
        "access": access, "tenant": access.tenant, "page": page, "filters": filters,
        "states": JobState.choices, "tiers": Tier.choices,
    })


@login_required
def job_new(request: HttpRequest, slug: str) -> HttpResponse:
    access = tenant_access_or_404(request.user, slug)
    inventory = selectors.inventory().for_tenant(access.tenant.slug)
    granted = selectors.granted_gpu_models(access.tenant)
    initial = template_initial(request.GET.get("template", ""), inventory, granted)
    if request.GET.get("clone"):
        clone = request.GET["clone"]
        if not (clone.isascii() and clone.isdigit()):
            raise Http404("No such job")  # not a job id: no job to clone
        source = selectors.job_or_404(access.tenant, int(clone))
        initial = {**services.clone_initial(source), "max_run_hours":
                   source.max_run_seconds / 3600}
        initial["command"] = shlex.join(initial["command"])
        initial["args"] = shlex.join(initial["args"])
        initial["env"] = "\n".join(f"{k}={v}" for k, v in source.env.items())
    form = JobForm(request.POST or None, initial=initial, inventory=inventory)
    if request.method == "POST" and form.is_valid():
        try:
            job = services.job_submit(access=access, actor=request.user, inventory=inventory,
                                      pool=form.cleaned_data["pool"], data=form.submission(),
                                      template=form.cleaned_data.get("template") or "")
        except ApplicationError as exc:
            for field, message in (exc.extra.get("errors") or {exc.field: exc.message}).items():
                form.add_error(field if field in form.fields else None, message)
        else:
            messages.success(request, _("Job %(n)s is queued.") % {"n": job.name})
            return redirect("jobs:detail", slug=slug, pk=job.pk)
    return render(request, "jobs/new.html", {
        "access": access, "tenant": access.tenant, "form": form,
        "template_values": template_values(inventory, granted),
    }, status=400 if request.method == "POST" else 200)


def preview_data(request: HttpRequest, slug: str) -> tuple[dict, dict | None]:
    """The live preview's answer and the cleaned submission it was computed for (None when
    refused): ``preview`` is the one verdict (``jobs.verdict``: fits, waits or refused,
    the same check Submit makes), ``errors`` every field's refusal (empty unless refused).
    Times are sent as ISO instants and as every page writes them (``*_text``)."""
    access = tenant_access_or_404(request.user, slug)
    inventory = selectors.inventory().for_tenant(access.tenant.slug)
    form = JobForm(request.POST, inventory=inventory)
    if not form.is_valid():
        errors = {k: str(v[0]) for k, v in form.errors.items()}
        return {"errors": errors, "preview": refused(errors)}, None
    result, clean = job_submit_verdict(access=access, pool=form.cleaned_data["pool"],
                                       data=form.submission(), inventory=inventory)
    for key in ("eta_p50", "eta_p90"):
        if result.get(key):
            result[key] = result[key].isoformat()
    return {"errors": result.get("errors", {}), "preview": result}, clean


@login_required
@require_POST
def job_preview(request: HttpRequest, slug: str) -> JsonResponse:
    """The live preview of the submission form (the portal adds the cost estimate)."""
    return JsonResponse(preview_data(request, slug)[0])


@require_safe
@login_required
def job_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    access = tenant_access_or_404(request.user, slug)
    job = selectors.job_or_404(access.tenant, pk)
    transitions = list(selectors.transitions_of(job))
    seconds = running_seconds([(t.to_state, t.at) for t in transitions], timezone.now())
    pods = selectors.pods_of(job)
    pod_util = selectors.pod_gpu_utilisation(job, pods)
    for pod in pods:
        pod.gpu_util = pod_util.get(pod.name)  # type: ignore[attr-defined]
    return render(request, "jobs/detail.html", {
        "access": access, "tenant": access.tenant, "job": job, "transitions": transitions,
        "gpu_hours": seconds * job.total_gpus / 3600, "run_seconds": seconds,
        "pods": pods, "events": selectors.events_of(job),
        "log_pods": selectors.log_pods(job, pods),
        "mean_util": selectors.mean_gpu_utilisation([job]).get(job.pk),
        "gpu_kind": selectors.gpu_kind_label(job) if job.gpu_kind in ("shared", "hami") else "",
        "platform_admin": is_platform_admin(request.user),
        "health": selectors.job_health(job),
        "reclaim_grace": selectors.reclaim_grace(job),
        "progress": progress.shown(job, now=timezone.now()),
        "worker": worker_resources_text(worker_resources(job)),
        "eta_accuracy": selectors.job_eta_accuracy(job),
    })


@login_required
def job_logs(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """One of the job's pods' log, read from the cluster: JSON for the log panel (``after``:
    only lines newer than that timestamp, how the panel follows a log), or the text as a
    file with ``download=1``. Another tenant's job, or a pod not the job's: 404."""
    access = tenant_access_or_404(request.user, slug)
    job = selectors.job_or_404(access.tenant, pk)
    pod = selectors.job_pod_or_404(job, request.GET.get("pod", ""))
    previous = request.GET.get("previous") in ("1", "true")
    if request.GET.get("download"):
        log = selectors.pod_log(job, pod=pod, previous=previous, tail=None,
                                limit_bytes=selectors.LOG_DOWNLOAD_BYTES)
        if log.problem:
            return HttpResponse(f"{log.message}\n{log.detail}\n", status=409,
                                content_type="text/plain; charset=utf-8")
        response = HttpResponse(log.stamped_text, content_type="text/plain; charset=utf-8")
        name = f"{pod}{'-previous' if previous else ''}.log"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
    log = selectors.pod_log(job, pod=pod, previous=previous,
                            after=request.GET.get("after", "")[:40])
    # "today": the reader's day, so the panel reads the log again when it changes (its
    # lines say "today" and "yesterday")
    return JsonResponse({"pod": pod, "previous": previous, "lines": log.shown(),
                         "last": log.last, "problem": log.problem, "message": log.message,
                         "detail": log.detail, "truncated": log.truncated,
                         "active": job.is_active, "today": timezone.localdate().isoformat()})


@login_required
@require_POST
def job_action(request: HttpRequest, slug: str, pk: int, action: str) -> HttpResponse:
    access = tenant_access_or_404(request.user, slug)
    job = selectors.job_or_404(access.tenant, pk)
    reason = request.POST.get("reason", "")
    try:
        if action == "cancel":
            services.job_cancel(access=access, actor=request.user, job=job)
            messages.success(request, _("Job %(n)s was cancelled.") % {"n": job.name})
        elif action in ("hold", "release"):
            services.job_hold(actor=request.user, job=job, held=action == "hold", reason=reason)
            messages.success(request, _("Done."))
        elif action == "preempt":
            # a platform admin's preemption (the service checks the role), by the
            # admission backend in force: stops after the tier's grace, back to the queue
            job = services.job_preempt(actor=request.user, job=job, reason=reason)
            if job.state == JobState.PREEMPTING:
                messages.success(request, _(
                    "Job %(n)s is being preempted: it stops after its tier's grace period "
                    "and goes back to the queue.") % {"n": job.name})
            else:
                messages.error(request, _("Job %(n)s was not preempted: only an admitted or "
                                          "running job can be.") % {"n": job.name})
        elif action == "priority":
            services.job_set_priority(actor=request.user, job=job,
                                      priority=int(request.POST.get("priority") or 0),
                                      reason=reason)
            messages.success(request, _("Done."))
        else:
            raise Http404
    except (ApplicationError, ValueError) as exc:
        messages.error(request, getattr(exc, "message", str(exc)))
    back = request.POST.get("next", "")
    # a path of this site only, sent as it is (redirect() would read "x" as a view name)
    if back.startswith("/") and url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return HttpResponseRedirect(back)
    return redirect("jobs:detail", slug=slug, pk=pk)


QUEUE_PAGE_SIZE = 50


@require_safe
@login_required
def platform_queue(request: HttpRequest) -> HttpResponse:
    """Every active job of every tenant (platform admins): filters, sorting and pages from
    the query string (bookmarkable), row actions that come back to the same view."""
    platform_admin_or_404(request.user)
    queue = selectors.platform_queue(request.GET)
    page = Paginator(queue.jobs, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    keep = {**queue.filters}
    if request.GET.get("sort") and "sort" not in queue.ignored:
        keep["sort"] = ("-" if queue.descending else "") + queue.sort
    return render(request, "jobs/platform_queue.html", {
        "queue": queue, "page": page, "query": urlencode(keep),
        "filter_query": urlencode(queue.filters), "here": request.get_full_path(),
        "sorts": [(name, _sort_link(queue, name)) for name in selectors.QUEUE_SORTS],
        "states": [(s.value, s.label) for s in ACTIVE_STATES], "tiers": Tier.choices,
        "pools": PoolKind.choices,
    })


def _sort_link(queue: selectors.PlatformQueue, name: str) -> str:
    """The query string that sorts by ``name`` (the other direction when it is the sort
    now), keeping the filters."""
    descending = queue.sort == name and not queue.descending
    return urlencode({**queue.filters, "sort": ("-" if descending else "") + name})


@login_required
def defrag(request: HttpRequest) -> HttpResponse:
    """Plan and schedule a defragmentation window (platform admins)."""
    platform_admin_or_404(request.user)
    inventory = selectors.inventory()
    model = request.POST.get("gpu_model") or request.GET.get("gpu_model") or next(
        iter(sorted(inventory.gpus_per_node)), "")
    error = ""
    try:
        wanted = int(request.POST.get("nodes_wanted") or request.GET.get("nodes_wanted") or 1)
    except ValueError:
        wanted, error = 1, _("Give the number of nodes to free as a whole number.")
    plan = services.defrag_plan_preview(gpu_model=model, wanted=wanted) if model else None
    if request.method == "POST" and not error:
        try:
            starts = _aware(request.POST.get("starts_at", ""))
            ends = _aware(request.POST.get("ends_at", ""))
            target = (request.POST.get("target_job") or "").strip()
            if target and not target.isdigit():
                raise ApplicationError(_("Give the job to hold the nodes for by its number."),
                                       field="target_job")
            services.window_schedule(actor=request.user, gpu_model=model, nodes_wanted=wanted,
                                     starts_at=starts, ends_at=ends,
                                     reason=request.POST.get("reason", ""),
                                     target_job_id=int(target[:18]) if target else None)
        except (ApplicationError, ValueError) as exc:
            error = getattr(exc, "message", None) or _("Give the window's start and end.")
        else:
            messages.success(request, _("The maintenance window was scheduled."))
            return redirect("jobs:defrag")
    return render(request, "jobs/defrag.html", {
        "models": sorted(inventory.gpus_per_node), "model": model, "wanted": wanted,
        "plan": plan, "error": error, "windows": MaintenanceWindow.objects.all()[:50],
        "now": timezone.now(),
    }, status=400 if error else 200)


def _aware(text: str):  # type: ignore[no-untyped-def]
    value = dt.datetime.fromisoformat(text)
    return timezone.make_aware(value) if timezone.is_naive(value) else value


@login_required
@require_POST
def defrag_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel a maintenance window; an open one gives its cordoned nodes back now."""
    platform_admin_or_404(request.user)
    try:
        services.window_cancel(actor=request.user, window_id=pk)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("The maintenance window was cancelled."))
    return redirect("jobs:defrag")
