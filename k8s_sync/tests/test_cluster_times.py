"""The cluster's own times, parsed from what the API says (issue 17)."""

import datetime as dt

from k8s_sync.observe import pod_run_times
from k8s_sync.selectors import WorkloadStatus

UTC = dt.UTC


def _status(*conditions):
    return WorkloadStatus(namespace="ty-a-dev", name="j", uid="u", resource_version="1",
                          suspended=False, conditions=conditions, replica_statuses={},
                          active=0)


def test_pod_run_times_from_the_containers():
    running = {"phase": "Running", "startTime": "2026-10-01T10:00:00Z", "containerStatuses": [
        {"state": {"running": {"startedAt": "2026-10-01T10:02:00Z"}}},
        {"state": {"terminated": {"startedAt": "2026-10-01T10:01:00Z",
                                  "finishedAt": "2026-10-01T11:00:00Z"}}}]}
    assert pod_run_times(running) == (dt.datetime(2026, 10, 1, 10, 1, tzinfo=UTC), None)
    done = {"phase": "Succeeded", "containerStatuses": [
        {"state": {"terminated": {"startedAt": "2026-10-01T10:01:00Z",
                                  "finishedAt": "2026-10-01T11:00:00Z"}}}]}
    assert pod_run_times(done) == (dt.datetime(2026, 10, 1, 10, 1, tzinfo=UTC),
                                   dt.datetime(2026, 10, 1, 11, 0, tzinfo=UTC))
    pulling = {"phase": "Pending", "startTime": "2026-10-01T10:00:00Z",
               "containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}
    assert pod_run_times(pulling) == (None, None)


def test_running_since_is_the_running_conditions_time_until_a_suspension():
    running = {"type": "Running", "status": "True", "reason": "PyTorchJobRunning",
               "lastTransitionTime": "2026-10-01T10:00:00Z"}
    assert _status(running).running_since() == dt.datetime(2026, 10, 1, 10, tzinfo=UTC)
    finished = (dict(running, status="False"),
                {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded",
                 "lastTransitionTime": "2026-10-01T11:00:00Z"})
    status = _status(*finished)
    assert status.running_since() == dt.datetime(2026, 10, 1, 10, tzinfo=UTC)
    assert status.condition_time("Succeeded") == dt.datetime(2026, 10, 1, 11, tzinfo=UTC)
    suspended = dict(running, status="False", reason="PyTorchJobSuspended")
    assert _status(suspended).running_since() is None
    assert _status(suspended, finished[1]).running_since() is None
    assert _status().running_since() is None
