"""borrowWithinCohort (policy LowerPriority, maxPriorityThreshold)."""

PT = "pkg/scheduler/preemption/preemption_test.go TestPreemption"


def _shared(name, nominal, borrowing, within, reclaim):
    """TestPreemption's cohort "with-shared-cq": borrowWithinCohort LowerPriority with
    maxPriorityThreshold 0 on the four queues, and "shared" (cpu 10) that lends. Kueue's
    unit test names them a_standard ...; object names take "-" here."""
    return {"name": name, "cohort": "with-shared-cq",
            "flavors": {"default": {"cpu": {"nominal": nominal, "borrowingLimit": borrowing}}},
            "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim,
                           "borrowWithinCohort": {"policy": "LowerPriority",
                                                  "maxPriorityThreshold": 0}}}


SHARED = [
    _shared("a-standard", 1, 12, "Never", "LowerPriority"),
    _shared("b-standard", 1, 12, "LowerPriority", "Any"),
    _shared("a-best-effort", 1, 12, "Never", "LowerPriority"),
    _shared("b-best-effort", 0, 13, "Never", "LowerPriority"),
    {"name": "shared", "cohort": "with-shared-cq", "flavors": {"default": {"cpu": 10}}},
]


def _wl(name, queue, cpu, priority=0):
    return {"name": name, "queue": queue, "priority": priority, "requests": {"cpu": cpu}}


SCENARIOS = [
    {
        "name": "bwc-preempt-lower-priority-in-other-queue-while-borrowing",
        "source": f"{PT} / 'use BorrowWithinCohort; allow preempting a lower-priority "
                  "workload from another ClusterQueue while borrowing'",
        "clusterQueues": SHARED,
        "admitted": [_wl("a-best-effort-low", "a-best-effort", 10, -1),
                     _wl("b-best-effort-low", "b-best-effort", 1, -1)],
        "incoming": [_wl("in", "a-standard", 10)],
        "expect": {"preempted_messages": {"a-best-effort-low": (
            "due to reclamation within the cohort while borrowing; "
            "preemptor path: /with-shared-cq/a-standard; "
            "preemptee path: /with-shared-cq/a-best-effort")},
                   "preempted": {"a-best-effort-low": "InCohortReclaimWhileBorrowing"},
                   "admitted": {"b-best-effort-low": "default", "in": "default"},
                   "pending": {"a-best-effort-low": "WaitingForQuota"}},
    },
    {
        "name": "bwc-no-preemption-above-threshold-when-still-borrowing",
        "source": f"{PT} / 'use BorrowWithinCohort; don't allow preempting a lower-priority "
                  "workload with priority above MaxPriorityThreshold, if borrowing is required "
                  "even after the preemption'",
        "clusterQueues": SHARED,
        "admitted": [_wl("b-standard", "b-standard", 10, 1)],
        "incoming": [_wl("in", "a-standard", 10, 2)],
        "expect": {"admitted": {"b-standard": "default"},
                   "pending": {"in": "WaitingForQuota"}},
    },
    {
        "name": "bwc-preempt-above-threshold-when-not-borrowing-after",
        "source": f"{PT} / 'use BorrowWithinCohort; allow preempting a lower-priority workload "
                  "with priority above MaxPriorityThreshold, if borrowing is not required after "
                  "the preemption'",
        "clusterQueues": SHARED,
        "admitted": [_wl("b-standard", "b-standard", 13, 1)],
        "incoming": [_wl("in", "a-standard", 1, 2)],
        "expect": {"preempted": {"b-standard": "InCohortReclamation"},
                   "admitted": {"in": "default"},
                   "pending": {"b-standard": "WaitingForQuota"}},
    },
    {
        "name": "bwc-never-within-the-same-queue",
        "source": f"{PT} / 'use BorrowWithinCohort; don't allow for preemption of "
                  "lower-priority workload from the same ClusterQueue'",
        "clusterQueues": SHARED,
        "admitted": [_wl("a-standard", "a-standard", 13, 1)],
        "incoming": [_wl("in", "a-standard", 1, 2)],
        "expect": {"admitted": {"a-standard": "default"},
                   "pending": {"in": "WaitingForQuota"}},
    },
    {
        "name": "bwc-only-own-queue-when-none-below-threshold",
        "source": f"{PT} / 'use BorrowWithinCohort; only preempt from CQ if no workloads below "
                  "threshold and already above nominal'",
        "clusterQueues": SHARED,
        "admitted": [_wl("a-standard-1", "a-standard", 10, 1),
                     _wl("a-standard-2", "a-standard", 1, 1),
                     _wl("b-standard-1", "b-standard", 1, 1),
                     _wl("b-standard-2", "b-standard", 1, 2)],
        "incoming": [_wl("in", "b-standard", 1, 3)],
        "expect": {"preempted": {"b-standard-1": "InClusterQueue"},
                   "admitted": {"a-standard-1": "default", "a-standard-2": "default",
                                "b-standard-2": "default", "in": "default"},
                   "pending": {"b-standard-1": "WaitingForQuota"}},
    },
    {
        "name": "bwc-preempt-own-queue-and-below-threshold-elsewhere",
        "source": f"{PT} / 'use BorrowWithinCohort; preempt from CQ and from other CQs with "
                  "workloads below threshold'",
        "clusterQueues": SHARED,
        "admitted": [_wl("b-standard-high", "b-standard", 10, 2),
                     _wl("b-standard-mid", "b-standard", 1, 1),
                     _wl("a-best-effort-low", "a-best-effort", 1, -1),
                     _wl("a-best-effort-lower", "a-best-effort", 1, -2)],
        "incoming": [_wl("in", "b-standard", 2, 2)],
        "expect": {"preempted": {"a-best-effort-lower": "InCohortReclaimWhileBorrowing",
                                 "b-standard-mid": "InClusterQueue"},
                   "admitted": {"b-standard-high": "default", "a-best-effort-low": "default",
                                "in": "default"},
                   "pending": {"a-best-effort-lower": "WaitingForQuota",
                               "b-standard-mid": "WaitingForQuota"}},
    },
]
