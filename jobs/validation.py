"""Checks of a job submission, pure: the inventory comes in as plain data.

Each problem is reported against the field it concerns, in words the researcher can act
on. Nothing here touches the database or the cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from core.choices import Tier
from core.numbers import api_decimal
from core.resources import extended
from jobs.choices import TIER_POOLS, JobKind
from k8s_sync import specs as k8s_specs
from tenants.storage import iops_tiers

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,58}[a-z0-9])?$")
# [registry[:port]/]path[:tag][@sha256:digest] with lower-case path components.
IMAGE_RE = re.compile(
    r"^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?)(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$")
# A PVC name: a DNS-1123 subdomain.
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
CLAIM_RE = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")
CHECKPOINT_GIB = 50  # a new checkpoint volume's size when none is given
MAX_CHECKPOINT_GIB = 10240
MAX_WORKERS = 64
MAX_GPUS_PER_WORKER = 64
#: what a worker's CPU and memory may be at most before the largest node is asked (the
#: columns' width); the inventory's largest node is the real bound
MAX_CPU_PER_WORKER = Decimal(99999)
MAX_MEMORY_GIB_PER_WORKER = Decimal(9999999)
MAX_GPU_MEMORY_GIB_PER_CARD = Decimal(99999)
#: a command's or arguments' list, the environment, the annotations: at most this many
#: entries of at most MAX_VALUE_CHARS characters each
MAX_ITEMS = 256
MAX_VALUE_CHARS = 10_000
#: annotation and label domains the scheduler owns: Trainyard (``trainyard.io/tenant``,
#: ``.../pool`` ...) and Kueue (``kueue.x-k8s.io/queue-name``); a submission may not set
#: them. ``kubesim.trainyard.io/`` keys are the simulator's hints and are kept.
RESERVED_DOMAINS = ("trainyard.io", "kueue.x-k8s.io")
SIMULATOR_PREFIX = "kubesim.trainyard.io/"


@dataclass(frozen=True)
class Inventory:
    """What the cluster offers, per node: the largest node of each kind bounds a worker."""

    gpus_per_node: dict[str, int] = field(default_factory=dict)   # GPU model -> max per node
    mig_per_node: dict[str, int] = field(default_factory=dict)    # MIG profile -> max per node
    max_cpu: Decimal = Decimal(0)
    max_memory_gib: Decimal = Decimal(0)
    storage_classes: dict[str, bool] = field(default_factory=dict)  # name -> is the default
    # shared GPUs (time-slicing/MPS, nvidia.com/gpu.shared), per card model (without GFD's
    # -SHARED suffix): the most shares one node has, the GPU memory of one share (MiB, the
    # smallest over the model's nodes) and the sharing strategies (e.g. "time-slicing")
    shared_per_node: dict[str, int] = field(default_factory=dict)
    shared_memory_mib: dict[str, int] = field(default_factory=dict)
    shared_strategies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # HAMi (nvidia.com/gpumem): card model -> GPU memory of one card (MiB, the largest)
    hami_memory_mib: dict[str, int] = field(default_factory=dict)
    # whole GPUs ("gpu:<model>") and MIG slices ("mig:<profile>"): switch -> the units of
    # each node under it (every node, schedulable or not), bounding a gang (one switch)
    gang_room: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    # StorageClass -> the tenant whose pools own it (its trainyard.io/tenant label)
    storage_class_owners: dict[str, str] = field(default_factory=dict)

    def for_tenant(self, slug: str) -> Inventory:
        """What ``slug`` is shown: the shared StorageClasses and its own, never another
        tenant's (``tenants.storage.storage_class_owners``)."""
        return replace(self, storage_classes={
            name: default for name, default in self.storage_classes.items()
            if self.storage_class_owners.get(name, slug) == slug})


