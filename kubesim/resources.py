"""Kind registry: built-in kinds, kinds served from CRDs, and the discovery documents."""
from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .crd_rules import immutable_paths
from .errors import ApiError
from .normalize import normalizer
from .validation import CrdSchema, compile_crd_schema

CRD_DIR = Path(__file__).parent / "crds"
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: list[str] = field(default_factory=list)
    subresources: tuple[str, ...] = ()       # "status", "binding", "eviction", "log", "scale"
    model: str | None = None                 # the client's pydantic model (built-in kinds)
    categories: list[str] = field(default_factory=list)
    immutable: tuple[str, ...] = ()          # dotted paths that may not change on update
    schema: dict | None = None               # CRD openAPIV3Schema
    validator: CrdSchema | None = None       # compiled schema validators (CRDs)
    # normalize(obj, dropped, only) -> obj, in place (built-ins); see normalize.normalizer
    normalize: Callable[..., dict] | None = None
    served_versions: tuple[str, ...] = ()    # CRDs may serve several versions
    crd_name: str | None = None
    printer_columns: list = field(default_factory=list)  # CRD additionalPrinterColumns
    view_of: str | None = None               # another representation of this stored kind
    immutable_rules: list = field(default_factory=list)  # CRD `self == oldSelf` CEL rules
    verbs: tuple[str, ...] = ()              # () = ALL_VERBS; ("create",) = a review, not stored
    scale_paths: tuple[str, str, str] | None = None  # CRD scale: spec, status, labelSelector
    selectable_fields: tuple[str, ...] = ()  # CRD selectableFields ("spec.x", no dot)

    @property
    def key(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _b(group, version, kind, plural, namespaced, short=(), sub=(), model=None, cats=(),
       immutable=(), view_of=None, verbs=()):
    return ResourceType(group, version, kind, plural, namespaced, list(short), tuple(sub),
                        model or f"V1{kind}", list(cats), tuple(immutable), view_of=view_of,
                        verbs=tuple(verbs))


# Subresources' discovery entries: verbs, and the group/version/kind they take when that is
# not the parent's (kubectl drain looks for pods/eviction with group policy, version v1 in
# /api/v1: staging/src/k8s.io/kubectl/pkg/drain/drain.go CheckEvictionSupport).
SUB_VERBS = {"status": ["get", "patch", "update"], "log": ["get"], "binding": ["create"],
             "eviction": ["create"], "scale": ["get", "patch", "update"],
             "finalize": ["update"], "token": ["create"]}
SUB_GVK = {"binding": ("", "", "Binding"), "eviction": ("policy", "v1", "Eviction"),
           "scale": ("autoscaling", "v1", "Scale"),
           "token": ("authentication.k8s.io", "v1", "TokenRequest")}


BUILTINS = [
    _b("", "v1", "Namespace", "namespaces", False, ["ns"], ["status", "finalize"]),
    _b("", "v1", "Node", "nodes", False, ["no"], ["status"]),
    _b("", "v1", "Pod", "pods", True, ["po"], ["status", "binding", "eviction", "log"],
       cats=["all"]),
    _b("", "v1", "Event", "events", True, ["ev"], model="CoreV1Event"),
    _b("", "v1", "ConfigMap", "configmaps", True, ["cm"]),
    _b("", "v1", "Secret", "secrets", True),
    _b("", "v1", "ServiceAccount", "serviceaccounts", True, ["sa"], ["token"]),
    _b("", "v1", "Service", "services", True, ["svc"], ["status"], cats=["all"]),
    _b("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ["pvc"], ["status"]),
    _b("", "v1", "PersistentVolume", "persistentvolumes", False, ["pv"], ["status"]),
    _b("", "v1", "ResourceQuota", "resourcequotas", True, ["quota"], ["status"]),
    _b("", "v1", "LimitRange", "limitranges", True, ["limits"]),
    _b("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    _b("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True,
       immutable=("roleRef",)),
    _b("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    _b("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False,
       immutable=("roleRef",)),
    _b("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, ["netpol"]),
    _b("networking.k8s.io", "v1", "Ingress", "ingresses", True, ["ing"], ["status"]),
    _b("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, ["pc"],
       immutable=("value", "preemptionPolicy")),
    _b("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, ["sc"],
       immutable=("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode")),
    # GA in 1.34 (pkg/apis/storage/validation/validation.go ValidateVolumeAttributesClass:
    # driverName and parameters immutable)
    _b("storage.k8s.io", "v1", "VolumeAttributesClass", "volumeattributesclasses", False,
       ["vac"], immutable=("driverName", "parameters")),
    # Dynamic Resource Allocation, GA in 1.34 (see dra.py for the sources): claims have a
    # status subresource; claim and template specs are immutable (validated in dra.py)
    _b("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
    _b("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False),
    _b("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True, sub=["status"],
       model="ResourceV1ResourceClaim"),
    _b("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    _b("coordination.k8s.io", "v1", "Lease", "leases", True),
    _b("batch", "v1", "Job", "jobs", True, sub=["status"], cats=["all"]),
    _b("apps", "v1", "Deployment", "deployments", True, ["deploy"], ["status", "scale"],
       cats=["all"]),
    _b("apps", "v1", "ReplicaSet", "replicasets", True, ["rs"], ["status", "scale"],
       cats=["all"]),
    _b("apps", "v1", "DaemonSet", "daemonsets", True, ["ds"], ["status"], cats=["all"]),
    _b("apps", "v1", "StatefulSet", "statefulsets", True, ["sts"], ["status", "scale"],
       cats=["all"]),
    _b("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ["pdb"],
       ["status"]),
    # reviews: create-only, answered and never stored
    _b("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews",
       False, verbs=["create"]),
    _b("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews",
       False, verbs=["create"]),
    _b("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False,
       verbs=["create"]),
    # served from the core v1 Events (one storage, two representations; see events_v1.py)
    _b("events.k8s.io", "v1", "Event", "events", True, ["ev"], model="EventsV1Event",
       view_of="events"),
    _b("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
       False, ["crd", "crds"], ["status"]),
]


# Aggregated APIs the simulation answers (not stored kinds): group -> version -> resources.
# Kueue's visibility server (pkg/visibility/api/v1beta2): read-only pending workloads.
AGGREGATED = {
    "visibility.kueue.x-k8s.io": {"v1beta2": [
        {"name": "clusterqueues", "singularName": "clusterqueue", "namespaced": False,
         "kind": "ClusterQueue", "verbs": ["get"]},
        {"name": "clusterqueues/pendingworkloads", "singularName": "", "namespaced": False,
         "kind": "PendingWorkloadsSummary", "verbs": ["get"]},
        {"name": "localqueues", "singularName": "localqueue", "namespaced": True,
         "kind": "LocalQueue", "verbs": ["get"]},
        {"name": "localqueues/pendingworkloads", "singularName": "", "namespaced": True,
         "kind": "PendingWorkloadsSummary", "verbs": ["get"]},
    ]},
}


class Registry:
    """Maps resource keys ("pods", "pytorchjobs.kubeflow.org") to ResourceType."""

    def __init__(self) -> None:
        self._by_key: dict[str, ResourceType] = {}
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self._lock = threading.Lock()
        for rt in BUILTINS:
            rt.normalize = normalizer(rt.model)
            self._add(rt)


    def _add(self, rt: ResourceType) -> None:
        self._by_key[rt.key] = rt
        for v in rt.served_versions or (rt.version,):
            self._by_gvr[(rt.group, v, rt.plural)] = rt

    def get(self, key: str) -> ResourceType:
        try:
            return self._by_key[key]
        except KeyError:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource "
                                            f"({key})") from None

    def find(self, key: str) -> ResourceType | None:
        return self._by_key.get(key)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def all(self) -> list[ResourceType]:
        return list(self._by_key.values())

    # ---- CRDs -----------------------------------------------------------------------
    def register_crd(self, crd: dict) -> ResourceType:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
        storage = next((v for v in versions if v.get("storage")), versions[0])
        schema = ((storage.get("schema") or {}).get("openAPIV3Schema")) or None
        rt = ResourceType(
            group=spec["group"], version=storage["name"], kind=names["kind"],
            plural=names["plural"], namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=list(names.get("shortNames") or []),
            subresources=tuple(k for k in ("status", "scale")
                               if k in (storage.get("subresources") or {})),
            scale_paths=_scale_paths((storage.get("subresources") or {}).get("scale")),
            categories=list(names.get("categories") or []),
            schema=schema, validator=compile_crd_schema(schema) if schema else None,
            served_versions=tuple(v["name"] for v in versions),
            crd_name=(crd.get("metadata") or {}).get("name"),
            printer_columns=[c for c in storage.get("additionalPrinterColumns") or []
                             if c.get("jsonPath") != ".metadata.creationTimestamp"],
            immutable_rules=immutable_paths(schema),
            selectable_fields=tuple(f["jsonPath"].lstrip(".") for f in
                                    storage.get("selectableFields") or [] if f.get("jsonPath")),
        )
        with self._lock:
            old = self._by_key.get(rt.key)
            if old is not None:
                self._drop(old)
            self._add(rt)
        return rt

    def _drop(self, rt: ResourceType) -> None:
        self._by_key.pop(rt.key, None)
        for k in [k for k, v in self._by_gvr.items() if v is rt]:
            del self._by_gvr[k]

    def unregister_crd(self, crd: dict) -> ResourceType | None:
        spec = crd.get("spec") or {}
        key = f"{(spec.get('names') or {}).get('plural')}.{spec.get('group')}"
        rt = self._by_key.get(key)
        if rt is not None and rt.crd_name:
            with self._lock:
                self._drop(rt)
            return rt
        return None

    # ---- discovery ------------------------------------------------------------------
    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {g: list(vs) for g, vs in AGGREGATED.items()}
        for rt in self._by_key.values():
            for v in rt.served_versions or (rt.version,):
                vs = out.setdefault(rt.group, [])
                if v not in vs:
                    vs.append(v)
        return out

    def api_group_list(self) -> dict:
        groups = []
        for name, versions in sorted(self.groups().items()):
            if not name:
                continue
            groups.append(self._group_doc(name, versions))
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    @staticmethod
    def _group_doc(name: str, versions: list[str]) -> dict:
        vs = sorted(versions, key=_version_priority)
        return {"name": name,
                "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in vs],
                "preferredVersion": {"groupVersion": f"{name}/{vs[0]}", "version": vs[0]}}

    def api_group(self, name: str) -> dict | None:
        versions = self.groups().get(name)
        if not versions or not name:
            return None
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group_doc(name, versions)}

    def resource_list(self, group: str, version: str) -> dict | None:
        gv = f"{group}/{version}" if group else version
        resources = list(AGGREGATED.get(group, {}).get(version, []))
        for (g, v, _), rt in sorted(self._by_gvr.items()):
            if g != group or v != version:
                continue
            entry = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                     "kind": rt.kind, "verbs": list(rt.verbs or ALL_VERBS)}
            if rt.short_names:
                entry["shortNames"] = rt.short_names
            if rt.categories:
                entry["categories"] = rt.categories
            resources.append(entry)
            for sub in rt.subresources:
                sgroup, sversion, kind = SUB_GVK.get(sub, ("", "", rt.kind))
                sub_entry = {"name": f"{rt.plural}/{sub}", "singularName": "",
                             "namespaced": rt.namespaced, "kind": kind,
                             "verbs": SUB_VERBS[sub]}
                if sgroup:
                    sub_entry.update(group=sgroup, version=sversion)
                resources.append(sub_entry)
        if not resources:
            return None
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": resources}


def _scale_paths(scale: dict | None) -> tuple[str, str, str] | None:
    """CRD spec.versions[].subresources.scale: specReplicasPath, statusReplicasPath,
    labelSelectorPath (apiextensions/v1 CustomResourceSubresourceScale)."""
    if not isinstance(scale, dict):
        return None
    return (scale.get("specReplicasPath") or "", scale.get("statusReplicasPath") or "",
            scale.get("labelSelectorPath") or "")


def _version_priority(v: str):
    """Kubernetes version priority: GA > beta > alpha, higher numbers first."""
    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", v)
    if not m:
        return (3, 0, 0, v)
    major, stage, minor = m.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), v)


def yaml_load_all(text) -> list:
    """Safe YAML loading, with libyaml's C loader when available (the CRDs are large)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return list(yaml.load_all(text, Loader=loader))


def load_crd_file(path: Path) -> list[dict]:
    with open(path) as f:
        return [d for d in yaml_load_all(f) if d and d.get("kind") == "CustomResourceDefinition"]


def default_crds() -> list[dict]:
    out = []
    for p in sorted(CRD_DIR.glob("*.yaml")):
        out.extend(load_crd_file(p))
    return out
