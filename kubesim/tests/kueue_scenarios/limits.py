"""borrowingLimit and lendingLimit."""

PT = "pkg/scheduler/preemption/preemption_test.go TestPreemption"
ST = "test/integration/singlecluster/scheduler/scheduler_test.go"
PI = "test/integration/singlecluster/scheduler/preemption_test.go"
DOC = ("site/content/en/docs/concepts/cluster_queue.md "
       "(kueue.sigs.k8s.io/docs/concepts/cluster_queue)")


def _team(name, cpu, **limits):
    """The docs' team-a-cq / team-b-cq in cohort team-ab, flavor default-flavor."""
    q = {"nominal": cpu, **limits} if limits else cpu
    return {"name": name, "cohort": "team-ab", "flavors": {"default-flavor": {"cpu": q}}}


def _docs(name, section, queues, incoming, expect, note=""):
    return {"name": name, "source": f"{DOC} / {section}{note}", "flavors": ["default-flavor"],
            "clusterQueues": queues, "incoming": incoming, "expect": expect}


def _lend(name, lending):
    """TestPreemption's cohort "cohort-lend": cpu 6 with a lendingLimit."""
    return {"name": name, "cohort": "cohort-lend",
            "flavors": {"default": {"cpu": {"nominal": 6, "lendingLimit": lending}}},
            "preemption": {"withinClusterQueue": "LowerPriority",
                           "reclaimWithinCohort": "LowerPriority"}}


LEND = [_lend("lend1", 4), _lend("lend2", 2)]


def _wl(name, queue, cpu, priority=0, **kw):
    return {"name": name, "queue": queue, "priority": priority, "requests": {"cpu": cpu}, **kw}


