"""queueingStrategy: StrictFIFO against BestEffortFIFO (the default), the order of a
cycle's heads, and capacity held by a head that cannot reclaim."""

ST = "test/integration/singlecluster/scheduler/scheduler_test.go"
PI = "test/integration/singlecluster/scheduler/preemption_test.go"
ENG = {"matchExpressions": [{"key": "dep", "operator": "In", "values": ["eng"]}]}
# scheduler_test.go "Queueing with StrictFIFO": cpu 5, borrowingLimit 0, in cohort "cohort"
STRICT = {"name": "strict-fifo-cq", "cohort": "cohort", "queueingStrategy": "StrictFIFO",
          "namespaceSelector": ENG,
          "flavors": {"on-demand": {"cpu": {"nominal": 5, "borrowingLimit": 0}}}}


def _wl(name, queue, cpu, priority=0, **kw):
    return {"name": name, "queue": queue, "priority": priority, "requests": {"cpu": cpu}, **kw}


def _foundation(reclaim):
    return [{"name": "foundation-queue", "cohort": "cohort", "queueingStrategy": "StrictFIFO",
             "preemption": {"reclaimWithinCohort": reclaim},
             "flavors": {"on-demand": {"cpu": 2}}},
            {"name": "best-effort-queue", "cohort": "cohort",
             "flavors": {"on-demand": {"cpu": 0}}}]


