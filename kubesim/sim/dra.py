"""Dynamic Resource Allocation, the cluster's half: a simulated NVIDIA DRA driver, the
ResourceClaim controller and the scheduler's DynamicResources plugin (allocation).

* The driver (kubernetes-sigs/dra-driver-nvidia-gpu): its Helm chart installs the
  DeviceClasses `gpu.nvidia.com` and `mig.nvidia.com` (templates/deviceclass-gpu.yaml,
  deviceclass-mig.yaml: `device.driver == 'gpu.nvidia.com' &&
  device.attributes['gpu.nvidia.com'].type == 'gpu'` resp. `'mig'`); its kubelet plugin
  publishes one ResourceSlice per node (pool = the node's name, generation, one slice),
  devices named `gpu-<minor>` with the attributes of cmd/gpu-kubelet-plugin/deviceinfo.go
  (`type`, `uuid`, `productName`, `brand`, `architecture`, `cudaComputeCapability`,
  `driverVersion`, `cudaDriverVersion`, `index`, `minor`; MIG devices add `profile`,
  `parentUUID`, `parentIndex`) and the capacity `memory` (MIG: and `multiprocessors`). A
  partitioned GPU is published as its MIG devices only. Nodes are DRA nodes when their
  profile pool says `gpu: {dra: true}`; they advertise no `nvidia.com/*` extended resource.
* The claim controller (pkg/controller/resourceclaim/controller.go): a pod's
  `spec.resourceClaims[].resourceClaimTemplateName` becomes a claim generated as
  `<pod>-<claim>-<5 chars>`, owned by the pod (controller, blockOwnerDeletion), annotated
  `resource.kubernetes.io/pod-claim-name`, recorded in the pod's
  `status.resourceClaimStatuses`; `status.reservedFor` entries of pods that are gone or done
  are removed, a claim reserved for nobody is deallocated (status.allocation cleared), and
  a generated claim of a done pod is deleted (the GC deletes those of deleted pods).
* The scheduler plugin (pkg/scheduler/framework/plugins/dynamicresources/
  dynamicresources.go, with staging/src/k8s.io/dynamic-resource-allocation/structured/
  allocator.go): PreEnqueue waits for every claim to exist (no condition, no event);
  Filter finds, per node, devices of the node's slices, in slice and device order, that
  match the class selectors and the request selectors (CEL via dra.py) and are not
  allocated to another claim (a device is allocated to one claim at a time), `count` of
  them (ExactCount) or every matching one (All); a node that cannot is
  `cannot allocate all claims`; a claim allocated already pins the pod to its node.
  PreBind writes `status.allocation` (`devices.results[]` request/driver/pool/device,
  `nodeSelector` on the node's name) and adds the pod to `status.reservedFor`; then the
  pod is bound. Preemption does not free DRA devices (`Preemption is not helpful`).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kubesim import dra
from kubesim.sim.predicates import R_NOT_HELPFUL, fit_error_message, fit_reasons

if TYPE_CHECKING:
    from kubesim.sim.state import ClusterState, NodeState, PodInfo

log = logging.getLogger("kubesim.sim.dra")

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
R_CLAIMS = "cannot allocate all claims"
_ARCH = {"ampere": "Ampere", "hopper": "Hopper", "ada-lovelace": "Ada Lovelace",
         "turing": "Turing", "blackwell": "Blackwell"}


def device_class_objects() -> list[dict]:
    """The driver chart's DeviceClasses."""
    def dc(name: str, typ: str) -> dict:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": (
                    f"device.driver == '{DRIVER}' && "
                    f"device.attributes['{DRIVER}'].type == '{typ}'")}}]}}
    return [dc(GPU_CLASS, "gpu"), dc(MIG_CLASS, "mig")]


