"""Pure builders: plain specs in, plain Kubernetes manifests (dicts) out.

Contracts:

* No I/O, no clock, no settings, no ``kubernetes`` import; the same spec always yields
  the same manifest, so a resync that changes nothing is a no-op apply.
* Every call returns fresh dicts that share nothing with the spec or with each other.
* Names come from :mod:`k8s_sync.naming`; labels are set only in :func:`_metadata`.
* Quantities are canonical strings (what the API server would store), so server-side
  apply of an unchanged spec does not change the object.
* The manifests are the *declared intent* of Trainyard's field manager: they carry no
  ``status``, ``resourceVersion`` or ``managedFields``.

Per tenant pool, in apply order (:func:`desired_pool_objects`): Namespace,
ServiceAccount, Role, RoleBinding, NetworkPolicy, LimitRange, ResourceQuota; with the
pool's IOPS StorageClasses (:mod:`k8s_sync.storage`) these are :data:`POOL_KINDS`.
Cluster-wide (:func:`desired_cluster_objects`): one PriorityClass per tier. Per job
(:func:`build_pytorchjob`, :func:`build_checkpoint_pvc`, :func:`pytorchjob_suspend_patch`,
:func:`pytorchjob_resume_patch`): a suspended PyTorchJob and its checkpoint PVC; the design
notes of those are at the "per job" section below.

Design choices, with the Kubernetes facts they rest on:

* **One unscoped ResourceQuota** carries compute, GPU, MIG, storage and PVC keys.
  PriorityClass-scoped quotas would reject storage/object-count keys (§0.2) and tiers
  are ordered by Trainyard's admission, not by quota, so no scoped quota is built.
* **Suspended pool**: the namespace and every object stay; the quota's ``pods`` and all
  ``requests.nvidia.com/*`` keys become ``"0"``. Quota admission only checks *new*
  pods, so nothing running is killed and nothing stored is deleted; stopping running
  jobs is the admission engine's decision (it suspends PyTorchJobs). Lifting the
  suspension restores the normal values on the next apply. The namespace is labelled
  ``trainyard.io/suspended: "true"`` so observers and humans can see why.
* **LimitRange** always sets GPU ``default``/``defaultRequest`` to ``"0"`` (§0.3); CPU and
  memory ``defaultRequest`` let pods that omit requests pass the cpu/memory quota.
* **RBAC, least privilege**: researchers submit and cancel through the portal, so that
  Trainyard's admission stays the only queue. Their group gets *read-only* access to
  what they need to debug their work (pods, logs, events, services, PVCs, quota,
  limit ranges, PyTorchJobs). No secrets, no exec/port-forward, no writes. The
  ServiceAccount is the identity of job pods; it is bound to nothing and does not
  automount an API token.
* **NetworkPolicy**: every pod is isolated both ways; allowed are traffic from/to pods
  of the same namespace (NCCL/Gloo between master and workers), DNS to the cluster
  DNS pods, and any ``NetworkSpec.egress_cidrs``. No ingress from other namespaces.
* **Namespace** enforces the ``baseline`` Pod Security Standard by default (no privileged
  or host-namespace pods), which GPU training pods do not need; ``PoolSpec.pod_security``
  relaxes it where RDMA needs extra capabilities.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from core.choices import Tier
from k8s_sync import naming
from k8s_sync.placement import NODE_NAME_FIELD
from k8s_sync.specs import (
    DEFAULT_TRAINING_RUNTIME,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    HAMI_CORES_RESOURCE,
    HAMI_MEMORY_RESOURCE,
    JOB_KIND_PYTORCHJOB,
    JOB_KIND_TRAINJOB,
    SHARING_STRATEGY_LABEL,
    WORKLOAD_KINDS,
    JobSpec,
    LimitSpec,
    NetworkSpec,
    PoolSpec,
    TierSpec,
    cpu_quantity,
    default_tiers,
    gib_quantity,
    thaw,
)
from k8s_sync.tier_runtime import tier_runtime_name

__all__ = [
    "POOL_KINDS",
    "PYTORCHJOB_API_VERSION",
    "PYTORCHJOB_KIND",
    "TRAINJOB_API_VERSION",
    "TRAINJOB_KIND",
    "TRAINYARD_PATCH_MANAGER",
    "Manifest",
    "build_checkpoint_pvc",
    "build_limit_range",
    "build_namespace",
    "build_network_policy",
    "build_priority_class",
    "build_pytorchjob",
    "build_resource_quota",
    "build_role",
    "build_role_binding",
    "build_service_account",
    "build_trainjob",
    "build_workload",
    "desired_cluster_objects",
    "desired_pool_objects",
    "merge_node_affinity",
    "pytorchjob_resume_patch",
    "pytorchjob_suspend_patch",
    "trainjob_resume_patch",
    "trainjob_suspend_patch",
    "workload_requeue_patch",
    "workload_resume_patch",
    "workload_suspend_patch",
    "workload_suspended",
]

Manifest = dict[str, Any]

RBAC_GROUP = "rbac.authorization.k8s.io"
POD_SECURITY_LABEL = "pod-security.kubernetes.io/enforce"
_READ = ["get", "list", "watch"]


def _metadata(
    name: str, labels: Mapping[str, str], namespace: str | None = None
) -> dict[str, Any]:
    """The one place where object metadata (and thus labels) is assembled."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(sorted(labels.items()))
    return meta


