"""The simulated GPU cluster behind kubesim's API server.

``Simulation(store, profile=load_profile("small"), seed=0)`` creates the profile's
Nodes and StorageClasses (``bootstrap``) and runs the controllers on every
``tick``: node lifecycle, Kueue (``kueue.py``), training operator (PyTorchJob), Trainer
v2 (TrainJob, with the ClusterTrainingRuntime ``torch-distributed`` installed at
bootstrap), garbage collector,
scheduler and kubelet.  All timing uses ``store.clock``, the wall clock (see
``kubesim/clock.py``): its ``speed`` only shortens what the simulated workload takes (the
kubelet's container start-up and run times, the log's steps); the seed makes runs
repeatable.
``metrics_text()`` renders DCGM-exporter / cAdvisor style Prometheus text and
``pod_log()`` a simulated container log.

Controls through the API (annotations are ``kubesim.trainyard.io/<name>``):

* Node ``fail: "true"``: NotReady (Ready=Unknown) with unreachable NoSchedule/NoExecute
  taints; its pods fail (reason NodeLost, exit code 137).  ``spec.unschedulable``
  (kubectl cordon) keeps new pods off.  Deleting a Node force-deletes its pods.
* Pod (or PyTorchJob pod template) ``run-seconds`` (or env ``KUBESIM_RUN_SECONDS``),
  ``fail-after-seconds``, ``exit-code``, ``gpu-util`` (%), ``gpu-mem-gib``,
  ``egress-bytes-per-second`` (to the internet), ``peer-bytes-per-second`` (to the other
  running pods of its job, split evenly: a multi-node job's NCCL traffic), ``log`` (text
  prepended to the simulated log). ``/metrics`` reports both as cAdvisor's
  ``container_network_transmit_bytes_total`` (every byte sent) and as OpenCost's
  network-costs ``kubecost_pod_network_egress_bytes_total`` by destination (``internet``,
  ``sameRegion``, ``sameZone`` from the nodes' topology labels).
* Topology labels: ``topology.kubernetes.io/zone``, ``trainyard.io/rack``,
  ``trainyard.io/switch`` (leaf switch), ``trainyard.io/node-pool``.
"""

from __future__ import annotations

import contextlib
import logging
from time import perf_counter
from typing import Protocol

from kubesim.sim.dra import DraController
from kubesim.sim.events import EventRecorder
from kubesim.sim.gc import GarbageCollector, NodeController
from kubesim.sim.kubelet import Kubelet
from kubesim.sim.kueue import JOB_RESOURCES, KUEUE_RESOURCES, KueueController
from kubesim.sim.logs import ContainerLog, container_log, pod_log, run_progress
from kubesim.sim.metrics import Metrics
from kubesim.sim.nodes import build_nodes, priority_class_objects, storage_class_objects
from kubesim.sim.operator import Operator
from kubesim.sim.profile import load_profile
from kubesim.sim.scheduler import Scheduler
from kubesim.sim.state import CLUSTER_RUNTIMES, PRIORITYCLASSES, ClusterState
from kubesim.sim.trainjob import REPORTS_PER_RUN, TrainJobController, runtime_objects
from kubesim.sim.volumes import VolumeController

__all__ = ["Simulation", "load_profile"]
log = logging.getLogger("kubesim.sim")

WATCHED = (
    "priorityclasses.scheduling.k8s.io",
    "storageclasses.storage.k8s.io",
    "volumeattributesclasses.storage.k8s.io",
    "nodes",
    "persistentvolumes",
    "persistentvolumeclaims",
    "pytorchjobs.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org",
    "trainjobs.trainer.kubeflow.org",
    "pods",
    "services",
)


class _Controller(Protocol):
    def tick(self) -> None: ...


