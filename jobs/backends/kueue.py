"""Kueue as the admission backend (``TRAINYARD_ADMISSION_BACKEND=kueue``).

Kueue decides; Trainyard keeps what Kueue does not offer and reads Kueue's decisions
into its own job states, so pages, the API, billing and notifications work unchanged.

* **Submit** (:meth:`KueueBackend.sync_job`): the job's PyTorchJob is created once,
  suspended, with Kueue's queue label (the pool's LocalQueue ``trainyard``, or
  ``trainyard-batch`` for batch) and priority label (the tier's WorkloadPriorityClass)
  (``k8s_sync.kueue.kueue_job``). Kueue creates its Workload and un-suspends the job
  when it admits it; Trainyard never touches ``suspend`` again.
* **Observe** (:meth:`KueueBackend.cycle`): the PyTorchJobs' conditions move jobs to
  running, succeeded, failed and, after a preemption, back to queued once their pods are
  gone (``jobs.observation.observe_jobs``, shared with the trainyard engine). One list of the
  Workloads moves a queued job whose Workload is ``Admitted`` to admitted, and an
  admitted or running job whose Workload lost its admission to preempting, with Kueue's
  reason (the ``Preempted`` condition's ``InClusterQueue``/``InCohortReclamation``/...
  or the ``Evicted`` reason) and the tier's grace as its deadline.
* **Resume**: a job back in the queue after a preemption gets its suspended object's pod
  templates refreshed (``TRAINYARD_RESUME=1``, the restart count: :func:`refresh_resume`)
  before Kueue admits it again, so it resumes from its checkpoint, PyTorchJob or TrainJob
  (whose Workload Kueue names ``trainjob-<name>-<hash>``, read by its owner like any).
* **Waiting jobs**: position from Kueue's visibility API (``pendingworkloads`` of the
  job's ClusterQueue), reason from the Workload's ``QuotaReserved`` condition in plain
  language, and the estimated start from Kueue's order (``jobs.kueue_eta``): Trainyard's
  engine run as a forecaster over the same cluster and run history with the queued jobs
  in Kueue's positions (``jobs.admission.decide``: its ``eta.py`` simulation and
  ``explain.py`` reason, whose admissions and preemptions are ignored), bounded by the
  ClusterQueue's observed admission rate.
* **Hold and Trainyard's own preemptions** (an admin's, a maintenance window's) are
  Kueue's ``spec.active``: a held queued job's Workload and a job preempted by Trainyard
  are deactivated (Kueue evicts, the job is suspended and its pods get their grace), and
  reactivated once it is released or back in the queue (Kueue queues it again).
* **Quota**: ``tenants.tasks.reconcile_kueue`` writes the ClusterQueues from the grants
  and loans (after each pool reconcile and on the resync beat).

* **Watermark** (:mod:`jobs.backends.kueue_watermark`): Kueue admits by quota alone, so
  each pass measures physical use as the engine does; above the line it moves the
  jobs the engine would evict, in its order and with its words, to preempting (their
  Workloads deactivated, as above), and keeps the Workloads of queued jobs the engine
  would gate inactive, reactivating them once use is back below the line.

* **Pod-start deadline** is Kueue's ``waitForPodsReady`` (``deploy/kueue/``): its
  requeues and its giving up are read into the engine's transitions and words
  (``jobs.backends.kueue_evictions``), and every eviction Kueue counted is recorded, also
  one undone between two passes.

What Kueue's own controller does is not repeated: no node placement (Kueue's flavors and
topology-aware scheduling). A maintenance window's moves are Trainyard's preemptions
(deactivations), its hold of the freed nodes for a target job Kueue's objects
(``jobs.window_kueue``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, transaction
from django.utils import timezone

from core.choices import Tier
from core.models import Policy
from core.texts import message as stored_text
from core.texts import text_code
from jobs import enqueue, idle_waiting, kueue_eta, selectors, transitions
from jobs.admission.text import position as ordinal_text
from jobs.admission.types import WaitInfo
from jobs.backends import kueue_evictions, kueue_watermark
from jobs.backends.base import BaseBackend
from jobs.choices import ACTIVE_STATES, JobState
from jobs.converge import ensure_tier_runtime, refused, unbuildable
from jobs.models import TrainingJob
from jobs.observation import observe_jobs
from k8s_sync import kueue, kueue_observe, kueue_status, manifests
from k8s_sync.client import K8sError, get_client, is_transient
from k8s_sync.specs import WORKLOAD_KINDS, default_tiers
from tenants.selectors import topology_levels
from tenants.services import pool_sync_request
from tenants.tasks import backoff_seconds
from tenants.tiers import tier_rules

log = logging.getLogger(__name__)

MAX_RETRIES = 8
KUEUE_PREEMPT = "jobs.preempt.kueue"
#: What the last visibility reads found, per ClusterQueue (:func:`queue_positions`).
POSITIONS_KEY = "jobs.kueue.positions"
POSITIONS_SECONDS = 3600  # a queue not explained for this long is read again
#: Kueue's QuotaReserved reasons by what they mean to the job's owner.
_NEVER = {"NoMatchingFlavor", "ExceedsMaxQuota", "Misconfigured"}


def cluster_queue_of(job: TrainingJob) -> str:
    """The ClusterQueue a job is queued in: its pool's, or the pool's batch queue."""
    role = "batch" if job.tier == Tier.BATCH else job.pool.kind
    return kueue.cluster_queue_name(job.pool.namespace, role)  # type: ignore[arg-type]


def desired_active(job: TrainingJob, gated: Collection[int] = ()) -> bool:
    """Whether the job's Workload should be active: not while it is held in the queue or
    kept out by the eviction watermark (``gated``: the ids of such queued jobs,
    :mod:`jobs.backends.kueue_watermark`), nor while a preemption Trainyard asked for (an
    admin's, a maintenance window's, the watermark's) stops it, until it is back in the
    queue. Kueue's own preemptions need nothing: Kueue requeues the Workload itself."""
    if job.state == JobState.QUEUED and (job.held or job.pk in gated):
        return False
    return not (job.state == JobState.PREEMPTING
                and text_code(job.preempt_reason) != KUEUE_PREEMPT)


def _grace(tier: str) -> int:
    return tier_rules(Policy.current())[Tier(tier)].termination_grace_seconds


class KueueBackend(BaseBackend):
    name = "kueue"

    # -- submit ------------------------------------------------------------------------

    def sync_queues(self) -> None:
        from tenants.tasks import reconcile_kueue

        transaction.on_commit(lambda: reconcile_kueue.delay(), robust=True)

    def sync_job(self, task: Any, job_id: int) -> str:
        """Create the job's PyTorchJob or TrainJob for Kueue (once; suspended, labelled);
        delete a cancelled job's. Kueue owns ``suspend`` from then on. Idempotent."""
        job = TrainingJob.objects.select_related("tenant", "pool").filter(pk=job_id).first()
        if job is None:
            return "gone"
        client = get_client()
        try:
            if job.state == JobState.CANCELLED:
                api_version, kind = WORKLOAD_KINDS[job.kind]
                client.ensure_absent(api_version, kind, job.k8s_name,
                                     job.pool.namespace, propagation_policy="Foreground")
                return "absent"
            if job.state in (JobState.SUCCEEDED, JobState.FAILED):
                return "finished"
            try:
                spec = selectors.job_spec(job)
                pvc = manifests.build_checkpoint_pvc(spec)
                levels = topology_levels()
                workload = kueue.kueue_job(
                    manifests.build_workload(spec), tier=job.tier,
                    required_topology=levels[-1] if levels and job.workers > 1 else "")
            except DatabaseError:
                raise
            except Exception as exc:  # a ValueError of JobSpec, mostly
                return unbuildable(job, exc)
            if pvc is not None:
                client.create_if_absent(pvc)
            if not job.in_cluster:
                ensure_tier_runtime(client, spec)
            _obj, created = client.create_if_absent(workload)
            TrainingJob.objects.filter(pk=job.pk).update(in_cluster=True, last_error="")
        except K8sError as exc:
            TrainingJob.objects.filter(pk=job.pk).update(last_error=str(exc)[:2000])
            if exc.namespace_missing and not job.in_cluster:
                pool_sync_request(pool=job.pool)
                return "waiting: no namespace"
            if is_transient(exc) and task.request.retries < MAX_RETRIES:
                raise task.retry(exc=exc, countdown=backoff_seconds(task.request.retries)) from exc
            if refused(exc) and not job.in_cluster:
                transitions.job_transition(
                    job_id=job.pk, from_states=[JobState.QUEUED], to_state=JobState.FAILED,
                    reason="Rejected", finished_at=timezone.now(),
                    message=stored_text("jobs.transition.rejected", status=exc.status,
                                        reason=exc.reason, error=exc.message[:1000]))
                return "rejected"
            return "error"
        return "created" if created else "exists"

    # -- admin preemption ------------------------------------------------------------------

    def preempt(self, *, job_id: int, reason: Any, actor: Any = None) -> bool:
        """Kueue's way: the job moves to preempting now and its Workload is deactivated
        (:meth:`cycle` writes ``spec.active: false``: Kueue evicts it and suspends the
        job, whose pods get the tier's grace); once it is back in the queue the Workload is
        reactivated and Kueue queues it again."""
        job = TrainingJob.objects.filter(pk=job_id).only("tier").first()
        if job is None:
            return False
        moved = transitions.job_transition(
            job_id=job_id, from_states=[JobState.RUNNING, JobState.ADMITTED],
            to_state=JobState.PREEMPTING, reason="Preempted", message=reason, actor=actor,
            preempt_reason=reason,
            preempt_deadline=timezone.now() + dt.timedelta(seconds=_grace(job.tier)))
        if moved:
            enqueue.kick_admission()  # the cycle deactivates its Workload
        return moved

    # -- the loop --------------------------------------------------------------------------

    def run_pass(self, now: dt.datetime, started: float) -> dict[str, Any]:
        """Observe, then read Kueue's decisions into job states (the cycle lock, the
        timing and the pass's record: :class:`~jobs.backends.base.BaseBackend`). The
        Workloads are the watcher's rows (``k8s_sync.kueue_observe``): no API call reads
        them. On the explanation cadence (:meth:`~BaseBackend.explain_due`) the pass
        also explains the queue: positions (a visibility read per ClusterQueue whose
        pending Workloads changed), reasons and the engine's forecast."""
        result: dict[str, Any] = dict(observe_jobs(now))
        if not kueue_observe.workloads_observed():
            log.warning("Kueue mode: no Workloads observed yet (is k8s_watch running, "
                        "and Kueue installed?)")
            result["error"] = "Kueue's Workloads are not observed yet"
            return result
        state = self.pass_state()
        explain = self.explain_due(now, state)
        client = get_client()
        active = list(TrainingJob.objects.filter(state__in=list(ACTIVE_STATES))
                      .select_related("pool__tenant")
                      .only("id", "state", "tier", "k8s_name", "pool__kind",
                            "pool__tenant__slug"))
        views = kueue_observe.workload_views(
            (job.pool.namespace, job.k8s_name) for job in active)
        # the eviction watermark, the engine's rule on the engine's inputs
        inputs = selectors.admission_inputs(now)
        watermark = kueue_watermark.plan(inputs)
        result["watermark_evicted"] = kueue_watermark.evict(watermark, now)
        result["watermark_gated"] = len(watermark.gated)
        result.update(apply_workloads(client, views, now, gated=watermark.gated))
        result["waiting"] = None
        if explain:
            waiting, result["positions_read"] = waiting_info(
                client, views, now, active=active, gated=watermark.gated, inputs=inputs)
            transitions.record_waiting(waiting)
            result["waiting"] = len(waiting)
            # GPU-seconds idle while work that fits waits, measured as in trainyard mode
            idle_waiting.record_observed(
                nodes=inputs["nodes"], jobs=inputs["jobs"], waiting=waiting, now=now,
                previous=state.explained_at, default_seconds=settings.TRAINYARD_EXPLAIN_SECONDS)
        with transaction.atomic():
            self.record_pass(started, {**result, "backend": self.name}, at=now,
                             explained_at=now if explain else None)
        return result


#: What a pass reads of each active job (refresh_resume reads the rest of a requeued one).
_READ = ("id", "state", "tier", "kind", "k8s_name", "restart_count", "held", "preempt_reason",
         "problem", "kueue_evictions", "pool__kind", "pool__tenant__slug")


def apply_workloads(client: Any, views: Mapping[tuple[str, str], kueue.WorkloadView],
                    now: dt.datetime, *, gated: Collection[int] = ()) -> dict[str, int]:
    """Kueue's decisions into job transitions, and each Workload's ``active`` as the job
    wants it (one patch per Workload that differs; none when nothing changed). ``gated``:
    queued jobs the eviction watermark keeps out (their Workloads stay inactive), unless
    Kueue has admitted them already."""
    counts = {"admitted": 0, "preempted": 0, "activated": 0, "deactivated": 0}
    jobs = TrainingJob.objects.filter(state__in=list(ACTIVE_STATES), in_cluster=True
                                      ).select_related("pool__tenant").only(*_READ)
    admissions: list[transitions.Move] = []
    policy = Policy.current()
    for job in jobs:
        view = views.get((job.pool.namespace, job.k8s_name))
        if view is None:
            continue
        admitting = job.state == JobState.QUEUED and (view.admitted or (
            view.is_true("Finished") and view.is_true("Admitted")))
        consumed = ""
        # Kueue's waitForPodsReady: requeued or failed as the engine's deadline does
        moved = kueue_evictions.start_deadline(job, view, now, policy)
        if moved:
            admitting = False
            counts["start_" + moved] = counts.get("start_" + moved, 0) + 1
            consumed = "Deactivated" if moved == "failed" else "PodsReadyTimeout"
        elif admitting:
            # (admitted, or admitted and already finished between two passes: its
            # running and end are read from the job by the next observe_jobs)
            # never later than the pass (clocks differ): the ETA record's start is the same
            admitted = min(view.conditions["Admitted"].at or now, now)
            admissions.append(transitions.Move(
                job_id=job.pk, at=admitted, fields={"admitted_at": admitted},
                message=stored_text("jobs.transition.kueue_admitted",
                                    queue=view.cluster_queue,
                                    flavors=", ".join(view.flavors) or "-")))
        elif (job.state in (JobState.ADMITTED, JobState.RUNNING) and not view.admitted
              and not view.is_true("Finished")):
            counts["preempted"] += _evicted(job, view, now)
            consumed = view.evicted.reason if view.evicted is not None else ""
        # every eviction Kueue counted, also one undone between two passes
        recorded = kueue_evictions.record_new(job, view, now, policy, consumed=consumed)
        if recorded:
            counts["evictions_recorded"] = counts.get("evictions_recorded", 0) + recorded
        if moved == "failed":
            continue  # Kueue deactivated it; the job has ended: leave it inactive
        if job.state == JobState.QUEUED and job.restart_count and not view.admitted:
            counts["resumable"] = counts.get("resumable", 0) + refresh_resume(client, job)
        want = desired_active(job, () if admitting else gated)
        if view.active != want:
            client.patch("kueue.x-k8s.io/v1beta2", "Workload", view.name,
                         kueue.workload_active_patch(want), view.namespace)
            counts["activated" if want else "deactivated"] += 1
    # every admission of the pass in one transaction (conditional, as one by one)
    counts["admitted"] = len(transitions.job_transitions(
        moves=admissions, from_states=[JobState.QUEUED], to_state=JobState.ADMITTED,
        reason="Admitted", borrowing=False, placement=[], switch="", wait_reason="",
        position_in_pool=None, position_in_model=None, eta_p50=None, eta_p90=None))
    return counts


def refresh_resume(client: Any, job: TrainingJob) -> int:
    """A job back in the queue after a preemption resumes from its checkpoint: before
    Kueue admits it again, its suspended PyTorchJob's or TrainJob's pod templates get this
    run's ``TRAINYARD_RESUME=1`` and restart count (``manifests.workload_requeue_patch``;
    the trainyard engine does it as it un-suspends). Once per requeue (a cache mark per
    restart count; without it, one read that finds the templates current writes nothing).
    Not once Kueue has un-suspended the job: its pods are made. A deactivated Workload
    (an admin's preemption) is reactivated after this, in the same pass; a Workload Kueue
    requeued itself is patched in the pass that sees the job back in the queue (normally
    the one that requeues it: the preemptor holds the quota meanwhile). 1 when patched."""
    mark = f"jobs.kueue.resume:{job.pk}:{job.restart_count}"
    if cache.get(mark):
        return 0
    api_version, kind = WORKLOAD_KINDS[job.kind]
    try:
        obj = client.read(api_version, kind, job.k8s_name, job.pool.namespace)
        if obj is None or not manifests.workload_suspended(job.kind, obj):
            return 0
        full = TrainingJob.objects.select_related("pool__tenant").filter(pk=job.pk).first()
        if full is None:
            return 0
        job = full  # every field (the pass read only what it decides on)
        patch = manifests.workload_requeue_patch(selectors.job_spec(job), obj)
        client.patch(api_version, kind, job.k8s_name, patch, job.pool.namespace)
    except K8sError as exc:  # the next pass tries again; Kueue's decisions still recorded
        log.warning("Kueue mode: cannot refresh %s for its resume: %s", job.k8s_name, exc)
        return 0
    cache.set(mark, "1", timeout=7 * 86400)
    return 1


def _evicted(job: TrainingJob, view: kueue.WorkloadView, now: dt.datetime) -> int:
    """Kueue took an admitted or running job's admission back: it is preempting, with
    Kueue's reason, until its pods are gone (``observe_jobs`` requeues it then)."""
    evicted = view.evicted
    preempted = view.conditions.get("Preempted")
    if preempted is not None and preempted.status:
        why, detail = preempted.reason, preempted.message
    elif evicted is not None:
        why, detail = evicted.reason, evicted.message
    else:
        why, detail = "NoReservation", ""
    code = "Preempted" if (preempted is not None and preempted.status) or (
        evicted is not None and evicted.reason == "Preempted") else "Evicted"
    text = stored_text(KUEUE_PREEMPT, reason=why, message=detail or "-")
    return int(transitions.job_transition(
        job_id=job.pk, from_states=[JobState.ADMITTED, JobState.RUNNING],
        to_state=JobState.PREEMPTING, reason=code, message=text, preempt_reason=text,
        preempt_deadline=now + dt.timedelta(seconds=_grace(job.tier))))


def _positions(client: Any, queues: Iterable[str]
               ) -> dict[str, dict[tuple[str, str], tuple[int, int]]]:
    """Per ClusterQueue read: (namespace, Workload name) -> (position in its
    ClusterQueue, in its LocalQueue), 1-based, from Kueue's visibility API (one GET per
    queue); a queue the API cannot answer for is left out."""
    found: dict[str, dict[tuple[str, str], tuple[int, int]]] = {}
    for queue in sorted(queues):
        try:
            items = client.kueue_pending_workloads(queue)
        except K8sError as exc:
            log.info("Kueue visibility API: no positions for %s: %s", queue, exc)
            continue
        found[queue] = {}
        for item in items:
            meta = item.get("metadata") or {}
            found[queue][(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = (
                int(item.get("positionInClusterQueue") or 0) + 1,
                int(item.get("positionInLocalQueue") or 0) + 1)
    return found


def pending_in_kueue(view: kueue.WorkloadView) -> bool:
    """The Workload waits in its ClusterQueue (what the visibility API lists): active,
    no quota reserved, not finished."""
    return view.active and not view.is_true("QuotaReserved") and not view.is_true("Finished")


def queue_digests(active: Iterable[TrainingJob],
                  views: Mapping[tuple[str, str], kueue.WorkloadView]
                  ) -> dict[str, tuple[str, frozenset[tuple[str, str]]]]:
    """Per ClusterQueue of an active job: a digest of its pending Workloads (which ones,
    and when each last entered the queue: its ``QuotaReserved``, ``Evicted`` and
    ``Requeued`` times), and their keys. Kueue orders a queue by priority (fixed per
    tier) and by when each Workload entered it, so positions move only when this digest
    does: a Workload new, admitted, finished, evicted, deactivated or requeued."""
    pending: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for job in active:
        queue = cluster_queue_of(job)
        pending.setdefault(queue, [])
        view = views.get((job.pool.namespace, job.k8s_name))
        if view is None or not pending_in_kueue(view):
            continue
        times = tuple(str(c.at) if (c := view.conditions.get(t)) is not None else ""
                      for t in ("QuotaReserved", "Evicted", "Requeued"))
        pending[queue].append((view.namespace, view.name, *times))
    out = {}
    for queue, items in pending.items():
        digest = hashlib.blake2b(repr(sorted(items)).encode(), digest_size=16).hexdigest()
        out[queue] = (digest, frozenset((ns, name) for ns, name, *_t in items))
    return out


def queue_positions(client: Any, digests: Mapping[str, tuple[str, frozenset[tuple[str, str]]]]
                    ) -> tuple[dict[tuple[str, str], tuple[int, int]], int]:
    """Positions of the pending Workloads of these ClusterQueues, and how many queues
    were read: Kueue's visibility API is asked only for a queue whose digest
    (:func:`queue_digests`) moved since its last read; the others keep what was read
    then (in the cache, :data:`POSITIONS_KEY`). A read that misses a pending Workload
    (Kueue had not queued it yet) is read again next time; a failed read too."""
    kept: dict[str, tuple[str | None, dict[tuple[str, str], tuple[int, int]]]] = (
        cache.get(POSITIONS_KEY) or {})
    stale = {queue for queue, (digest, keys) in digests.items()
             if keys and (queue not in kept or kept[queue][0] != digest)}
    read = _positions(client, stale)
    fresh: dict[str, tuple[str | None, dict[tuple[str, str], tuple[int, int]]]] = {}
    found: dict[tuple[str, str], tuple[int, int]] = {}
    for queue, (digest, keys) in digests.items():
        if not keys:
            continue  # nothing of ours waits there
        if queue in read:
            complete = keys <= read[queue].keys()
            fresh[queue] = (digest if complete else None, read[queue])
        elif queue in kept and queue not in stale:
            fresh[queue] = kept[queue]
        else:
            continue  # the read failed: no positions, read again next time
        found.update(fresh[queue][1])
    cache.set(POSITIONS_KEY, fresh, timeout=POSITIONS_SECONDS)
    return found, len(stale)


def _forecast(now: dt.datetime, inputs: dict[str, Any] | None = None,
              order: Mapping[int, tuple[str, int]] | None = None) -> dict[int, WaitInfo]:
    """Trainyard's engine over the same cluster and history, as a forecaster: its
    estimated starts and its reasons (its admissions and preemptions are not applied),
    the queued jobs in Kueue's order (``order``: job id -> (ClusterQueue, position);
    ``jobs.kueue_eta.in_kueue_order``). ``inputs``: the engine's inputs the pass already
    read."""
    try:
        inputs = inputs if inputs is not None else selectors.admission_inputs(now)
        if order:
            inputs = {**inputs, "jobs": kueue_eta.in_kueue_order(inputs["jobs"], order)}
        decisions, _absent = selectors.decide_with_pools_absent(inputs)
    except Exception:  # a forecast never stops Kueue's decisions from being recorded
        log.exception("Kueue mode: the ETA forecast failed")
        return {}
    return dict(decisions.waiting)


def kueue_reason(view: kueue.WorkloadView | None, queue: str,
                 position: int | None) -> dict[str, Any]:
    """Why a queued job waits, in plain language, from its Workload's conditions."""
    if view is None:
        return stored_text("jobs.wait.kueue.not_queued")
    backoff = kueue_evictions.backoff_reason(view)
    if backoff is not None:
        return backoff
    pending = view.pending
    why = pending.reason if pending is not None else ""
    detail = kueue_status.concise_message(pending.message if pending is not None else ""
                                          ) or "-"
    if why == "NoMatchingFlavor" and kueue_status.waits_for_quota(detail):
        # Kueue's resolveNoFitReason takes, per resource group, the mildest reason of the
        # flavors that did not fit, also in a group where another flavor fits (the GPU
        # group's other models): "NoMatchingFlavor" beside a quota wait is a quota wait
        why = "WaitingForQuota"
    if why in _NEVER:
        return stored_text("jobs.wait.kueue.never", queue=queue, message=detail)
    if why == "WaitingForPreemptedWorkloads":
        return stored_text("jobs.wait.kueue.preempting")
    if why == "TopologyPlacementFailed":
        return stored_text("jobs.wait.kueue.topology", message=detail)
    if why in ("WaitingForQuota", "Pending", "") and position is not None:
        return stored_text("jobs.wait.kueue.quota", n=ordinal_text(position), queue=queue,
                           message=detail)
    return stored_text("jobs.wait.kueue.other", queue=queue, reason=why or "Pending",
                       message=detail)


def model_positions(queued: list[TrainingJob]) -> dict[int, int]:
    """Each queued job's place among the queued jobs that want the same resource (a GPU
    model, a MIG profile) cluster-wide, by Kueue's own order within a queue: priority (the
    tier's WorkloadPriorityClass) first, then submission time. Kueue has no order across
    its queues (each admits its head in turn), so this is Trainyard's figure; held jobs
    come last, as in the trainyard engine."""
    values = {str(t.name): t.value for t in default_tiers()}
    order = sorted(queued, key=lambda j: (j.held, -values.get(str(j.tier), 0), -j.priority,
                                          j.submitted_at, j.pk))
    seen: dict[str, int] = {}
    out: dict[int, int] = {}
    for job in order:
        seen[job.resource_key] = seen.get(job.resource_key, 0) + 1
        out[job.pk] = seen[job.resource_key]
    return out


def waiting_info(client: Any, views: Mapping[tuple[str, str], kueue.WorkloadView],
                 now: dt.datetime, *, active: Iterable[TrainingJob] = (),
                 gated: Mapping[int, Any] | None = None, inputs: dict[str, Any] | None = None,
                 ) -> tuple[dict[int, WaitInfo], int]:
    """Every queued job's position (Kueue's), reason (Kueue's, and Trainyard's
    explanation of who holds the room; the eviction watermark's first for a job it keeps
    out, ``gated``) and estimated start (Trainyard's forecast, on ``inputs`` when the
    pass read them); and how many ClusterQueues the visibility API was asked about
    (``active``: every active job, whose pending Workloads tell which queues changed:
    :func:`queue_positions`)."""
    queued = list(TrainingJob.objects.filter(state=JobState.QUEUED).select_related(
        "pool__tenant").order_by("submitted_at", "id"))
    if not queued:
        return {}, 0
    every = {job.pk: job for job in (*queued, *active)}.values()
    positions, reads = queue_positions(client, queue_digests(every, views))
    by_model = model_positions(queued)
    order = kueue_eta.positions_by_job(queued, views, positions, cluster_queue_of)
    forecast = _forecast(now, inputs, order)
    rates = kueue_eta.admission_rates(now, cluster_queue_of) if order else {}
    gated = gated or {}
    out: dict[int, WaitInfo] = {}
    for job in queued:
        view = views.get((job.pool.namespace, job.k8s_name))
        queue = cluster_queue_of(job)
        in_cq, in_lq = positions.get((job.pool.namespace, view.name), (None, None)) if (
            view is not None) else (None, None)
        engine = forecast.get(job.pk)
        if job.held:
            reason: Any = stored_text("jobs.wait.held")
        elif job.pk in gated:   # its Workload is inactive: Kueue's reason says nothing
            reason = gated[job.pk]
        else:
            reason = kueue_reason(view, queue, in_cq)
            if engine is not None and engine.reason:
                reason = [reason, engine.reason]
        p50, p90 = kueue_eta.combine(
            (engine.eta_p50, engine.eta_p90) if engine is not None else (None, None),
            kueue_eta.rate_eta(now, in_cq, rates.get(queue)))
        out[job.pk] = WaitInfo(
            # the pool's queue is its own ClusterQueue (one LocalQueue each): one position
            position_in_pool=in_cq if in_cq is not None else in_lq,  # type: ignore[arg-type]
            position_in_model=by_model.get(job.pk),  # type: ignore[arg-type]
            eta_p50=p50, eta_p90=p90, reason=reason)
    return out, reads
