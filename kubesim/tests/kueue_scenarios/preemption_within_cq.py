"""withinClusterQueue: LowerPriority, LowerOrNewerEqualPriority, Never."""

PT = "pkg/scheduler/preemption/preemption_test.go TestPreemption"
PI = "test/integration/singlecluster/scheduler/preemption_test.go"
# preemption_test.go (integration): lowPriority, midPriority, highPriority = -1, 0, 1
LOW, MID, HIGH = -1, 0, 1
# its "In a single ClusterQueue" queue
CQ = {"name": "cq", "flavors": {"alpha": {"cpu": 4}},
      "preemption": {"withinClusterQueue": "LowerOrNewerEqualPriority"}}

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
        "expect": {"preempted_messages": {"low": (
            "due to prioritization in the ClusterQueue; "
            "preemptor path: /standalone; preemptee path: /standalone")},
                   "preempted": {"low": "InClusterQueue"},
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
    {
        "name": "within-cq-some-free-quota-preempt-low-priority",
        "source": f"{PT} / 'some free quota, preempt low priority'",
        "flavors": FLAVORS, "clusterQueues": [STANDALONE],
        "admitted": [_wl("low", 1, -1), _wl("mid", 1, 0), _wl("high", 3, 1)],
        "incoming": [_wl("in", 2, 1)],
        "expect": {"preempted": {"low": "InClusterQueue"},
                   "admitted": {"in": "default", "mid": "default", "high": "default"},
                   "pending": {"low": "WaitingForQuota"}},
    },
    {
        "name": "within-cq-minimal-set-excludes-low-priority",
        "source": f"{PT} / 'minimal set excludes low priority'",
        "flavors": FLAVORS, "clusterQueues": [STANDALONE],
        "admitted": [_wl("low", 1, -1), _wl("mid", 2, 0), _wl("high", 3, 1)],
        "incoming": [_wl("in", 2, 1)],
        "expect": {"preempted": {"mid": "InClusterQueue"},
                   "admitted": {"in": "default", "low": "default", "high": "default"},
                   "pending": {"mid": "WaitingForQuota"}},
    },
    {
        "name": "within-cq-not-enough-low-priority-workloads",
        "source": f"{PT} / 'not enough low priority workloads'",
        "flavors": FLAVORS, "clusterQueues": [STANDALONE],
        "admitted": [_wl("low", 3, -1), _wl("mid", 3, 0)],
        "incoming": [_wl("in", 4, 0)],
        "expect": {"admitted": {"low": "default", "mid": "default"},
                   "pending": {"in": "WaitingForQuota"}},
    },
    {
        "name": "within-cq-never",
        # the "standalone" queue of TestPreemption with withinClusterQueue: Never (the
        # default): the same workloads as 'preempt lowest priority', nothing is preempted
        "source": f"{PT} / 'preempt lowest priority' with withinClusterQueue Never "
                  "(apis/kueue/v1beta2/clusterqueue_types.go default; preemption.go "
                  "classicalPreemptions: no candidates)",
        "flavors": FLAVORS,
        "clusterQueues": [{**STANDALONE, "preemption": {"withinClusterQueue": "Never"}}],
        "admitted": [_wl("low", 2, -1), _wl("mid", 2, 0), _wl("high", 2, 1)],
        "incoming": [_wl("in", 2, 1)],
        "expect": {"admitted": {"low": "default", "mid": "default", "high": "default"},
                   "pending": {"in": "WaitingForQuota"}},
    },
    {
        "name": "lower-or-newer-equal-preempts-lower-priority",
        "source": f"{PI} / In a single ClusterQueue / 'Should preempt Workloads with lower "
                  "priority when there is not enough quota'",
        "flavors": ["alpha"], "clusterQueues": [CQ],
        "admitted": [_wl("low-wl-1", 1, LOW, "cq"), _wl("low-wl-2", 1, LOW, "cq"),
                     _wl("mid-wl", 1, MID, "cq"), _wl("high-wl-1", 1, HIGH, "cq")],
        "incoming": [[_wl("low-wl-3", 1, LOW, "cq")], [_wl("high-wl-2", 2, HIGH, "cq")]],
        "expect": {"preempted": {"low-wl-1": "InClusterQueue", "low-wl-2": "InClusterQueue"},
                   "admitted": {"mid-wl": "alpha", "high-wl-1": "alpha", "high-wl-2": "alpha"},
                   "pending": {"low-wl-1": None, "low-wl-2": None, "low-wl-3": None}},
    },
    {
        "name": "lower-or-newer-equal-preempts-newer-same-priority",
        "source": f"{PI} / In a single ClusterQueue / 'Should preempt newer Workloads with the "
                  "same priority when there is not enough quota'",
        "flavors": ["alpha"], "clusterQueues": [CQ],
        "admitted": [_wl("wl-1", 1, LOW, "cq"), _wl("wl-2", 1, LOW, "cq")],
        "incoming": [[_wl("wl-3", 3, LOW, "cq")], [_wl("wl-4", 1, LOW, "cq")],
                     [{"finish": "wl-1"}]],
        "expect": {"preempted": {"wl-4": "InClusterQueue"},
                   "admitted": {"wl-2": "alpha", "wl-3": "alpha"},
                   "pending": {"wl-4": None}},
    },
]