class SubmissionError(ValueError):
    """Invalid submission; ``errors`` maps field -> message."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def _number(data: dict, key: str, errors: dict, *, integer: bool = False) -> Any:
    raw = data.get(key)
    try:
        value = Decimal(str(raw).strip())
    except (InvalidOperation, ValueError):
        errors[key] = _("“%(v)s” is not a number.") % {"v": raw}
        return None
    if not value.is_finite() or (integer and value != value.to_integral_value()):
        errors[key] = (_("“%(v)s” is not a whole number.") if integer
                       else _("“%(v)s” is not a number.")) % {"v": raw}
        return None
    return int(value) if integer else value


def validate_submission(data: dict[str, Any], *, pool: str, inventory: Inventory
                        ) -> dict[str, Any]:
    """Return the cleaned submission or raise SubmissionError naming every bad field."""
    errors: dict[str, str] = {}
    name = str(data.get("name") or "").strip()
    if not NAME_RE.match(name):
        errors["name"] = _("Use 1 to 60 lower-case letters, digits and hyphens, starting and "
                           "ending with a letter or digit.")
    image = str(data.get("image") or "").strip()
    if not image or not IMAGE_RE.match(image) or len(image) > 500 or not _valid_image(image):
        errors["image"] = _("“%(i)s” is not a valid image reference, e.g. "
                            "registry.example.org/team/trainer:1.4 or pytorch/pytorch:2.4.0."
                            ) % {"i": image}
    tier = data.get("tier")
    if tier not in Tier.values:
        errors["tier"] = _("Choose production, development or batch.")
    elif pool not in TIER_POOLS[Tier(tier)]:
        errors["tier"] = {Tier.PRODUCTION: _("Production jobs run in the prod pool."),
                          Tier.DEVELOPMENT: _("Development jobs run in the dev pool.")}.get(
            Tier(tier), _("This tier cannot run in this pool."))
    workers = _number(data, "workers", errors, integer=True)
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        errors["workers"] = _("Use 1 to %(n)s workers.") % {"n": MAX_WORKERS}
    gpus = _number(data, "gpus_per_worker", errors, integer=True)
    model = str(data.get("gpu_model") or "").strip()
    mig = str(data.get("mig_profile") or "").strip()
    shared = _flag(data, "gpu_shared", errors)
    if gpus is not None and shared:
        _check_shared(gpus, model, mig, inventory, errors)
    elif gpus is not None:
        _check_accelerators(gpus, model, mig, inventory, errors)
    gpu_memory = _gpu_memory_limit(data, gpus, model, mig, bool(shared), inventory, errors)
    cpu = _number(data, "cpu_per_worker", errors)
    if cpu is not None and not (Decimal("0.1") <= cpu <= max(inventory.max_cpu, Decimal("0.1"))):
        errors["cpu_per_worker"] = _("Use 0.1 to %(n)s cores: the largest node has that many."
                                     ) % {"n": api_decimal(inventory.max_cpu)}
    elif cpu is not None and cpu != cpu.quantize(Decimal("0.001")):
        # Kubernetes counts CPU in millicores: a limit finer than that cannot be written.
        errors["cpu_per_worker"] = _("Give CPU cores to at most three decimals (millicores), "
                                     "e.g. 0.5 or 7.25.")
    memory = _number(data, "memory_gib_per_worker", errors)
    if memory is not None and not (Decimal("0.25") <= memory
                                   <= max(inventory.max_memory_gib, Decimal("0.25"))):
        errors["memory_gib_per_worker"] = _(
            "Use 0.25 to %(n)s GiB: the largest node has that much."
        ) % {"n": api_decimal(inventory.max_memory_gib)}
    elif memory is not None and (memory * 1024 != (memory * 1024).to_integral_value()
                                 or memory != memory.quantize(Decimal("0.001"))):
        # A memory limit is written in whole MiB (1/1024 GiB) and stored to three decimals.
        errors["memory_gib_per_worker"] = _(
            "Give memory in whole MiB: a multiple of 1/1024 GiB with at most three decimals, "
            "e.g. 0.25, 0.5 or 64.")
    run = _number(data, "max_run_seconds", errors, integer=True)
    if run is not None and not 60 <= run <= k8s_specs.MAX_RUN_SECONDS:
        errors["max_run_seconds"] = _("Use between one minute and 30 days.")
    if data.get("expected_seconds") not in (None, ""):
        expected = _number(data, "expected_seconds", errors, integer=True)
        if expected is not None and not 1 <= expected <= k8s_specs.MAX_RUN_SECONDS:
            errors["expected_seconds"] = _("Use between one second and 30 days.")
    env = data.get("env") or {}
    if not isinstance(env, dict) or any(
            not k8s_specs.ENV_NAME.match(str(k)) or str(k).startswith("TRAINYARD_") for k in env):
        errors["env"] = _("Variable names are letters, digits and underscores; TRAINYARD_ "
                          "names are reserved.")
    elif len(env) > MAX_ITEMS or any(len(str(v)) > MAX_VALUE_CHARS for v in env.values()):
        errors["env"] = _("Give at most %(n)s variables of at most %(c)s characters each.") % {
            "n": MAX_ITEMS, "c": MAX_VALUE_CHARS}
    else:
        _check_env(env, errors)
    for key in ("command", "args"):
        value = data.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            errors[key] = _("Give a list of strings.")
        elif len(value) > MAX_ITEMS or any(len(v) > MAX_VALUE_CHARS for v in value):
            errors[key] = _("Give at most %(n)s strings of at most %(c)s characters each.") % {
                "n": MAX_ITEMS, "c": MAX_VALUE_CHARS}
    for key in ("annotations", "labels"):
        owned = [k for k in (data.get(key) or {}) if scheduler_owned(str(k))]
        if owned:
            errors[key] = _("%(key)s belongs to the scheduler (keys of %(domains)s are set by "
                            "Trainyard and Kueue); remove it.") % {
                "key": owned[0], "domains": ", ".join(RESERVED_DOMAINS)}
    path = str(data.get("checkpoint_path") or "/checkpoints")
    if not path.startswith("/") or ".." in path.split("/"):
        errors["checkpoint_path"] = _("Use an absolute path inside the container.")
    else:
        _check_checkpoint_path(path, errors)
    claim, storage_class, size = _checkpoint_volume(data, inventory, errors)
    iops = _checkpoint_iops(data, storage_class, errors)
    kind, runtime = _kind(data, errors)
    per_worker = _extended_per_worker(data, errors)
    if errors:
        raise SubmissionError(errors)
    return {**per_worker,
        "kind": kind, "runtime": runtime,
        "name": name, "image": image, "tier": tier, "workers": workers,
        "gpus_per_worker": gpus, "gpu_model": model if not mig else "", "mig_profile": mig,
        "cpu_per_worker": cpu, "memory_gib_per_worker": memory, "max_run_seconds": run,
        "env": {str(k): str(v) for k, v in env.items()},
        "command": list(data.get("command") or []), "args": list(data.get("args") or []),
        "checkpoint_path": path, "checkpoint_claim": claim,
        "checkpoint_storage_class": storage_class, "checkpoint_size_gib": size,
        "checkpoint_iops": iops,
        "gpu_shared": bool(shared), "gpu_memory_gib_per_card": gpu_memory,
    }


def _extended_per_worker(data: dict[str, Any], errors: dict[str, str]) -> dict[str, int]:
    """Each extended-resource dimension's per-worker field (``core.resources``: RDMA NICs
    ``rdma_per_worker``): a whole number from 0 to the dimension's bound; absent is 0."""
    out: dict[str, int] = {}
    for dim in extended():
        if data.get(dim.job_field) in (None, ""):
            out[dim.job_field] = 0
            continue
        n = _number(data, dim.job_field, errors, integer=True)
        if n is not None and not 0 <= n <= dim.max_per_worker:
            errors[dim.job_field] = _("Use 0 to %(n)s.") % {"n": dim.max_per_worker}
        elif n is not None:
            out[dim.job_field] = int(n)
    return out


