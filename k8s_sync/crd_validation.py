"""Validate custom objects against their CRD's ``openAPIV3Schema`` (and the PyTorchJob
operator's webhook rules), without a cluster.

The schema comes from the CRD bundled in ``k8s_sync/crds/`` (an unmodified upstream copy,
see ``crds/SOURCE.md``); it is parsed once per process. ``jsonschema`` checks field names'
types, enums, patterns and required keys; it ignores the ``x-kubernetes-*`` extensions
(CEL rules, int-or-string is expressed with ``anyOf`` anyway). The CRD does not forbid
unknown fields (no ``additionalProperties: false``): the API server would prune them
silently, so :func:`schema_errors` also reports fields the schema does not declare.

The operator's admission webhook (trainer v1.9 ``pytorchjob_webhook.go``, summarised in
kubernetes-facts §6) adds rules the schema cannot express; :func:`pytorchjob_errors`
checks them: DNS-1035 name, ``pytorchReplicaSpecs`` present with only Master/Worker,
``Master.replicas`` set to exactly 1 (the webhook sees the object before the operator's
defaulting), other ``replicas >= 1``, at least one container, each with an image, one
named ``pytorch`` in every template, a known ``runPolicy.managedBy``. (The webhook does
not forbid changing pod templates of an existing job: only ``managedBy`` is immutable,
which :func:`k8s_sync.manifests.pytorchjob_resume_patch` relies on.)

Pure and side-effect free apart from reading the bundled file once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from k8s_sync import naming

__all__ = [
    "CRD_DIR",
    "CrdValidationError",
    "crd_schema",
    "pytorchjob_errors",
    "schema_errors",
    "validate_pytorchjob",
]

CRD_DIR = Path(__file__).resolve().parent / "crds"
_CRD_FILES = {
    ("kubeflow.org", "PyTorchJob"): "kubeflow.org_pytorchjobs.yaml",
    # Kueue v0.19.2, v1beta2 only, descriptions stripped (crds/SOURCE.md)
    **{("kueue.x-k8s.io", kind): f"kueue.x-k8s.io_{plural}.yaml" for kind, plural in (
        ("ResourceFlavor", "resourceflavors"), ("ClusterQueue", "clusterqueues"),
        ("Cohort", "cohorts"), ("LocalQueue", "localqueues"),
        ("WorkloadPriorityClass", "workloadpriorityclasses"), ("Workload", "workloads"),
        ("Topology", "topologies"))},
}
_REPLICA_TYPES = ("Master", "Worker")
_CLEAN_POD_POLICIES = ("None", "Running", "All")
_RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
_MANAGERS = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")


class CrdValidationError(ValueError):
    """A custom object breaks its CRD schema or the operator's webhook; ``errors`` lists
    every problem as ``"<json path>: <message>"``."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


@cache
def _load_crd(filename: str) -> dict[str, Any]:
    with (CRD_DIR / filename).open("rb") as fh:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return yaml.load(fh, Loader=loader)  # noqa: S506 - a SafeLoader


@cache
def crd_schema(api_version: str, kind: str) -> Mapping[str, Any]:
    """The ``openAPIV3Schema`` of ``kind`` in ``api_version`` (``group/version``).

    Raises ``LookupError`` for a kind or version no bundled CRD serves.
    """
    group, _, version = api_version.rpartition("/")
    filename = _CRD_FILES.get((group, kind))
    if filename is None:
        raise LookupError(f"no bundled CRD for {kind} in {group or 'core'}")
    crd = _load_crd(filename)
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version and entry.get("served", True):
            return entry["schema"]["openAPIV3Schema"]
    raise LookupError(f"the bundled CRD of {kind} does not serve {api_version}")


@cache
def _validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    schema = dict(crd_schema(api_version, kind))
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def _path(parts: Any) -> str:
    return "." + ".".join(str(p) for p in parts) if parts else "."


