"""Hierarchical cohorts (Cohort objects with parentName and their own quota).

TestHierarchicalPreemptions gives several ClusterQueues a flavor with no resources; here they
list cpu (and memory) with a nominal quota of 0, the same quota, since a ClusterQueue must
cover every resource a workload requests before Kueue's scheduler looks at it. Queue names
take "-" for Kueue's "_" (object names)."""

PH = "pkg/scheduler/preemption/preemption_hierarchical_test.go TestHierarchicalPreemptions"
ST = "test/integration/singlecluster/scheduler/scheduler_test.go"
PI = "test/integration/singlecluster/scheduler/preemption_test.go"
ANY = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
BWC = {"policy": "LowerPriority", "maxPriorityThreshold": 0}


def _q(name, cohort, cpu=0, preemption=ANY, **res):
    return {"name": name, "cohort": cohort, "flavors": {"default": {"cpu": cpu, **res}},
            "preemption": preemption}


def _c(name, parent=None, cpu=None, **res):
    c = {"name": name, "parentName": parent}
    if cpu is not None:
        c["quota"] = {"default": {"cpu": cpu, **res}}
    return c


def _wl(name, queue, cpu, priority=0, **req):
    return {"name": name, "queue": queue, "priority": priority,
            "requests": {"cpu": cpu, **req}}


R_C2 = [_c("r"), _c("c", "r", 2)]