def _pool_object(spec: PoolSpec, api_version: str, kind: str, name: str) -> Manifest:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _metadata(name, spec.labels, spec.namespace),
    }


# --- per pool --------------------------------------------------------------------------------


def build_namespace(spec: PoolSpec) -> Manifest:
    """The pool's Namespace ``ty-<tenant>-<pool>``; kept (and labelled) when suspended."""
    labels = {**spec.labels, naming.LABEL_SUSPENDED: "true" if spec.suspended else "false"}
    if spec.pod_security is not None:
        labels[POD_SECURITY_LABEL] = spec.pod_security
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": _metadata(spec.namespace, labels)}


def build_service_account(spec: PoolSpec) -> Manifest:
    """The identity of the pool's job pods: no permissions, no automounted token."""
    obj = _pool_object(spec, "v1", "ServiceAccount", naming.SERVICE_ACCOUNT_NAME)
    obj["automountServiceAccountToken"] = False
    return obj


def build_role(spec: PoolSpec) -> Manifest:
    """Read-only Role for the tenant's people (see the module docstring for the why)."""
    obj = _pool_object(spec, f"{RBAC_GROUP}/v1", "Role", naming.ROLE_NAME)
    obj["rules"] = [
        {"apiGroups": [""],
         "resources": ["events", "limitranges", "persistentvolumeclaims", "pods", "pods/log",
                       "resourcequotas", "services"],
         "verbs": list(_READ)},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": list(_READ)},
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "pytorchjobs/status"],
         "verbs": list(_READ)},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs", "trainjobs/status"],
         "verbs": list(_READ)},
    ]
    return obj


def build_role_binding(spec: PoolSpec) -> Manifest:
    """Binds :func:`build_role` to the tenant's group.

    ``roleRef`` is immutable; the binding is named after the role it references
    (``naming.ROLE_BINDING_NAME == naming.ROLE_NAME``), so a future change of role is a
    new binding, never an in-place roleRef change (which the API server rejects with 422).
    """
    obj = _pool_object(spec, f"{RBAC_GROUP}/v1", "RoleBinding", naming.ROLE_BINDING_NAME)
    obj["subjects"] = [{"kind": "Group", "apiGroup": RBAC_GROUP, "name": spec.tenant_group}]
    obj["roleRef"] = {"apiGroup": RBAC_GROUP, "kind": "Role", "name": naming.ROLE_NAME}
    return obj


def _dns_peer(network: NetworkSpec) -> dict[str, Any]:
    peer: dict[str, Any] = {
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": network.dns_namespace}
        }
    }
    if network.dns_pod_labels:
        peer["podSelector"] = {"matchLabels": dict(network.dns_pod_labels)}
    return peer


