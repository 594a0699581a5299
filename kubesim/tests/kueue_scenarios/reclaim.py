"""reclaimWithinCohort (Any, LowerPriority, Never) and preemption across a cohort."""

PT = "pkg/scheduler/preemption/preemption_test.go TestPreemption"
PI = "test/integration/singlecluster/scheduler/preemption_test.go"
LOW, MID, HIGH = -1, 0, 1  # its lowPriority, midPriority, highPriority
ANY = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
# its "In a ClusterQueue that is part of a cohort" queues
ABG = [{"name": "alpha-cq", "cohort": "all", "flavors": {"alpha": {"cpu": 2}}, "preemption": ANY},
       {"name": "beta-cq", "cohort": "all", "flavors": {"alpha": {"cpu": 2}}},
       {"name": "gamma-cq", "cohort": "all", "flavors": {"alpha": {"cpu": 2}}, "preemption": ANY}]


def _cohort_cq(name, cohort, within, reclaim, borrowing=True):
    """TestPreemption's c1/c2 (cpu 6 borrowingLimit 6, memory 3Gi borrowingLimit 3Gi) and
    d1/d2 (the same without borrowingLimit)."""
    if borrowing:
        res = {"cpu": {"nominal": 6, "borrowingLimit": 6},
               "memory": {"nominal": "3Gi", "borrowingLimit": "3Gi"}}
    else:
        res = {"cpu": 6, "memory": "3Gi"}
    return {"name": name, "cohort": cohort, "flavors": {"default": res},
            "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim}}


C1 = _cohort_cq("c1", "cohort", "LowerPriority", "LowerPriority")
C2 = _cohort_cq("c2", "cohort", "Never", "Any")
D1 = _cohort_cq("d1", "cohort-no-limits", "LowerPriority", "LowerPriority", borrowing=False)
D2 = _cohort_cq("d2", "cohort-no-limits", "Never", "Any", borrowing=False)
L1 = {"name": "l1", "cohort": "legion",
      "flavors": {"default": {"cpu": {"nominal": 6, "borrowingLimit": 12},
                              "memory": {"nominal": "3Gi", "borrowingLimit": "6Gi"}}},
      "preemption": {"withinClusterQueue": "LowerPriority",
                     "reclaimWithinCohort": "LowerPriority"}}


def _three(name, preemption=None):
    q = {"name": name, "cohort": "cohort-three", "flavors": {"default": {"cpu": 2, "memory": 2}}}
    if preemption:
        q["preemption"] = preemption
    return q


THREE = [_three("a", {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
         _three("b"), _three("c")]


def _wl(name, queue, cpu, priority=0, **req):
    return {"name": name, "queue": queue, "priority": priority,
            "requests": {"cpu": cpu, **req}}


SCENARIOS = [
    {
        "name": "reclaim-quota-from-borrower",
        "source": f"{PT} / 'reclaim quota from borrower'",
        "clusterQueues": [C1, C2],
        "admitted": [_wl("c1-low", "c1", 3, -1), _wl("c2-mid", "c2", 3),
                     _wl("c2-high", "c2", 6, 1)],
        "incoming": [_wl("in", "c1", 3, 1)],
        "expect": {"preempted_messages": {"c2-mid": (
            "due to reclamation within the cohort; "
            "preemptor path: /cohort/c1; preemptee path: /cohort/c2")},
                   "preempted": {"c2-mid": "InCohortReclamation"},
                   "admitted": {"c1-low": "default", "c2-high": "default", "in": "default"},
                   "pending": {"c2-mid": "WaitingForQuota"}},
    },
    {
        "name": "reclaim-no-workloads-borrowing",
        "source": f"{PT} / 'no workloads borrowing'",
        "clusterQueues": [C1, C2],
        "admitted": [_wl("c1-high", "c1", 4, 1), _wl("c2-low-1", "c2", 4, -1)],
        "incoming": [_wl("in", "c1", 4, 1)],
        # c1 needs 8 > its nominal 6 and c2 is within its nominal: nothing to reclaim,
        # and the cohort has 4 free of 12: it borrows (Kueue's test forces Preempt mode; the
        # scheduler finds it fits by borrowing)
        "expect": {"admitted": {"c1-high": "default", "c2-low-1": "default", "in": "default"}},
    },
    {
        "name": "reclaim-not-enough-workloads-borrowing",
        "source": f"{PT} / 'not enough workloads borrowing'",
        "clusterQueues": [C1, C2],
        "admitted": [_wl("c1-high", "c1", 4, 1), _wl("c2-low-1", "c2", 4, -1),
                     _wl("c2-low-2", "c2", 4, -1)],
        "incoming": [_wl("in", "c1", 4, 1)],
        "expect": {"admitted": {"c1-high": "default", "c2-low-1": "default",
                                "c2-low-2": "default"},
                   "pending": {"in": "WaitingForQuota"}},
    },
    {
        "name": "preempt-locally-borrowing-other-resource-without-cohort-candidates",
        "source": f"{PT} / 'preempting locally and borrowing other resources in cohort, "
                  "without cohort candidates'",
        "clusterQueues": [C1, C2],
        "admitted": [_wl("c1-low", "c1", 4, -1), _wl("c2-low-1", "c2", 4, -1),
                     _wl("c2-high-2", "c2", 4, 1)],
        "incoming": [_wl("in", "c1", 4, 1, memory="5Gi")],
        "expect": {"preempted": {"c1-low": "InClusterQueue"},
                   "admitted": {"c2-low-1": "default", "c2-high-2": "default",
                                "in": "default"},
                   "pending": {"c1-low": "WaitingForQuota"}},
    },
    {
        "name": "preempt-locally-borrowing-same-resource",
        "source": f"{PT} / 'preempting locally and borrowing same resource in cohort'",
        "clusterQueues": [C1, C2],
        "admitted": [_wl("c1-med", "c1", 4, 0), _wl("c1-low", "c1", 4, -1),
                     _wl("c2-low-1", "c2", 4, -1)],
        "incoming": [_wl("in", "c1", 4, 1)],
        "expect": {"preempted": {"c1-low": "InClusterQueue"},
                   "admitted": {"c1-med": "default", "c2-low-1": "default", "in": "default"},
                   "pending": {"c1-low": "WaitingForQuota"}},
    },
    {
        "name": "preempt-locally-borrowing-same-resource-no-borrowing-limit",
        "source": f"{PT} / 'preempting locally and borrowing same resource in cohort; no "
                  "borrowing limit in the cohort'",
        "clusterQueues": [D1, D2],
        "admitted": [_wl("d1-med", "d1", 4, 0), _wl("d1-low", "d1", 4, -1),
                     _wl("d2-low-1", "d2", 4, -1)],
        "incoming": [_wl("in", "d1", 4, 1)],
        "expect": {"preempted": {"d1-low": "InClusterQueue"},
                   "admitted": {"d1-med": "default", "d2-low-1": "default", "in": "default"},
                   "pending": {"d1-low": "WaitingForQuota"}},
    },
    {
        "name": "preempt-locally-borrowing-other-resource-with-cohort-candidates",
        "source": f"{PT} / 'preempting locally and borrowing other resources in cohort, "
                  "with cohort candidates'",
        "clusterQueues": [C1, C2],
        "admitted": [_wl("c1-med", "c1", 4, 0), _wl("c2-low-1", "c2", 5, -1),
                     _wl("c2-low-2", "c2", 1, -1), _wl("c2-low-3", "c2", 1, -1)],
        "incoming": [_wl("in", "c1", 2, 1, memory="5Gi")],
        "withdraw_preempted": True,
        "expect": {"preempted": {"c1-med": "InClusterQueue"},
                   "admitted": {"c2-low-1": "default", "c2-low-2": "default",
                                "c2-low-3": "default", "in": "default"}},
    },
    {
        "name": "preempt-locally-not-borrowing-in-one-queue-cohort",
        "source": f"{PT} / 'preempting locally and not borrowing same resource in 1-queue "
                  "cohort'",
        "clusterQueues": [L1],
        "admitted": [_wl("l1-med", "l1", 4, 0), _wl("l1-low", "l1", 2, -1)],
        "incoming": [_wl("in", "l1", 4, 1)],
        "expect": {"preempted": {"l1-med": "InClusterQueue"},
                   "admitted": {"l1-low": "default", "in": "default"},
                   "pending": {"l1-med": "WaitingForQuota"}},
    },
    {
        "name": "reclaim-lower-priority-not-same-priority",
        "source": f"{PT} / 'do not reclaim borrowed quota from same priority for "
                  "withinCohort=ReclaimFromLowerPriority'",
        "clusterQueues": [C1, C2],
        "admitted": [_wl("c1", "c1", 2), _wl("c2-1", "c2", 4), _wl("c2-2", "c2", 4)],
        "incoming": [_wl("in", "c1", 4)],
        "expect": {"admitted": {"c1": "default", "c2-1": "default", "c2-2": "default"},
                   "pending": {"in": "WaitingForQuota"}},
    },
    {
        "name": "reclaim-any-same-priority",
        "source": f"{PT} / 'reclaim borrowed quota from same priority for "
                  "withinCohort=ReclaimFromAny'",
        "clusterQueues": [C1, C2],
        "admitted": [_wl("c1-1", "c1", 4), _wl("c1-2", "c1", 4, 1), _wl("c2", "c2", 2)],
        "incoming": [_wl("in", "c2", 4)],
        "expect": {"preempted": {"c1-1": "InCohortReclamation"},
                   "admitted": {"c1-2": "default", "c2": "default", "in": "default"},
                   "pending": {"c1-1": "WaitingForQuota"}},
    },
    {
        "name": "preempt-from-all-cluster-queues-in-cohort",
        "source": f"{PT} / 'preempt from all ClusterQueues in cohort'",
        "clusterQueues": [C1, C2],
        "admitted": [_wl("c1-low", "c1", 3, -1), _wl("c1-mid", "c1", 2),
                     _wl("c2-low", "c2", 3, -1), _wl("c2-mid", "c2", 4)],
        "incoming": [_wl("in", "c1", 4)],
        "expect": {"preempted": {"c1-low": "InClusterQueue", "c2-low": "InCohortReclamation"},
                   "admitted": {"c1-mid": "default", "c2-mid": "default", "in": "default"},
                   "pending": {"c1-low": "WaitingForQuota", "c2-low": "WaitingForQuota"}},
    },
    {
        "name": "exhausted-target-queue-single-resource",
        "source": f"{PT} / 'preemptions from cq when target queue is exhausted for the single "
                  "requested resource'",
        "clusterQueues": THREE,
        "admitted": [_wl("a1", "a", 1, -2), _wl("a2", "a", 1, -2), _wl("a3", "a", 1, -1),
                     _wl("b1", "b", 1), _wl("b2", "b", 1), _wl("b3", "b", 1)],
        "incoming": [_wl("in", "a", 2)],
        "expect": {"preempted_messages": {"a1": (
            "due to prioritization in the ClusterQueue; "
            "preemptor path: /cohort-three/a; preemptee path: /cohort-three/a")},
                   "preempted": {"a1": "InClusterQueue", "a2": "InClusterQueue"},
                   "admitted": {"a3": "default", "b1": "default", "b2": "default",
                                "b3": "default", "in": "default"},
                   "pending": {"a1": "WaitingForQuota", "a2": "WaitingForQuota"}},
    },
    {
        "name": "exhausted-target-queue-two-resources",
        "source": f"{PT} / 'preemptions from cq when target queue is exhausted for two "
                  "requested resources'",
        "clusterQueues": THREE,
        "admitted": [_wl("a1", "a", 1, -2, memory=1), _wl("a2", "a", 1, -2, memory=1),
                     _wl("a3", "a", 1, -1, memory=1), _wl("b1", "b", 1, memory=1),
                     _wl("b2", "b", 1, memory=1), _wl("b3", "b", 1, memory=1)],
        "incoming": [_wl("in", "a", 2, memory=2)],
        "expect": {"preempted": {"a1": "InClusterQueue", "a2": "InClusterQueue"},
                   "admitted": {"a3": "default", "b1": "default", "b2": "default",
                                "b3": "default", "in": "default"},
                   "pending": {"a1": "WaitingForQuota", "a2": "WaitingForQuota"}},
    },
    {
        "name": "exhausted-target-queue-one-of-two-resources",
        "source": f"{PT} / 'preemptions from cq when target queue is exhausted for one "
                  "requested resource, but not the other'",
        "clusterQueues": THREE,
        "admitted": [_wl("a1", "a", 1, -2), _wl("a2", "a", 1, -2), _wl("a3", "a", 1, -1),
                     _wl("b1", "b", 1), _wl("b2", "b", 1), _wl("b3", "b", 1)],
        "incoming": [_wl("in", "a", 2, memory=2)],
        "expect": {"preempted": {"a1": "InClusterQueue", "a2": "InClusterQueue"},
                   "admitted": {"a3": "default", "b1": "default", "b2": "default",
                                "b3": "default", "in": "default"},
                   "pending": {"a1": "WaitingForQuota", "a2": "WaitingForQuota"}},
    },
    {
        "name": "target-queue-not-exhausted-preempts-in-cohort-too",
        "source": f"{PT} / 'allow preemption from other cluster queues if target cq is not "
                  "exhausted for the requested resource'",
        "clusterQueues": THREE,
        "admitted": [_wl("a1", "a", 1, -1), _wl("b1", "b", 1), _wl("b2", "b", 1),
                     _wl("b3", "b", 1), _wl("b4", "b", 1), _wl("b5", "b", 1, -1)],
        "incoming": [_wl("in", "a", 2)],
        "expect": {"preempted": {"a1": "InClusterQueue", "b5": "InCohortReclamation"},
                   "admitted": {"b1": "default", "b2": "default", "b3": "default",
                                "b4": "default", "in": "default"},
                   "pending": {"a1": "WaitingForQuota", "b5": "WaitingForQuota"}},
    },
    {
        "name": "cohort-reclaim-while-under-nominal",
        "source": f"{PI} / In a ClusterQueue that is part of a cohort / 'Should preempt "
                  "Workloads in the cohort borrowing quota, when the ClusterQueue is using less "
                  "than nominal quota'",
        "flavors": ["alpha"], "clusterQueues": ABG,
        "admitted": [_wl("alpha-low", "alpha-cq", 1, LOW), _wl("beta-mid", "beta-cq", 1, MID),
                     _wl("beta-high", "beta-cq", 4, HIGH)],
        "incoming": [_wl("alpha-mid", "alpha-cq", 2, MID)],
        "expect": {"preempted": {"alpha-low": "InClusterQueue",
                                 "beta-mid": "InCohortReclamation"},
                   "admitted": {"alpha-mid": "alpha", "beta-high": "alpha"},
                   "pending": {"alpha-low": None, "beta-mid": None}},
    },
    {
        "name": "cohort-reclaim-then-readmitted-after-finish",
        "source": f"{PI} / 'Should preempt Workloads in the cohort borrowing quota, when the "
                  "ClusterQueue is using less than nominal quota' (after alpha-mid finishes)",
        "flavors": ["alpha"], "clusterQueues": ABG,
        "admitted": [_wl("alpha-low", "alpha-cq", 1, LOW), _wl("beta-mid", "beta-cq", 1, MID),
                     _wl("beta-high", "beta-cq", 4, HIGH)],
        "incoming": [[_wl("alpha-mid", "alpha-cq", 2, MID)], [{"finish": "alpha-mid"}]],
        "expect": {"preempted": {"alpha-low": "InClusterQueue",
                                 "beta-mid": "InCohortReclamation"},
                   "admitted": {"alpha-low": "alpha", "beta-mid": "alpha",
                                "beta-high": "alpha"}},
    },
    {
        "name": "cohort-no-reclaim-when-preemptor-must-borrow",
        "source": f"{PI} / In a ClusterQueue that is part of a cohort / 'Should not preempt "
                  "Workloads in the cohort, if the ClusterQueue requires borrowing'",
        "flavors": ["alpha"], "clusterQueues": ABG,
        "admitted": [_wl("alpha-high-1", "alpha-cq", 2, HIGH), _wl("beta-low", "beta-cq", 4, LOW)],
        "incoming": [_wl("alpha-high-2", "alpha-cq", 2, HIGH)],
        "expect": {"admitted": {"alpha-high-1": "alpha", "beta-low": "alpha"},
                   "pending": {"alpha-high-2": None}},
    },
    {
        "name": "reclaim-never",
        # TestPreemption's 'reclaim quota from borrower' with c1's policies Never: c1 is
        # within its nominal quota but may not reclaim; nothing is preempted
        "source": f"{PT} / 'reclaim quota from borrower' with reclaimWithinCohort and "
                  "withinClusterQueue Never (the defaults; preemption.go: no candidates)",
        "clusterQueues": [{**C1, "preemption": {"withinClusterQueue": "Never",
                                                "reclaimWithinCohort": "Never"}}, C2],
        "admitted": [_wl("c1-low", "c1", 3, -1), _wl("c2-mid", "c2", 3),
                     _wl("c2-high", "c2", 6, 1)],
        "incoming": [_wl("in", "c1", 3, 1)],
        "expect": {"admitted": {"c1-low": "default", "c2-mid": "default", "c2-high": "default"},
                   "pending": {"in": "WaitingForQuota"}},
    },
]

