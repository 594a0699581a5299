"""withinClusterQueue: LowerPriority, LowerOrNewerEqualPriority, Never."""

PT = "pkg/scheduler/preemption/preemption_test.go TestPreemption"

# TestPreemption's "standalone" ClusterQueue (defaultClusterQueues)
STANDALONE = {
    "name": "standalone",
    "resourceGroups": [{"default": {"cpu": 6}}, {"alpha": {"memory": "3Gi"},
                                                 "beta": {"memory": "3Gi"}}],
    "preemption": {"withinClusterQueue": "LowerPriority"},
}
FLAVORS = ["default", "alpha", "beta"]


def _wl(name, cpu, priority=0, queue="standalone", **kw):
    return {"name": name, "queue": queue, "priority": priority, "requests": {"cpu": cpu}, **kw}


SCENARIOS = [
    {
        "name": "within-cq-preempt-lowest-priority",
        "source": f"{PT} / 'preempt lowest priority'",
        "flavors": FLAVORS, "clusterQueues": [STANDALONE],
        "admitted": [_wl("low", 2, -1), _wl("mid", 2, 0), _wl("high", 2, 1)],
        "incoming": [_wl("in", 2, 1)],
        "expect": {"preempted": {"low": "InClusterQueue"},
                   "admitted": {"in": "default", "mid": "default", "high": "default"},
                   "pending": {"low": "WaitingForQuota"}},
    },
    {
        "name": "within-cq-preempt-multiple",
        "source": f"{PT} / 'preempt multiple'",
        "flavors": FLAVORS, "clusterQueues": [STANDALONE],
        "admitted": [_wl("low", 2, -1), _wl("mid", 2, 0), _wl("high", 2, 1)],
        "incoming": [_wl("in", 3, 1)],
        "expect": {"preempted": {"low": "InClusterQueue", "mid": "InClusterQueue"},
                   "admitted": {"in": "default", "high": "default"},
                   "pending": {"low": "WaitingForQuota", "mid": "WaitingForQuota"}},
    },
    {
        "name": "within-cq-no-preemption-for-low-priority",
        "source": f"{PT} / 'no preemption for low priority'",
        "flavors": FLAVORS, "clusterQueues": [STANDALONE],
        "admitted": [_wl("low", 3, -1), _wl("mid", 3, 0)],
        "incoming": [_wl("in", 1, -1)],
        "expect": {"admitted": {"low": "default", "mid": "default"},
                   "pending": {"in": ["WaitingForQuota",
                                      "insufficient unused quota for cpu in flavor default"]}},
    },
]