def build_network_policy(spec: PoolSpec) -> Manifest:
    """Isolate every pod of the pool: same-namespace traffic, DNS, listed CIDRs only."""
    obj = _pool_object(spec, "networking.k8s.io/v1", "NetworkPolicy",
                       naming.NETWORK_POLICY_NAME)
    egress: list[dict[str, Any]] = [
        {"to": [{"podSelector": {}}]},
        {"to": [_dns_peer(spec.network)],
         "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
    ]
    if spec.network.egress_cidrs:
        egress.append({"to": [{"ipBlock": {"cidr": cidr}} for cidr in spec.network.egress_cidrs]})
    obj["spec"] = {
        "podSelector": {},
        "policyTypes": ["Ingress", "Egress"],
        # A peer with only a podSelector means "pods of THIS namespace".
        "ingress": [{"from": [{"podSelector": {}}]}],
        "egress": egress,
    }
    return obj


def _container_limits(limits: LimitSpec) -> dict[str, Any]:
    default: dict[str, str] = {GPU_RESOURCE: "0"}
    default_request: dict[str, str] = {GPU_RESOURCE: "0"}
    maximum: dict[str, str] = {}
    if limits.default_cpu is not None:
        default["cpu"] = cpu_quantity(limits.default_cpu)
    if limits.default_memory_gib is not None:
        default["memory"] = gib_quantity(limits.default_memory_gib)
    if limits.default_request_cpu is not None:
        default_request["cpu"] = cpu_quantity(limits.default_request_cpu)
    if limits.default_request_memory_gib is not None:
        default_request["memory"] = gib_quantity(limits.default_request_memory_gib)
    if limits.max_cpu is not None:
        maximum["cpu"] = cpu_quantity(limits.max_cpu)
    if limits.max_memory_gib is not None:
        maximum["memory"] = gib_quantity(limits.max_memory_gib)
    if limits.max_gpus is not None:
        maximum[GPU_RESOURCE] = str(limits.max_gpus)
    item: dict[str, Any] = {
        "type": "Container",
        "default": dict(sorted(default.items())),
        "defaultRequest": dict(sorted(default_request.items())),
    }
    if maximum:
        item["max"] = dict(sorted(maximum.items()))
    return item


def build_limit_range(spec: PoolSpec) -> Manifest:
    """Per-container defaults/caps; GPU ``default`` and ``defaultRequest`` are always 0."""
    obj = _pool_object(spec, "v1", "LimitRange", naming.LIMIT_RANGE_NAME)
    items = [_container_limits(spec.limits)]
    if spec.limits.max_pvc_storage_gib is not None:
        items.append({"type": "PersistentVolumeClaim",
                      "max": {"storage": gib_quantity(spec.limits.max_pvc_storage_gib)}})
    obj["spec"] = {"limits": items}
    return obj


def build_resource_quota(spec: PoolSpec) -> Manifest:
    """The pool's unscoped ResourceQuota (the backstop, never the queue)."""
    obj = _pool_object(spec, "v1", "ResourceQuota", naming.RESOURCE_QUOTA_NAME)
    obj["spec"] = {"hard": spec.quota.to_hard(suspended=spec.suspended)}
    return obj


def build_production_quota(spec: PoolSpec) -> Manifest | None:
    """A prod pool's ResourceQuota for its production pods alone (scoped to the production
    PriorityClass): production never borrows, so they are held to the grant, while the
    unscoped quota lets the pool's batch pods borrow idle capacity."""
    if spec.production_quota is None:
        return None
    obj = _pool_object(spec, "v1", "ResourceQuota", naming.PRODUCTION_QUOTA_NAME)
    obj["spec"] = {
        "hard": spec.production_quota.to_hard(suspended=spec.suspended),
        "scopeSelector": {"matchExpressions": [{
            "scopeName": "PriorityClass", "operator": "In",
            "values": [naming.priority_class_name(Tier.PRODUCTION)]}]},
    }
    return obj


#: (apiVersion, kind) of every object a tenant pool may have, in apply order: what
#: :func:`desired_pool_objects` builds, plus the pool's IOPS StorageClasses (cluster-scoped,
#: :mod:`k8s_sync.storage`). The one list: the pool reconcile lists and prunes these kinds
#: (``reconcile.pool_owner``) and the periodic resync relists them. Every object of a pool
#: carries ``naming.pool_labels``; a Namespace is never pruned
#: (``reconcile.NEVER_DELETED_KINDS``).
POOL_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    (f"{RBAC_GROUP}/v1", "Role"),
    (f"{RBAC_GROUP}/v1", "RoleBinding"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("v1", "LimitRange"),
    ("storage.k8s.io/v1", "StorageClass"),
    ("v1", "ResourceQuota"),
)


def desired_pool_objects(spec: PoolSpec) -> list[Manifest]:
    """Every object of one tenant pool, in apply order.

    The Namespace comes first (everything else lives in it); the LimitRange precedes the
    ResourceQuota so pods never meet a cpu/memory quota without defaults.
    """
    return [
        build_namespace(spec),
        build_service_account(spec),
        build_role(spec),
        build_role_binding(spec),
        build_network_policy(spec),
        build_limit_range(spec),
        build_resource_quota(spec),
        *filter(None, [build_production_quota(spec)]),
    ]


# --- cluster-wide ----------------------------------------------------------------------------


def build_priority_class(tier: TierSpec) -> Manifest:
    """The PriorityClass of one tier. ``value``/``preemptionPolicy`` are immutable (422)."""
    labels = {**naming.managed_labels(), naming.LABEL_TIER: tier.name.value}
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": _metadata(tier.priority_class_name, labels),
        "value": tier.value,
        "preemptionPolicy": tier.preemption_policy,
        "globalDefault": False,
        "description": tier.description,
    }


def desired_cluster_objects(tiers: Iterable[TierSpec] | None = None) -> list[Manifest]:
    """The cluster-wide objects: one PriorityClass per tier (default: :func:`default_tiers`)."""
    chosen = default_tiers() if tiers is None else tuple(tiers)
    names = [tier.priority_class_name for tier in chosen]
    if len(names) != len(set(names)):
        raise ValueError(f"duplicate tiers: {names}")
    return [build_priority_class(tier) for tier in chosen]