def _undeclared(obj: Any, schema: Mapping[str, Any], path: tuple[Any, ...]
                ) -> Iterator[str]:
    """Fields of ``obj`` the structural schema does not declare (the API server prunes)."""
    if isinstance(obj, Mapping):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props is None and not isinstance(extra, Mapping):
            return  # an untyped object: anything goes
        for key, value in obj.items():
            if props is not None and key in props:
                yield from _undeclared(value, props[key], (*path, key))
            elif isinstance(extra, Mapping):
                yield from _undeclared(value, extra, (*path, key))
            elif path == () and key in ("apiVersion", "kind", "metadata"):
                continue
            else:
                yield f"{_path((*path, key))}: unknown field (the API server would drop it)"
    elif isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(obj):
            yield from _undeclared(item, schema["items"], (*path, index))


def schema_errors(obj: Mapping[str, Any]) -> list[str]:
    """Every violation of the CRD schema by ``obj`` (empty when valid), sorted.

    ``obj`` needs ``apiVersion`` and ``kind`` naming a bundled CRD (else ``LookupError``).
    """
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    schema = crd_schema(api_version, kind)
    errors = [f"{_path(err.absolute_path)}: {err.message}"
              for err in _validator(api_version, kind).iter_errors(obj)]
    errors.extend(_undeclared(obj, schema, ()))
    return sorted(set(errors))


def pytorchjob_errors(obj: Mapping[str, Any]) -> list[str]:
    """The PyTorchJob webhook's rules (plus the enums the schema leaves as free strings)."""
    errors: list[str] = []
    name = (obj.get("metadata") or {}).get("name", "")
    if not naming.is_dns1035_label(name):
        errors.append(f".metadata.name: {name!r} is not a DNS-1035 label")
    spec = obj.get("spec") or {}
    run_policy = spec.get("runPolicy") or {}
    policy = run_policy.get("cleanPodPolicy")
    if policy is not None and policy not in _CLEAN_POD_POLICIES:
        errors.append(f".spec.runPolicy.cleanPodPolicy: {policy!r} not in {_CLEAN_POD_POLICIES}")
    manager = run_policy.get("managedBy")
    if manager is not None and manager not in _MANAGERS:
        errors.append(f".spec.runPolicy.managedBy: {manager!r} not in {_MANAGERS}")
    replicas = spec.get("pytorchReplicaSpecs")
    if not replicas:
        return [*errors, ".spec.pytorchReplicaSpecs: required"]
    for rtype, rspec in replicas.items():
        where = f".spec.pytorchReplicaSpecs.{rtype}"
        if rtype not in _REPLICA_TYPES:
            errors.append(f"{where}: replica type must be one of {_REPLICA_TYPES}")
        rspec = rspec or {}
        count = rspec.get("replicas")
        if rtype == "Master" and count != 1:  # the webhook runs before defaulting: explicit 1
            errors.append(f"{where}.replicas: must be 1 for Master, got {count}")
        elif count is not None and (not isinstance(count, int) or count < 1):
            errors.append(f"{where}.replicas: must be an integer >= 1, got {count!r}")
        restart = rspec.get("restartPolicy")
        if restart is not None and restart not in _RESTART_POLICIES:
            errors.append(f"{where}.restartPolicy: {restart!r} not in {_RESTART_POLICIES}")
        containers = ((rspec.get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            errors.append(f"{where}.template.spec.containers: must be specified")
        if not any(c.get("name") == "pytorch" for c in containers):
            errors.append(f"{where}.template.spec.containers: needs a container named pytorch")
        for index, container in enumerate(containers):
            if not container.get("image"):
                errors.append(f"{where}.template.spec.containers.{index}.image: required")
    return errors


def validate_pytorchjob(obj: Mapping[str, Any]) -> None:
    """Raise :class:`CrdValidationError` unless ``obj`` is a PyTorchJob that both the CRD
    schema and the operator's webhook accept."""
    if (obj.get("apiVersion"), obj.get("kind")) != ("kubeflow.org/v1", "PyTorchJob"):
        raise CrdValidationError([f".: not a kubeflow.org/v1 PyTorchJob: "
                                  f"{obj.get('apiVersion')}/{obj.get('kind')}"])
    errors = schema_errors(obj) + pytorchjob_errors(obj)
    if errors:
        raise CrdValidationError(errors)
