"""What the cluster says, recorded by the observers (``observe.py``) in k8s_sync's own tables.

These rows are *observations*, never decisions: only the observers write them, and a
relist replaces them with what the API server returns. Each row is keyed by namespace
("" for cluster-scoped kinds) and name (and, in the one table shared by several kinds,
:class:`ObservedWorkload`, by apiVersion and kind too), keeps the object's ``uid`` and
``resourceVersion`` (an unchanged version means nothing to write) and the raw object,
beside the parsed columns pages and selectors need.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class Observed(models.Model):
    """Common columns of one observed Kubernetes object."""

    namespace = models.CharField(max_length=253, blank=True, default="")
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64)
    resource_version = models.CharField(max_length=64)
    labels = models.JSONField(default=dict)
    raw = models.JSONField(default=dict)
    created_at = models.DateTimeField(null=True, blank=True)  # metadata.creationTimestamp
    observed_at = models.DateTimeField()  # when Trainyard last wrote the row

    objects = models.Manager()  # declared on the base so code generic over kinds type-checks

    class Meta:
        abstract = True
        ordering = ["namespace", "name"]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class ObservedNode(Observed):
    """A Node: GPU inventory (GPU Feature Discovery labels), capacity, schedulability."""

    gpu_product = models.CharField(max_length=200, blank=True)  # nvidia.com/gpu.product
    gpu_model = models.CharField(max_length=200, blank=True)  # product without -MIG-/-SHARED
    gpu_count = models.PositiveIntegerField(default=0)  # physical cards (nvidia.com/gpu.count)
    gpu_memory_mib = models.PositiveIntegerField(null=True, blank=True)  # per card
    mig_strategy = models.CharField(max_length=20, blank=True)  # none / single / mixed
    sharing_strategy = models.CharField(max_length=20, blank=True)  # none / time-slicing / mps
    gpu_replicas = models.PositiveIntegerField(default=1)
    capacity = models.JSONField(default=dict)  # resource -> quantity string
    allocatable = models.JSONField(default=dict)
    unschedulable = models.BooleanField(default=False)  # spec.unschedulable (cordoned)
    ready = models.BooleanField(default=False)  # the Ready condition is True
    taints = models.JSONField(default=list)
    zone = models.CharField(max_length=200, blank=True)
    rack = models.CharField(max_length=200, blank=True)
    switch = models.CharField(max_length=200, blank=True)
    node_pool = models.CharField(max_length=200, blank=True)

    class Meta(Observed.Meta):
        verbose_name = _("observed node")
        constraints = [models.UniqueConstraint(fields=["name"], name="k8s_obs_node_name")]

    @property
    def schedulable(self) -> bool:
        """New pods may land here: not cordoned and Ready."""
        return self.ready and not self.unschedulable


class ObservedPod(Observed):
    """A Pod: where it runs, what it asked for, and whose it is (Trainyard labels)."""

    # Indexed: every admission pass reads the live pods (LIVE_PHASES) among every pod of
    # every finished job the cluster still keeps.
    phase = models.CharField(max_length=20, blank=True, db_index=True)
    node_name = models.CharField(max_length=253, blank=True, db_index=True)
    requests = models.JSONField(default=dict)  # effective pod requests: resource -> str
    priority = models.IntegerField(null=True, blank=True)
    priority_class = models.CharField(max_length=253, blank=True)
    tenant = models.CharField(max_length=100, blank=True, db_index=True)  # trainyard.io/tenant
    pool = models.CharField(max_length=100, blank=True)  # trainyard.io/pool
    job = models.CharField(max_length=253, blank=True, db_index=True)  # trainyard.io/job
    reason = models.CharField(max_length=200, blank=True)  # why it is pending / failed
    message = models.TextField(blank=True)
    # The cluster's own times (the kubelet's clock, not when Trainyard looked): the
    # earliest container start (``state.running.startedAt`` or ``terminated.startedAt``,
    # else ``status.startTime``) and, once every container ended, the latest
    # ``terminated.finishedAt``. What a job ran when the admission loop did not look.
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta(Observed.Meta):
        verbose_name = _("observed pod")
        constraints = [models.UniqueConstraint(fields=["namespace", "name"],
                                               name="k8s_obs_pod_ns_name")]

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


class ObservedQuota(Observed):
    """A ResourceQuota: hard limits and current use per resource (quantity strings)."""

    hard = models.JSONField(default=dict)  # status.hard (spec.hard until the server fills it)
    used = models.JSONField(default=dict)
    scopes = models.JSONField(default=list)  # spec.scopes and the scopeSelector, flattened

    class Meta(Observed.Meta):
        verbose_name = _("observed quota")
        constraints = [models.UniqueConstraint(fields=["namespace", "name"],
                                               name="k8s_obs_quota_ns_name")]


class ObservedPVC(Observed):
    """A PersistentVolumeClaim: requested size, StorageClass, phase."""

    storage_class = models.CharField(max_length=253, blank=True)
    requested = models.CharField(max_length=64, blank=True)  # spec.resources.requests.storage
    requested_bytes = models.BigIntegerField(null=True, blank=True)
    capacity = models.CharField(max_length=64, blank=True)  # status.capacity.storage
    phase = models.CharField(max_length=20, blank=True)
    volume_name = models.CharField(max_length=253, blank=True)
    # spec.volumeAttributesClassName: the volume's provisioned IOPS (k8s_sync.storage)
    volume_attributes_class = models.CharField(max_length=253, blank=True, default="")

    class Meta(Observed.Meta):
        verbose_name = _("observed persistent volume claim")
        constraints = [models.UniqueConstraint(fields=["namespace", "name"],
                                               name="k8s_obs_pvc_ns_name")]


class ObservedStorageClass(Observed):
    """A StorageClass: provisioner and parameters (what a PVC of that class gets)."""

    provisioner = models.CharField(max_length=253, blank=True)
    parameters = models.JSONField(default=dict)
    is_default = models.BooleanField(default=False)
    reclaim_policy = models.CharField(max_length=20, blank=True)
    volume_binding_mode = models.CharField(max_length=40, blank=True)
    allow_volume_expansion = models.BooleanField(default=False)

    class Meta(Observed.Meta):
        verbose_name = _("observed storage class")
        verbose_name_plural = _("observed storage classes")
        constraints = [models.UniqueConstraint(fields=["name"], name="k8s_obs_sc_name")]


class ClusterEvent(Observed):
    """An Event that matters to users (a refused pod, a preemption, unschedulable).

    Unlike the other observations it outlives the cluster's copy (Events expire after
    about an hour there): a relist keeps rows whose Event vanished, and rows older than
    ``observe.EVENT_RETENTION`` are pruned.
    """

    type = models.CharField(max_length=20, blank=True)  # Normal / Warning
    reason = models.CharField(max_length=100, db_index=True)
    message = models.TextField(blank=True)
    involved_kind = models.CharField(max_length=100, blank=True)
    involved_namespace = models.CharField(max_length=253, blank=True)
    involved_name = models.CharField(max_length=253, blank=True)
    involved_uid = models.CharField(max_length=64, blank=True, db_index=True)
    source = models.CharField(max_length=200, blank=True)
    count = models.PositiveIntegerField(default=1)
    first_seen = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta(Observed.Meta):
        verbose_name = _("cluster event")
        ordering = ["-last_seen", "namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["namespace", "name"],
                                               name="k8s_obs_event_ns_name")]


#: The (apiVersion, kind) of the training workloads Trainyard creates: Kubeflow training
#: operator v1 PyTorchJobs and Kubeflow Trainer v2 TrainJobs (``specs.WORKLOAD_KINDS``).
PYTORCHJOB: tuple[str, str] = ("kubeflow.org/v1", "PyTorchJob")
TRAINJOB: tuple[str, str] = ("trainer.kubeflow.org/v1alpha1", "TrainJob")


class ObservedWorkload(Observed):
    """A training workload Trainyard manages: a Kubeflow PyTorchJob (``observe.KINDS``
    "pytorchjobs") or a Kubeflow Trainer v2 TrainJob ("trainjobs"), with what the
    admission loop reads of it.

    **One table for every job kind**, keyed by (``api_version``, ``kind``, namespace,
    name), rather than a table per kind. What admission needs of a training job is the
    same whatever its kind: is it suspended, which conditions hold (``Running``,
    ``Succeeded``, ``Failed``...) and how many replicas are still active. Each kind's parse
    function (``observe.py``) fills these common columns from its own status shape, so
    another kind (Kubeflow Trainer v2's ``trainer.kubeflow.org/v1alpha1`` TrainJob: its
    ``spec.suspend``, ``status.conditions`` and ``status.jobsStatus``) is one ``KINDS``
    entry and one parse function, with no migration, and ``jobs`` reads every kind with
    the same selector (``k8s_sync.selectors.workload_statuses``). The observer scopes each
    kind's relist to its own rows (``KindSpec.shared``), so kinds never prune each other.
    """

    api_version = models.CharField(max_length=100)  # e.g. kubeflow.org/v1
    kind = models.CharField(max_length=100)  # e.g. PyTorchJob
    suspended = models.BooleanField(default=False)  # PyTorchJob: spec.runPolicy.suspend
    # status.conditions, each as the API said: type, status, reason, message,
    # lastTransitionTime (the keys the object carries; absent ones stay absent)
    conditions = models.JSONField(default=list)
    # per replica type (Master, Worker): the operator's active / succeeded / failed counts
    replica_statuses = models.JSONField(default=dict)
    active = models.PositiveIntegerField(default=0)  # replicas active, summed over types

    class Meta(Observed.Meta):
        verbose_name = _("observed workload")
        ordering = ["api_version", "kind", "namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["api_version", "kind", "namespace", "name"],
                                               name="k8s_obs_workload_key")]


class ObservedKueueWorkload(Observed):
    """A Kueue Workload of a Trainyard job (``observe.KINDS`` "kueueworkloads",
    ``kueue.x-k8s.io/v1beta2``): what Kueue decided about it, which Kueue mode reads
    (``jobs.backends.kueue``) instead of listing every Workload each pass.

    Its own table, not :class:`ObservedWorkload`'s: a Workload is not a training job (no
    suspend flag, no replicas) and Kueue mode finds it by its owner, the job. Only the
    Workloads in Trainyard's tenant namespaces owned by a PyTorchJob or TrainJob are
    recorded (Kueue copies none of the job's labels, so the watch cannot select them on
    the server: ``k8s_sync.kueue_observe.keeps_workload``). The columns are
    ``k8s_sync.kueue.WorkloadView``'s, so a pass never decodes ``raw``.
    """

    owner_kind = models.CharField(max_length=100, blank=True)  # PyTorchJob / TrainJob
    owner_name = models.CharField(max_length=253, blank=True)  # the job's k8s_name
    active = models.BooleanField(default=True)  # spec.active
    queue_name = models.CharField(max_length=253, blank=True)  # spec.queueName (LocalQueue)
    cluster_queue = models.CharField(max_length=253, blank=True)  # status.admission's
    # status.conditions, each as the API said: type, status, reason, message,
    # lastTransitionTime (the keys the object carries)
    conditions = models.JSONField(default=list)
    flavors = models.JSONField(default=list)  # the flavors of its admission, sorted
    requeue_at = models.DateTimeField(null=True, blank=True)  # status.requeueState
    requeue_count = models.PositiveIntegerField(default=0)  # status.requeueState.count
    # status.schedulingStats.evictions: [{reason, underlyingCause, count}] (every eviction
    # Kueue made of it, counted when made: no preemption is lost between two passes)
    evictions = models.JSONField(default=list)

    class Meta(Observed.Meta):
        verbose_name = _("observed Kueue workload")
        constraints = [models.UniqueConstraint(fields=["namespace", "name"],
                                               name="k8s_obs_kueue_wl_ns_name")]
        indexes = [models.Index(fields=["namespace", "owner_name"],
                                name="k8s_obs_kueue_wl_owner")]


class ObservedKind(models.Model):
    """The watcher's bookkeeping per kind: last list, last event, last error, count."""

    kind = models.CharField(max_length=40, primary_key=True)  # "nodes", "pods", ...
    resource_version = models.CharField(max_length=64, blank=True)
    last_list_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    object_count = models.PositiveIntegerField(default=0)  # rows after the last list

    class Meta:
        verbose_name = _("observed kind")
        ordering = ["kind"]

    def __str__(self) -> str:
        return self.kind

    @property
    def failing(self) -> bool:
        """The last error is newer than the last successful list."""
        if not self.last_error:
            return False
        return not (self.last_list_at and self.last_error_at
                    and self.last_list_at > self.last_error_at)
