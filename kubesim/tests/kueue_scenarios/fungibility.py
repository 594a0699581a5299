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


RB = "pkg/scheduler/flavorassigner/flavorassigner_test.go TestReclaimBeforePriorityPreemption"
GPU = "example.com/gpu"


def _reclaim_first(case, test_gpu, other_gpu, fungibility, want, preempted, cpu_usage=None):
    """TestReclaimBeforePriorityPreemption: test-clusterqueue provides flavors uno, due and
    tre (10 compute and 10 gpu each) to its cohort; other-clusterqueue has none. The test
    sets each queue's usage and stubs the preemption oracle; here the usage is workloads of
    priority 0 pinned to their flavor (flavors with nodeLabels, workloads with a
    nodeSelector), the incoming workload has priority 10, and kubesim's own oracle runs.
    "compute" is cpu here, "gpu" is example.com/gpu."""
    flavors = [{"name": f, "nodeLabels": {"example.com/flavor": f}} for f in ("uno", "due",
                                                                              "tre")]
    res = {"cpu": 10, GPU: 10}
    queues = [
        {"name": "test-clusterqueue", "cohort": "cohort",
         "preemption": {"withinClusterQueue": "LowerPriority",
                        "reclaimWithinCohort": "LowerPriority"},
         "flavorFungibility": fungibility or {"whenCanPreempt": "TryNextFlavor"},
         "flavors": {f: dict(res) for f in ("uno", "due", "tre")}},
        {"name": "other-clusterqueue", "cohort": "cohort",
         "flavors": {f: {"cpu": 0, GPU: 0} for f in ("uno", "due", "tre")}}]
    setup = []
    cpu_usage = cpu_usage or {}
    for f in ("uno", "due", "tre"):
        req = {k: v for k, v in (("cpu", cpu_usage.get(f)), (GPU, test_gpu.get(f))) if v}
        if req:
            setup.append({"name": f"test-{f}", "queue": "test-clusterqueue", "priority": 0,
                          "requests": req, "nodeSelector": {"example.com/flavor": f},
                          "flavor": f})
    for f, n in other_gpu.items():
        setup.append({"name": f"other-{f}", "queue": "other-clusterqueue", "priority": 0,
                      "requests": {GPU: n}, "nodeSelector": {"example.com/flavor": f},
                      "flavor": f})
    incoming = {"name": "in", "queue": "test-clusterqueue", "priority": 10,
                "requests": {GPU: 10, **({"cpu": 10} if cpu_usage else {})}}
    names = [w["name"] for w in setup]
    expect: dict = {"admitted": dict.fromkeys(names) | {"in": want}}
    if preempted:
        expect["preempted"] = {preempted[0]: preempted[1]}
        del expect["admitted"][preempted[0]]
        expect["pending"] = {preempted[0]: "WaitingForQuota"}
    slug = case.lower().replace(",", "").replace(" ", "-")
    return {"name": f"reclaim-before-priority-{slug}", "source": f"{RB} / '{case}'",
            "flavors": flavors, "clusterQueues": queues, "admitted": setup,
            "incoming": [incoming], "expect": expect}


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
    *[_reclaim_first(*case) for case in (
        ("Select first flavor which fits", {"uno": 1}, {"due": 1}, None, "tre", None),
        ("Select first flavor where gpu reclamation is possible", {"uno": 1},
         {"due": 1, "tre": 1}, None, "due", ("other-due", "InCohortReclamation")),
        ("Select first flavor when flavor fungibility is disabled", {"uno": 1},
         {"due": 1, "tre": 1}, {"whenCanPreempt": "MayStopSearch"}, "uno",
         ("test-uno", "InClusterQueue")),
        ("Select first flavor where priority based preemption is possible",
         {"uno": 1, "due": 1, "tre": 1}, {}, None, "uno", ("test-uno", "InClusterQueue")),
    )],
    _reclaim_first(
        "Select second flavor where gpu reclamation is possible, as compute Fits",
        {"uno": 1}, {"due": 1, "tre": 1}, None, {"cpu": "tre", GPU: "tre"},
        ("other-tre", "InCohortReclamation"), cpu_usage={"uno": 1, "due": 1}),
]