SCENARIOS = [
    {
        "name": "lending-reclaim-quota-from-lender",
        "source": f"{PT} / 'reclaim quota from lender'",
        "clusterQueues": LEND,
        "admitted": [_wl("lend1-low", "lend1", 3, -1), _wl("lend2-mid", "lend2", 3),
                     _wl("lend2-high", "lend2", 4, 1)],
        "incoming": [_wl("in", "lend1", 3, 1)],
        "expect": {"preempted_messages": {"lend2-mid": (
            "due to reclamation within the cohort; "
            "preemptor path: /cohort-lend/lend1; preemptee path: /cohort-lend/lend2")},
                   "preempted": {"lend2-mid": "InCohortReclamation"},
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
    {
        "name": "borrowing-both-queues-borrow-from-a-third",
        # Kueue's test creates test-cq after the workloads so that both meet in one cycle;
        # here they are created in the same instant
        "source": f"{ST} / Using cohorts for sharing unused resources / 'Should schedule "
                  "workloads borrowing quota from ClusterQueues in the same Cohort'",
        "flavors": ["on-demand"],
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 5, "borrowingLimit": 10}}}},
            {"name": "dev-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 5, "borrowingLimit": 10}}}},
            {"name": "test-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 15, "borrowingLimit": 0}}}}],
        "incoming": [_wl("wl-1", "prod-cq", 11), _wl("wl-2", "dev-cq", 11)],
        "expect": {"admitted": {"wl-1": "on-demand", "wl-2": "on-demand"}},
    },
    {
        "name": "borrowing-limit-zero-is-not-borrowed-from",
        # 'Should admit workloads using borrowed ClusterQueue': prod-cq's spot-tainted has
        # borrowingLimit 0, so the 10 cpu go to on-demand borrowed from fallback-cq
        "source": f"{ST} / Using cohorts for sharing unused resources / 'Should admit "
                  "workloads using borrowed ClusterQueue' (once fallback-cq exists)",
        "flavors": [
            {"name": "on-demand", "nodeLabels": {"cloud.provider.com/instance": "on-demand"}},
            {"name": "spot-tainted",
             "nodeLabels": {"cloud.provider.com/instance": "spot-tainted"},
             "nodeTaints": [{"key": "cloud.provider.com/instance", "value": "spot-tainted",
                             "effect": "NoSchedule"}]}],
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"spot-tainted": {"cpu": {"nominal": 5, "borrowingLimit": 0}},
                         "on-demand": {"cpu": 5}}},
            {"name": "fallback-cq", "cohort": "all",
             "flavors": {"spot-tainted": {"cpu": 5}, "on-demand": {"cpu": 5}}}],
        "incoming": [_wl("wl", "prod-cq", 10, tolerations=[{
            "key": "cloud.provider.com/instance", "operator": "Equal",
            "value": "spot-tainted", "effect": "NoSchedule"}])],
        "expect": {"admitted": {"wl": "on-demand"}},
    },
    {
        "name": "borrowing-no-fit-without-a-lender",
        "source": f"{ST} / Using cohorts for sharing unused resources / 'Should admit "
                  "workloads using borrowed ClusterQueue' (checking a no-fit workload does not "
                  "get admitted)",
        "flavors": ["on-demand", "spot-tainted"],
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"spot-tainted": {"cpu": {"nominal": 5, "borrowingLimit": 0}},
                         "on-demand": {"cpu": 5}}}],
        "incoming": [_wl("wl", "prod-cq", 10)],
        "expect": {"pending": {"wl": None}},
    },
    {
        "name": "lending-limit-lent-quota-admits-borrower",
        "source": f"{ST} / Using cohorts for sharing with LendingLimit / 'Should admit "
                  "workloads using borrowed ClusterQueue' (once dev-cq exists)",
        "flavors": ["on-demand"],
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 5, "lendingLimit": 1}}}},
            {"name": "dev-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 5, "lendingLimit": 4}}}}],
        "incoming": [_wl("wl", "prod-cq", 9)],
        "expect": {"admitted": {"wl": "on-demand"}},
    },
    {
        "name": "lending-limit-zero-lends-nothing",
        "source": f"{ST} / Using cohorts for sharing with LendingLimit / 'Should admit "
                  "workloads after updating lending limit' (before the update)",
        "flavors": ["on-demand"],
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 5, "lendingLimit": 0}}}},
            {"name": "dev-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 5, "lendingLimit": 0}}}}],
        "incoming": [_wl("wl-1", "prod-cq", 5), _wl("wl-2", "prod-cq", 5)],
        "expect": {"admitted": {"wl-1": "on-demand"}, "pending": {"wl-2": None}},
    },
    {
        "name": "lending-limit-raised-lends",
        "source": f"{ST} / Using cohorts for sharing with LendingLimit / 'Should admit "
                  "workloads after updating lending limit' (dev-cq's lendingLimit 5)",
        "flavors": ["on-demand"],
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 5, "lendingLimit": 0}}}},
            {"name": "dev-cq", "cohort": "all",
             "flavors": {"on-demand": {"cpu": {"nominal": 5, "lendingLimit": 5}}}}],
        "incoming": [_wl("wl-1", "prod-cq", 5), _wl("wl-2", "prod-cq", 5)],
        "expect": {"admitted": {"wl-1": "on-demand", "wl-2": "on-demand"}},
    },
    {
        "name": "lending-limit-preempt-borrower",
        "source": f"{PI} / With lending limit / 'Should be able to preempt when lending limit "
                  "enabled'",
        "flavors": ["alpha"],
        "clusterQueues": [
            {"name": "prod-cq", "cohort": "all",
             "flavors": {"alpha": {"cpu": {"nominal": 5, "lendingLimit": 4}}},
             "preemption": {"reclaimWithinCohort": "Any"}},
            {"name": "dev-cq", "cohort": "all", "flavors": {"alpha": {"cpu": 5}}}],
        "admitted": [_wl("wl-1", "dev-cq", 4, 0), _wl("wl-2", "dev-cq", 5, 1)],
        "incoming": [_wl("wl-3", "prod-cq", 4)],
        "expect": {"preempted": {"wl-1": "InCohortReclamation"},
                   "admitted": {"wl-2": "alpha", "wl-3": "alpha"},
                   "pending": {"wl-1": None}},
    },
    _docs("docs-borrowing-up-to-the-cohort", "Borrowing example",
          [_team("team-a-cq", 9), _team("team-b-cq", 12)],
          [_wl("a-21", "team-a-cq", 21)],
          {"admitted": {"a-21": "default-flavor"}},
          ": team-a-cq can admit up to 12+9=21 CPUs while team-b-cq has no workloads"),
    _docs("docs-borrowing-not-beyond-the-cohort", "Borrowing example",
          [_team("team-a-cq", 9), _team("team-b-cq", 12)],
          [_wl("a-22", "team-a-cq", 22)],
          {"pending": {"a-22": ["ExceedsMaxQuota", "maximum capacity (21)"]}},
          ": up to 21 CPUs (the reason and message: flavorassigner.go fitsResourceQuota)"),
    _docs("docs-nominal-quota-first", "Borrowing example",
          [_team("team-a-cq", 9), _team("team-b-cq", 12)],
          [[_wl("a-base", "team-a-cq", 9)],
           [_wl("a-more", "team-a-cq", 3), _wl("b-1", "team-b-cq", 12)]],
          {"admitted": {"a-base": "default-flavor", "b-1": "default-flavor"},
           "pending": {"a-more": "WaitingForQuota"}},
          ": with team-a-cq's nominal quota used, Kueue admits team-b-cq's pending workloads "
          "before new ones of team-a-cq (a-more arrives first here)"),
    _docs("docs-borrowing-limit", "BorrowingLimit",
          [_team("team-a-cq", 9, borrowingLimit=1), _team("team-b-cq", 12)],
          [_wl("a-10", "team-a-cq", 10), _wl("a-1", "team-a-cq", 1)],
          {"admitted": {"a-10": "default-flavor"},
           "pending": {"a-1": "WaitingForQuota"}},
          ": team-a-cq can admit up to 9+1=10 CPUs"),
    _docs("docs-no-borrowing-limit-uses-the-cohort", "BorrowingLimit",
          [_team("team-a-cq", 9, borrowingLimit=1), _team("team-b-cq", 12)],
          [_wl("b-21", "team-b-cq", 21)],
          {"admitted": {"b-21": "default-flavor"}},
          ": team-b-cq, without borrowingLimit, can use up to 12+9 CPUs"),
    _docs("docs-lending-limit", "LendingLimit",
          [_team("team-a-cq", 9), _team("team-b-cq", 12, lendingLimit=1)],
          [_wl("a-10", "team-a-cq", 10), _wl("a-1", "team-a-cq", 1)],
          {"admitted": {"a-10": "default-flavor"},
           "pending": {"a-1": "WaitingForQuota"}},
          ": team-a-cq can admit up to 9+1=10 CPUs"),
    _docs("docs-no-lending-limit-lends-all", "LendingLimit",
          [_team("team-a-cq", 9), _team("team-b-cq", 12, lendingLimit=1)],
          [_wl("b-21", "team-b-cq", 21)],
          {"admitted": {"b-21": "default-flavor"}},
          ": team-a-cq, without lendingLimit, lends all: team-b-cq can use up to 9+12 CPUs"),
]