def _version(v: str) -> str:
    parts = [str(int(x)) for x in str(v).split(".")[:3]]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def slice_object(node: str, inv: Any, sim: dict) -> dict | None:
    """The driver's ResourceSlice for one node's GpuInventory (None: no GPUs)."""
    model = inv.model
    if not model or not inv.gpus:
        return None
    common = {
        "productName": {"string": model["name"]},
        "brand": {"string": "Nvidia" if not model["name"].startswith("Tesla") else "Tesla"},
        "architecture": {"string": _ARCH.get(model["family"], model["family"])},
        "cudaComputeCapability": {"version": "{}.{}.0".format(*model["compute"])},
        "driverVersion": {"version": _version(sim.get("driver_version", "550.90.07"))},
        "cudaDriverVersion": {"version": _version(sim.get("cuda_version", "12.4"))},
    }
    devices = []
    for g in inv.gpus:
        if not g.mig:
            devices.append({"name": f"gpu-{g.index}", "attributes": {
                "type": {"string": "gpu"}, "uuid": {"string": g.uuid},
                "index": {"int": g.index}, "minor": {"int": g.index},
                "pcieBusID": {"string": g.pci_bus_id}, **common},
                "capacity": {"memory": {"value": f"{g.memory}Mi"}}})
            continue
        migs = [d for ds in inv.devices.values() for d in ds
                if d.gpu == g.index and d.mig_profile]
        for d in sorted(migs, key=lambda d: d.gi_id or 0):
            prof = d.mig_profile or ""
            _cs, _ms, mem, sms = model["mig"][prof]
            devices.append({"name": f"gpu-{g.index}-mig-{prof.replace('.', '')}-{d.gi_id}",
                            "attributes": {
                                "type": {"string": "mig"}, "uuid": {"string": d.uuid},
                                "profile": {"string": prof},
                                "parentUUID": {"string": g.uuid},
                                "parentIndex": {"int": g.index},
                                "index": {"int": d.gi_id or 0}, **common},
                            "capacity": {"memory": {"value": f"{mem}Mi"},
                                         "multiprocessors": {"value": str(sms)}}})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def claim_generate_name(pod: str, claim: str) -> str:
    """controller.go handleClaim: `<pod>-<claim>-`, both parts cut in proportion when longer
    than 57 characters (room for the 5 random characters of a 63-character name)."""
    gen = f"{pod}-{claim}-"
    if len(gen) > 57:
        gen = pod[:len(pod) * 57 // len(gen)] + "-" + claim[:len(claim) * 57 // len(gen)]
    return gen


def _node_selector(node: str) -> dict:
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def _done(obj: dict) -> bool:
    return ((obj.get("status") or {}).get("phase")) in ("Succeeded", "Failed")


class DraController:
    """Claim controller + allocation for the scheduler (see the module docstring)."""

    def __init__(self, store, state: ClusterState, events, now_fn):
        self.store = store
        self.state = state
        self.events = events
        self.now_fn = now_fn

    # ---- the driver -------------------------------------------------------------------
    def bootstrap(self, profile: dict) -> None:
        dra_nodes = {f"{p['prefix']}{i}" for p in profile["pools"]
                     if p.get("gpu") and p["gpu"].get("dra") for i in range(p["count"])}
        if not dra_nodes:
            return
        objs = [(dra.DEVICE_CLASSES, o) for o in device_class_objects()]
        for node in sorted(dra_nodes):
            inv = self.state.inventories.get(node)
            s = slice_object(node, inv, profile["simulation"]) if inv else None
            if s is not None:
                objs.append((dra.RESOURCE_SLICES, s))
        for resource, obj in objs:
            try:
                self.store.create(resource, obj)
            except Exception as exc:
                if getattr(exc, "code", None) != 409:
                    log.warning("bootstrap %s %s: %s", resource, obj["metadata"]["name"], exc)

    # ---- the claim controller ---------------------------------------------------------
    def tick(self) -> None:
        claims = self._claims()
        for info in list(self.state.pods.values()):
            spec = info.obj.get("spec") or {}
            if spec.get("resourceClaims") and not _done(info.obj) and \
                    not info.obj["metadata"].get("deletionTimestamp"):
                self._create_template_claims(info.obj)
        if claims:
            self._release(claims)

    def _claims(self) -> list[dict]:
        try:
            return self.store.list(dra.RESOURCE_CLAIMS)
        except Exception:
            return []

    def _create_template_claims(self, pod: dict) -> None:
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        have = {s.get("name") for s in (pod.get("status") or {}).get(
            "resourceClaimStatuses") or []}
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        changed = False
        for pc in pod["spec"]["resourceClaims"]:
            tname = pc.get("resourceClaimTemplateName")
            if not tname or pc.get("name") in have:
                continue
            try:
                tmpl = self.store.get(dra.CLAIM_TEMPLATES, tname, namespace=ns)
            except Exception as exc:   # the controller retries until the template exists
                log.debug("pod %s/%s: template %s: %s", ns, name, tname, exc)
                continue
            tmeta = (tmpl.get("spec") or {}).get("metadata") or {}
            claim: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {
                         "generateName": claim_generate_name(name, pc["name"]),
                         "namespace": ns,
                         "labels": dict(tmeta.get("labels") or {}),
                         "annotations": {**(tmeta.get("annotations") or {}),
                                         POD_CLAIM_NAME: pc["name"]},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                              "uid": meta["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
                     "spec": (tmpl.get("spec") or {}).get("spec") or {}}
            cmeta: dict[str, Any] = claim["metadata"]
            if not cmeta["labels"]:
                del cmeta["labels"]
            try:
                created = self.store.create(dra.RESOURCE_CLAIMS, claim)
            except Exception as exc:   # e.g. quota: the pod waits, as with the real controller
                self.events.record(pod, "Warning", "FailedResourceClaimCreation",
                                   f"PodResourceClaim {pc['name']}: resource claim template "
                                   f'"{tname}": {getattr(exc, "message", exc)}',
                                   component="resource_claim", kind="Pod")
                continue
            statuses.append({"name": pc["name"],
                             "resourceClaimName": created["metadata"]["name"]})
            changed = True
        if changed:
            try:
                self.store.patch("pods", name, {"status": {"resourceClaimStatuses": statuses}},
                                 patch_type="merge", namespace=ns, subresource="status")
            except Exception as exc:
                log.info("pod %s/%s resourceClaimStatuses: %s", ns, name, exc)

    def _release(self, claims: list[dict]) -> None:
        freed = False
        for claim in claims:
            meta = claim["metadata"]
            ns = meta["namespace"]
            status = claim.get("status") or {}
            reserved = status.get("reservedFor") or []
            keep = []
            for ref in reserved:
                info = self.state.pods.get((ns, ref.get("name")))
                if ref.get("resource") == "pods" and (info is None or info.uid != ref.get("uid")
                                                      or _done(info.obj)):
                    continue
                keep.append(ref)
            owner = next((o for o in meta.get("ownerReferences") or []
                          if o.get("kind") == "Pod" and o.get("controller")), None)
            if owner is not None and POD_CLAIM_NAME in (meta.get("annotations") or {}):
                info = self.state.pods.get((ns, owner["name"]))
                if info is not None and info.uid == owner["uid"] and _done(info.obj):
                    try:
                        self.store.delete(dra.RESOURCE_CLAIMS, meta["name"], namespace=ns)
                        freed = True
                    except Exception as exc:
                        log.info("delete claim %s/%s: %s", ns, meta["name"], exc)
                    continue
            if len(keep) == len(reserved) and (keep or not status.get("allocation")):
                continue
            new_status = dict(status)
            new_status["reservedFor"] = keep
            if not keep:
                new_status.pop("reservedFor", None)
                new_status.pop("allocation", None)   # deallocate: nobody uses it
                freed = True
            try:
                self.store.replace(dra.RESOURCE_CLAIMS, {**claim, "status": new_status},
                                   namespace=ns, subresource="status")
            except Exception as exc:
                log.info("release claim %s/%s: %s", ns, meta["name"], exc)
        if freed:
            self.state.capacity_freed = True

    # ---- the scheduler plugin ---------------------------------------------------------
    def pod_claims(self, pod: dict) -> list[dict] | None:
        """The pod's claims, or None while one does not exist yet (PreEnqueue)."""
        ns = pod["metadata"]["namespace"]
        names = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}
                                                                      ).get(
            "resourceClaimStatuses") or []}
        out = []
        for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
            cname = pc.get("resourceClaimName") or names.get(pc.get("name"))
            if not cname:
                return None
            try:
                claim = self.store.get(dra.RESOURCE_CLAIMS, cname, namespace=ns)
            except Exception:
                return None
            if claim["metadata"].get("deletionTimestamp"):
                return None
            out.append(claim)
        return out

    def _in_use(self) -> set[tuple[str, str, str]]:
        used = set()
        for claim in self._claims():
            alloc = (claim.get("status") or {}).get("allocation") or {}
            for r in (alloc.get("devices") or {}).get("results") or []:
                used.add((r.get("driver"), r.get("pool"), r.get("device")))
        return used

    def _classes(self) -> dict[str, dict]:
        try:
            return {c["metadata"]["name"]: c for c in self.store.list(dra.DEVICE_CLASSES)}
        except Exception:
            return {}

    def _node_devices(self, node: str) -> list[tuple[str, str, dict]]:
        try:
            slices = self.store.list(dra.RESOURCE_SLICES)
        except Exception:
            return []
        out = []
        for s in sorted(slices, key=lambda s: s["metadata"]["name"]):
            spec = s.get("spec") or {}
            if spec.get("nodeName") != node:
                continue
            for d in spec.get("devices") or []:
                out.append((spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""), d))
        return out

    def allocate_on(self, node: str, claims: list[dict], used: set,
                    classes: dict) -> list[tuple[dict, dict]] | str:
        """[(claim, allocation)] for the claims not allocated yet, or a failure reason."""
        devices = self._node_devices(node)
        taken = set(used)
        out = []
        for claim in claims:
            cname = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
            alloc = (claim.get("status") or {}).get("allocation")
            if alloc is not None:
                terms = (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
                nodes = {v for t in terms for f in t.get("matchFields") or []
                         for v in f.get("values") or []}
                if nodes and node not in nodes:
                    return R_CLAIMS
                continue
            results = []
            for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
                exact = req.get("exactly")
                if exact is None:
                    return R_CLAIMS   # firstAvailable is not simulated
                cls = classes.get(exact.get("deviceClassName", ""))
                if cls is None:
                    return (f"resource claim {cname}: request {req.get('name')}: device class "
                            f"{exact.get('deviceClassName')} does not exist")
                exprs = [s["cel"]["expression"] for s in (cls.get("spec") or {}).get(
                    "selectors") or [] if (s.get("cel") or {}).get("expression")]
                exprs += [s["cel"]["expression"] for s in exact.get("selectors") or []
                          if (s.get("cel") or {}).get("expression")]
                matching = []
                for driver, pool, d in devices:
                    key = (driver, pool, d["name"])
                    if key in taken:
                        continue
                    act = dra.device_activation(driver, d)
                    try:
                        if all(dra.selector_matches(e, act) for e in exprs):
                            matching.append(key)
                    except dra.CelError as exc:
                        return f"claim {cname}: CEL runtime error: {exc}"
                want = len(matching) if exact.get("allocationMode") == "All" else int(
                    exact.get("count") or 1)
                if want == 0 or len(matching) < want:
                    return R_CLAIMS
                for key in matching[:want]:
                    taken.add(key)
                    results.append({"request": req["name"], "driver": key[0], "pool": key[1],
                                    "device": key[2]})
            out.append((claim, {"devices": {"results": results},
                                "nodeSelector": _node_selector(node)}))
        return out

    def schedule(self, sched: Any, info: PodInfo) -> bool:
        """The scheduler's cycle for a pod with resourceClaims (called by Scheduler)."""
        pod = info.obj
        claims = self.pod_claims(pod)
        if claims is None:
            return False   # PreEnqueue: a claim is missing; the pod is retried on changes
        spec = pod.get("spec") or {}
        ok_nodes, static_reasons, ok_names = sched._static(spec, sched.signature(info))
        fitting = sched._fitting(info, ok_nodes, ok_names, tuple(sorted(info.req.items())))
        fit_names = {n.name for n in fitting}
        used, classes = self._in_use(), self._classes()
        plans: dict[str, Any] = {}
        reasons = dict(static_reasons)
        for n in ok_nodes:
            if n.name not in fit_names:
                for r in fit_reasons(info.req, n, None):
                    reasons[r] = reasons.get(r, 0) + 1
                continue
            plan = self.allocate_on(n.name, claims, used, classes)
            if isinstance(plan, str):
                reasons[plan] = reasons.get(plan, 0) + 1
            else:
                plans[n.name] = plan
        if plans:
            best: NodeState = sched._pick(info, [n for n in fitting if n.name in plans])
            return self._reserve_and_bind(sched, info, best, claims, plans[best.name])
        total = len(self.state.nodes)
        msg = fit_error_message(total, reasons) + (
            f" preemption: 0/{total} nodes are available: {total} {R_NOT_HELPFUL}.")
        sched._unschedulable(info, msg, ("dra", info.key))
        return False

    def _reserve_and_bind(self, sched: Any, info: PodInfo, node: NodeState,
                          claims: list[dict], plan: list) -> bool:
        pod = info.obj
        meta = pod["metadata"]
        allocations = {c["metadata"]["uid"]: a for c, a in plan}
        for claim in claims:
            status = dict(claim.get("status") or {})
            if claim["metadata"]["uid"] in allocations:
                status["allocation"] = allocations[claim["metadata"]["uid"]]
            reserved = list(status.get("reservedFor") or [])
            if not any(r.get("uid") == meta["uid"] for r in reserved):
                reserved.append({"resource": "pods", "name": meta["name"], "uid": meta["uid"]})
            status["reservedFor"] = reserved
            try:
                self.store.replace(dra.RESOURCE_CLAIMS, {**claim, "status": status},
                                   namespace=meta["namespace"], subresource="status")
            except Exception as exc:   # a conflict: another pod took it; retry next cycle
                log.info("reserve claim %s: %s", claim["metadata"]["name"], exc)
                self.state.sched_active[info.key] = info
                return False
        if not sched._bind(info, node):
            return False
        self._hold_devices(info.key, node.name, plan, claims)
        return True

    def _hold_devices(self, key: tuple, node: str, plan: list, claims: list[dict]) -> None:
        """The node's GPU inventory learns which of its cards the pod's claims hold, so
        the kubelet's DCGM metrics and ``gpu_assignment`` see them (released with the
        pod, as device-plugin cards are: ClusterState._account)."""
        inv = self.state.inventories.get(node)
        if inv is None:
            return
        names = {d["name"]: (d.get("attributes") or {}).get("uuid", {}).get("string")
                 for _drv, _pool, d in self._node_devices(node)}
        allocs = [a for _c, a in plan] + [(c.get("status") or {}).get("allocation") or {}
                                          for c in claims]
        uuids = {names.get(r.get("device")) for a in allocs
                 for r in (a.get("devices") or {}).get("results") or [] if r.get("pool") == node}
        held = [d for ds in inv.devices.values() for d in ds if d.uuid in uuids]
        for d in held:
            if key not in d.users:
                d.users.append(key)
        if held:
            inv.by_pod[key] = held