# --- per job ---------------------------------------------------------------------------------
#
# Design choices of the PyTorchJob (facts: kubernetes-facts §5, §6, §8):
#
# * Created once with ``runPolicy.suspend: true`` (``client.create_if_absent``), never
#   re-applied: admission un-suspends it (:func:`pytorchjob_resume_patch`), preemption
#   suspends it after the tier's grace period (:func:`pytorchjob_suspend_patch`); the
#   operator then deletes the pods (SIGTERM, ``terminationGracePeriodSeconds``) and
#   recreates them from the template on resume.
# * ``cleanPodPolicy: Running``: when the job finishes (Master succeeded, failed, or
#   deadline), pods still Running or Pending (typically Workers) are deleted so they
#   stop holding GPUs nobody accounts for any more; finished pods stay for their logs.
#   ``None`` (operator default) would leave stragglers on GPUs; ``All`` loses the logs.
# * Whole GPUs: ``nodeSelector nvidia.com/gpu.product=<model>`` (GFD label) so the model
#   admission counted is the model the pods get. MIG (mixed strategy): the resource name
#   ``nvidia.com/mig-<profile>`` already restricts pods to nodes with such slices, and a
#   mixed-strategy node keeps its base product label, so ``gpu_product`` is optional and,
#   when given, selects the base product (a profile such as 1g.10gb exists on A100-80GB
#   and H100-80GB alike). MIG-single product labels (``...-MIG-1g.10gb``) advertise
#   ``nvidia.com/gpu`` and are rejected with a MIG profile by JobSpec.
# * Shared GPUs (time-slicing/MPS, ``renameByDefault``): ``nvidia.com/gpu.shared: N`` and
#   ``nvidia.com/gpu.product=<model>-SHARED`` (GFD's label on such nodes; NVIDIA
#   k8s-device-plugin README, "Shared Access to GPUs"), optionally
#   ``nvidia.com/gpu.sharing-strategy``; ``nprocPerNode`` 1 (shares may be replicas of
#   one card, and NCCL refuses two ranks on one device). HAMi: ``nvidia.com/gpu`` vGPUs
#   plus ``nvidia.com/gpumem`` (MiB per card) and ``nvidia.com/gpucores`` (%) limits.
# * GPU/MIG in requests and limits with equal values (the device plugin's extended
#   resources cannot be overcommitted); CPU/memory requests may be below limits.
# * GPU pods tolerate ``nvidia.com/gpu:NoSchedule`` (the GPU Operator's customary taint);
#   CPU-only pods do not, so they stay off GPU nodes where that taint is used.
# * ``nprocPerNode``: one process per whole GPU; ``"1"`` for MIG (a CUDA process sees one
#   MIG device) and for CPU-only jobs (``auto`` would start one process per host CPU).
# * ``/dev/shm``: an ``emptyDir`` with ``medium: Memory`` (the container runtime's 64 MiB
#   default breaks NCCL and DataLoader workers); its ``sizeLimit`` (JobSpec.shm_gib,
#   default half the memory limit, at most 64 GiB) bounds tmpfs pages, which count
#   against the memory limit.
# * Checkpoints: a PVC volume mounted at ``checkpoint_path`` in every replica. The PVC
#   is *not* owned by the PyTorchJob (no ownerReference), so it survives suspension,
#   preemption and deletion of the job; removing it is the jobs app's decision.

PYTORCHJOB_API_VERSION, PYTORCHJOB_KIND = WORKLOAD_KINDS[JOB_KIND_PYTORCHJOB]
PYTORCH_CONTAINER = "pytorch"
CLEAN_POD_POLICY = "Running"
RESTART_POLICY = "OnFailure"
GPU_TOLERATION: dict[str, str] = {"key": GPU_RESOURCE, "operator": "Exists",
                                  "effect": "NoSchedule"}
CHECKPOINT_VOLUME = "checkpoints"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"  # noqa: S108 - the container's shared-memory mount, not a temp file


def _job_env(spec: JobSpec) -> list[dict[str, str]]:
    """Trainyard's variables first (so user values may reference them as ``$(NAME)``),
    then the user's, sorted by name.

    The checkpoint contract (docs/guides/checkpoints.md; examples/train_resumable.py
    follows it): identity (``TRAINYARD_JOB_ID``, ``TRAINYARD_JOB`` the PyTorchJob name,
    ``TRAINYARD_TENANT``, ``TRAINYARD_POOL``, ``TRAINYARD_TIER``); where to save
    (``TRAINYARD_CHECKPOINT_DIR``, the mount of the checkpoint volume;
    ``TRAINYARD_CHECKPOINT_PERSISTENT`` "1" when it is a PVC that survives a preemption,
    "0" for an emptyDir); how often (``TRAINYARD_CHECKPOINT_INTERVAL_SECONDS``); how long
    SIGTERM gives (``TRAINYARD_GRACE_SECONDS`` = ``terminationGracePeriodSeconds``);
    whether this run resumes (``TRAINYARD_RESUME`` "1" after a preemption or restart,
    ``TRAINYARD_RESTART_COUNT`` how many times the job was put back in the queue).
    Distributed-launch variables (``MASTER_ADDR``, ``WORLD_SIZE``, ``RANK``, ``PET_*``
    for torchrun) are the training operator's, not ours.
    """
    ours = [
        ("TRAINYARD_JOB_ID", str(spec.job_id)),
        ("TRAINYARD_JOB", spec.name),
        ("TRAINYARD_TENANT", spec.tenant_slug),
        ("TRAINYARD_POOL", spec.pool),
        ("TRAINYARD_TIER", spec.tier.value),
        ("TRAINYARD_CHECKPOINT_PERSISTENT", "1" if spec.checkpoint_claim_name else "0"),
        ("TRAINYARD_CHECKPOINT_DIR", spec.checkpoint_path),
        ("TRAINYARD_CHECKPOINT_INTERVAL_SECONDS", str(spec.checkpoint_interval_seconds)),
        ("TRAINYARD_RESUME", "1" if spec.resume else "0"),
        ("TRAINYARD_RESTART_COUNT", str(spec.restart_count)),
        ("TRAINYARD_GRACE_SECONDS", str(spec.grace_seconds)),
    ]
    return [{"name": k, "value": v} for k, v in [*ours, *sorted(spec.env.items())]]


