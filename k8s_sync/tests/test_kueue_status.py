"""What Kueue's Workload status says of evictions and requeues (Kueue v0.19), read pure."""

from k8s_sync import kueue, kueue_status
from k8s_sync.tests.test_kueue import _workload


def test_new_evictions_since_what_the_job_saw():
    now = {"Preempted/": 3, "PodsReadyTimeout/WaitForStart": 1}
    assert kueue_status.new_evictions({}, now) == [
        "PodsReadyTimeout/WaitForStart", "Preempted/", "Preempted/", "Preempted/"]
    assert kueue_status.new_evictions({"Preempted/": 1, "PodsReadyTimeout/WaitForStart": 1},
                                      now) == ["Preempted/", "Preempted/"]
    assert kueue_status.new_evictions(now, now) == []
    # a count that went down (the Workload was recreated) counts from zero
    assert kueue_status.new_evictions({"Preempted/": 5}, {"Preempted/": 1}) == ["Preempted/"]


def test_the_preemption_reason_survives_readmission_in_the_message():
    # preemption.go preemptionMessage with HumanReadablePreemptionReasons
    msg = ("Previously: Preempted to accommodate a workload (UID: u, JobUID: j) due to "
           "reclamation within the cohort while borrowing; preemptor path: /c/a; ...")
    assert kueue_status.preemption_reason(msg) == "InCohortReclaimWhileBorrowing"
    assert kueue_status.preemption_reason(msg.replace(" while borrowing", "")) == \
        "InCohortReclamation"
    assert kueue_status.preemption_reason("due to prioritization in the ClusterQueue") == \
        "InClusterQueue"
    assert kueue_status.preemption_reason("no reason") == ""


def test_the_requeuing_limit_is_read_from_each_step_of_the_deactivation():
    target = kueue.workload_view(_workload(conditions=[
        ("Admitted", "True", "Admitted", ""),
        ("DeactivationTarget", "True", "RequeuingLimitExceeded",
         "exceeding the maximum number of re-queuing retries")]))
    assert target.requeue_limit_exceeded  # about to be deactivated
    evicted = kueue.workload_view(_workload(active=False, conditions=[
        ("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded",
         "The workload is deactivated due to exceeding the maximum number of re-queuing "
         "retries")]))
    assert evicted.requeue_limit_exceeded
    held = kueue.workload_view(_workload(active=False, conditions=[
        ("Evicted", "True", "Deactivated", "The workload is deactivated")]))
    assert not held.requeue_limit_exceeded  # Trainyard's own hold
    timed_out = kueue.workload_view(_workload(
        conditions=[("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout")],
        requeueState={"count": 2}, schedulingStats={"evictions": [
            {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 2}]}))
    assert not timed_out.requeue_limit_exceeded and timed_out.requeue_count == 2
    assert kueue_status.counts(timed_out.evictions) == {"PodsReadyTimeout/WaitForStart": 2}


def test_the_pending_message_leaves_out_the_flavors_of_other_nodes():
    """Kueue names every flavor that is for other nodes (every other GPU model's); the
    job's owner is told what holds it back on its own flavor, per pod set."""
    from k8s_sync.kueue_status import concise_message

    message = ("couldn't assign flavors to pod set master: flavor gpu-a100 doesn't match node "
               "affinity, flavor gpu-l4 doesn't match node affinity, insufficient unused quota "
               "for nvidia.com/gpu in flavor gpu-h800, 3 more needed; couldn't assign flavors "
               "to pod set worker: flavor gpu-a100 doesn't match node affinity, insufficient "
               "unused quota for nvidia.com/gpu in flavor gpu-h800, 8 more needed")
    assert concise_message(message) == (
        "couldn't assign flavors to pod set master: insufficient unused quota for "
        "nvidia.com/gpu in flavor gpu-h800, 3 more needed; couldn't assign flavors to pod "
        "set worker: insufficient unused quota for nvidia.com/gpu in flavor gpu-h800, "
        "8 more needed")
    # no flavor matches the job at all: that is the message, kept whole
    none = ("couldn't assign flavors to pod set master: flavor gpu-a100 doesn't match node "
            "affinity, flavor gpu-l4 doesn't match node affinity")
    assert concise_message(none) == none
    assert concise_message("ClusterQueue ty-a-dev is inactive") == (
        "ClusterQueue ty-a-dev is inactive")