SCENARIOS = [
    {
        "name": "hier-preempt-with-hierarchical-advantage",
        "source": f"{PH} / 'preempt with hierarchical advantage'",
        "cohorts": R_C2,
        "clusterQueues": [_q("q", "c"), _q("q-borrowing", "r")],
        "admitted": [_wl("admitted2", "q-borrowing", 2)],
        "incoming": [_wl("in", "q", 2)],
        "expect": {"preempted_messages": {"admitted2": (
            "due to reclamation within the cohort; "
            "preemptor path: /r/c/q; preemptee path: /r/q-borrowing")},
                   "preempted": {"admitted2": "InCohortReclamation"},
                   "admitted": {"in": "default"},
                   "pending": {"admitted2": "WaitingForQuota"}},
    },
    {
        "name": "hier-avoid-queues-within-nominal-quota",
        "source": f"{PH} / 'avoid queues within nominal quota'",
        "cohorts": R_C2,
        "clusterQueues": [_q("q-nominal", "r", 2), _q("q", "c"), _q("q-borrowing", "r")],
        "admitted": [_wl("admitted1", "q-nominal", 2, -10), _wl("admitted2", "q-borrowing", 2)],
        "incoming": [_wl("in", "q", 2)],
        "expect": {"preempted": {"admitted2": "InCohortReclamation"},
                   "admitted": {"admitted1": "default", "in": "default"},
                   "pending": {"admitted2": "WaitingForQuota"}},
    },
    {
        "name": "hier-preempt-multiple-with-hierarchical-advantage",
        "source": f"{PH} / 'preempt multiple with hierarchical advantage'",
        "cohorts": R_C2,
        "clusterQueues": [_q("q", "c"), _q("q-borrowing", "r")],
        "admitted": [_wl("admitted1", "q-borrowing", 1, 1),
                     _wl("admitted2", "q-borrowing", 1, 2)],
        "incoming": [_wl("in", "q", 2)],
        "expect": {"preempted": {"admitted1": "InCohortReclamation",
                                 "admitted2": "InCohortReclamation"},
                   "admitted": {"in": "default"},
                   "pending": {"admitted1": "WaitingForQuota", "admitted2": "WaitingForQuota"}},
    },
    {
        "name": "hier-preempt-in-cohort-and-own-queue",
        # Kueue's test admits admitted_preemptible (1 cpu requested) with a usage of 2; here
        # its usage is its request, 1: the same two preemptions are needed for 2 cpu
        "source": f"{PH} / 'preempt in cohort and own CQ'",
        "cohorts": [_c("r"), _c("c", "r", 3)],
        "clusterQueues": [
            _q("q", "c", preemption={**ANY, "borrowWithinCohort": BWC}),
            _q("q-same-cohort", "c")],
        "admitted": [_wl("admitted_not_preemptible", "q-same-cohort", 1, 1),
                     _wl("admitted_preemptible", "q-same-cohort", 1, 0),
                     _wl("admitted_own_queue", "q", 1, -1)],
        "incoming": [_wl("in", "q", 2, 1)],
        "expect": {"preempted": {"admitted_own_queue": "InClusterQueue",
                                 "admitted_preemptible": "InCohortReclaimWhileBorrowing"},
                   "admitted": {"admitted_not_preemptible": "default", "in": "default"},
                   "pending": {"admitted_own_queue": "WaitingForQuota",
                               "admitted_preemptible": "WaitingForQuota"}},
    },
    {
        "name": "hier-prefer-hierarchical-candidate",
        "source": f"{PH} / 'prefer to preempt hierarchical candidate'",
        "cohorts": R_C2,
        "clusterQueues": [_q("q", "c"), _q("q-borrowing", "r")],
        "admitted": [_wl("admitted_borrowing", "q-borrowing", 1, 1),
                     _wl("admitted_same_queue", "q", 1, -2)],
        "incoming": [_wl("in", "q", 1)],
        "expect": {"preempted": {"admitted_borrowing": "InCohortReclamation"},
                   "admitted": {"admitted_same_queue": "default", "in": "default"},
                   "pending": {"admitted_borrowing": "WaitingForQuota"}},
    },
    {
        "name": "hier-forced-to-preempt-priority-candidate",
        "source": f"{PH} / 'forced to preempt priority candidate'",
        "cohorts": R_C2,
        "clusterQueues": [
            _q("q", "c", preemption={**ANY, "borrowWithinCohort": BWC}),
            _q("q-nominal", "r", 2), _q("q-same-cohort", "c")],
        "admitted": [_wl("admitted_nominal", "q-nominal", 2, -10),
                     _wl("admitted_same_cohort", "q-same-cohort", 2, -1)],
        "incoming": [_wl("in", "q", 2)],
        "expect": {"preempted": {"admitted_same_cohort": "InCohortReclaimWhileBorrowing"},
                   "admitted": {"admitted_nominal": "default", "in": "default"},
                   "pending": {"admitted_same_cohort": "WaitingForQuota"}},
    },
    {
        "name": "hier-incoming-fits-in-queue-nominal-quota",
        "source": f"{PH} / 'incoming workload fits in CQ nominal quota'",
        "cohorts": R_C2,
        "clusterQueues": [_q("q", "c", 4), _q("q-borrowing", "r"), _q("q-same-cohort", "c")],
        "admitted": [_wl("admitted_borrowing", "q-borrowing", 3, 10),
                     _wl("admitted_same_cohort", "q-same-cohort", 3, 10)],
        "incoming": [_wl("in", "q", 4)],
        "expect": {"preempted": {"admitted_borrowing": "InCohortReclamation",
                                 "admitted_same_cohort": "InCohortReclamation"},
                   "admitted": {"in": "default"},
                   "pending": {"admitted_borrowing": "WaitingForQuota",
                               "admitted_same_cohort": "WaitingForQuota"}},
    },
    {
        "name": "hier-preempt-hierarchical-and-priority-candidates",
        "source": f"{PH} / 'preempt hierarchical and priority candidates'",
        "cohorts": [_c("r", None, 1), _c("c", "r", 4)],
        "clusterQueues": [
            _q("q", "c", preemption={"withinClusterQueue": "LowerPriority",
                                     "reclaimWithinCohort": "LowerPriority",
                                     "borrowWithinCohort": BWC}),
            _q("q-borrowing", "r"), _q("q-same-cohort", "c")],
        "admitted": [_wl("admitted_borrowing", "q-borrowing", 2, -1),
                     _wl("admitted_same_cohort_preemptible", "q-same-cohort", 1, -1),
                     _wl("admitted_borrowing_not_preemptible", "q-borrowing", 2, 1)],
        "incoming": [_wl("in", "q", 3)],
        "withdraw_preempted": True,
        "expect": {"preempted": {
            "admitted_borrowing": "InCohortReclamation",
            "admitted_same_cohort_preemptible": "InCohortReclaimWhileBorrowing"},
            "admitted": {"admitted_borrowing_not_preemptible": "default", "in": "default"}},
    },
    {
        "name": "hier-preempt-hierarchical-candidates-and-inside-queue",
        "source": f"{PH} / 'preempt hierarchical candidates and inside CQ'",
        "cohorts": [_c("r", None, 1), _c("c", "r", 4)],
        "clusterQueues": [
            _q("q", "c", preemption={"withinClusterQueue": "LowerPriority",
                                     "reclaimWithinCohort": "LowerPriority",
                                     "borrowWithinCohort": BWC}),
            _q("q-borrowing", "r"), _q("q-same-cohort", "c")],
        "admitted": [_wl("admitted_borrowing", "q-borrowing", 2, -1),
                     _wl("admitted_same_queue_preemptible", "q", 1, -1),
                     _wl("admitted_borrowing_not_preemptible", "q-borrowing", 2, 1)],
        "incoming": [_wl("in", "q", 3)],
        "expect": {"preempted": {"admitted_borrowing": "InCohortReclamation",
                                 "admitted_same_queue_preemptible": "InClusterQueue"},
                   "admitted": {"admitted_borrowing_not_preemptible": "default",
                                "in": "default"},
                   "pending": {"admitted_borrowing": "WaitingForQuota",
                               "admitted_same_queue_preemptible": "WaitingForQuota"}},
    },
    {
        "name": "hier-reclaim-from-lowest-priority-excluding-non-borrowing",
        "source": f"{PH} / 'reclaim nominal quota from lowest priority workload, excluding "
                  "non-borrowing'",
        "cohorts": [_c("r"), _c("c", "r", 3)],
        "clusterQueues": [_q("q", "c"), _q("q-borrowing", "r"), _q("q-nominal", "r", 2)],
        "admitted": [_wl("admitted_borrowing_prio_8", "q-borrowing", 1, 8),
                     _wl("admitted_borrowing_prio_9", "q-borrowing", 1, 9),
                     _wl("admitted_borrowing_prio_10", "q-borrowing", 1, 9),
                     _wl("admitted_nominal", "q-nominal", 2, -2)],
        "incoming": [_wl("in", "q", 1)],
        "expect": {"preempted": {"admitted_borrowing_prio_8": "InCohortReclamation"},
                   "admitted": {"admitted_borrowing_prio_9": "default",
                                "admitted_borrowing_prio_10": "default",
                                "admitted_nominal": "default", "in": "default"},
                   "pending": {"admitted_borrowing_prio_8": "WaitingForQuota"}},
    },
    {
        "name": "hier-infeasible-preemption-in-pruned-subtrees",
        "source": f"{PH} / 'infeasible preemption all available workloads in pruned subtrees'",
        "cohorts": [_c("r"), _c("c", "r", 2), _c("c-other", "r", 2)],
        "clusterQueues": [_q("q-other", "c-other"), _q("q", "c"), _q("q-same-cohort", "c")],
        "admitted": [_wl("admitted_other_1", "q-other", 1, -10),
                     _wl("admitted_other_2", "q-other", 1, -10),
                     _wl("admitted_same_cohort", "q-same-cohort", 2)],
        "incoming": [_wl("in", "q", 2)],
        "expect": {"admitted": {"admitted_other_1": "default", "admitted_other_2": "default",
                                "admitted_same_cohort": "default"},
                   "pending": {"in": "WaitingForQuota"}},
    },
    {
        "name": "hier-preemption-with-multiple-resources",
        "source": f"{PH} / 'hiearchical preemption with multiple resources'",
        "cohorts": [_c("r", None, 3), _c("c", "r", 4, memory="4Gi")],
        "clusterQueues": [_q("q", "c", memory=0), _q("q-borrowing", "r", memory=0),
                          _q("q-same-cohort", "c", memory=0)],
        "admitted": [_wl("admitted_borrowing", "q-borrowing", 3, 0, memory="1Gi"),
                     _wl("admitted_same_cohort", "q-same-cohort", 1, -2, memory="3Gi")],
        "incoming": [_wl("in", "q", 2, -2, memory="1Gi")],
        "expect": {"preempted": {"admitted_borrowing": "InCohortReclamation"},
                   "admitted": {"admitted_same_cohort": "default", "in": "default"},
                   "pending": {"admitted_borrowing": "WaitingForQuota"}},
    },
    {
        "name": "hier-respect-lending-limits",
        "source": f"{PH} / 'respect lending limits'",
        "cohorts": R_C2,
        "clusterQueues": [_q("q", "c", {"nominal": 3, "lendingLimit": 2}),
                          _q("q-borrowing", "r")],
        "admitted": [_wl("admitted_borrowing", "q-borrowing", 4)],
        "incoming": [_wl("in", "q", 5, -2)],
        "expect": {"preempted": {"admitted_borrowing": "InCohortReclamation"},
                   "admitted": {"in": "default"},
                   "pending": {"admitted_borrowing": "WaitingForQuota"}},
    },
    {
        "name": "hier-reclaim-in-complex-hierarchy",
        "source": f"{PH} / 'reclaim in complex hierarchy'",
        "cohorts": [_c("r"), _c("c11", "r", 4), _c("c12", "r", 4), _c("c21", "c11", 4),
                    _c("c22", "c11", 4), _c("c23", "c11", 4), _c("c31", "c21", 4),
                    _c("c32", "c21", 4)],
        "clusterQueues": [_q("q1", "c12"), _q("q2", "c23"), _q("q3", "c22"), _q("q4", "c32"),
                          _q("q5", "c31")],
        "admitted": [_wl("admitted_borrowing_1", "q1", 4, -6),
                     _wl("admitted_borrowing_2", "q1", 4, -5),
                     _wl("admitted_borrowing_3", "q2", 4, -9),
                     _wl("admitted_borrowing_4", "q2", 4, -10),
                     _wl("admitted_borrowing_5", "q3", 4, -4),
                     _wl("admitted_borrowing_6", "q3", 3, -3),
                     _wl("admitted_borrowing_7", "q4", 2, 4),
                     _wl("admitted_borrowing_8", "q4", 3, 2)],
        "incoming": [_wl("in", "q5", 7, -2)],
        # "only one of workloads from q2 will be preempted because after preempting the
        # first one, the usage of cohort c23 will be back within nominal quota"
        "expect": {"preempted": {"admitted_borrowing_1": "InCohortReclamation",
                                 "admitted_borrowing_4": "InCohortReclamation"},
                   "admitted": {f"admitted_borrowing_{i}": "default" for i in (2, 3, 5, 6, 7, 8)}
                   | {"in": "default"},
                   "pending": {"admitted_borrowing_1": "WaitingForQuota",
                               "admitted_borrowing_4": "WaitingForQuota"}},
    },
    {
        "name": "hier-guaranteed-cohort-preferential-access",
        "source": f"{PI} / In a multi-level cohort / 'workloads in guaranteed cq should have "
                  "preferential access to the resources'",
        "cohorts": [_c("root"), _c("guaranteed", "root", 3)],
        "clusterQueues": [_q("best-effort", "root"), _q("guaranteed", "guaranteed")],
        "admitted": [_wl("best-effort-wl", "best-effort", 3, 1)],
        "incoming": [_wl("guaranteed-wl", "guaranteed", 3, 0)],
        "expect": {"preempted": {"best-effort-wl": "InCohortReclamation"},
                   "admitted": {"guaranteed-wl": "default"},
                   "pending": {"best-effort-wl": None}},
    },
    {
        "name": "hier-cohort-provides-resources-directly",
        "source": f"{ST} / Cohort provides resources directly / 'Should admit workload using "
                  "resources borrowed from cohort' (cohort quota 10)",
        "cohorts": [_c("cohort", None, 10)],
        "clusterQueues": [{"name": "clusterqueue", "cohort": "cohort",
                           "flavors": {"default": {"cpu": 0}}}],
        "incoming": [_wl("wl", "clusterqueue", 10)],
        "expect": {"admitted": {"wl": "default"}},
    },
    {
        "name": "hier-cohort-quota-too-small",
        "source": f"{ST} / Cohort provides resources directly / 'Should admit workload using "
                  "resources borrowed from cohort' (cohort quota 5: pending)",
        "cohorts": [_c("cohort", None, 5)],
        "clusterQueues": [{"name": "clusterqueue", "cohort": "cohort",
                           "flavors": {"default": {"cpu": 0}}}],
        "incoming": [_wl("wl", "clusterqueue", 10)],
        "expect": {"pending": {"wl": None}},
    },
    {
        "name": "hier-long-distance-resource",
        "source": f"{ST} / Cohort provides resources directly / 'Long distance resource allows "
                  "workload to be scheduled' (once cohort bank exists)",
        "cohorts": [_c("root"), _c("left", "root"), _c("right", "root"),
                    _c("bank", "right", 10)],
        "clusterQueues": [{"name": "cq", "cohort": "left", "flavors": {"default": {"cpu": 0}}}],
        "incoming": [_wl("wl", "cq", 10)],
        "expect": {"admitted": {"wl": "default"}},
    },
    {
        "name": "hier-cohort-lending-limit-caps-sibling",
        "source": f"{ST} / Cohort lendingLimit caps sibling borrowing in hierarchy / 'Should "
                  "admit only up to the lendingLimit of sibling cohort'",
        "cohorts": [_c("root", None, 0),
                    {"name": "lender", "parentName": "root",
                     "quota": {"default": {"cpu": {"nominal": 1, "lendingLimit": "500m"}}}},
                    _c("borrower", "root")],
        "clusterQueues": [{"name": "lender-cq", "cohort": "lender",
                           "flavors": {"default": {"cpu": 1}}},
                          {"name": "borrower-cq", "cohort": "borrower",
                           "flavors": {"default": {"cpu": 0}}}],
        "incoming": [_wl("wl-1", "borrower-cq", "500m"), _wl("wl-2", "borrower-cq", "500m")],
        "expect": {"admitted": {"wl-1": "default"}, "pending": {"wl-2": None}},
    },
    {
        "name": "hier-cohort-borrowing-limit-zero-blocks",
        "source": f"{ST} / Cohort borrowingLimit blocks sibling borrowing in hierarchy / "
                  "'should allow production to borrow but block research from borrowing'",
        "cohorts": [_c("root", None, 0),
                    {"name": "research", "parentName": "root",
                     "quota": {"default": {"cpu": {"nominal": 0, "borrowingLimit": 0}}}},
                    _c("production", "root", 0)],
        "clusterQueues": [{"name": "research-cq", "cohort": "research",
                           "flavors": {"default": {"cpu": 1}}},
                          {"name": "production-cq", "cohort": "production",
                           "flavors": {"default": {"cpu": 1}}}],
        "incoming": [[_wl(f"prod-{i}", "production-cq", "500m") for i in (1, 2, 3)],
                     [{"finish": f"prod-{i}"} for i in (1, 2, 3)],
                     [_wl(f"research-{i}", "research-cq", "500m") for i in (1, 2, 3)]],
        # "verifying production admits all 3 workloads with borrowing", then "research
        # admits only 2 workloads and cannot borrow"
        "expect": {"admitted": {"research-1": "default", "research-2": "default"},
                   "pending": {"research-3": None}},
    },
    {
        "name": "hier-production-borrows-across-cohorts",
        "source": f"{ST} / Cohort borrowingLimit blocks sibling borrowing in hierarchy / "
                  "'should allow production to borrow but block research from borrowing' "
                  "(production admits all 3 workloads with borrowing)",
        "cohorts": [_c("root", None, 0),
                    {"name": "research", "parentName": "root",
                     "quota": {"default": {"cpu": {"nominal": 0, "borrowingLimit": 0}}}},
                    _c("production", "root", 0)],
        "clusterQueues": [{"name": "research-cq", "cohort": "research",
                           "flavors": {"default": {"cpu": 1}}},
                          {"name": "production-cq", "cohort": "production",
                           "flavors": {"default": {"cpu": 1}}}],
        "incoming": [_wl(f"prod-{i}", "production-cq", "500m") for i in (1, 2, 3)],
        "expect": {"admitted": {f"prod-{i}": "default" for i in (1, 2, 3)}},
    },
    {
        "name": "hier-burst-queue-borrows-while-orgs-stay-isolated",
        "source": f"{ST} / Cohort borrowingLimit blocks sibling borrowing in hierarchy / "
                  "'should allow burst queue to borrow idle capacity while orgs stay isolated'",
        "cohorts": [_c("root", None, 0),
                    {"name": "org-a", "parentName": "root",
                     "quota": {"default": {"cpu": {"nominal": 0, "borrowingLimit": 0}}}},
                    {"name": "org-b", "parentName": "root",
                     "quota": {"default": {"cpu": {"nominal": 0, "borrowingLimit": 0}}}}],
        "clusterQueues": [{"name": "org-a-cq", "cohort": "org-a",
                           "flavors": {"default": {"cpu": 1}}},
                          {"name": "org-b-cq", "cohort": "org-b",
                           "flavors": {"default": {"cpu": 1}}},
                          {"name": "burst-cq", "cohort": "root",
                           "flavors": {"default": {"cpu": 0}}}],
        "incoming": [[_wl("org-a-1", "org-a-cq", "500m"), _wl("org-a-2", "org-a-cq", "500m")],
                     [_wl("org-a-overflow", "org-a-cq", "500m")],
                     [_wl("burst-1", "burst-cq", "500m"), _wl("burst-2", "burst-cq", "500m")]],
        "expect": {"admitted": {"org-a-1": "default", "org-a-2": "default",
                                "burst-1": "default", "burst-2": "default"},
                   "pending": {"org-a-overflow": None}},
    },
    {
        "name": "docs-cohort-shared-quota",
        "source": "site/content/en/docs/concepts/cohort.md (kueue.sigs.k8s.io/docs/concepts/"
                  "cohort) / Configuring Quotas: a ClusterQueue with nominal quota 0 may access "
                  "the 12 shared CPUs defined by its Cohort",
        "flavors": ["default-flavor"],
        "cohorts": [{"name": "hello-cohort", "quota": {"default-flavor": {"cpu": 12}}}],
        "clusterQueues": [{"name": "my-cluster-queue", "cohort": "hello-cohort",
                           "flavors": {"default-flavor": {"cpu": 0}}}],
        "incoming": [_wl("uses-12", "my-cluster-queue", 12)],
        "expect": {"admitted": {"uses-12": "default-flavor"}},
    },
    {
        "name": "docs-cohort-shared-quota-is-the-limit",
        "source": "site/content/en/docs/concepts/cohort.md / Configuring Quotas (12 shared "
                  "CPUs; the reason and message: flavorassigner.go fitsResourceQuota)",
        "flavors": ["default-flavor"],
        "cohorts": [{"name": "hello-cohort", "quota": {"default-flavor": {"cpu": 12}}}],
        "clusterQueues": [{"name": "my-cluster-queue", "cohort": "hello-cohort",
                           "flavors": {"default-flavor": {"cpu": 0}}}],
        "incoming": [_wl("wants-13", "my-cluster-queue", 13)],
        "expect": {"pending": {"wants-13": ["ExceedsMaxQuota", "maximum capacity (12)"]}},
    },
    {
        "name": "hier-long-range-preemption",
        "source": "pkg/scheduler/preemption/preemption_test.go TestPreemption / 'long range "
                  "preemption'",
        "cohorts": [_c("cohort-left", "root"), _c("cohort-right", "root")],
        "clusterQueues": [_q("cq-left", "cohort-left", 10,
                             preemption={"reclaimWithinCohort": "Any"}),
                          {"name": "cq-right", "cohort": "cohort-right",
                           "flavors": {"default": {"cpu": 0}}}],
        "admitted": [_wl("to-be-preempted", "cq-right", 5)],
        "incoming": [_wl("in", "cq-left", 8)],
        "expect": {"preempted_messages": {"to-be-preempted": (
            "due to reclamation within the cohort; preemptor path: /root/cohort-left/cq-left; "
            "preemptee path: /root/cohort-right/cq-right")},
            "preempted": {"to-be-preempted": "InCohortReclamation"},
            "admitted": {"in": "default"}, "pending": {"to-be-preempted": "WaitingForQuota"}},
    },
]