def _job_resources(spec: JobSpec) -> dict[str, dict[str, str]]:
    requests = {"cpu": cpu_quantity(spec.cpu_request),
                "memory": gib_quantity(spec.memory_request_gib)}
    limits = {"cpu": cpu_quantity(spec.cpu_limit),
              "memory": gib_quantity(spec.memory_limit_gib)}
    device = spec.gpu_resource
    if device is not None:
        requests[device] = limits[device] = str(spec.gpus_per_replica)
    # HAMi: memory (MiB) and cores (%) per card, read by its scheduler extender and its
    # in-container limiter (HAMi-core) from the limits; requests == limits like the GPUs.
    for resource, value in ((HAMI_MEMORY_RESOURCE, spec.gpu_memory_mib_per_card),
                            (HAMI_CORES_RESOURCE, spec.gpu_cores_percent)):
        if value is not None:
            requests[resource] = limits[resource] = str(value)
    for resource, count in spec.extended.items():  # RDMA NICs ... (core.resources)
        requests[resource] = limits[resource] = str(count)
    return {"requests": dict(sorted(requests.items())), "limits": dict(sorted(limits.items()))}


def merge_node_affinity(affinity: Mapping[str, Any] | None,
                        required: list[dict[str, Any]],
                        nodes: Iterable[str] = ()) -> dict[str, Any]:
    """``affinity`` (copied) with ``required`` match expressions ANDed into its required
    node affinity, and, when ``nodes`` are given, restricted to those nodes by name.

    ``nodeSelectorTerms`` are ORed and the requirements inside a term ANDed, so each
    expression is added to *every* existing term; with no required terms yet, one term
    holding ``required`` is created. A ``matchFields`` requirement takes exactly one value
    for ``In`` (kube-apiserver's ``ValidateNodeFieldSelectorRequirement``: "must be only
    one value when `operator` is 'In' or 'NotIn' for node field selector"), so each term
    becomes one term per node, ``metadata.name In [<node>]``: (T1 or T2) and (n1 or n2)
    = T1n1 or T1n2 or T2n1 or T2n2. Preferred terms, pod (anti-)affinity are kept as-is.
    """
    merged = thaw(affinity or {})
    nodes = list(nodes)
    if not required and not nodes:
        return merged
    node = merged.setdefault("nodeAffinity", {})
    req = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = req.get("nodeSelectorTerms") or [{}]
    for term in terms:
        if required:
            term["matchExpressions"] = [*term.get("matchExpressions", []), *thaw(required)]
    if nodes:
        terms = [{**thaw(term), "matchFields": [
            *term.get("matchFields", []),
            {"key": NODE_NAME_FIELD, "operator": "In", "values": [name]}]}
            for term in terms for name in nodes]
    req["nodeSelectorTerms"] = terms
    return merged


def _job_pod_spec(spec: JobSpec) -> dict[str, Any]:
    placement = thaw(spec.placement)
    node_selector: dict[str, str] = dict(placement.get("nodeSelector") or {})
    if spec.gpu_product:
        node_selector[GPU_PRODUCT_LABEL] = spec.gpu_product_label  # <model>-SHARED if shared
    if spec.sharing_strategy:
        node_selector[SHARING_STRATEGY_LABEL] = spec.sharing_strategy
    tolerations: list[dict[str, Any]] = list(placement.get("tolerations") or [])
    if spec.gpu_resource is not None and GPU_TOLERATION not in tolerations:
        tolerations.append(dict(GPU_TOLERATION))
    required = ([{"key": spec.switch_label, "operator": "In", "values": [spec.switch]}]
                if spec.switch else [])
    # ... and on the nodes admission counted the replicas on, by name (k8s_sync.placement).
    affinity = merge_node_affinity(placement.get("affinity"), required, spec.nodes)

    mounts = [{"name": SHM_VOLUME, "mountPath": SHM_PATH}]
    volumes: list[dict[str, Any]] = [
        {"name": SHM_VOLUME,
         "emptyDir": {"medium": "Memory", "sizeLimit": gib_quantity(spec.effective_shm_gib)}},
    ]
    claim = spec.checkpoint_claim_name
    mounts.insert(0, {"name": CHECKPOINT_VOLUME, "mountPath": spec.checkpoint_path})
    volumes.insert(0, {"name": CHECKPOINT_VOLUME,
                       **({"persistentVolumeClaim": {"claimName": claim}} if claim
                          else {"emptyDir": {}})})
    container: dict[str, Any] = {"name": PYTORCH_CONTAINER, "image": spec.image}
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    container["env"] = _job_env(spec)
    container["resources"] = _job_resources(spec)
    container["volumeMounts"] = mounts

    pod: dict[str, Any] = {
        "serviceAccountName": naming.SERVICE_ACCOUNT_NAME,
        "automountServiceAccountToken": False,
        "priorityClassName": naming.priority_class_name(spec.tier),
        "terminationGracePeriodSeconds": spec.grace_seconds,
    }
    if node_selector:
        pod["nodeSelector"] = dict(sorted(node_selector.items()))
    if affinity:
        pod["affinity"] = affinity
    if tolerations:
        pod["tolerations"] = tolerations
    pod["containers"] = [container]
    pod["volumes"] = volumes
    return pod


