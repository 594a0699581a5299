"""The API preview's answer, as the OpenAPI schema describes it (``jobs.verdict``).

Documentation only: the view returns the verdict's dict as it is. A ``fits`` or ``waits``
verdict answers 200; a ``refused`` one answers with the status Submit would (400, 403 or
409) and Submit's error body (``message``, ``field``, ``extra.errors``) plus the verdict's
fields.
"""

from __future__ import annotations

from rest_framework import serializers

_VERDICT = ("One of fits (it would be admitted now), waits (it would be queued) or refused "
            "(Submit would refuse it; only in a 400, 403 or 409 answer).")


class PreviewDimension(serializers.Serializer):
    key = serializers.CharField(help_text="A quota key: cpu, memory, gpu:<model>, mig:<profile>, "
                                          "gpu-shared, gpu-memory.")
    label = serializers.CharField()
    unit = serializers.CharField()
    wanted = serializers.FloatField(help_text="What the whole job counts (every worker; CPU "
                                              "and memory: the requests).")
    in_use = serializers.FloatField(help_text="In use in the pool now (the quota page's number).")
    ahead = serializers.FloatField(help_text="What queued jobs of the pool that would start "
                                             "before this one take (the engine counts them "
                                             "in use when it decides this one).")
    quota = serializers.FloatField()
    ceiling = serializers.FloatField(allow_null=True, help_text="What the pool may hold, "
                                     "borrowing; null: any idle capacity.")
    fits_quota = serializers.BooleanField()
    fits_ceiling = serializers.BooleanField()


class WorkerResources(serializers.Serializer):
    cpu_request = serializers.FloatField(help_text="Cores one worker's pod requests (counted).")
    cpu_limit = serializers.FloatField(help_text="Cores one worker's pod is limited to (typed).")
    memory_request_gib = serializers.FloatField(help_text="GiB one worker's pod requests "
                                                          "(counted).")
    memory_limit_gib = serializers.FloatField(help_text="GiB one worker's pod is limited to "
                                                        "(typed).")


class RunCost(serializers.Serializer):
    seconds = serializers.IntegerField(help_text="The run time priced.")
    gpu = serializers.CharField(help_text="GPU devices (cards, MIG instances, shares, vGPUs), "
                                          "as the invoice's GPU line would charge them.")
    cpu = serializers.CharField(help_text="CPU core-hours (0 where the card prices none).")
    memory = serializers.CharField(help_text="Memory GiB-hours (0 where the card prices none).")
    storage = serializers.CharField(help_text="The checkpoint volume's GiB-months, where the "
                                              "job asks for one.")
    total = serializers.CharField()


class PreviewCost(serializers.Serializer):
    currency = serializers.CharField()
    unpriced = serializers.BooleanField(help_text="The job's device has no price on the rate "
                                                  "card: its GPU part is billed 0.")
    max = RunCost(help_text="For its maximum run time.")
    expected = RunCost(help_text="For the run time the engine expects "
                                 "(expected_run_seconds).")


class PreviewAnswer(serializers.Serializer):
    """A ``fits`` or ``waits`` verdict (200)."""

    verdict = serializers.ChoiceField(choices=["fits", "waits"], help_text=_VERDICT)
    summary = serializers.CharField(help_text="The verdict in one sentence, in the request's "
                                              "language.")
    nodes = serializers.IntegerField(allow_null=True, help_text="fits: how many nodes.")
    placement = serializers.ListField(child=serializers.CharField(),
                                      help_text="fits: the node of each replica (master first).")
    switch = serializers.CharField(help_text='fits: the switch its nodes are under ("" unknown).')
    starts_now = serializers.BooleanField()
    borrowing = serializers.BooleanField(help_text="fits: above the pool's quota, on borrowed "
                                                   "idle capacity (reclaimed when its owner "
                                                   "needs it).")
    reason = serializers.CharField(help_text="waits: the one limit that holds it, in the "
                                             "request's language.")
    reason_code = serializers.CharField(allow_null=True, help_text="waits: the reason's code "
                                        "(jobs.wait.*, jobs.never.*).")
    eta_p50 = serializers.DateTimeField(allow_null=True, help_text="waits: the estimated start "
                                        "(median); null when it cannot start as it is.")
    eta_p90 = serializers.DateTimeField(allow_null=True, help_text="waits: 90% start by then.")
    eta_p50_text = serializers.CharField(help_text='eta_p50 as every page writes it, e.g. '
                                                   '"today 21:05 UTC".')
    eta_p90_text = serializers.CharField()
    position_in_pool = serializers.IntegerField(allow_null=True)
    resource = serializers.CharField(allow_null=True, help_text="The accelerator's quota key.")
    gpus = serializers.IntegerField()
    quota = serializers.FloatField(allow_null=True)
    in_use = serializers.FloatField()
    fits_quota = serializers.BooleanField()
    gpu_kind = serializers.CharField()
    notes = serializers.ListField(child=serializers.CharField())
    dimensions = PreviewDimension(many=True)
    worker = WorkerResources()
    worker_text = serializers.DictField(child=serializers.CharField(),
                                        help_text="cpu, memory, counted: the per-worker lines.")
    expected_run_seconds = serializers.IntegerField(
        help_text="The run time the engine expects for such a job (the submitter's "
                  "expected_seconds, else the history of such jobs, else the policy's "
                  "default), at most its maximum run time.")
    cost = PreviewCost(allow_null=True, help_text="What the invoice would charge for it "
                                                  "(null: billing not installed).")


class PreviewRefused(serializers.Serializer):
    """A ``refused`` verdict: Submit's error body with the verdict's fields."""

    verdict = serializers.ChoiceField(choices=["refused"], help_text=_VERDICT)
    field = serializers.CharField(allow_null=True, help_text="The field to change (null: the "
                                                             "submission as a whole).")
    message = serializers.CharField(help_text="Submit's words: what to change.")
    errors = serializers.DictField(child=serializers.CharField(),
                                   help_text="Every field's refusal (__all__: not a field's).")
    summary = serializers.CharField()
    extra = serializers.DictField(help_text="As in Submit's error body.")