SCENARIOS = [
    {
        "name": "strict-fifo-by-priority-strictly",
        "source": f"{ST} / Queueing with StrictFIFO / 'Should schedule workloads by their "
                  "priority strictly'",
        "flavors": ["on-demand"], "namespaces": {"sc": {"dep": "eng"}},
        "clusterQueues": [STRICT],
        "incoming": [_wl("wl1", "strict-fifo-cq", 2, 100), _wl("wl2", "strict-fifo-cq", 5, 10),
                     _wl("wl3", "strict-fifo-cq", 1, 1)],
        # "wl3 can't be scheduled before wl2 even though there is enough quota";
        # "wl3 doesn't even get a scheduling attempt, so can't check for conditions"
        "expect": {"admitted": {"wl1": "on-demand"},
                   "pending": {"wl2": None, "wl3": "NoCondition"}},
    },
    {
        "name": "best-effort-fifo-lets-smaller-past",
        # the same workloads in a BestEffortFIFO queue (the default): wl3 goes past wl2
        "source": f"{ST} / 'Should schedule workloads by their priority strictly', with "
                  "queueingStrategy BestEffortFIFO (docs: concepts/cluster_queue, Queueing "
                  "strategy)",
        "flavors": ["on-demand"], "namespaces": {"sc": {"dep": "eng"}},
        "clusterQueues": [{**STRICT, "queueingStrategy": "BestEffortFIFO"}],
        "incoming": [_wl("wl1", "strict-fifo-cq", 2, 100), _wl("wl2", "strict-fifo-cq", 5, 10),
                     _wl("wl3", "strict-fifo-cq", 1, 1)],
        "expect": {"admitted": {"wl1": "on-demand", "wl3": "on-demand"},
                   "pending": {"wl2": "WaitingForQuota"}},
    },
    {
        "name": "strict-fifo-namespace-mismatch-does-not-block",
        "source": f"{ST} / Queueing with StrictFIFO / 'Workloads not matching "
                  "namespaceSelector should not block others'",
        "flavors": ["on-demand"], "namespaces": {"sc": {"dep": "eng"}, "core": {}},
        "clusterQueues": [STRICT],
        "incoming": [_wl("wl1", "strict-fifo-cq", 2, 100),
                     _wl("wl2", "strict-fifo-cq", 5, 10, namespace="core"),
                     _wl("wl3", "strict-fifo-cq", 1, 1)],
        # ExpectWorkloadsToBeInadmissible: QuotaReserved=False, Inadmissible or
        # Misconfigured; pkg/workload/resources.go ErrNamespaceMismatch's text
        "expect": {"admitted": {"wl1": "on-demand", "wl3": "on-demand"},
                   "pending": {"wl2": ["Misconfigured",
                                       "workload namespace doesn't match ClusterQueue "
                                       "selector"]}},
    },
    {
        "name": "strict-fifo-pending-head-does-not-block-borrowing-from-third-queue",
        "source": f"{ST} / Queueing with StrictFIFO / 'Pending workload with StrictFIFO "
                  "doesn't block other CQ from borrowing from a third CQ'",
        "flavors": ["on-demand"], "namespaces": {"sc": {"dep": "eng"}},
        "clusterQueues": [
            STRICT,
            {"name": "team-a", "cohort": "cohort", "flavors": {"on-demand": {"cpu": 5}}},
            {"name": "shared-resources", "cohort": "cohort",
             "flavors": {"on-demand": {"cpu": 5}}}],
        "admitted": [_wl("wl", "strict-fifo-cq", 3, 10), _wl("player1-a", "team-a", 5, 1)],
        # Kueue's test holds team-a (stopPolicy Hold) while creating these so that they meet
        # in one scheduling cycle; here they are created in the same instant
        "incoming": [_wl("pending-wl", "strict-fifo-cq", 3, 99),
                     _wl("player2-a", "team-a", 5, 11), _wl("player3-a", "team-a", 1, 10)],
        "expect": {"admitted": {"wl": "on-demand", "player1-a": "on-demand",
                                "player2-a": "on-demand"},
                   "pending": {"pending-wl": None, "player3-a": None}},
    },
    {
        "name": "under-nominal-quota-before-borrowing",
        "source": f"{ST} / Using cohorts for sharing unused resources / 'Should start "
                  "workloads that are under min quota before borrowing'",
        "flavors": ["on-demand"],
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all", "queueingStrategy": "StrictFIFO",
             "flavors": {"on-demand": {"cpu": 2}}},
            {"name": "dev-cq", "cohort": "all", "queueingStrategy": "StrictFIFO",
             "flavors": {"on-demand": {"cpu": 0}}}],
        "admitted": [_wl("p-wl-1", "prod-cq", 2)],
        "incoming": [[_wl("d-wl-1", "dev-cq", 1)], [_wl("p-wl-2", "prod-cq", 2)],
                     [{"finish": "p-wl-1"}]],
        # "The pWl2 workload gets accepted, even though it was created after dWl1."
        "expect": {"admitted": {"p-wl-2": "on-demand"}, "pending": {"d-wl-1": None}},
    },
    {
        "name": "foundation-queue-lets-best-effort-use-capacity-until-ready",
        "source": f"{ST} / Reserving Resources in Cohort / 'foundation-queue allows "
                  "best-effort queue to use capacity until it is ready to admit next workload'",
        "flavors": ["on-demand"],
        "clusterQueues": _foundation("Any"),
        "admitted": [_wl("f-1", "foundation-queue", 1, 1000)],
        "incoming": [[_wl("f-2", "foundation-queue", 2, 1000)],
                     [_wl("be-1", "best-effort-queue", 1), _wl("be-2", "best-effort-queue", 1)],
                     [{"finish": "f-1"}]],
        # be-1 was admitted with the spare cpu; once f-1 finished, f-2 reclaims it
        "expect": {"preempted": {"be-1": "InCohortReclamation"},
                   "admitted": {"f-2": "on-demand"},
                   "pending": {"be-1": "WaitingForQuota", "be-2": "WaitingForQuota"}},
    },
    {
        "name": "foundation-queue-best-effort-admitted-meanwhile",
        # the step before "finish first foundation workload" of the scenario above
        "source": f"{ST} / Reserving Resources in Cohort / 'foundation-queue allows "
                  "best-effort queue to use capacity until it is ready to admit next "
                  "workload' (best-effort workloads - 1 can admit; 1 is pending)",
        "flavors": ["on-demand"],
        "clusterQueues": _foundation("Any"),
        "admitted": [_wl("f-1", "foundation-queue", 1, 1000)],
        "incoming": [[_wl("f-2", "foundation-queue", 2, 1000)],
                     [_wl("be-1", "best-effort-queue", 1), _wl("be-2", "best-effort-queue", 1)]],
        "expect": {"admitted": {"f-1": "on-demand", "be-1": "on-demand"},
                   "pending": {"f-2": "WaitingForQuota", "be-2": "WaitingForQuota"}},
    },
    {
        "name": "foundation-queue-blocks-capacity-when-it-cannot-reclaim",
        "source": f"{ST} / Reserving Resources in Cohort / 'foundation-queue blocks capacity "
                  "when it is not sure that it can reclaim'",
        "flavors": ["on-demand"],
        "clusterQueues": _foundation("LowerPriority"),
        "admitted": [_wl("f-1", "foundation-queue", 1, 1000)],
        "incoming": [[_wl("f-2", "foundation-queue", 2, 1000)],
                     [_wl("be-1", "best-effort-queue", 1), _wl("be-2", "best-effort-queue", 1)]],
        # "creating best-effort workloads - neither can admit"
        "expect": {"admitted": {"f-1": "on-demand"},
                   "pending": {"f-2": "WaitingForQuota", "be-1": "WaitingForQuota",
                               "be-2": "WaitingForQuota"}},
    },
    {
        "name": "foundation-queue-admitted-first-after-finish",
        "source": f"{ST} / Reserving Resources in Cohort / 'foundation-queue blocks capacity "
                  "when it is not sure that it can reclaim' (finish first foundation "
                  "workload)",
        "flavors": ["on-demand"],
        "clusterQueues": _foundation("LowerPriority"),
        "admitted": [_wl("f-1", "foundation-queue", 1, 1000)],
        "incoming": [[_wl("f-2", "foundation-queue", 2, 1000)],
                     [_wl("be-1", "best-effort-queue", 1), _wl("be-2", "best-effort-queue", 1)],
                     [{"finish": "f-1"}]],
        "expect": {"admitted": {"f-2": "on-demand"},
                   "pending": {"be-1": "WaitingForQuota", "be-2": "WaitingForQuota"}},
    },
    {
        "name": "strict-fifo-cohort-reclaim-despite-pending-workloads",
        "source": f"{PI} / In a cohort with StrictFIFO / 'Should reclaim from cohort even if "
                  "another CQ has pending workloads'",
        "flavors": ["one"],
        "clusterQueues": [
            {"name": name, "cohort": "all", "queueingStrategy": "StrictFIFO",
             "flavors": {"one": {"cpu": 2}},
             "preemption": {"withinClusterQueue": "LowerPriority",
                            "reclaimWithinCohort": "Any"}}
            for name in ("alpha-cq", "beta-cq")],
        "admitted": [_wl("use-all", "alpha-cq", 4, 1)],
        "incoming": [[_wl("pending", "alpha-cq", 1, 0)], [_wl("preemptor", "beta-cq", 1, -1)]],
        # "The other workload "pending" may occasionally get admitted" (kueue#8141)
        "expect": {"preempted": {"use-all": "InCohortReclamation"},
                   "admitted": {"preemptor": "one"}, "pending": {"use-all": None},
                   "unchecked": ["pending"]},
    },
]
