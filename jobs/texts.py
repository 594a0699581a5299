"""The jobs app's stored texts: every code the admission engine and the jobs services
write into a row (``TrainingJob.wait_reason``, ``preempt_reason``, ``hold_reason``,
``JobTransition.message``), registered with its translatable template (see
:mod:`core.texts`), and the labels of ``JobTransition.reason`` codes.

The engine (``jobs/admission``, no Django) builds the dicts as literals; this module is
imported when the app loads (``JobsConfig.ready``), so every code renders anywhere.

Templates use named placeholders; an argument that is itself a stored text (a tier, a
pool, a resource, an amount, a clock time) is rendered first, in the same language.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.translation import get_language, ngettext_lazy, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from core.texts import register
from core.when import eta_text
from jobs.admission.text import ordinal


class _Ordinal:
    """``{"n": 3}`` -> "3rd" in English; the bare number in languages whose sentence places
    it ("排第 3 位")."""

    def __mod__(self, args: dict[str, Any]) -> str:
        n = int(args["n"])
        return ordinal(n) if (get_language() or "en").startswith("en") else str(n)

    def __str__(self) -> str:
        return "%(n)s"


class _Clock:
    """``{"at": ISO instant}`` -> "today 14:20 UTC" / "Wed 2 Dec 12:00 UTC": the one
    format of every time people read (:func:`core.when.eta_text`, the reader's language
    and time zone, with its day)."""

    def __mod__(self, args: dict[str, Any]) -> str:
        return eta_text(datetime.fromisoformat(str(args["at"])))

    def __str__(self) -> str:
        return "%(at)s"


# -- pieces other texts place in their sentences --------------------------------------------

register("jobs.tier.production", pgettext_lazy("tier, in a sentence", "production"))
register("jobs.tier.development", pgettext_lazy("tier, in a sentence", "development"))
register("jobs.tier.batch", pgettext_lazy("tier, in a sentence", "batch"))
register("jobs.pool.prod", pgettext_lazy("pool, in a sentence", "prod"))
register("jobs.pool.dev", pgettext_lazy("pool, in a sentence", "dev"))
register("jobs.tiers.two", _("%(a)s and %(b)s"))
register("jobs.tiers.three", _("%(a)s, %(b)s and %(c)s"))
register("jobs.tiers.comma", pgettext_lazy("a list of tiers", "%(a)s, %(b)s"))
register("jobs.resource.gpu", pgettext_lazy("a GPU model, in a sentence", "%(model)s"))
register("jobs.resource.mig", _("%(profile)s MIG instances"))
register("jobs.resource.gpus", pgettext_lazy("resource, in a sentence", "GPUs"))
register("jobs.amount.gpu", pgettext_lazy("a number of GPUs of a model", "%(n)s %(model)s"))
register("jobs.amount.mig", ngettext_lazy("%(n)s %(profile)s MIG instance",
                                          "%(n)s %(profile)s MIG instances", "n"))
register("jobs.amount.gpus", ngettext_lazy("%(n)s GPU", "%(n)s GPUs", "n"))
register("jobs.resource.cpu", pgettext_lazy("resource, in a sentence", "CPU"))
register("jobs.resource.memory", pgettext_lazy("resource, in a sentence", "memory"))
register("jobs.resource.gpu_memory", pgettext_lazy("resource, in a sentence", "GPU memory"))
register("jobs.resource.gpu_shared", pgettext_lazy("resource, in a sentence", "shared GPUs"))
register("jobs.resource.shared", pgettext_lazy("a GPU model, in a sentence",
                                               "shared %(model)s GPUs"))
register("jobs.amount.cpu", ngettext_lazy("%(n)s CPU core", "%(n)s CPU cores", "n"))
register("jobs.amount.memory", _("%(n)s GiB of memory"))
register("jobs.amount.gpu_memory", _("%(n)s GiB of GPU memory"))
register("jobs.amount.gpu_shared", ngettext_lazy("%(n)s shared GPU", "%(n)s shared GPUs",
                                                 "n"))
register("jobs.resource.rdma", pgettext_lazy("resource, in a sentence", "RDMA NICs"))
register("jobs.amount.rdma", ngettext_lazy("%(n)s RDMA NIC", "%(n)s RDMA NICs", "n"))
register("jobs.amount.shared", ngettext_lazy("%(n)s shared %(model)s GPU",
                                             "%(n)s shared %(model)s GPUs", "n"))
register("jobs.ordinal", _Ordinal())
register("jobs.clock.time", _Clock())  # both codes: written before one format
register("jobs.clock.date", _Clock())

# -- why a job waits (the admission engine) -------------------------------------------------

register("jobs.wait.capacity", _("waiting for capacity"))
register("jobs.wait.held", _("held by a platform admin"))
register("jobs.wait.pool_absent", _(
    "waiting for its pool to be set up in the cluster (namespace %(namespace)s): it is "
    "admitted once the cluster shows the namespace and its quota"))
register("jobs.wait.over_batch_ceiling", _(
    "above your %(pool)s ceiling of %(ceiling)s for batch jobs (%(used)s in use): waits for "
    "your jobs to finish"))
register("jobs.wait.over_ceiling", _(
    "above your %(pool)s borrowing ceiling of %(ceiling)s (%(used)s in use): waits for your "
    "jobs to finish, or ask for more quota"))
register("jobs.wait.borrow_cap", _(
    "above your %(pool)s quota of %(quota)s and the borrowing cap of %(ceiling)s a platform "
    "admin set (%(used)s in use): waits for your jobs to finish, or ask for more quota"))
register("jobs.wait.borrow_cap_dim", _(
    "%(resource)s: needs %(wanted)s, %(used)s in use, above the borrowing cap of "
    "%(quota)s a platform admin set for your %(pool)s pool: waits for your jobs to finish, "
    "or ask for more quota"))
register("jobs.wait.over_quota", _(
    "above your %(pool)s quota of %(quota)s (%(used)s in use): ask for more quota or use the "
    "batch tier"))
register("jobs.wait.over_quota_wait", _(
    "above your %(pool)s quota of %(quota)s (%(used)s in use): waits for your jobs to "
    "finish, or ask for more quota"))
register("jobs.wait.over_quota_dim", _(
    "%(resource)s: needs %(wanted)s, %(used)s of your %(pool)s quota of %(quota)s in use: "
    "waits for your jobs to finish, or ask for more quota"))
register("jobs.wait.over_ceiling_dim", _(
    "%(resource)s: needs %(wanted)s, %(used)s of your %(pool)s ceiling of %(quota)s in use: "
    "waits for your jobs to finish, or ask for more quota"))
register("jobs.wait.cpu_room", _(
    "no schedulable node you may use has room for one replica's CPU and memory now"))
register("jobs.wait.borrowing", _(
    "above your %(pool)s quota of %(quota)s (%(used)s in use), so it borrows idle "
    "%(resource)s: %(detail)s"))
register("jobs.wait.reserved", _(
    "the free GPUs are reserved from %(at)s for a larger job ahead of it; it may start "
    "before then only if it is expected to finish by then"))
register("jobs.wait.batch_idle", _("batch jobs run only on idle capacity: %(detail)s"))
register("jobs.wait.no_node_has_room", _(
    "needs %(amount)s on one node, %(free)s free but no node has %(units)s free"))
register("jobs.wait.scattered", _(
    "needs %(replicas)s replicas of %(per)s on one node or under one switch, %(free)s free "
    "but too scattered"))
register("jobs.wait.needs", _("needs %(amount)s, %(free)s free; %(holders)s"))
register("jobs.holders.other", _("%(n)s held by other workloads"))
register("jobs.holders.running_and_other", _(
    "%(n)s held by running jobs (the last expected to finish around %(at)s) and other "
    "workloads"))
register("jobs.holders.tiers", _("%(n)s held by %(tiers)s jobs expected to finish around "
                                 "%(at)s"))
register("jobs.wait.victims", ngettext_lazy(
    "waiting for %(n)s %(tiers)s job to checkpoint and stop (by %(by)s)",
    "waiting for %(n)s %(tiers)s jobs to checkpoint and stop (by %(by)s)", "n"))
register("jobs.wait.preempted", ngettext_lazy(
    "waiting for %(n)s preempted job to checkpoint and stop (by %(by)s)",
    "waiting for %(n)s preempted jobs to checkpoint and stop (by %(by)s)", "n"))
register("jobs.wait.position", _("%(n)s in the %(pool)s queue"))
register("jobs.wait.position_own", _("%(n)s in the %(pool)s queue behind jobs of your own "
                                     "tenant"))
# a job whose ETA is earlier than that of a job ahead of it in its pool's queue and tier
register("jobs.wait.backfill_smaller", _(
    "a smaller job: it can start in the gap before the %(n)s in the queue needs the cards"))
register("jobs.wait.backfill", _(
    "it fits in the room that is free until the %(n)s in the queue can start"))
register("jobs.wait.sooner_other_cards", _(
    "it can start before the %(n)s in the queue, which waits for other cards"))
register("jobs.wait.sooner_quota", _(
    "it can start before the %(n)s in the queue, which waits for its own tenant's quota"))

# -- why a job could never start as it is ---------------------------------------------------

register("jobs.never.no_node_has", _("no schedulable node you may use has %(resource)s"))
register("jobs.never.no_cpu_node", _("no schedulable node you may use"))
register("jobs.never.replica_too_large", _(
    "no schedulable node has %(per)s for one replica; the largest node has %(largest)s"))
register("jobs.never.gang_too_large", _(
    "no switch has room for %(replicas)s replicas of %(per)s together; the largest switch "
    "has %(largest)s"))
register("jobs.never.no_quota", _(
    "your tenant has no %(pool)s quota for %(resource)s: ask for quota"))
register("jobs.never.above_quota", _(
    "asks for %(amount)s, more than your %(pool)s quota of %(limit)s: ask for more quota or "
    "make the job smaller"))
register("jobs.never.above_cap", _(
    "asks for %(amount)s, more than the borrowing cap of %(limit)s a platform admin set for "
    "your %(pool)s pool: ask for more quota or make the job smaller"))
register("jobs.never.no_quota_capped", _(
    "your tenant has no %(pool)s quota for %(resource)s and a platform admin capped "
    "borrowing: ask for quota"))
register("jobs.never.above_ceiling", _(
    "asks for %(amount)s, more than your %(pool)s ceiling of %(limit)s: ask for more quota "
    "or make the job smaller"))

# -- why a job is preempted -----------------------------------------------------------------

register("jobs.preempt.batch", _(
    "batch jobs run only on idle capacity; a %(tier)s job of %(tenant)s needs these "
    "%(resource)s"))
register("jobs.preempt.priority", _(
    "a higher-priority job of your tenant (priority %(priority)s over %(theirs)s) needs "
    "these %(resource)s"))
register("jobs.preempt.return_borrowed", _(
    "returning borrowed %(resource)s: %(tenant)s needs its %(pool)s quota back for a "
    "%(tier)s job"))
register("jobs.preempt.loan_ended", _(
    "the loan from %(lender)s ended: returning its %(resource)s, %(tenant)s needs its "
    "%(pool)s quota back for a %(tier)s job"))
register("jobs.preempt.tier", _(
    "a %(tier)s job takes precedence over %(theirs)s jobs for these %(resource)s"))
register("jobs.preempt.watermark", _(
    "%(resource)s are above the %(percent)s%% eviction watermark while jobs within their "
    "quota wait"))
register("jobs.preempt.maintenance", _("moved to free whole nodes for maintenance"))
register("jobs.preempt.watermark_use", _(
    "%(resource)s are at %(use)s%% of their physical capacity, above the %(percent)s%% "
    "eviction watermark: preemptible work beyond its guarantee is evicted until use is back "
    "below it"))
register("jobs.preempt.guarantee", _(
    "returning %(resource)s above your guaranteed share: %(tenant)s needs its guaranteed "
    "%(pool)s quota for a %(tier)s job"))
register("jobs.wait.watermark", _(
    "starting it would take %(resource)s to %(after)s%% of their physical capacity "
    "(%(use)s%% now), above the %(percent)s%% eviction watermark: only production work and "
    "work within its guarantee start there until use falls"))

# -- transition messages and holds written by the system ------------------------------------

register("jobs.transition.borrowing", _("borrowing idle capacity beyond the pool's quota"))
register("jobs.transition.pool_absent", _(
    "The cluster has no namespace %(namespace)s (%(error)s). Back in the queue, waiting for "
    "its pool to be set up in the cluster; a sync of the pool was requested."))
register("jobs.transition.requeued", _(
    "stopped after its checkpoint grace; it resumes from its checkpoint"))
register("jobs.transition.cancelled_by", _("Cancelled by %(u)s"))
register("jobs.transition.rejected", _(
    "The cluster refused the job (%(status)s %(reason)s: %(error)s); fix the submission or "
    "ask your platform team, then clone and resubmit."))
register("jobs.transition.unbuildable", _(
    "Trainyard cannot build this job for the cluster (%(error)s); clone it, fix the "
    "submission and resubmit."))
register("jobs.transition.start_requeued", _(
    "Its pods did not start within %(minutes)s minutes: %(cause)s. It is back in the queue "
    "(attempt %(n)s of %(max)s) and its GPUs are free for others."))
register("jobs.transition.start_failed", _(
    "Its pods did not start within %(minutes)s minutes, %(max)s times: %(cause)s. It has "
    "failed and its GPUs are free; fix the cause, then clone and resubmit."))
register("jobs.start.image", _("the cluster cannot pull the image %(image)s (%(reason)s: "
                               "%(message)s)"))
register("jobs.start.unschedulable", _("the scheduler cannot place its pods (%(reason)s: "
                                       "%(message)s)"))
register("jobs.start.create_failed", _("the cluster refused to create its pods (%(reason)s: "
                                       "%(message)s)"))
register("jobs.start.not_created", _("its PyTorchJob could not be created in the cluster "
                                     "(%(message)s)"))
register("jobs.start.other", _("its pods wait (%(reason)s: %(message)s)"))
register("jobs.start.unknown", _("the cluster gave no reason"))
register("jobs.notify.job", _("Job %(job)s: %(text)s"))
# What stops an admitted job's pods (jobs.problems), in Trainyard's words and the cluster's.
register("jobs.problem.image_missing", _(
    "the image %(image)s cannot be pulled: it does not exist, or its registry cannot be "
    "found (%(reason)s: %(message)s)"))
register("jobs.problem.image_invalid", _("the image name %(image)s is not valid (%(reason)s: "
                                         "%(message)s)"))
register("jobs.problem.image_denied", _("the registry refuses access to the image %(image)s "
                                        "(%(reason)s: %(message)s)"))
register("jobs.problem.image_pull", _("the image %(image)s cannot be pulled for now "
                                      "(%(reason)s: %(message)s)"))
register("jobs.problem.config", _("its containers cannot be created (%(reason)s: "
                                  "%(message)s)"))
register("jobs.problem.unschedulable", _("the scheduler cannot place its pods (%(reason)s: "
                                         "%(message)s)"))
register("jobs.problem.create_failed", _("the cluster refuses to create its pods "
                                         "(%(reason)s: %(message)s)"))
register("jobs.problem.notify", _("its pods cannot start: %(cause)s. %(next)s"))
register("jobs.problem.next.requeue", _(
    "Trainyard keeps trying until %(at)s (the pod-start deadline), then puts it back in the "
    "queue (attempt %(n)s of %(max)s)."))
register("jobs.problem.next.fail", _(
    "Trainyard keeps trying until %(at)s (the pod-start deadline), then fails it (attempt "
    "%(n)s of %(max)s, the last)."))
register("jobs.problem.next.wait", _("Trainyard keeps trying; no deadline is set."))
register("jobs.problem.next.fail_now", _(
    "Retrying cannot help, so it failed at once and its GPUs are free: fix the image, then "
    "clone and resubmit."))
register("jobs.problem.next.failed", _(
    "It failed at %(at)s and its GPUs are free: fix the cause, then clone and resubmit."))
register("jobs.problem.next.readmit", _(
    "Its pods did not start in time, so it is back in the queue; Trainyard tries again when "
    "it is admitted (attempt %(n)s of %(max)s)."))
register("jobs.transition.image_failed", _(
    "Its pods cannot start: %(cause)s. Retrying cannot help, so it failed at once and its "
    "GPUs are free; fix the image, then clone and resubmit."))
register("jobs.transition.maintenance", _(
    "maintenance window #%(window)s: freeing whole %(model)s nodes"))
register("jobs.hold.abnormal", _("Held from the cluster page: abnormal GPU use"))
register("jobs.hold.low_util", _("GPU utilisation %(u).0f%% since %(t)s"))
register("jobs.hold.long_run", _("running for %(d)s"))
register("jobs.duration.days", _("%(n).1f days"))

# -- Kueue mode (jobs.backends.kueue): Kueue's decisions in plain language ------------------

register("jobs.transition.kueue_admitted", _(
    "admitted by Kueue in queue %(queue)s on %(flavors)s"))
register("jobs.preempt.kueue", _(
    "Kueue evicted it (%(reason)s): %(message)s. It stops after its checkpoint grace and "
    "Kueue queues it again"))
register("jobs.preempt.admin", _("preempted by platform admin %(u)s: %(reason)s"))
register("jobs.wait.kueue.quota", _(
    "waiting for quota, %(n)s in Kueue's queue %(queue)s (%(message)s)"))
register("jobs.wait.kueue.never", _(
    "Kueue's queue %(queue)s can never hold it as it is: %(message)s"))
register("jobs.wait.kueue.preempting", _(
    "waiting for the jobs Kueue preempted for it to checkpoint and stop"))
register("jobs.wait.kueue.topology", _(
    "no single network domain has room for all its workers (%(message)s)"))
register("jobs.wait.kueue.other", _("waiting in Kueue's queue %(queue)s (%(reason)s: "
                                    "%(message)s)"))
register("jobs.wait.kueue.not_queued", _("waiting for Kueue to queue it"))
register("jobs.wait.kueue.backoff", _(
    "its pods did not start in time (%(n)s times so far): Kueue queues it again at %(at)s"))

# -- audit log (AuditEvent.text) -------------------------------------------------------------

register("jobs.audit.hold", _("held job %(job)s: %(reason)s"))
register("jobs.audit.release", _("released job %(job)s: %(reason)s"))
register("jobs.audit.preempt", _("preempted job %(job)s: %(reason)s"))
register("jobs.audit.priority", _("set priority of %(job)s to %(priority)s: %(reason)s"))
register("jobs.audit.defrag_schedule", ngettext_lazy(
    "scheduled a maintenance window freeing %(n)s whole %(model)s node at %(at)s",
    "scheduled a maintenance window freeing %(n)s whole %(model)s nodes at %(at)s", "n"))
register("jobs.audit.defrag_apply", ngettext_lazy(
    "opened the %(model)s maintenance window: moved %(n)s job, freeing %(nodes)s",
    "opened the %(model)s maintenance window: moved %(n)s jobs, freeing %(nodes)s", "n"))
register("jobs.audit.defrag_release", _(
    "closed the %(model)s maintenance window: uncordoned %(nodes)s"))
register("jobs.audit.defrag_cancel", _("cancelled %(model)s maintenance window #%(window)s"))

# -- JobTransition.reason: short codes (queries and metrics use them), shown as labels ------

TRANSITION_REASONS: dict[str, Any] = {
    "Submitted": pgettext_lazy("job transition", "Submitted"),
    "Admitted": pgettext_lazy("job transition", "Admitted"),
    "Running": pgettext_lazy("job transition", "Running"),
    "Succeeded": pgettext_lazy("job transition", "Succeeded"),
    "Failed": pgettext_lazy("job transition", "Failed"),
    "Preempted": pgettext_lazy("job transition", "Preempted"),
    "Requeued": pgettext_lazy("job transition", "Requeued"),
    "Cancelled": pgettext_lazy("job transition", "Cancelled"),
    "Rejected": pgettext_lazy("job transition", "Rejected"),
    "NotStarted": pgettext_lazy("job transition", "NotStarted"),
    "Unbuildable": pgettext_lazy("job transition", "Unbuildable"),
    "PoolAbsent": pgettext_lazy("job transition", "PoolAbsent"),
    "Evicted": pgettext_lazy("job transition", "Evicted"),
}


def transition_reason_label(code: str) -> str:
    """A transition's reason code in the active language; an unknown code as it is."""
    label = TRANSITION_REASONS.get(code)
    return str(label) if label is not None else code
