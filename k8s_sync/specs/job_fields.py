"""The words and rules of a training job's fields (``k8s_sync.specs``): the kinds a job
runs as, its labels and resources, image references, environment names and the checkpoint
mount point. :class:`k8s_sync.specs.job.JobSpec` checks its fields with these (through
``k8s_sync.specs.job_checks``), and so do the submission checks (``jobs.validation``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from k8s_sync import naming

#: The job kinds a JobSpec renders: a Kubeflow training-operator v1 PyTorchJob
#: (``manifests.build_pytorchjob``) or a Kubeflow Trainer v2 TrainJob
#: (``manifests.build_trainjob``), each as its (apiVersion, kind).
JOB_KIND_PYTORCHJOB = "pytorchjob"
JOB_KIND_TRAINJOB = "trainjob"
WORKLOAD_KINDS: Mapping[str, tuple[str, str]] = MappingProxyType({
    JOB_KIND_PYTORCHJOB: ("kubeflow.org/v1", "PyTorchJob"),
    JOB_KIND_TRAINJOB: ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
})
#: The ClusterTrainingRuntime a TrainJob references unless it names another (Trainer's
#: chart installs it: ``charts/kubeflow-trainer/files/runtimes/torch-distributed.yaml``).
DEFAULT_TRAINING_RUNTIME = "torch-distributed"

#: Node label (GPU Feature Discovery) naming the GPU model, e.g. ``NVIDIA-H800``.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
SHARED_SUFFIX = "-SHARED"  # GFD's product suffix on renamed shared GPUs
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
SHARING_STRATEGIES = ("time-slicing", "mps")
HAMI_MEMORY_RESOURCE = "nvidia.com/gpumem"  # MiB per card (HAMi)
HAMI_CORES_RESOURCE = "nvidia.com/gpucores"  # % of a card (HAMi)
#: Node label naming the leaf switch a node hangs off (kubesim and Trainyard topology).
SWITCH_LABEL = "trainyard.io/switch"
#: Prefix of the environment variables Trainyard sets itself; users may not set them.
RESERVED_ENV_PREFIX = "TRAINYARD_"
#: Set by the training operator on the ``pytorch`` container (and read by torchrun); a
#: user value would silently win over the operator's and break the rendezvous.
OPERATOR_ENV = frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"})
OPERATOR_ENV_PREFIX = "PET_"
#: A MIG job takes exactly this many slices per replica (see :class:`JobSpec`).
MIG_SLICES_PER_REPLICA = 1
#: Upper bound of ``max_run_seconds``: anything longer is a typo, not a training run.
MAX_RUN_SECONDS = 30 * 24 * 3600
#: ``/dev/shm`` default cap (a tmpfs counts against the container's memory limit).
SHM_MAX_GIB = 64

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# OCI / distribution reference grammar (github.com/distribution/reference, regexp.go),
# restricted to what Trainyard accepts: [registry[:port]/]path[:tag][@sha256:<64 hex>].
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = re.compile(rf"^{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?$")
_PATH_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_IMAGE_NAME_MAX = 255


def validate_image(ref: str) -> str:
    """Return ``ref`` if it is an image reference Trainyard accepts, else raise ``ValueError``.

    Grammar: ``[registry[:port]/]path[:tag][@sha256:<64 hex>]``. The first ``/``-separated
    component is a registry when it contains ``.`` or ``:`` or is ``localhost`` (as docker
    decides); every path component is lower-case ``[a-z0-9]`` runs joined by ``.``, ``_``,
    ``__`` or dashes. No whitespace, no upper-case repository, name <= 255 characters.
    """
    if not isinstance(ref, str) or not ref:
        raise ValueError("image: must not be empty")
    if ref != ref.strip() or any(ch.isspace() for ch in ref):
        raise ValueError(f"image: must not contain whitespace: {ref!r}")
    rest, _, digest = ref.partition("@")
    if digest and not _DIGEST.match(digest):
        raise ValueError(f"image: digest must be sha256:<64 lower-case hex>: {ref!r}")
    name, tag = rest, ""
    last_slash = rest.rfind("/")
    if rest.rfind(":") > last_slash:  # a ':' after the last '/' starts the tag
        name, _, tag = rest.rpartition(":")
        if not _TAG.match(tag):
            raise ValueError(f"image: invalid tag {tag!r} in {ref!r}")
    if not name or len(name) > _IMAGE_NAME_MAX:
        raise ValueError(f"image: repository name empty or longer than 255: {ref!r}")
    parts = name.split("/")
    first = parts[0]
    if len(parts) > 1 and ("." in first or ":" in first or first == "localhost"):
        if not _DOMAIN.match(first):
            raise ValueError(f"image: invalid registry {first!r} in {ref!r}")
        parts = parts[1:]
    for part in parts:
        if not _PATH_COMPONENT.match(part):
            raise ValueError(
                f"image: invalid repository component {part!r} in {ref!r} "
                "(lower-case letters, digits and . _ - separators only)")
    return ref


_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def _is_qualified_name(key: object) -> bool:
    """A label/annotation key: ``[<DNS-1123 subdomain>/]<name of <= 63 chars>``."""
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and not naming.is_dns1123_subdomain(prefix):
        return False
    return bool(_QUALIFIED_NAME.match(name))




_PLACEMENT_KEYS = frozenset({"tolerations", "affinity", "nodeSelector"})
#: Mount points a checkpoint volume must not shadow: these directories themselves...
_SYSTEM_DIRS = frozenset({"", "/dev", "/dev/shm", "/proc", "/sys", "/etc",  # noqa: S108
                          "/bin", "/sbin", "/lib", "/lib64", "/usr", "/boot", "/var", "/run",
                          "/var/run"})
#: ...and anything under these: the runtime refuses mounts into /proc (runc's
#: checkProcMount), and a volume under /etc, /dev or /var/run/secrets hides files the
#: kubelet mounts there (resolv.conf, hosts, /dev/shm, the service-account token).
_SYSTEM_TREES = ("/proc/", "/sys/", "/dev/", "/etc/", "/var/run/secrets/", "/run/secrets/")


def env_name_problem(name: object) -> Literal["invalid", "reserved", "operator"] | None:
    """Why ``name`` cannot be a user's environment variable, or ``None``: ``"invalid"``
    (not letters, digits and ``_``), ``"reserved"`` (``TRAINYARD_*``, set by Trainyard) or
    ``"operator"`` (set by the training operator: :data:`OPERATOR_ENV`, ``PET_*``). The one
    rule; ``JobSpec`` and the submission checks both ask it."""
    if not isinstance(name, str) or not ENV_NAME.match(name):
        return "invalid"
    if name.upper().startswith(RESERVED_ENV_PREFIX):
        return "reserved"
    if name in OPERATOR_ENV or name.startswith(OPERATOR_ENV_PREFIX):
        return "operator"
    return None


def checkpoint_path_problem(path: object) -> Literal["relative", "characters", "parent",
                                                     "system"] | None:
    """Why ``path`` cannot be a checkpoint mount point, or ``None``: ``"relative"`` (not
    absolute), ``"characters"`` (':' or whitespace), ``"parent"`` (a ``..`` component) or
    ``"system"`` (a system directory, or under /proc, /sys, /dev, /etc, /var/run/secrets).
    The one rule; ``JobSpec`` and the submission checks both ask it."""
    if not isinstance(path, str) or not path.startswith("/"):
        return "relative"
    if ":" in path or any(ch.isspace() for ch in path):
        return "characters"
    if ".." in path.split("/"):
        return "parent"
    clean = "/" + "/".join(part for part in path.split("/") if part and part != ".")
    if clean.rstrip("/") in _SYSTEM_DIRS or (clean + "/").startswith(_SYSTEM_TREES):
        return "system"
    return None
