"""What a real cluster checks on custom resources beyond the OpenAPI schema, for the kinds
Trainyard uses: CEL transition rules of the form `self == oldSelf` (immutable fields, e.g.
PyTorchJob spec.runPolicy.schedulingPolicy.queue, TrainJob spec.trainer), the Kubeflow
training operator's validating webhook for PyTorchJob (kubeflow/trainer v1.9
pkg/webhooks/pytorch) and Trainer v2's for TrainJob (kubeflow/trainer v2.3.0
pkg/webhooks/trainjob_webhook.go with the torch and jobset plugins' Validate)."""
from __future__ import annotations

import re

from .errors import ApiError

_IMMUTABLE_RULES = {"self == oldSelf", "oldSelf == self"}
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def immutable_paths(schema: dict | None, path: tuple = ()) -> list[tuple[tuple, str]]:
    """(path, message) for every property guarded by an immutability CEL rule."""
    out: list[tuple[tuple, str]] = []
    if not isinstance(schema, dict):
        return out
    for rule in schema.get("x-kubernetes-validations") or []:
        if rule.get("rule", "").strip() in _IMMUTABLE_RULES and path:
            out.append((path, rule.get("message") or "Value is immutable"))
    for key, sub in (schema.get("properties") or {}).items():
        out.extend(immutable_paths(sub, (*path, key)))
    if isinstance(schema.get("additionalProperties"), dict):
        out.extend(immutable_paths(schema["additionalProperties"], (*path, "*")))
    return out


def _values(obj, path: tuple, prefix: tuple = ()):
    """(concrete path, value) pairs at `path`; '*' walks every map key."""
    if not path:
        yield prefix, obj
        return
    if not isinstance(obj, dict):
        return
    head, rest = path[0], path[1:]
    keys = list(obj) if head == "*" else [head] if head in obj else []
    for k in keys:
        yield from _values(obj[k], rest, (*prefix, k))


def transition_errors(rules: list[tuple[tuple, str]], old: dict, new: dict) -> list[dict]:
    errs = []
    for path, message in rules:
        old_values = dict(_values(old, path))
        for concrete, value in _values(new, path):
            if concrete in old_values and old_values[concrete] != value:
                shown = f'"{value}"' if isinstance(value, str) else str(value).lower() \
                    if isinstance(value, bool) else "object" if isinstance(value, dict | list) \
                    else str(value)
                errs.append({"field": ".".join(concrete), "reason": "FieldValueInvalid",
                             "message": f"Invalid value: {shown}: {message}"})
    return errs


# ---- the training operator's PyTorchJob webhook ------------------------------------------------
PYTORCHJOB_WEBHOOK = "validator.pytorchjob.training-operator.kubeflow.org"
_ROLES = ("Master", "Worker")


def pytorchjob_errors(job: dict) -> list[str]:
    errs = []
    name = (job.get("metadata") or {}).get("name") or ""
    if not _DNS1035.match(name) or len(name) > 63:
        errs.append(f'metadata.name: Invalid value: "{name}": should match: a DNS-1035 label '
                    "must consist of lower case alphanumeric characters or '-', start with an "
                    "alphabetic character, and end with an alphanumeric character (e.g. "
                    "'my-name',  or 'abc-123', regex used for validation is "
                    "'[a-z]([-a-z0-9]*[a-z0-9])?')")
    spec = job.get("spec") or {}
    managed_by = (spec.get("runPolicy") or {}).get("managedBy")
    if managed_by is not None and managed_by not in ("kubeflow.org/training-operator",
                                                     "kueue.x-k8s.io/multikueue"):
        errs.append(f'spec.runPolicy.managedBy: Unsupported value: "{managed_by}": supported '
                    'values: "kueue.x-k8s.io/multikueue", "kubeflow.org/training-operator"')
    specs = spec.get("pytorchReplicaSpecs")
    if specs is None:
        errs.append("spec.pytorchReplicaSpecs: Required value: must be required")
    if spec.get("elasticPolicy") is not None:
        worker = (specs or {}).get("Worker")
        if worker is None:
            errs.append("spec.pytorchReplicaSpecs.Worker: Required value: must be configured "
                        "if elastic policy is used")
        elif worker.get("replicas") is not None and worker["replicas"] < 1:
            errs.append("spec.pytorchReplicaSpecs.Worker.replicas: Forbidden: must be at least "
                        "1 worker if elastic policy is used")
    for role, rspec in sorted((specs or {}).items()):
        path = f"spec.pytorchReplicaSpecs[{role}]"
        containers_path = f"{path}.template.spec.containers"
        if role not in _ROLES:
            errs.append(f'{path}: Unsupported value: "{role}": supported values: "Master", '
                        '"Worker"')
        containers = (((rspec or {}).get("template") or {}).get("spec") or {}).get(
            "containers") or []
        if not containers:
            errs.append(f"{containers_path}: Required value: must be specified")
        for i, c in enumerate(containers):
            if not c.get("image"):
                errs.append(f"{containers_path}[{i}].image: Required value: must be required")
        if not any(c.get("name") == "pytorch" for c in containers):
            errs.append(f"{containers_path}: Required value: must have at least one container "
                        "with name pytorch")
        if role == "Master" and (rspec or {}).get("replicas") != 1:
            errs.append(f"{path}.replicas: Forbidden: must be 1")
    return errs


