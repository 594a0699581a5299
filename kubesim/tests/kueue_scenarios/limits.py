"""borrowingLimit and lendingLimit."""

PT = "pkg/scheduler/preemption/preemption_test.go TestPreemption"


def _lend(name, lending):
    """TestPreemption's cohort "cohort-lend": cpu 6 with a lendingLimit."""
    return {"name": name, "cohort": "cohort-lend",
            "flavors": {"default": {"cpu": {"nominal": 6, "lendingLimit": lending}}},
            "preemption": {"withinClusterQueue": "LowerPriority",
                           "reclaimWithinCohort": "LowerPriority"}}


LEND = [_lend("lend1", 4), _lend("lend2", 2)]


def _wl(name, queue, cpu, priority=0):
    return {"name": name, "queue": queue, "priority": priority, "requests": {"cpu": cpu}}


SCENARIOS = [
    {
        "name": "lending-reclaim-quota-from-lender",
        "source": f"{PT} / 'reclaim quota from lender'",
        "clusterQueues": LEND,
        "admitted": [_wl("lend1-low", "lend1", 3, -1), _wl("lend2-mid", "lend2", 3),
                     _wl("lend2-high", "lend2", 4, 1)],
        "incoming": [_wl("in", "lend1", 3, 1)],
        "expect": {"preempted": {"lend2-mid": "InCohortReclamation"},
                   "admitted": {"lend1-low": "default", "lend2-high": "default",
                                "in": "default"},
                   "pending": {"lend2-mid": "WaitingForQuota"}},
    },
    {
        "name": "lending-preempt-from-all-queues",
        "source": f"{PT} / 'preempt from all ClusterQueues in cohort-lend'",
        "clusterQueues": LEND,
        "admitted": [_wl("lend1-low", "lend1", 3, -1), _wl("lend1-mid", "lend1", 2),
                     _wl("lend2-low", "lend2", 3, -1), _wl("lend2-mid", "lend2", 4)],
        "incoming": [_wl("in", "lend1", 4)],
        "expect": {"preempted": {"lend1-low": "InClusterQueue",
                                 "lend2-low": "InCohortReclamation"},
                   "admitted": {"lend1-mid": "default", "lend2-mid": "default",
                                "in": "default"},
                   "pending": {"lend1-low": "WaitingForQuota", "lend2-low": "WaitingForQuota"}},
    },
    {
        "name": "lending-limit-caps-requestable-quota",
        "source": f"{PT} / 'cannot preempt from other ClusterQueues if exceeds requestable "
                  "quota including lending limit'",
        "clusterQueues": LEND,
        "admitted": [_wl("lend2-low", "lend2", 10, -1)],
        "incoming": [_wl("in", "lend1", 9)],
        "expect": {"admitted": {"lend2-low": "default"},
                   "pending": {"in": None}},
    },
]