class Simulation:
    def __init__(self, store, *, profile: dict, seed: int = 0):
        self.store = store
        self.clock = store.clock
        self.profile = profile if "simulation" in profile else load_profile(profile)
        self.seed = seed
        self.state = ClusterState(self.profile)
        sim = self.profile["simulation"]
        self.events = EventRecorder(store, self.now, ttl_seconds=float(sim["event_ttl_seconds"]))
        self.kubelet = Kubelet(store, self.state, self.events, self.now, self.profile, seed,
                               speed=self.clock.speed)
        self.scheduler = Scheduler(store, self.state, self.events, self.now)
        self.dra = self.scheduler.dra = DraController(store, self.state, self.events, self.now)
        self.operator = Operator(store, self.state, self.events, self.now)
        self.kueue = KueueController(store, self.state, self.events, self.now)
        self.trainjobs = TrainJobController(
            store, self.state, self.events, self.now,
            progress=lambda ns, name: run_progress(self, ns, name, reports=REPORTS_PER_RUN))
        self.gc = GarbageCollector(store, self.state)
        self.nodes = NodeController(store, self.state, self.kubelet, self.events, self.now)
        self.volumes = VolumeController(store, self.state, self.events, self.now)
        self.metrics = Metrics(self.state, self.kubelet, self.profile, seed, self.now)
        self._bootstrapped = False
        self._last_expire = 0.0
        self.ticks = 0
        self.timings: dict[str, float] = {}  # seconds spent per controller (for the bench)
        self.operator.max_per_tick = int(sim.get("max_job_reconciles_per_tick", 200))
        self.trainjobs.max_per_tick = self.operator.max_per_tick
        self.scheduler.max_per_tick = int(sim.get("max_schedule_attempts_per_tick", 1000))
        self._controllers: list[tuple[str, _Controller]] = [
            ("nodes", self.nodes),
            ("kueue", self.kueue),
            ("operator", self.operator),
            ("trainjobs", self.trainjobs),
            ("gc", self.gc),
            ("volumes", self.volumes),
            ("dra", self.dra),
            ("scheduler", self.scheduler),
            ("kubelet", self.kubelet),
        ]
        self._prime()
        state_event, kueue_event = self.state.on_event, self.kueue.on_event
        kueue_keys = KUEUE_RESOURCES | JOB_RESOURCES | {"pods", "configmaps"}

        def on_event(etype: str, resource: str, obj: dict) -> None:
            state_event(etype, resource, obj)
            if resource in kueue_keys:
                kueue_event(etype, resource, obj)

        if hasattr(store, "subscribe_raw"):  # stored objects, never mutated in place: no copies
            self._unsubscribe = store.subscribe_raw(
                lambda etype, rt, obj: on_event(etype, rt.key, obj)
            )
        else:
            self._unsubscribe = store.subscribe(on_event)

    def now(self) -> float:
        return self.clock.now().timestamp()

    def _prime(self) -> None:
        """Load what the store already holds (a Simulation attached to a non-empty store)."""
        for resource in WATCHED:
            try:
                objs = self.store.list(resource)
            except Exception as exc:  # resource not served by this store
                log.debug("prime %s: %s", resource, exc)
                continue
            for obj in objs:
                self.state.on_event("ADDED", resource, obj)
        for resource in sorted(KUEUE_RESOURCES | JOB_RESOURCES | {"configmaps"}):
            try:
                objs = self.store.list(resource)
            except Exception as exc:  # not served (no CRD)
                log.debug("prime %s: %s", resource, exc)
                continue
            for obj in objs:
                self.kueue.on_event("ADDED", resource, obj)

    def bootstrap(self) -> None:
        """Create the profile's Nodes, StorageClasses (and optional PriorityClasses).

        Idempotent: existing objects are skipped (their GPU inventories are attached)."""
        now = self.clock.timestamp()
        for node, inv in build_nodes(self.profile, now):
            name = node["metadata"]["name"]
            self.state.inventories[name] = inv
            if name in self.state.nodes:
                ns = self.state.nodes[name]
                if ns.inv is None or not ns.inv.gpus:
                    ns.inv = inv
                    for key in sorted(ns.pods):  # pods bound before the inventory existed
                        inv.allocate(key, self.state.pods[key].req)
                continue
            try:
                created = self.store.create("nodes", node)
            except Exception as exc:
                if getattr(exc, "code", None) == 409:
                    continue
                raise
            if not (created.get("status") or {}).get("capacity"):
                self.store.patch(
                    "nodes",
                    name,
                    {"status": node["status"]},
                    patch_type="merge",
                    subresource="status",
                )
            node_state = self.state.nodes.get(name)
            if node_state is not None:
                node_state.inv = inv
        for resource, objs in (
            ("storageclasses.storage.k8s.io", storage_class_objects(self.profile)),
            (PRIORITYCLASSES, priority_class_objects(self.profile)),
            (CLUSTER_RUNTIMES, runtime_objects()),
        ):
            for obj in objs:
                try:
                    self.store.create(resource, obj)
                except Exception as exc:
                    if getattr(exc, "code", None) != 409:
                        log.warning("bootstrap %s %s: %s", resource, obj["metadata"]["name"], exc)
        self.dra.bootstrap(self.profile)   # the DRA driver's DeviceClasses and ResourceSlices
        self._bootstrapped = True

    def tick(self) -> None:
        """One pass of every controller at the clock's current time."""
        self.ticks += 1
        t = self.timings
        for name, ctl in self._controllers:
            t0 = perf_counter()
            ctl.tick()
            t[name] = t.get(name, 0.0) + perf_counter() - t0
        now = self.now()
        if now - self._last_expire >= 60.0:
            self._last_expire = now
            self.events.expire()

    def metrics_text(self) -> str:
        return self.metrics.text()

    def pod_log(self, namespace: str, name: str, container: str | None = None) -> str:
        """Simulated container log (served by the API server's pods/log)."""
        return pod_log(self, namespace, name, container)

    def container_log(self, namespace: str, name: str, container: str, *,
                      previous: bool = False) -> ContainerLog:
        """Timed lines of one container instance (raises ``LogUnavailable``)."""
        return container_log(self, namespace, name, container, previous=previous)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._unsubscribe()

    # introspection for tests and the bench
    def gpu_assignment(self, namespace: str, name: str) -> list[dict]:
        info = self.state.pods.get((namespace, name))
        if info is None or info.node is None:
            return []
        inv = self.state.nodes[info.node].inv
        return [
            {"gpu": d.gpu, "uuid": d.uuid, "resource": d.resource, "mig_profile": d.mig_profile}
            for d in (inv.by_pod.get(info.key, []) if inv else [])
        ]