def _kind(data: dict[str, Any], errors: dict[str, str]) -> tuple[str, str]:
    """The job kind (a PyTorchJob unless ``trainjob``) and, for a TrainJob, its
    ClusterTrainingRuntime (``torch-distributed`` unless named)."""
    kind = str(data.get("kind") or JobKind.PYTORCHJOB).strip()
    runtime = str(data.get("runtime") or "").strip()
    if kind not in JobKind.values:
        errors["kind"] = _("Choose %(kinds)s.") % {"kinds": ", ".join(JobKind.values)}
        return kind, runtime
    if kind != JobKind.TRAINJOB:
        if runtime:
            errors["runtime"] = _("Only a TrainJob runs on a training runtime: leave it "
                                  "empty for a PyTorchJob.")
        return kind, ""
    runtime = runtime or k8s_specs.DEFAULT_TRAINING_RUNTIME
    if not CLAIM_RE.match(runtime):  # a DNS-1123 subdomain, as a PVC name
        errors["runtime"] = _("“%(r)s” is not a ClusterTrainingRuntime name: lower-case "
                              "letters, digits, '-' and '.', e.g. torch-distributed.") % {
            "r": runtime}
    return kind, runtime


def scheduler_owned(key: str) -> bool:
    """Whether an annotation or label key belongs to the scheduler: its prefix (before the
    ``/``) is one of :data:`RESERVED_DOMAINS` or a subdomain of one, except the simulator's
    hints (:data:`SIMULATOR_PREFIX`)."""
    if key.startswith(SIMULATOR_PREFIX) or "/" not in key:
        return False
    domain = key.split("/", 1)[0].lower()
    return any(domain == d or domain.endswith("." + d) for d in RESERVED_DOMAINS)


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "", "none")


