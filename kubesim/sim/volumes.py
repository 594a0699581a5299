"""A PersistentVolume controller look-alike: dynamic provisioning and binding of PVCs.

A PVC of a known StorageClass gets a PersistentVolume ``pvc-<uid>`` and both become
Bound: at once for ``volumeBindingMode: Immediate``, or when the first pod using
the claim is bound to a node for ``WaitForFirstConsumer`` (the default).  Deleting
the claim deletes (reclaimPolicy Delete) or releases (Retain) its volume.

A claim naming a VolumeAttributesClass (``spec.volumeAttributesClassName``, GA in 1.34) is
provisioned only once that class exists and is for the StorageClass's provisioner, as the
CSI external-provisioner does (kubernetes-csi/external-provisioner
``pkg/controller/controller.go``: "volumeattributesclass ... not found", and "VAC ... is for
driver ... which does not match driver name ..." as ProvisioningFailed, retried); the
volume gets the class (``PersistentVolume.spec.volumeAttributesClassName``) and the bound
claim reports it (``status.currentVolumeAttributesClassName``, set on binding by
pkg/controller/volume/persistentvolume/pv_controller.go).
"""

from __future__ import annotations

import logging
from typing import Any

from kubesim.sim.state import ClusterState
from kubesim.sim.util import fmt_time

log = logging.getLogger("kubesim.sim.volumes")
COMPONENT = "persistentvolume-controller"
DEFAULT_CLASS_ANN = "storageclass.kubernetes.io/is-default-class"