def _replica_specs(spec: JobSpec) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        metadata: dict[str, Any] = {"labels": dict(sorted(spec.labels.items()))}
        if spec.annotations:
            metadata["annotations"] = dict(spec.annotations)
        return {"replicas": count, "restartPolicy": RESTART_POLICY,
                "template": {"metadata": metadata, "spec": _job_pod_spec(spec)}}

    replicas = {"Master": replica(1)}
    if spec.worker_replicas:
        replicas["Worker"] = replica(spec.worker_replicas)
    return replicas


def build_pytorchjob(spec: JobSpec) -> Manifest:
    """The ``kubeflow.org/v1`` PyTorchJob of one Trainyard job (see the design notes above).

    Contract: pure and deterministic; one Master (``replicas: 1``) plus a Worker replica
    spec only when ``spec.worker_replicas > 0``; every pod template carries the job labels, the
    single container ``pytorch``, the tier's PriorityClass and grace period, the
    workload ServiceAccount without a token, the checkpoint and ``/dev/shm`` volumes.
    The result validates against the bundled CRD schema and the operator's webhook
    rules (``k8s_sync.crd_validation.validate_pytorchjob``).
    """
    gpus = spec.gpus_per_replica if spec.gpu_resource == GPU_RESOURCE else 0
    return {
        "apiVersion": PYTORCHJOB_API_VERSION,
        "kind": PYTORCHJOB_KIND,
        "metadata": _metadata(spec.name, spec.labels, spec.namespace),
        "spec": {
            "nprocPerNode": str(gpus or 1),
            "runPolicy": {
                "cleanPodPolicy": CLEAN_POD_POLICY,
                "suspend": spec.suspend,
                "activeDeadlineSeconds": spec.max_run_seconds,
                "backoffLimit": spec.backoff_limit,
            },
            "pytorchReplicaSpecs": _replica_specs(spec),
        },
    }


def build_checkpoint_pvc(spec: JobSpec) -> Manifest | None:
    """The PVC ``<job>-ckpt`` Trainyard creates for the job's checkpoints, or ``None``.

    ``None`` unless ``checkpoint_storage_class`` and ``checkpoint_size_gib`` are given
    (an existing ``checkpoint_claim`` is the user's, not Trainyard's). The claim carries
    the job labels and no ownerReference: it outlives suspensions and the PyTorchJob.
    Access mode: ``ReadWriteOnce`` for a single-pod job; ``ReadWriteMany`` when there are
    Workers, because their pods land on other nodes and a RWO volume attaches to one node
    only (so multi-node jobs need an RWX-capable class such as NFS/CephFS/Lustre). Create
    it once, before the PyTorchJob (``client.create_if_absent``): a PVC's spec is
    immutable apart from growing ``resources.requests.storage``.
    """
    if not spec.checkpoint_storage_class or spec.checkpoint_size_gib is None:
        return None
    name = spec.checkpoint_claim_name
    assert name is not None  # derived from the storage class above
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteMany" if spec.worker_replicas else "ReadWriteOnce"],
        "storageClassName": spec.checkpoint_storage_class,
        "resources": {"requests": {"storage": gib_quantity(spec.checkpoint_size_gib)}},
    }
    if spec.checkpoint_volume_attributes_class:  # its provisioned IOPS (k8s_sync.storage)
        claim["volumeAttributesClassName"] = spec.checkpoint_volume_attributes_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(name, spec.labels, spec.namespace),
        "spec": claim,
    }


def pytorchjob_suspend_patch(suspend: bool) -> dict[str, Any]:
    """Merge patch that suspends (``True``: the operator deletes the pods, which get their
    grace period) or un-suspends (``False``: the operator recreates them) a PyTorchJob."""
    return {"spec": {"runPolicy": {"suspend": bool(suspend)}}}


def pytorchjob_resume_patch(spec: JobSpec) -> dict[str, Any]:
    """Merge patch that un-suspends the job *and* refreshes its pod templates from
    ``spec`` (e.g. ``resume=True`` and the new ``restart_count``).

    JSON merge patch replaces lists wholesale, so containers, env and volumes become
    exactly what :func:`build_pytorchjob` renders; maps (labels) are merged, except the
    pod's ``affinity`` and required node affinity, which are nulled when the spec renders
    none (the placement of this admission replaces the last one's). Replica
    counts are part of the templates, so ``spec.worker_replicas`` must be the job's
    original.
    ``spec.suspend`` is ignored: the patch always sets ``suspend: false``.
    """
    replicas = _replica_specs(spec)
    for replica in replicas.values():
        # A merge patch merges maps: without an explicit null, the required node affinity
        # of an earlier admission (another switch, other nodes) would survive the resume.
        affinity = replica["template"]["spec"].setdefault("affinity", None)
        if affinity is not None:
            node = affinity.setdefault("nodeAffinity", None)
            if node is not None:
                node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", None)
    return {"spec": {"runPolicy": {"suspend": False}, "pytorchReplicaSpecs": replicas}}


