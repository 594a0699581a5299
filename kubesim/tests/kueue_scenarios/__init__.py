"""Kueue's own test scenarios, transcribed as data (facts only) for kubesim's Kueue controller.

Each topic module holds ``SCENARIOS``, a list of plain dicts run by
``kubesim/tests/test_kueue_scenarios.py``. The format (every key but ``name``, ``source``,
``clusterQueues`` and ``expect`` is optional):

``name``
    unique id (the pytest id).
``source``
    the Kueue file on ``main`` and the test (Go test function and table entry, or the
    ``ginkgo.It`` text, or the docs page) the facts come from.
``flavors``
    ResourceFlavor names, or dicts ``{"name", "nodeLabels", "nodeTaints"}``; default
    ``["default"]``.
``cohorts``
    Cohort objects: ``{"name", "parentName", "quota": {flavor: {resource: q}}}`` (own quota,
    hierarchical cohorts). A cohort named only by a ClusterQueue's ``cohort`` needs no entry.
``clusterQueues``
    ``{"name", "cohort", "flavors": {flavor: {resource: q | {"nominal", "borrowingLimit",
    "lendingLimit"}}}, "resourceGroups": [<flavors>, ...] (instead of ``flavors``, several
    groups), "preemption": {...} (as the API), "queueingStrategy", "flavorFungibility",
    "namespaceSelector"}``. A LocalQueue of the same name is made for each in namespace
    ``sc`` (and in each namespace of ``namespaces``).
``namespaces``
    extra namespaces ``{name: labels}``.
``admitted``
    workloads set up first, one at a time, each run until admitted (at ``flavor`` if given),
    as the Go tests start with workloads that hold quota.
``incoming``
    workloads created together after the set-up, in list order (older first), or a list of
    such lists created one after another (each run until stable before the next). An
    entry ``{"finish": name}`` ends that workload's job instead (its quota is released;
    it is not expected at the end).
    A workload: ``{"name", "queue" (LocalQueue = ClusterQueue name), "priority" (int),
    "requests": {resource: q} (per pod), "count" (pods, default 1), "podsets": [{"name",
    "count", "requests"}] (instead of requests/count, up to two: master, worker),
    "namespace", "tolerations", "nodeSelector" (pins a set-up workload to a flavor with
    those ``nodeLabels``), "flavor" (for ``admitted``: the flavor expected)}``.
``expect``
    after everything settled:
    ``admitted``: {workload: flavor | None}, every workload admitted at the end;
    ``pending``: {workload: reason | [reason, message substring] | None | "NoCondition"
    (no ``QuotaReserved`` condition at all: never tried)};
    ``unchecked``: workloads whose end state Kueue's test does not state;
    ``preempted``: {workload: Preempted condition reason}, every workload preempted on the way
    (any other workload must never have been preempted);
    ``preempted_messages``: {workload: a part of its ``Preempted`` message} (Kueue's
    message names the preemptor's UID, which differs; the reason and paths are compared).
``withdraw_preempted``
    true: a workload seen preempted has its job deleted at once (the Go unit tests look at
    one preemption round; without this the requeued workload could preempt in turn, which
    the test does not state). Withdrawn workloads are listed under ``preempted`` only.
``xfail``
    a reason: kubesim disagrees with Kueue here and is not fixed yet.
"""

from __future__ import annotations

from importlib import import_module

TOPICS = ("preemption_within_cq", "reclaim", "borrow_within_cohort", "limits",
          "hierarchical", "queueing", "fungibility")


def all_scenarios() -> list[dict]:
    out: list[dict] = []
    for topic in TOPICS:
        try:
            mod = import_module(f"{__name__}.{topic}")
        except ModuleNotFoundError:
            continue
        for sc in mod.SCENARIOS:
            out.append({**sc, "topic": topic})
    return out