class VolumeController:
    def __init__(self, store, state: ClusterState, events, now_fn):
        self.store = store
        self.state = state
        self.events = events
        self.now_fn = now_fn
        self._waiting_reported: set = set()
        self.provisioned = 0

    def _class(self, pvc: dict) -> dict | None:
        name = (pvc.get("spec") or {}).get("storageClassName")
        classes = self.state.storage_classes
        if name is None:
            for sc in classes.values():
                if (sc["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANN) == "true":
                    return sc
            return None
        return classes.get(name)

    def tick(self) -> None:
        st = self.state
        if st.released_pvs:
            for pv_name, policy in sorted(st.released_pvs):
                self._reclaim(pv_name, policy)
            st.released_pvs.clear()
        if not st.pvc_dirty:
            return
        todo = sorted(st.pvc_dirty)
        st.pvc_dirty.clear()
        for key in todo:
            pvc = st.pvcs.get(key)
            if pvc is None or pvc["metadata"].get("deletionTimestamp"):
                continue
            if (pvc.get("status") or {}).get("phase") == "Bound":
                continue
            name = (pvc.get("spec") or {}).get("storageClassName")
            sc = self._class(pvc)
            if sc is None:
                if name:
                    self.events.record(
                        pvc,
                        "Warning",
                        "ProvisioningFailed",
                        f'storageclass.storage.k8s.io "{name}" not found',
                        component=COMPONENT,
                        kind="PersistentVolumeClaim",
                    )
                continue
            if not self._attributes_class_ready(pvc, sc):
                continue
            mode = sc.get("volumeBindingMode") or "Immediate"
            if mode == "WaitForFirstConsumer" and not st.pvc_consumers.get(key):
                if key not in self._waiting_reported:
                    self._waiting_reported.add(key)
                    self.events.record(
                        pvc,
                        "Normal",
                        "WaitForFirstConsumer",
                        "waiting for first consumer to be created before binding",
                        component=COMPONENT,
                        kind="PersistentVolumeClaim",
                    )
                continue
            self._provision(key, pvc, sc)

    def _attributes_class_ready(self, pvc: dict, sc: dict) -> bool:
        """Whether the claim's VolumeAttributesClass (if any) exists for this provisioner;
        a ProvisioningFailed event when not (the claim is retried when classes change)."""
        name = (pvc.get("spec") or {}).get("volumeAttributesClassName")
        if not name:
            return True
        vac = self.state.volume_attributes_classes.get(name)
        driver = sc.get("provisioner", "")
        if vac is None:
            problem = f'failed to get VolumeAttributesClass "{name}": ' \
                      f'volumeattributesclass.storage.k8s.io "{name}" not found'
        elif vac.get("driverName") != driver:
            problem = (f"VAC {name} referenced in PVC is for driver {vac.get('driverName')} "
                       f"which does not match driver name {driver}")
        else:
            return True
        self.events.record(pvc, "Warning", "ProvisioningFailed", problem,
                           component=COMPONENT, kind="PersistentVolumeClaim")
        return False

    def _provision(self, key: tuple, pvc: dict, sc: dict) -> None:
        ns, name = key
        md = pvc["metadata"]
        spec = pvc.get("spec") or {}
        size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        modes = spec.get("accessModes") or ["ReadWriteOnce"]
        pv_name = f"pvc-{md.get('uid', name)}"
        pv: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": pv_name,
                "annotations": {"pv.kubernetes.io/provisioned-by": sc.get("provisioner", "")},
                "finalizers": ["kubernetes.io/pv-protection"],
            },
            "spec": {
                "capacity": {"storage": size},
                "accessModes": modes,
                "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
                "storageClassName": sc["metadata"]["name"],
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": ns,
                    "name": name,
                    "uid": md.get("uid", ""),
                },
                "hostPath": {"path": f"/var/lib/kubesim/volumes/{pv_name}", "type": ""},
            },
        }
        vac = spec.get("volumeAttributesClassName")
        if vac:
            pv["spec"]["volumeAttributesClassName"] = vac
        nodes = self.state.pvc_consumers.get(key)
        if nodes:
            node = sorted(nodes)[0]
            pv["spec"]["nodeAffinity"] = {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [node],
                                }
                            ]
                        }
                    ]
                }
            }
        pv["metadata"].pop("finalizers")  # keep deletion simple: no protection finalizer
        try:
            self.store.create("persistentvolumes", pv)
        except Exception as exc:
            if getattr(exc, "code", None) != 409:
                log.warning("provision %s: %s", pv_name, exc)
                return
        try:
            self.store.patch(
                "persistentvolumes",
                pv_name,
                {"status": {"phase": "Bound"}},
                patch_type="merge",
                subresource="status",
            )
        except Exception as exc:
            log.debug("pv status %s: %s", pv_name, exc)
        anns = {
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.kubernetes.io/storage-provisioner": sc.get("provisioner", ""),
        }
        if nodes:
            anns["volume.kubernetes.io/selected-node"] = sorted(nodes)[0]
        try:
            self.store.patch(
                "persistentvolumeclaims",
                name,
                {"metadata": {"annotations": anns}, "spec": {"volumeName": pv_name}},
                patch_type="merge",
                namespace=ns,
            )
        except Exception as exc:  # volumeName may be refused by stricter validation: keep status
            log.debug("pvc %s/%s volumeName: %s", ns, name, exc)
            try:
                self.store.patch(
                    "persistentvolumeclaims",
                    name,
                    {"metadata": {"annotations": anns}},
                    patch_type="merge",
                    namespace=ns,
                )
            except Exception as exc2:
                log.debug("pvc %s/%s annotations: %s", ns, name, exc2)
        try:
            self.store.patch(
                "persistentvolumeclaims",
                name,
                {"status": {"phase": "Bound", "accessModes": modes, "capacity": {"storage": size},
                            **({"currentVolumeAttributesClassName": vac} if vac else {})}},
                patch_type="merge",
                namespace=ns,
                subresource="status",
            )
        except Exception as exc:
            log.debug("pvc status %s/%s: %s", ns, name, exc)
            return
        self.provisioned += 1
        self.events.record(
            pvc,
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {pv_name}",
            component=COMPONENT,
            kind="PersistentVolumeClaim",
        )

    def _reclaim(self, pv_name: str, policy: str) -> None:
        try:
            if policy == "Delete":
                self.store.delete("persistentvolumes", pv_name)
            else:
                self.store.patch(
                    "persistentvolumes",
                    pv_name,
                    {
                        "status": {
                            "phase": "Released",
                            "lastPhaseTransitionTime": fmt_time(self.now_fn()),
                        }
                    },
                    patch_type="merge",
                    subresource="status",
                )
        except Exception as exc:
            log.debug("reclaim %s: %s", pv_name, exc)
