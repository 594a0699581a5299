"""Kueue's DRA integration (KueueDRAIntegration, beta and on by default since v0.18):
devices asked for through ResourceClaimTemplates count against ClusterQueue quota as the
logical resource the Configuration's ``resources.deviceClassMappings`` names.

Sources (Kueue v0.19, /work/.mirror/kubernetes-sigs+kueue):
* ``apis/config/v1beta2/configuration_types.go`` ``DeviceClassMapping`` (``name``: the
  resource in ``nominalQuota``; ``deviceClassNames``: the DeviceClasses it stands for);
* ``pkg/dra/claims.go`` ``GetResourceRequestsForResourceClaimTemplates`` and
  ``countDevicesPerClass``: per podset, every ``spec.resourceClaims[]`` naming a
  ``resourceClaimTemplateName`` (a plain ``resourceClaimName`` is not counted) adds, per
  ``exactly`` request with ``allocationMode: ExactCount``, ``count`` devices of its class,
  mapped to the logical resource; ``firstAvailable``, ``allocationMode: All`` and an
  unmapped DeviceClass make the Workload inadmissible (field errors); ``adminAccess``
  requests count nothing;
* ``pkg/workload/workload.go`` ``totalRequestsFromPodSets``: the logical resources are
  added to each pod's requests after the transformations, then multiplied by ``count``;
* ``pkg/controller/core/workload_controller.go`` ``markDRAInadmissible``: the errors are the
  Workload's message.

Such an error is the Workload's ``QuotaReserved`` ``False`` condition: reason
``Misconfigured`` (``UnadmittedWorkloadReasonWithFallback``; the
``UnadmittedWorkloadsObservability`` gate is beta and on in v0.19), the field error as its
message. kubesim keeps the Workload in its queue and retries it each pass (Kueue leaves it
out of the queue with ``Requeued`` ``False`` until the Workload or the configuration
changes), and does not read counters or consumable capacity (``sources``).
"""
from __future__ import annotations

from typing import Any

from kubesim.dra import CLAIM_TEMPLATES

Mappings = tuple[tuple[str, tuple[str, ...]], ...]
MISCONFIGURED = "Misconfigured"   # apis/kueue/v1beta2 WorkloadQuotaReservedReasonMisconfigured


def parse_mappings(res: dict) -> Mappings:
    """``resources.deviceClassMappings``: ((name, (deviceClassNames...)), ...);
    ValueError on an entry without a name or classes, or a class mapped twice
    (pkg/config/validation.go validateDeviceClassMappings)."""
    out = []
    seen: set[str] = set()
    for m in res.get("deviceClassMappings") or []:
        name = str((m or {}).get("name") or "")
        classes = tuple(str(c) for c in (m or {}).get("deviceClassNames") or [])
        if not name or not classes or any(c in seen for c in classes):
            raise ValueError(f"invalid resources.deviceClassMappings entry {m!r}")
        seen.update(classes)
        out.append((name, classes))
    return tuple(out)


def _count_devices(spec: dict, path: str, tname: str) -> tuple[dict[str, int], str]:
    out: dict[str, int] = {}
    for i, req in enumerate(((spec or {}).get("devices") or {}).get("requests") or []):
        f = f"{path}.devices.requests[{i}]"
        if req.get("firstAvailable"):
            return {}, (f"{f}: Invalid value: null: ResourceClaimTemplate {tname}: "
                        "FirstAvailable device selection is not supported")
        exact = req.get("exactly")
        if exact is None:
            return {}, (f"{f}: Invalid value: null: ResourceClaimTemplate {tname}: Exactly "
                        "must be set if FirstAvailable is nil")
        if exact.get("adminAccess"):
            continue
        mode = exact.get("allocationMode") or "ExactCount"
        if mode == "All":
            return {}, (f'{f}.exactly.allocationMode: Invalid value: "All": '
                        f"ResourceClaimTemplate {tname}: AllocationMode 'All' is not supported")
        dc = exact.get("deviceClassName") or ""
        if dc:
            out[dc] = out.get(dc, 0) + int(exact.get("count") or 1)
    return out, ""


def podset_devices(store: Any, namespace: str, podset: dict, index: int,
                   mappings: Mappings) -> tuple[dict[str, int], str]:
    """Per-pod logical resources of one podset, or an error message."""
    by_class = {c: name for name, classes in mappings for c in classes}
    tmpl = podset.get("template") or {}
    out: dict[str, int] = {}
    for j, prc in enumerate((tmpl.get("spec") or {}).get("resourceClaims") or []):
        tname = prc.get("resourceClaimTemplateName")
        if not tname:
            continue
        path = f"spec.podSets[{index}].template.spec.resourceClaims[{j}]"
        try:
            rct = store.get(CLAIM_TEMPLATES, tname, namespace=namespace)
        except Exception as exc:
            return {}, (f"{path}: Internal error: failed to get claim spec for "
                        f"ResourceClaimTemplate {tname} in podset {podset.get('name')}: "
                        f"{getattr(exc, 'message', exc)}")
        counts, err = _count_devices((rct.get("spec") or {}).get("spec") or {}, path, tname)
        if err:
            return {}, err
        for dc, n in sorted(counts.items()):
            logical = by_class.get(dc)
            if logical is None:
                return {}, (f'{path}.resourceClaimTemplateName: Not found: "DeviceClass {dc} '
                            f'is not mapped in DRA configuration for podset '
                            f'{podset.get("name")}"')
            out[logical] = out.get(logical, 0) + n
    return out, ""


def with_devices(store: Any, namespace: str, podset: dict, index: int, mappings: Mappings,
                 per_pod: dict[str, int]) -> tuple[dict[str, int], str]:
    """``per_pod`` plus the podset's mapped DRA devices (a hook of kueue.py _assign)."""
    if not ((podset.get("template") or {}).get("spec") or {}).get("resourceClaims"):
        return per_pod, ""
    extra, err = podset_devices(store, namespace, podset, index, mappings)
    if err or not extra:
        return per_pod, err
    merged = dict(per_pod)
    for r, n in extra.items():
        merged[r] = merged.get(r, 0) + n
    return merged, ""