# ---- Trainer v2's TrainJob webhook -------------------------------------------------------------
TRAINJOB_WEBHOOK = "validator.trainjob.trainer.kubeflow.org"
_TORCH_RESERVED = ("PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NNODES", "PET_NODE_RANK",
                   "PET_NPROC_PER_NODE")
_NO_ENV = ("dataset-initializer", "model-initializer", "node")
_DNS1123_SUB = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _patches_without_time(job: dict | None) -> list:
    return [{k: v for k, v in (p or {}).items() if k != "time"}
            for p in ((job or {}).get("spec") or {}).get("runtimePatches") or []]


def trainjob_errors(job: dict, old: dict | None = None) -> list[str]:
    """Trainer v2.3.0's TrainJob validation that does not need the runtime object: the
    runtime kind its registry serves, the torch plugin's reserved env, each runtime
    patch's manager a domain-prefixed path, no env for the ``node`` (initializer)
    containers in a patch, and runtime patches changed only while the TrainJob is
    suspended before or after the update (``checkRuntimePatchesImmutability``). Whether a
    patch's replicated jobs and containers exist in the runtime is not checked."""
    errs: list[str] = []
    spec = job.get("spec") or {}
    ref = spec.get("runtimeRef") or {}
    kind, group = ref.get("kind") or "ClusterTrainingRuntime", ref.get("apiGroup") or (
        "trainer.kubeflow.org")
    if group != "trainer.kubeflow.org" or kind not in ("ClusterTrainingRuntime",
                                                       "TrainingRuntime"):
        errs.append(f"unsupported runtime: {kind}.{group}")
    env = sorted({e.get("name") for e in (spec.get("trainer") or {}).get("env") or []}
                 & set(_TORCH_RESERVED))
    if env:
        errs.append(f"spec.trainer.env: Invalid value: must not have reserved envs, invalid "
                    f"envs configured: {env}")
    for patch in spec.get("runtimePatches") or []:
        manager = (patch or {}).get("manager") or ""
        domain, _, path = manager.partition("/")
        if not path or not _DNS1123_SUB.match(domain):
            errs.append(f'spec.runtimePatches.manager: Invalid value: "{manager}": must be a '
                        "domain-prefixed path (such as \"acme.io/foo\")")
        tmpl = (((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {})
        for rjob in (tmpl.get("spec") or {}).get("replicatedJobs") or []:
            pod = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {})
            for c in (pod.get("spec") or {}).get("containers") or []:
                if c.get("env") and c.get("name") in _NO_ENV:
                    errs.append("spec.runtimePatches: Invalid value: must not have envs for "
                                "the dataset-initializer, model-initializer, node containers")
    if old is not None and _patches_without_time(old) != _patches_without_time(job):
        was = bool((old.get("spec") or {}).get("suspend"))
        if not was and not spec.get("suspend"):
            errs.append("spec.runtimePatches: Forbidden: RuntimePatches can only be modified "
                        "when the TrainJob is suspended before or after the update")
    return errs


_WEBHOOKS = {
    "pytorchjobs.kubeflow.org": (PYTORCHJOB_WEBHOOK, "kubeflow.org", "pytorchjobs",
                                 lambda new, old: pytorchjob_errors(new)),
    "trainjobs.trainer.kubeflow.org": (TRAINJOB_WEBHOOK, "trainer.kubeflow.org", "trainjobs",
                                       trainjob_errors),
}


def run_webhooks(key: str, obj: dict, old: dict | None = None) -> None:
    """The validating webhooks installed with the bundled CRDs (``old``: the stored object
    of an update); 403 like the API server."""
    if key not in _WEBHOOKS:
        return
    webhook, group, plural, check = _WEBHOOKS[key]
    errs = check(obj, old)
    if errs:
        detail = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
        name = (obj.get("metadata") or {}).get("name", "")
        raise ApiError(403, "Forbidden", f'admission webhook "{webhook}" denied the '
                                         f"request: {detail}",
                       {"name": name, "group": group, "kind": plural})