# --- per job: a Kubeflow Trainer v2 TrainJob --------------------------------------------------
#
# Design choices of the TrainJob (kubeflow/trainer v2.3.0: ``pkg/apis/trainer/v1alpha1/
# trainjob_types.go``, ``pkg/runtime/framework/plugins/jobset/jobset.go``,
# ``pkg/runtime/framework/plugins/torch/torch.go``):
#
# * The same JobSpec, so the same pods: ``trainer.numNodes`` is the job's pods (its
#   ``workers``), ``trainer.resourcesPerNode`` the requests and limits a PyTorchJob pod
#   gets, ``trainer.numProcPerNode`` its ``nprocPerNode``, ``trainer.image``, ``command``,
#   ``args``; the ClusterTrainingRuntime (``spec.runtimeRef``, default
#   ``torch-distributed``) supplies the rest of the pod and the PET_* rendezvous variables.
# * ``spec.trainer`` is immutable (CEL ``self == oldSelf``), and the webhook refuses env
#   for the ``node`` container in ``runtimePatches``. So Trainyard's variables that never
#   change (the checkpoint contract's identity, directory, interval, grace) are plain
#   ``trainer.env``; the two that change on every resume, ``TRAINYARD_RESUME`` and
#   ``TRAINYARD_RESTART_COUNT``, are read by the downward API from pod annotations
#   (``trainyard.io/resume``, ``trainyard.io/restart-count``) that Trainyard's runtime patch
#   sets.
# * What the pods need from Trainyard beyond the trainer (labels, annotations, node
#   selector, tolerations, affinity with the pinned nodes, the checkpoint and /dev/shm
#   volumes and their mounts in the ``node`` container, the ServiceAccount, the tier's
#   termination grace) is one ``spec.runtimePatches`` entry, manager
#   :data:`TRAINYARD_PATCH_MANAGER`, on the runtime's ``node`` replicated job. The webhook
#   lets runtime patches change when the TrainJob is suspended before or after the
#   update, so a resume un-suspends and replaces Trainyard's entry in one request
#   (:func:`trainjob_resume_patch`), as Kueue does with its own entry.
# * Trainer's PodSpecPatch has no ``priorityClassName`` (nor automountServiceAccountToken):
#   the TrainJob references ``<runtime>-<tier>``, the runtime's copy at the tier's
#   PriorityClass that Trainyard writes first (why: ``k8s_sync.tier_runtime``).
# * ``activeDeadlineSeconds`` is the longest run: Trainer counts it from the last resume,
#   like the PyTorchJob's runPolicy.
# * The checkpoint PVC is the same (:func:`build_checkpoint_pvc`): no ownerReference, it
#   outlives the TrainJob.

TRAINJOB_API_VERSION, TRAINJOB_KIND = WORKLOAD_KINDS[JOB_KIND_TRAINJOB]
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINING_RUNTIME_KIND = "ClusterTrainingRuntime"
#: The manager of Trainyard's entry in ``spec.runtimePatches`` (a domain-prefixed path, as
#: Trainer's webhook requires; Kueue's is ``kueue.x-k8s.io/manager``).
TRAINYARD_PATCH_MANAGER = "trainyard.io/manager"
#: The replicated job and its container that ``torch-distributed`` (and every torch
#: runtime) names ``node`` (Trainer's ``constants.Node``).
TRAINER_NODE = "node"
RESUME_ANNOTATION = "trainyard.io/resume"
RESTART_COUNT_ANNOTATION = "trainyard.io/restart-count"
_FROM_ANNOTATION = {"TRAINYARD_RESUME": RESUME_ANNOTATION,
                    "TRAINYARD_RESTART_COUNT": RESTART_COUNT_ANNOTATION}
_PATCHABLE_POD_FIELDS = ("serviceAccountName", "terminationGracePeriodSeconds",
                         "nodeSelector", "affinity", "tolerations", "volumes")


def _trainjob_env(spec: JobSpec) -> list[dict[str, Any]]:
    """:func:`_job_env`, with the two variables that change on a resume read from the
    pod's annotations (the downward API), since ``trainer.env`` cannot change."""
    env: list[dict[str, Any]] = []
    for item in _job_env(spec):
        key = _FROM_ANNOTATION.get(item["name"])
        if key is None:
            env.append(item)
        else:
            env.append({"name": item["name"], "valueFrom": {"fieldRef": {
                "apiVersion": "v1", "fieldPath": f"metadata.annotations['{key}']"}}})
    return env


def _trainyard_runtime_patch(spec: JobSpec) -> dict[str, Any]:
    """Trainyard's entry of ``spec.runtimePatches``: what the pods of the runtime's
    ``node`` job get beyond the trainer (see the design notes above)."""
    pod = _job_pod_spec(spec)
    pod_patch: dict[str, Any] = {key: pod[key] for key in _PATCHABLE_POD_FIELDS if key in pod}
    pod_patch["containers"] = [{"name": TRAINER_NODE,
                                "volumeMounts": pod["containers"][0]["volumeMounts"]}]
    annotations = {**dict(spec.annotations),
                   RESUME_ANNOTATION: "1" if spec.resume else "0",
                   RESTART_COUNT_ANNOTATION: str(spec.restart_count)}
    metadata = {"labels": dict(sorted(spec.labels.items())),
                "annotations": dict(sorted(annotations.items()))}
    return {"manager": TRAINYARD_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": TRAINER_NODE, "template": {"spec": {"template": {
            "metadata": metadata, "spec": pod_patch}}}}]}}}}