def _flag(data: dict[str, Any], key: str, errors: dict[str, str]) -> bool | None:
    """A yes/no field: a bool, or the usual spellings of one (absent = no)."""
    raw = data.get(key)
    if isinstance(raw, bool) or raw is None:
        return bool(raw)
    text = str(raw).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    errors[key] = _("“%(v)s” is not yes or no (true or false).") % {"v": raw}
    return None


def _check_shared(gpus: int, model: str, mig: str, inventory: Inventory,
                  errors: dict[str, str]) -> None:
    """Shares of a time-sliced/MPS GPU: a model the cluster shares, at most one node's
    shares per worker, no MIG profile."""
    if mig:
        errors["gpu_shared"] = _("A shared GPU takes no MIG profile: choose one or the other.")
        return
    if gpus < 1 or gpus > 64:
        errors["gpus_per_worker"] = _("Use 1 to 64 GPU shares per worker.")
        return
    if not model:
        errors["gpu_model"] = _("Choose the GPU model whose shares the workers need.")
        return
    most = inventory.shared_per_node.get(model)
    if most is None:
        known = ", ".join(sorted(inventory.shared_per_node)) or _("none")
        errors["gpu_shared"] = (_("The cluster has no shared %(m)s GPUs (time-slicing or "
                                  "MPS); models it shares: %(k)s.") % {"m": model, "k": known})
    elif gpus > most:
        errors["gpus_per_worker"] = (_("No node has %(n)s shares of %(m)s; the largest has "
                                       "%(most)s: use more workers with fewer shares each.")
                                     % {"n": gpus, "m": model, "most": most})


def _gpu_memory_limit(data: dict[str, Any], gpus: int | None, model: str, mig: str,
                      shared: bool, inventory: Inventory, errors: dict[str, str]
                      ) -> Decimal | None:
    """HAMi's GPU-memory limit per card (``nvidia.com/gpumem``), in GiB; None = the whole
    card. Only on whole GPUs of a model HAMi serves, and at most one card's memory."""
    key = "gpu_memory_gib_per_card"
    if data.get(key) in (None, ""):
        return None
    value = _number(data, key, errors)
    if value is None:
        return None
    if value <= 0:
        errors[key] = _("Give a positive number of GiB, or leave it empty for whole cards.")
        return None
    if value != value.quantize(Decimal("0.001")):
        errors[key] = _("Use at most three decimals (1 MiB is about 0.001 GiB).")
        return None
    if shared or mig or not gpus:
        errors[key] = _("A GPU-memory limit applies to whole GPUs on HAMi nodes, not to "
                        "shared GPUs, MIG slices or CPU-only jobs.")
        return None
    if not inventory.hami_memory_mib:
        errors[key] = _("The cluster runs no HAMi nodes, so it cannot limit GPU memory per "
                        "card: leave it empty.")
        return None
    card = inventory.hami_memory_mib.get(model)
    if card is None:
        errors[key] = (_("HAMi serves no %(m)s GPUs; it serves: %(k)s.")
                       % {"m": model or "—", "k": ", ".join(sorted(inventory.hami_memory_mib))})
        return None
    if value * 1024 > card:
        errors[key] = (_("A %(m)s card has %(n)s GiB; ask for at most that.")
                       % {"m": model, "n": format((Decimal(card) / 1024).quantize(
                           Decimal("0.01")).normalize(), "f")})
        return None
    return value


