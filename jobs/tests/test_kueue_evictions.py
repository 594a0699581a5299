"""Kueue mode's reading of waitForPodsReady's backoff, pure: a job whose pods did not start
waits out Kueue's backoff with a plain reason and the time it is queued again."""

import datetime as dt

from core.texts import english
from jobs.backends.kueue import kueue_reason
from k8s_sync import kueue
from k8s_sync.tests.test_kueue import _workload


def test_a_job_in_kueues_backoff_says_when_it_is_queued_again():
    at = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(minutes=2)
    view = kueue.workload_view(_workload(
        conditions=[("QuotaReserved", "False", "PendingEvaluation", "Exceeded the PodsReady "
                     "timeout ty-acme-dev/pytorchjob-j7-abcde"),
                    ("Requeued", "False", "PodsReadyTimeout", "Exceeded the PodsReady timeout")],
        requeueState={"count": 2, "requeueAt": at.strftime("%Y-%m-%dT%H:%M:%SZ")}))
    text = english(kueue_reason(view, "ty-acme-dev", None))
    assert text.startswith("its pods did not start in time (2 times so far): Kueue queues "
                           "it again at "), text
    assert at.strftime("%H:%M") in text
    over = kueue.workload_view(_workload(
        conditions=[("QuotaReserved", "False", "WaitingForQuota", "insufficient quota"),
                    ("Requeued", "True", "BackoffFinished", "The workload backoff was finished")],
        requeueState={"count": 2}))
    assert "did not start" not in english(kueue_reason(over, "ty-acme-dev", 3))
