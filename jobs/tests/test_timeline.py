"""Timeline arithmetic: the run a job had between two observations."""

from __future__ import annotations

import datetime as dt


def test_a_run_missed_between_two_observations_ends_now_and_never_starts_before_admission():
    from jobs.timeline import missed_run_start

    now = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
    admitted = now - dt.timedelta(minutes=10)
    ran = {"Running": {"status": "False", "lastTransitionTime": "2026-03-01T08:00:00Z"},
           "Succeeded": {"status": "True", "lastTransitionTime": "2026-03-01T08:02:30Z"}}
    # the cluster's clock says it ran 150 s: that long, ending now
    assert missed_run_start(ran, finished="Succeeded", admitted_at=admitted, now=now) == (
        now - dt.timedelta(seconds=150))
    # a faster (simulated) clock: never before the admission
    assert missed_run_start(ran, finished="Succeeded", now=now,
                            admitted_at=now - dt.timedelta(seconds=20)) == (
        now - dt.timedelta(seconds=20))
    # no Running condition: it never ran (it failed to start)
    assert missed_run_start({"Failed": {"status": "True"}}, finished="Failed",
                            admitted_at=admitted, now=now) is None
    # unreadable times: a stretch of no length, now
    assert missed_run_start({"Running": {"lastTransitionTime": "soon"}}, finished="Failed",
                            admitted_at=admitted, now=now) == now
