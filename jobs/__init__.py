"""Training jobs: submission, the queue, admission, preemption and resume (issue 6)."""