def _checkpoint_volume(data: dict[str, Any], inventory: Inventory, errors: dict[str, str]
                       ) -> tuple[str, str, int | None]:
    """Where checkpoints go: an existing PVC of the tenant's (``checkpoint_claim``), or a
    new one Trainyard creates (``checkpoint_storage_class`` and ``checkpoint_size_gib``,
    default :data:`CHECKPOINT_GIB`), or neither (a scratch directory that a preemption
    loses)."""
    claim = str(data.get("checkpoint_claim") or "").strip()
    storage_class = str(data.get("checkpoint_storage_class") or "").strip()
    if claim and not CLAIM_RE.match(claim):
        errors["checkpoint_claim"] = _("A PVC name is lower-case letters, digits, '-' and '.', "
                                       "at most 253 characters.")
    if not storage_class:
        return claim, "", None
    if claim:
        errors["checkpoint_storage_class"] = _(
            "Give an existing volume or a storage class for a new one, not both.")
        return claim, "", None
    if storage_class not in inventory.storage_classes:
        errors["checkpoint_storage_class"] = _(
            "The cluster has no StorageClass “%(sc)s”; choose one of: %(names)s."
        ) % {"sc": storage_class, "names": ", ".join(sorted(inventory.storage_classes)) or "—"}
        return claim, "", None
    raw = data.get("checkpoint_size_gib")
    size = CHECKPOINT_GIB if raw in (None, "") else _number(
        data, "checkpoint_size_gib", errors, integer=True)
    if size is not None and not 1 <= size <= MAX_CHECKPOINT_GIB:
        errors["checkpoint_size_gib"] = _("Use 1 to %(n)s GiB.") % {"n": MAX_CHECKPOINT_GIB}
    return claim, storage_class, size


def _checkpoint_iops(data: dict[str, Any], storage_class: str, errors: dict[str, str]
                     ) -> int | None:
    """The new checkpoint volume's provisioned IOPS: one of the tiers
    (``tenants.storage.iops_tiers``), or none (the class's own default, not counted
    against an IOPS grant). Whether the pool's IOPS grant holds it is the service's
    check (``jobs.services``)."""
    raw = data.get("checkpoint_iops")
    if raw in (None, "", 0, "0"):
        return None
    tiers = iops_tiers()
    value = _number(data, "checkpoint_iops", errors, integer=True)
    if value is None:
        return None
    if value not in tiers:
        errors["checkpoint_iops"] = _("Provisioned IOPS come in tiers: choose one of "
                                      "%(tiers)s, or none for the class's default.") % {
            "tiers": ", ".join(str(t) for t in tiers) or "—"}
        return None
    if not storage_class:
        errors.setdefault("checkpoint_iops", _(
            "Provisioned IOPS are for a new checkpoint volume: choose its class too."))
        return None
    return int(value)


def _check_accelerators(gpus: int, model: str, mig: str, inventory: Inventory,
                        errors: dict[str, str]) -> None:
    if gpus < 0 or gpus > MAX_GPUS_PER_WORKER:
        errors["gpus_per_worker"] = _("Use 0 to 64 GPUs per worker.")
        return
    if gpus == 0:
        if model or mig:
            errors["gpus_per_worker"] = _("A GPU model or MIG profile needs at least one GPU.")
        return
    if model and mig:
        errors["mig_profile"] = _("Choose either a whole-GPU model or a MIG profile, not both.")
    elif mig:
        most = inventory.mig_per_node.get(mig)
        if most is None:
            known = ", ".join(sorted(inventory.mig_per_node)) or _("none")
            errors["mig_profile"] = (_("The cluster has no MIG profile “%(m)s” (it has: %(k)s).")
                                     % {"m": mig, "k": known})
        elif gpus > most:
            errors["gpus_per_worker"] = (_("No node has %(n)s %(m)s instances; the largest "
                                           "has %(most)s.") % {"n": gpus, "m": mig, "most": most})
        elif gpus != k8s_specs.MIG_SLICES_PER_REPLICA:
            # A CUDA process sees one MIG device and NCCL cannot use MIG peers.
            errors["gpus_per_worker"] = _(
                "A MIG worker takes exactly one slice (a process sees only one MIG device): "
                "use 1 GPU per worker and more workers.")
    elif not model:
        errors["gpu_model"] = _("Choose the GPU model the workers need.")
    else:
        most = inventory.gpus_per_node.get(model)
        if most is None:
            known = ", ".join(sorted(inventory.gpus_per_node)) or _("none observed yet")
            errors["gpu_model"] = (_("The cluster has no GPU model “%(m)s” (it has: %(k)s).")
                                   % {"m": model, "k": known})
        elif gpus > most:
            errors["gpus_per_worker"] = (_("No node has %(n)s %(m)s GPUs; the largest has "
                                           "%(most)s: use more workers with fewer GPUs each.")
                                         % {"n": gpus, "m": model, "most": most})