def build_trainjob(spec: JobSpec) -> Manifest:
    """The ``trainer.kubeflow.org/v1alpha1`` TrainJob of one Trainyard job (see the design
    notes above): suspended unless ``spec.suspend`` is False, on the tier's copy of the
    runtime ``spec.runtime``, ``trainer.numNodes`` = the job's pods (CRD-validated)."""
    gpus = spec.gpus_per_replica if spec.gpu_resource == GPU_RESOURCE else 0
    trainer: dict[str, Any] = {"image": spec.image}
    if spec.command:
        trainer["command"] = list(spec.command)
    if spec.args:
        trainer["args"] = list(spec.args)
    trainer["env"] = _trainjob_env(spec)
    trainer["numNodes"] = spec.replicas
    trainer["numProcPerNode"] = gpus or 1
    trainer["resourcesPerNode"] = _job_resources(spec)
    return {
        "apiVersion": TRAINJOB_API_VERSION,
        "kind": TRAINJOB_KIND,
        "metadata": _metadata(spec.name, spec.labels, spec.namespace),
        "spec": {
            "runtimeRef": {"apiGroup": TRAINER_GROUP, "kind": TRAINING_RUNTIME_KIND,
                           "name": tier_runtime_name(spec.runtime or DEFAULT_TRAINING_RUNTIME,
                                                     spec.tier)},
            "trainer": trainer,
            "runtimePatches": [_trainyard_runtime_patch(spec)],
            "suspend": spec.suspend,
            "activeDeadlineSeconds": spec.max_run_seconds,
        },
    }


def trainjob_suspend_patch(suspend: bool) -> dict[str, Any]:
    """Merge patch that suspends (Trainer suspends its JobSet, whose Jobs delete the pods
    with their grace period) or un-suspends a TrainJob."""
    return {"spec": {"suspend": bool(suspend)}}


def trainjob_resume_patch(spec: JobSpec, current: Mapping[str, Any] | None = None
                          ) -> dict[str, Any]:
    """Merge patch that un-suspends the TrainJob *and* replaces Trainyard's runtime patch
    (the resume annotations, this admission's nodes), keeping other managers' entries of
    ``current`` (the TrainJob as read; a merge patch replaces the list wholesale). The
    webhook allows it because the job is suspended before the update."""
    others = [thaw(p) for p in ((current or {}).get("spec") or {}).get("runtimePatches") or []
              if isinstance(p, Mapping) and p.get("manager") != TRAINYARD_PATCH_MANAGER]
    return {"spec": {"suspend": False,
                     "runtimePatches": [*others, _trainyard_runtime_patch(spec)]}}


# --- per job, whichever kind -------------------------------------------------------------------


def build_workload(spec: JobSpec) -> Manifest:
    """The object the job runs as: :func:`build_pytorchjob` or :func:`build_trainjob`."""
    return build_trainjob(spec) if spec.kind == JOB_KIND_TRAINJOB else build_pytorchjob(spec)


def workload_suspend_patch(kind: str, suspend: bool) -> dict[str, Any]:
    """The suspend (or un-suspend) merge patch of a job of ``kind`` (``JobSpec.kind``)."""
    return (trainjob_suspend_patch(suspend) if kind == JOB_KIND_TRAINJOB
            else pytorchjob_suspend_patch(suspend))


def workload_resume_patch(spec: JobSpec, current: Mapping[str, Any] | None = None
                          ) -> dict[str, Any]:
    """The un-suspend merge patch that refreshes what a resume changes, for either kind."""
    return (trainjob_resume_patch(spec, current) if spec.kind == JOB_KIND_TRAINJOB
            else pytorchjob_resume_patch(spec))


def workload_requeue_patch(spec: JobSpec, current: Mapping[str, Any] | None = None
                           ) -> dict[str, Any]:
    """:func:`workload_resume_patch` that leaves the job suspended: what a job back in
    Kueue's queue needs before Kueue admits it again (its next run resumes from its
    checkpoint: ``TRAINYARD_RESUME``, the restart count). Kueue owns ``suspend`` and
    un-suspends it with the templates as they are then."""
    patch = workload_resume_patch(spec, current)
    if spec.kind == JOB_KIND_TRAINJOB:
        patch["spec"]["suspend"] = True
    else:
        patch["spec"]["runPolicy"]["suspend"] = True
    return patch


def workload_suspended(kind: str, obj: Mapping[str, Any]) -> bool:
    """Whether the object (as read from the cluster) of a job of ``kind`` is suspended."""
    spec = obj.get("spec") or {}
    if kind == JOB_KIND_TRAINJOB:
        return bool(spec.get("suspend"))
    return bool((spec.get("runPolicy") or {}).get("suspend"))
