"""flavorFungibility: whenCanBorrow and whenCanPreempt (v1beta2 values MayStopSearch and
TryNextFlavor; v1beta1 called them Borrow/Preempt and TryNextFlavor). Defaults:
whenCanBorrow MayStopSearch, whenCanPreempt TryNextFlavor."""

ST = "test/integration/singlecluster/scheduler/scheduler_test.go"
INSTANCE = "cloud.provider.com/instance"
# scheduler_test.go's flavors
FLAVORS = [
    {"name": "on-demand", "nodeLabels": {INSTANCE: "on-demand"}},
    {"name": "spot-tainted", "nodeLabels": {INSTANCE: "spot-tainted"},
     "nodeTaints": [{"key": INSTANCE, "value": "spot-tainted", "effect": "NoSchedule"}]},
    {"name": "spot-untainted", "nodeLabels": {INSTANCE: "spot-untainted"}},
]
SPOT_TOLERATION = {"key": INSTANCE, "operator": "Equal", "value": "spot-tainted",
                   "effect": "NoSchedule"}


def _wl(name, queue, cpu, priority=0, **kw):
    return {"name": name, "queue": queue, "priority": priority, "requests": {"cpu": cpu}, **kw}


SCENARIOS = [
    {
        "name": "fungibility-try-next-flavor-if-cannot-preempt-on-first",
        "source": f"{ST} / Scheduler, Using cohorts for sharing unused resources / 'Should try "
                  "next flavor if can't preempt on first'",
        "flavors": FLAVORS,
        "clusterQueues": [{
            "name": "prod-cq", "cohort": "all", "queueingStrategy": "StrictFIFO",
            "flavors": {"on-demand": {"cpu": 2}, "spot-untainted": {"cpu": 2}},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "flavorFungibility": {"whenCanPreempt": "MayStopSearch"}}],
        "admitted": [_wl("wl-1", "prod-cq", 1, flavor="on-demand"),
                     _wl("wl-2", "prod-cq", 1, flavor="on-demand")],
        "incoming": [_wl("wl-3", "prod-cq", 1)],
        "expect": {"admitted": {"wl-1": "on-demand", "wl-2": "on-demand",
                                "wl-3": "spot-untainted"}},
    },
    {
        "name": "fungibility-try-next-flavor-instead-of-borrowing",
        "source": f"{ST} / Scheduler, Using cohorts for sharing unused resources / 'Should try "
                  "next flavor instead of borrowing'",
        "flavors": FLAVORS,
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 10, "borrowingLimit": 10}}}},
            {"name": "dev-cq", "cohort": "all",
             "flavorFungibility": {"whenCanBorrow": "TryNextFlavor"},
             "flavors": {"on-demand": {"cpu": {"nominal": 10, "borrowingLimit": 10}},
                         "spot-tainted": {"cpu": 11}}}],
        "admitted": [_wl("wl-1", "prod-cq", 9, flavor="on-demand")],
        "incoming": [_wl("wl-2", "dev-cq", 11, tolerations=[SPOT_TOLERATION])],
        "expect": {"admitted": {"wl-1": "on-demand", "wl-2": "spot-tainted"}},
    },
    {
        "name": "fungibility-borrow-stops-search-by-default",
        # the same queues with dev-cq's default whenCanBorrow (MayStopSearch): on-demand
        # fits by borrowing and the search stops there (flavorassigner.go
        # shouldTryNextFlavor; CRD default)
        "source": f"{ST} / 'Should try next flavor instead of borrowing', with the v1beta2 "
                  "default whenCanBorrow: MayStopSearch (apis/kueue/v1beta2/"
                  "clusterqueue_types.go FlavorFungibility)",
        "flavors": FLAVORS,
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 10, "borrowingLimit": 10}}}},
            {"name": "dev-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 10, "borrowingLimit": 10}},
                         "spot-tainted": {"cpu": 11}}}],
        "admitted": [_wl("wl-1", "prod-cq", 9, flavor="on-demand")],
        "incoming": [_wl("wl-2", "dev-cq", 11, tolerations=[SPOT_TOLERATION])],
        "expect": {"admitted": {"wl-1": "on-demand", "wl-2": "on-demand"}},
    },
    {
        "name": "fungibility-preempt-before-try-next-flavor",
        "source": f"{ST} / Scheduler, Using cohorts for sharing unused resources / 'Should "
                  "preempt before try next flavor'",
        "flavors": FLAVORS,
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 10, "borrowingLimit": 10}},
                         "spot-untainted": {"cpu": 11}},
             "preemption": {"reclaimWithinCohort": "Any"},
             "flavorFungibility": {"whenCanPreempt": "MayStopSearch"}},
            {"name": "dev-cq", "cohort": "all",
             "flavorFungibility": {"whenCanBorrow": "TryNextFlavor"},
             "flavors": {"on-demand": {"cpu": {"nominal": 10, "borrowingLimit": 10}}}}],
        "admitted": [_wl("wl-1", "dev-cq", 9, 0, flavor="on-demand"),
                     _wl("wl-2", "dev-cq", 9, 1, flavor="on-demand")],
        "incoming": [_wl("wl-3", "prod-cq", 5)],
        "expect": {"preempted": {"wl-1": "InCohortReclamation"},
                   "admitted": {"wl-2": "on-demand", "wl-3": "on-demand"},
                   "pending": {"wl-1": "WaitingForQuota"}},
    },
    {
        "name": "fungibility-preempt-tries-next-flavor-by-default",
        # the same with prod-cq's default whenCanPreempt (TryNextFlavor): spot-untainted fits
        # without preemption and is taken, nothing is preempted
        "source": f"{ST} / 'Should preempt before try next flavor', with the v1beta2 default "
                  "whenCanPreempt: TryNextFlavor (flavorassigner.go shouldTryNextFlavor)",
        "flavors": FLAVORS,
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 10, "borrowingLimit": 10}},
                         "spot-untainted": {"cpu": 11}},
             "preemption": {"reclaimWithinCohort": "Any"}},
            {"name": "dev-cq", "cohort": "all",
             "flavorFungibility": {"whenCanBorrow": "TryNextFlavor"},
             "flavors": {"on-demand": {"cpu": {"nominal": 10, "borrowingLimit": 10}}}}],
        "admitted": [_wl("wl-1", "dev-cq", 9, 0, flavor="on-demand"),
                     _wl("wl-2", "dev-cq", 9, 1, flavor="on-demand")],
        "incoming": [_wl("wl-3", "prod-cq", 5)],
        "expect": {"admitted": {"wl-1": "on-demand", "wl-2": "on-demand",
                                "wl-3": "spot-untainted"}},
    },
    {
        "name": "fungibility-discard-flavor-where-preemption-is-impossible",
        "source": f"{ST} / Scheduler, Using multiple flavours / Multiple flavors can be "
                  "considered for preemption / 'finds correct flavor by discarding the first "
                  "one in which preemption is not possible'",
        "flavors": ["f1", "f2"],
        "clusterQueues": [
            {"name": name, "cohort": "cohort",
             "flavorFungibility": {"whenCanBorrow": "TryNextFlavor",
                                   "whenCanPreempt": "TryNextFlavor"},
             "preemption": {"withinClusterQueue": "LowerPriority",
                            "reclaimWithinCohort": "Any",
                            "borrowWithinCohort": {"policy": "LowerPriority"}},
             "flavors": {"f1": {"cpu": f1}, "f2": {"cpu": f2}}}
            for name, f1, f2 in (("cq1", 0, 1), ("cq2", 1, 0))],
        "admitted": [_wl("cq1-low", "cq1", 1, 0, flavor="f2"),
                     _wl("cq1-high", "cq1", 1, 9999, flavor="f1")],
        "incoming": [_wl("cq2-middle", "cq2", 1, 105)],
        # cq2-middle reclaims f1 from cq1-high; cq1-high, requeued, then preempts cq1-low
        # in its own queue and is admitted on f2
        "expect": {"preempted": {"cq1-high": "InCohortReclamation",
                                 "cq1-low": "InClusterQueue"},
                   "admitted": {"cq2-middle": "f1", "cq1-high": "f2"},
                   "pending": {"cq1-low": "WaitingForQuota"}},
    },
]