def gang_fits(room: dict[str, tuple[int, ...]], per: int) -> int:
    """The most workers of ``per`` units one switch could hold at once on an empty
    cluster (as the engine places a gang: on one node, or all under one switch)."""
    return max((sum(cap // per for cap in caps) for caps in room.values()), default=0)


def check_gang(clean: dict[str, Any], inventory: Inventory) -> None:
    """Refuse a gang no switch could ever hold (whole GPUs or MIG slices; raise
    :class:`SubmissionError` at ``workers``): the engine would keep it waiting forever.
    Submission asks after the pool's ceiling, so a gang above the quota hears of that."""
    workers, per = clean["workers"], clean["gpus_per_worker"]
    if clean.get("gpu_shared") or workers <= 1 or per <= 0:
        return
    name = clean.get("mig_profile") or clean.get("gpu_model") or ""
    room = inventory.gang_room.get(f"mig:{name}" if clean.get("mig_profile") else f"gpu:{name}")
    if not room:
        return
    most = gang_fits(room, per)
    if most < workers:
        raise SubmissionError({"workers": ngettext(
            "No switch has room for %(w)s workers × %(n)s %(m)s at once: a job's workers run "
            "under one switch, and the largest holds %(most)s such worker. Use fewer workers, "
            "or fewer GPUs each.",
            "No switch has room for %(w)s workers × %(n)s %(m)s at once: a job's workers run "
            "under one switch, and the largest holds %(most)s such workers. Use fewer "
            "workers, or fewer GPUs each.", most) % {"w": workers, "n": per, "m": name,
                                                       "most": most}})


# --- the rules of k8s_sync.specs.JobSpec, in words a researcher acts on ------------------


def _valid_image(image: str) -> bool:
    try:
        k8s_specs.validate_image(image)
    except ValueError:
        return False
    return True


def _check_env(env: dict[Any, Any], errors: dict[str, str]) -> None:
    """Names the training operator or Trainyard set themselves (the rule is
    ``k8s_sync.specs.env_name_problem``): a user value would break the rendezvous."""
    for key in env:
        problem = k8s_specs.env_name_problem(str(key))
        if problem == "operator":
            errors["env"] = _(
                "%(name)s is set by the training operator for the rendezvous (as are "
                "%(names)s and every %(prefix)s* variable); remove it.") % {
                "name": key, "names": ", ".join(sorted(k8s_specs.OPERATOR_ENV)),
                "prefix": k8s_specs.OPERATOR_ENV_PREFIX}
            return
        if problem is not None:
            errors["env"] = _("Variable names are letters, digits and underscores; %(prefix)s "
                              "names are reserved.") % {
                "prefix": k8s_specs.RESERVED_ENV_PREFIX}
            return


def _check_checkpoint_path(path: str, errors: dict[str, str]) -> None:
    """Where the checkpoint volume is mounted (``k8s_sync.specs.checkpoint_path_problem``)."""
    if len(path) > 500:
        errors["checkpoint_path"] = _("Use a path of at most 500 characters.")
        return
    problem = k8s_specs.checkpoint_path_problem(path)
    if problem == "characters":
        errors["checkpoint_path"] = _("A checkpoint path cannot contain spaces or ':'.")
    elif problem == "system":
        errors["checkpoint_path"] = _(
            "%(path)s is a system directory of the container (/etc, /proc, /sys, /dev, "
            "/var/run/secrets, /usr, ...): use a directory of your own, e.g. /checkpoints."
        ) % {"path": path}
    elif problem is not None:
        errors["checkpoint_path"] = _("Use an absolute path inside the container.")
