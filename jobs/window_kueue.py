"""Kueue mode: a maintenance window's freed nodes held for its target job.

The trainyard engine holds them by dedicating the nodes to the job alone
(``selectors.window_targets``, ``JobView.scope``); Kueue decides by queues and flavors, so
here the hold is Kueue's objects (``k8s_sync.kueue_hold``: a ResourceFlavor selecting only
the held nodes and tolerating the window's taint, offered by one ClusterQueue open to the
target's namespace alone, and its LocalQueue), declared to the Kueue converge through
``tenants.signals.kueue_holds`` (:func:`declared_holds`), and three writes here
(:func:`hold_in_kueue`, called by ``jobs.apply_maintenance_windows`` after the cordon):

* the held nodes are labelled ``trainyard.io/maintenance-hold=<window>`` (what the flavor
  selects) and the label is removed once the hold is over;
* the target job, while queued (suspended), is moved to the hold's LocalQueue (its
  ``kueue.x-k8s.io/queue-name`` label: Kueue moves its Workload), and back to its pool's
  queue if the window ends before Kueue admitted it.

A hold lasts while the window is open and its target is active, and after the window's
end for as long as the target, admitted on it, still runs there (its ClusterQueue is not
pulled from under an admitted Workload). The window's own moves are evicted as every
preemption Trainyard asks for in Kueue mode: their Workloads deactivated
(``jobs.backends.kueue.desired_active``) with their tier's grace, reactivated once back
in the queue.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.dispatch import receiver
from django.utils import timezone

from jobs.choices import ACTIVE_STATES, JobState
from jobs.models import MaintenanceWindow, TrainingJob
from jobs.selectors.windows import held_nodes_of
from k8s_sync import kueue
from k8s_sync.kueue_hold import HoldSpec, hold_name
from k8s_sync.maintenance import HOLD_LABEL, hold_label_patch
from k8s_sync.specs import WORKLOAD_KINDS
from tenants.kueue import kueue_on
from tenants.selectors import topology_levels
from tenants.signals import kueue_holds

_RUNNING = (JobState.ADMITTED, JobState.RUNNING, JobState.PREEMPTING)


def holding_windows(now: dt.datetime) -> list[MaintenanceWindow]:
    """The windows whose hold is on: open with an active target, or ended while their
    target, admitted after the window opened, still runs."""
    found = []
    for window in MaintenanceWindow.objects.filter(
            applied_at__isnull=False, target_job__state__in=ACTIVE_STATES).select_related(
            "target_job__pool"):
        job = window.target_job
        is_open = (window.status == MaintenanceWindow.Status.APPLIED
                   and window.released_at is None and window.ends_at > now)
        runs_on_it = (job is not None and job.state in _RUNNING and job.admitted_at is not None
                      and window.applied_at is not None and job.admitted_at >= window.applied_at)
        if is_open or runs_on_it:
            found.append(window)
    return found


def _amounts(nodes: Iterable[str]) -> dict[str, Decimal]:
    """The held nodes' whole cards, cores and GiB as observed (``k8s_sync.selectors``)."""
    from k8s_sync.selectors import capacity_report

    wanted = set(nodes)
    total: dict[str, Decimal] = {}
    for node in capacity_report().nodes:
        if node.name not in wanted:
            continue
        for key, amount in ((f"gpu:{node.gpu_model}", Decimal(node.whole_allocatable)),
                            ("cpu", Decimal(node.cpu_allocatable)),
                            ("memory", Decimal(node.memory_allocatable) / (1 << 30))):
            if amount and not key.endswith(":"):
                total[key] = total.get(key, Decimal(0)) + amount
    return total


@receiver(kueue_holds, dispatch_uid="jobs.window_kueue_holds")
def declared_holds(sender: Any, **kwargs: Any) -> list[HoldSpec]:
    """The holds the Kueue converge writes (``tenants.kueue.kueue_spec``)."""
    topology = bool(topology_levels())
    holds = []
    for window in holding_windows(timezone.now()):
        job = window.target_job
        assert job is not None
        nodes = held_nodes_of(window.plan, window.nodes)
        if nodes:
            holds.append(HoldSpec(window_id=window.pk, namespace=job.pool.namespace,
                                  amounts=_amounts(nodes), topology=topology))
    return holds


def hold_in_kueue(client: Any, now: dt.datetime) -> int:
    """Label the held nodes, move the targets between the hold's queue and their own
    (Kueue mode only). Level-triggered and idempotent. Returns the objects patched."""
    if not kueue_on():
        return 0
    from tenants.tasks import reconcile_kueue

    holding = holding_windows(now)
    wanted: dict[str, int] = {}
    for window in holding:
        for name in held_nodes_of(window.plan, window.nodes):
            wanted.setdefault(name, window.pk)
    nodes = client.list_objects("v1", "Node")
    if wanted or any(HOLD_LABEL in (n["metadata"].get("labels") or {}) for n in nodes):
        # the holds' flavors and queues exist before anything uses them (and go after)
        reconcile_kueue.apply()
    patched = 0
    for node in nodes:
        name = node["metadata"]["name"]
        labelled = ((node["metadata"].get("labels") or {}).get(HOLD_LABEL))
        if name not in wanted and labelled is None:
            continue
        patch = hold_label_patch(node, wanted.get(name))
        if patch is not None:
            client.patch("v1", "Node", name, patch)
            patched += 1
    open_for = {w.target_job_id: w.pk for w in holding
                if w.status == MaintenanceWindow.Status.APPLIED and w.released_at is None
                and w.ends_at > now}
    targets = TrainingJob.objects.filter(
        state=JobState.QUEUED, in_cluster=True,
        pk__in=MaintenanceWindow.objects.filter(applied_at__isnull=False).values(
            "target_job_id")).select_related("pool")
    for job in targets:
        queue = (hold_name(open_for[job.pk]) if job.pk in open_for
                 else kueue.local_queue_for(job.tier))
        api_version, kind = WORKLOAD_KINDS[job.kind]
        obj = client.read(api_version, kind, job.k8s_name, job.pool.namespace)
        labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
        if obj is None or labels.get(kueue.LABEL_QUEUE_NAME) == queue:
            continue
        if job.pk not in open_for and not labels.get(kueue.LABEL_QUEUE_NAME, "").startswith(
                hold_name("")):
            continue  # never moved by a window: left alone
        client.patch(api_version, kind, job.k8s_name,
                     {"metadata": {"labels": {kueue.LABEL_QUEUE_NAME: queue}}},
                     job.pool.namespace)
        patched += 1
    return patched
