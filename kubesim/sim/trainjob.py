"""A Kubeflow Trainer v2 look-alike for trainer.kubeflow.org/v1alpha1 TrainJob.

Follows kubeflow/trainer v2.3.0 and the JobSet it builds, without simulating the JobSet
and Job objects themselves: the pods are created as the JobSet's Indexed Jobs would
create them, owned directly by the TrainJob (so the garbage collector deletes them with
it).

* Runtime: ``spec.runtimeRef`` names a ClusterTrainingRuntime (kubesim installs
  ``torch-distributed`` at bootstrap: :data:`TORCH_DISTRIBUTED`, from the chart's
  ``files/runtimes/torch-distributed.yaml``). Another ``kind`` fails the TrainJob
  (``TrainingRuntimeNotSupported``, ``pkg/controller/trainjob_controller.go``); a missing
  runtime is a Warning event ``TrainJobResourcesCreationFailed``, retried.
* Pods (``pkg/runtime/framework/plugins/jobset``, ``.../torch/torch.go``): the runtime's
  replicated job labelled ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``
  (``node``) runs ``trainer.numNodes`` pods (else the runtime's ``mlPolicy.numNodes``),
  named ``<trainjob>-node-0-<index>-<5 chars>`` with hostname ``<trainjob>-node-0-<index>``
  and subdomain ``<trainjob>`` (a headless Service of that name), the JobSet labels and
  annotations (``jobset.sigs.k8s.io/jobset-name``, ``replicatedjob-name``, ``job-index``,
  ...) and the Indexed Job's (``batch.kubernetes.io/job-name``,
  ``batch.kubernetes.io/job-completion-index``). The ``node`` container gets
  ``trainer.image``, ``command``, ``args``, ``resourcesPerNode``, ``trainer.env`` and the
  torch plugin's ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK`` (from the
  completion index annotation), ``PET_MASTER_ADDR`` (``<trainjob>-node-0-0.<trainjob>``)
  and ``PET_MASTER_PORT`` (29500). ``spec.runtimePatches`` are merged into the pod
  template in list order (labels, annotations, node selector and maps merged; volumes,
  containers, volume mounts by name; tolerations, affinity replaced). The
  ``trainjob-ancestor-step`` label is on the runtime's Job template, so it would be on the
  Job, not on the pods (kubesim has no Job object). The rest of the runtime's pod
  template is the pods' as it is, ``priorityClassName`` included (Trainer's JobSet builder
  patches only the trainer's fields and the runtime patches into it:
  ``pkg/runtime/framework/plugins/jobset/builder.go``; a runtime patch has no
  ``priorityClassName``); the API server's Priority admission then sets ``priority``.
* ``restartPolicy`` defaults to ``OnFailure`` (JobSet's webhook default); a failed pod is
  recreated and container restarts count too, up to the Job's ``backoffLimit`` (the
  runtime's, else Kubernetes' default 6); past it the Job, hence the JobSet, fails
  (JobSet's default failure policy), and so the TrainJob: ``Failed``, reason
  ``FailedJobs``, message "jobset failed due to one or more job failures". All pods
  succeeded: ``Complete``, reason ``AllJobsCompleted``, "jobset completed successfully".
* ``spec.suspend``: pods deleted (with their grace period), condition ``Suspended`` True
  (reason ``Suspended``, "TrainJob is suspended"); un-suspended: ``Suspended`` False
  (``Resumed``, "TrainJob is resumed") and pods recreated from the TrainJob as it is now
  (its runtime patches included).
* ``activeDeadlineSeconds`` from the last resume (the ``Suspended`` condition's time when
  False, else the creation time): ``Failed``, ``DeadlineExceeded``, "TrainJob exceeded its
  active deadline", running pods deleted.
* ``status.jobsStatus``: one entry per replicated job (``node``): its one child Job
  ``active``, ``ready`` (all its pods ready), ``succeeded``, ``failed``, ``suspended``.
* ``status.trainerStatus`` (Trainer v2.2+, the ``TrainJobStatus`` feature gate; what the
  runtime POSTs to the controller's status server, ``pkg/statusserver/server.go``, applied
  to the status with the field manager ``trainer-status``): the rank-0 pod's training
  script reports its progress as it trains (``kubesim.sim.logs.run_progress``, the same
  figures as the ``TRAINYARD_PROGRESS`` lines of its log): ``progressPercentage`` (whole
  percent, 100 once it succeeded), ``estimatedRemainingSeconds``, ``metrics`` (``loss``
  and ``step``, values as strings) and ``lastUpdatedTime`` (when it reported). It reports
  about :data:`REPORTS_PER_RUN` times a run (a real client throttles, the SDK to one
  report in 5 s). The last report stays through a suspension or a failure, as Trainer
  leaves it, until the next run reports. kubesim writes it with the controller's own
  status write (its managedFields name the controller, not ``trainer-status``) and runs
  no status server, nor injects its ``KUBEFLOW_TRAINER_SERVER_*`` variables and token
  volume into the pods.
* ``spec.managedBy`` other than Trainer's: left alone.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
from collections.abc import Callable
from typing import Any

from kubesim.sim.logs import Progress
from kubesim.sim.operator import Operator
from kubesim.sim.state import CLUSTER_RUNTIMES, TERMINAL, TRAINJOBS, PodInfo
from kubesim.sim.util import fmt_time, parse_time

API_VERSION = "trainer.kubeflow.org/v1alpha1"
KIND = "TrainJob"
CONTROLLER = "trainjob-controller"
MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_ANCESTOR = "trainer"
NODE = "node"  # Trainer's constants.Node: the torch runtimes' job and container name
MASTER_PORT = 29500  # constants.ContainerTrainerPort
DEFAULT_BACKOFF_LIMIT = 6  # batch/v1 Job's default
REPORTS_PER_RUN = 50  # trainerStatus reports in a whole run, about (see the docstring)
JS = "jobset.sigs.k8s.io/"
L_JOBSET = JS + "jobset-name"
L_RJOB = JS + "replicatedjob-name"
L_RJOB_REPLICAS = JS + "replicatedjob-replicas"
L_JOB_INDEX = JS + "job-index"
L_JOB_GLOBAL_INDEX = JS + "job-global-index"
L_JOB_KEY = JS + "job-key"
L_RESTART = JS + "restart-attempt"
L_JOB_NAME = "batch.kubernetes.io/job-name"
L_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
L_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet

#: The ClusterTrainingRuntime kubesim installs (kubeflow/trainer v2.3.0
#: charts/kubeflow-trainer/files/runtimes/torch-distributed.yaml, templating removed).
TORCH_DISTRIBUTED: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed",
                 "labels": {"trainer.kubeflow.org/framework": "torch"}},
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {"spec": {"replicatedJobs": [{
            "name": NODE,
            "template": {
                "metadata": {"labels": {ANCESTOR_LABEL: TRAINER_ANCESTOR}},
                "spec": {"template": {"spec": {"containers": [{
                    "name": NODE,
                    "image": "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
                }]}}},
            },
        }]}},
    },
}


def runtime_objects() -> list[dict]:
    """The ClusterTrainingRuntimes a cluster starts with."""
    return [copy.deepcopy(TORCH_DISTRIBUTED)]


def owner_reference(md: dict) -> dict:
    return {"apiVersion": API_VERSION, "kind": KIND, "name": md["name"],
            "uid": md.get("uid", ""), "controller": True, "blockOwnerDeletion": True}


def set_condition(conds: list[dict], ctype: str, status: str, reason: str, message: str,
                  now: str) -> list[dict]:
    """apimachinery's ``meta.SetStatusCondition``: a new list; the transition time moves
    only when the status changes."""
    out, found = [], False
    for cond in conds:
        if cond.get("type") != ctype:
            out.append(cond)
            continue
        found = True
        when = cond.get("lastTransitionTime") if cond.get("status") == status else now
        out.append({"type": ctype, "status": status, "reason": reason, "message": message,
                    "lastTransitionTime": when or now})
    if not found:
        out.append({"type": ctype, "status": status, "reason": reason, "message": message,
                    "lastTransitionTime": now})
    return out


def condition(status: dict, ctype: str) -> dict | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == ctype), None)


def is_true(status: dict, ctype: str) -> bool:
    cond = condition(status, ctype)
    return cond is not None and cond.get("status") == "True"


def trainer_job(runtime: dict) -> dict | None:
    """The runtime's replicated job the trainer runs in (labelled ancestor ``trainer``)."""
    jobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "replicatedJobs") or []
    for rjob in jobs:
        labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(ANCESTOR_LABEL) == TRAINER_ANCESTOR:
            return rjob
    return None


def num_nodes(job: dict, runtime: dict) -> int:
    trainer = (job.get("spec") or {}).get("trainer") or {}
    if trainer.get("numNodes") is not None:
        return int(trainer["numNodes"])
    return int(((runtime.get("spec") or {}).get("mlPolicy") or {}).get("numNodes") or 1)


def _by_name(items: list, patch: list, key: str = "name") -> list:
    """Strategic-merge of a list with a merge key: items of ``patch`` replace (maps merge)
    the item of the same key, new ones are appended."""
    out = [copy.deepcopy(i) for i in items]
    for item in patch or []:
        cur = next((o for o in out if o.get(key) == item.get(key)), None)
        if cur is None:
            out.append(copy.deepcopy(item))
        else:
            for k, v in item.items():
                if k == "volumeMounts":
                    cur[k] = _by_name(cur.get(k) or [], v, "mountPath")
                elif k == "env":
                    cur[k] = _by_name(cur.get(k) or [], v)
                else:
                    cur[k] = copy.deepcopy(v)
    return out


def apply_runtime_patch(pod: dict, patch: dict) -> None:
    """One replicated job's ``template.spec.template`` patch into the pod template."""
    md = patch.get("metadata") or {}
    meta = pod.setdefault("metadata", {})
    for field in ("labels", "annotations"):
        if md.get(field):
            meta[field] = {**(meta.get(field) or {}), **md[field]}
    spec = pod.setdefault("spec", {})
    for k, v in (patch.get("spec") or {}).items():
        if k == "nodeSelector":
            spec[k] = {**(spec.get(k) or {}), **v}
        elif k in ("volumes", "containers", "initContainers"):
            spec[k] = _by_name(spec.get(k) or [], v)
        else:
            spec[k] = copy.deepcopy(v)


def _upsert_env(env: list, items: list) -> list:
    return _by_name(env, items)


def pod_suffix(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return "".join(_NAME_CHARS[b % len(_NAME_CHARS)] for b in digest[:5])


def build_pod(job: dict, runtime: dict, index: int, attempt: int) -> dict:
    """The pod JobSet's Indexed Job ``<trainjob>-node-0`` creates for ``index``."""
    md, spec = job["metadata"], job.get("spec") or {}
    name, ns = md["name"], md.get("namespace", "default")
    rjob = trainer_job(runtime) or {}
    rname = rjob.get("name", NODE)
    tmpl = copy.deepcopy(((rjob.get("template") or {}).get("spec") or {}).get("template") or {})
    for entry in spec.get("runtimePatches") or []:
        jobs = ((((entry or {}).get("trainingRuntimeSpec") or {}).get("template") or {})
                .get("spec") or {}).get("replicatedJobs") or []
        for rpatch in jobs:
            if rpatch.get("name") == rname:
                apply_runtime_patch(tmpl, ((rpatch.get("template") or {}).get("spec") or {})
                                    .get("template") or {})
    pspec = tmpl.get("spec") or {}
    trainer = spec.get("trainer") or {}
    nodes = num_nodes(job, runtime)
    resources = trainer.get("resourcesPerNode") or {}
    gpus = any(k.startswith("nvidia.com/") for k in (resources.get("limits") or {}))
    nproc = trainer.get("numProcPerNode")
    if nproc is None:
        nproc = "auto" if gpus else 1
    for c in pspec.get("containers") or []:
        if c.get("name") != NODE:
            continue
        if trainer.get("image"):
            c["image"] = trainer["image"]
        if trainer.get("command"):
            c["command"] = list(trainer["command"])
        if trainer.get("args"):
            c["args"] = list(trainer["args"])
        if resources:
            c["resources"] = copy.deepcopy(resources)
        env = _upsert_env(c.get("env") or [], trainer.get("env") or [])
        env = _upsert_env(env, [
            {"name": "PET_NNODES", "value": str(nodes)},
            {"name": "PET_NPROC_PER_NODE", "value": str(nproc)},
            {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {
                "fieldPath": f"metadata.annotations['{L_COMPLETION_INDEX}']"}}},
            {"name": "PET_MASTER_ADDR", "value": f"{name}-{NODE}-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
        ])
        c["env"] = env
        if not any(p.get("containerPort") == MASTER_PORT for p in c.get("ports") or []):
            c["ports"] = [*list(c.get("ports") or []),
                          {"containerPort": MASTER_PORT, "protocol": "TCP"}]
    pspec["restartPolicy"] = pspec.get("restartPolicy") or "OnFailure"
    job_name = f"{name}-{rname}-0"
    pspec["hostname"] = f"{job_name}-{index}"
    pspec["subdomain"] = name
    uid = md.get("uid", "")
    key = hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest()  # noqa: S324 - a key, as JobSet
    jobset = {L_JOBSET: name, L_RJOB: rname, L_RJOB_REPLICAS: "1", L_JOB_INDEX: "0",
              L_JOB_GLOBAL_INDEX: "0", L_JOB_KEY: key, L_RESTART: "0"}
    batch = {L_JOB_NAME: job_name, "job-name": job_name, L_COMPLETION_INDEX: str(index),
             L_CONTROLLER_UID: uid, "controller-uid": uid}
    tmd = tmpl.get("metadata") or {}
    labels = {**(tmd.get("labels") or {}), **jobset, **batch}
    annotations = {**(tmd.get("annotations") or {}), **jobset,
                   L_COMPLETION_INDEX: str(index)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job_name}-{index}-{pod_suffix(uid, str(index), str(attempt))}",
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(md)],
        },
        "spec": pspec,
    }


class TrainJobController(Operator):
    """Runs TrainJobs (see the module docstring); the tick loop, timers, pod create and
    delete and the status write are the PyTorchJob operator's."""

    RESOURCE = TRAINJOBS
    JOBS, PODS, DIRTY = "trainjobs", "trainjob_pods", "trainjob_dirty"
    COMPONENT = CONTROLLER
    CREATED, FAILED_CREATE, DELETED = "SuccessfulCreate", "FailedCreate", "SuccessfulDelete"
    STAMPS_RECONCILE = False

    def __init__(self, store, state, events, now_fn,
                 progress: Callable[[str, str], Progress | None] | None = None) -> None:
        super().__init__(store, state, events, now_fn)
        self.attempts: dict[str, int] = {}  # job uid -> pods created (names stay unique)
        # what a pod's training script last reported, (namespace, pod) -> Progress
        self.progress = progress

    def reconcile(self, key: tuple, job: dict, now: float) -> None:
        md = job["metadata"]
        if md.get("deletionTimestamp"):
            return
        spec = job.get("spec") or {}
        if spec.get("managedBy") not in (None, "", MANAGED_BY):
            return
        old = job.get("status") or {}
        status = copy.deepcopy(old)
        conds = list(status.get("conditions") or [])
        ts = fmt_time(now)
        pods = self._pods(key, md.get("uid", ""))
        ref = spec.get("runtimeRef") or {}
        rkind = ref.get("kind") or "ClusterTrainingRuntime"
        if rkind != "ClusterTrainingRuntime" or (ref.get("apiGroup") or "trainer.kubeflow.org"
                                                  ) != "trainer.kubeflow.org":
            group = ref.get("apiGroup") or "trainer.kubeflow.org"
            msg = f"unsupported runtime: {rkind}.{group}"
            conds = set_condition(conds, "Failed", "True", "TrainingRuntimeNotSupported", msg,
                                  ts)
            status["conditions"] = conds
            self._write(key, old, status)
            return
        runtime = self.state.runtimes.get(ref.get("name") or "")
        finished = is_true(status, "Complete") or is_true(status, "Failed")
        suspended = bool(spec.get("suspend"))
        if finished:
            for p in pods:
                if (p.obj.get("status") or {}).get("phase") not in TERMINAL:
                    self._delete_pod(job, p)
        elif runtime is None:
            msg = ("TrainJob resources reconciliation failed: "
                   f'{CLUSTER_RUNTIMES} "{ref.get("name")}" not found')
            self.events.record(job, "Warning", "TrainJobResourcesCreationFailed", msg,
                               component=CONTROLLER)
            self._at(now + 10.0, key)
        elif suspended:
            for p in pods:
                self._delete_pod(job, p)
        # the Suspended condition (setSuspendedCondition)
        if suspended:
            conds = set_condition(conds, "Suspended", "True", "Suspended",
                                  "TrainJob is suspended", ts)
        elif is_true({"conditions": conds}, "Suspended"):
            conds = set_condition(conds, "Suspended", "False", "Resumed",
                                  "TrainJob is resumed", ts)
        status["conditions"] = conds
        if not finished and not suspended and runtime is not None:
            self._run(key, job, runtime, status, pods, now, ts)
        if not suspended and runtime is not None:
            self._trainer_status(key, status, pods)
        status["jobsStatus"] = [self._jobs_status(job, runtime, status, now)]
        self._write(key, old, status)

    def _trainer_status(self, key: tuple, status: dict, pods: list[PodInfo]) -> None:
        """``status.trainerStatus`` from what the rank-0 pod's script last reported (see
        the module docstring); the next report is a timer."""
        if self.progress is None:
            return
        rank0 = next((p for p in pods if not p.obj["metadata"].get("deletionTimestamp") and (
            p.obj["metadata"].get("labels") or {}).get(L_COMPLETION_INDEX) == "0"), None)
        found = self.progress(*rank0.key) if rank0 is not None else None
        if found is None:
            return
        metrics = [{"name": "step", "value": str(found.step)}]
        if found.loss is not None:
            metrics.insert(0, {"name": "loss", "value": f"{found.loss:.4f}"})
        status["trainerStatus"] = {
            "progressPercentage": min(100, max(0, int(found.percent))),
            "estimatedRemainingSeconds": max(0, int(found.remaining_seconds)),
            "metrics": metrics,
            "lastUpdatedTime": fmt_time(found.at),
        }
        if found.next_at is not None:
            self._at(found.next_at, key)

    def _run(self, key: tuple, job: dict, runtime: dict, status: dict,
             pods: list[PodInfo], now: float, ts: str) -> None:
        md, spec = job["metadata"], job.get("spec") or {}
        # the deadline (reconcileDeadline): from the resume, else from the creation
        ads = spec.get("activeDeadlineSeconds")
        if ads:
            cond = condition(status, "Suspended")
            start = (parse_time(cond.get("lastTransitionTime")) if cond is not None
                     and cond.get("status") == "False" else None) or parse_time(
                md.get("creationTimestamp")) or now
            if now >= start + int(ads):
                self._fail(job, status, pods, "DeadlineExceeded",
                           "TrainJob exceeded its active deadline", ts)
                return
            self._at(start + int(ads), key)
        rjob = trainer_job(runtime) or {}
        limit = ((rjob.get("template") or {}).get("spec") or {}).get("backoffLimit")
        limit = DEFAULT_BACKOFF_LIMIT if limit is None else int(limit)
        uid = md.get("uid", "")
        by_index: dict[int, list[PodInfo]] = {}
        for p in pods:
            try:
                index = int((p.obj["metadata"].get("labels") or {})[L_COMPLETION_INDEX])
            except (KeyError, TypeError, ValueError):
                continue
            by_index.setdefault(index, []).append(p)
        n = num_nodes(job, runtime)
        failures = self.restarts.get(uid, 0) + sum(
            int(cs.get("restartCount") or 0) for p in pods
            for cs in (p.obj.get("status") or {}).get("containerStatuses") or [])
        if failures > limit:
            self._fail(job, status, pods, "FailedJobs",
                       "jobset failed due to one or more job failures", ts)
            return
        refused = False
        for index, plist in by_index.items():
            if index >= n:
                for p in plist:
                    self._delete_pod(job, p)
        succeeded = 0
        for index in range(n):
            live = [p for p in by_index.get(index, [])
                    if not p.obj["metadata"].get("deletionTimestamp")]
            if not by_index.get(index):
                if not refused and not self._create_pod(job, NODE, index):
                    refused = True
                continue
            for p in live:
                phase = (p.obj.get("status") or {}).get("phase")
                if phase == "Failed":
                    self._delete_pod(job, p)  # the Job controller replaces it
                    self.restarts[uid] = self.restarts.get(uid, 0) + 1
                elif phase == "Succeeded":
                    succeeded += 1
        if refused:
            self._pending_create.add(key)
            self._at(now + 5.0, key)
        else:
            self._pending_create.discard(key)
        if succeeded >= n:
            status["conditions"] = set_condition(
                status["conditions"], "Complete", "True", "AllJobsCompleted",
                "jobset completed successfully", ts)

    def _fail(self, job: dict, status: dict, pods: list[PodInfo], reason: str, message: str,
              ts: str) -> None:
        for p in pods:
            if (p.obj.get("status") or {}).get("phase") not in TERMINAL:
                self._delete_pod(job, p)
        status["conditions"] = set_condition(status["conditions"], "Failed", "True", reason,
                                             message, ts)

    def _jobs_status(self, job: dict, runtime: dict | None, status: dict, now: float) -> dict:
        """The one child Job of the trainer's replicated job, as JobSet counts it."""
        rjob = trainer_job(runtime or {}) or {}
        key = (job["metadata"].get("namespace", ""), job["metadata"]["name"])
        pods = [p for p in self._pods(key, job["metadata"].get("uid", ""))
                if not p.obj["metadata"].get("deletionTimestamp")]
        n = num_nodes(job, runtime or {}) if runtime else 0
        phases = [(p.obj.get("status") or {}).get("phase") for p in pods]
        entry = {"name": rjob.get("name", NODE), "active": 0, "ready": 0, "succeeded": 0,
                 "failed": 0, "suspended": 0}
        if is_true(status, "Failed"):
            entry["failed"] = 1
        elif is_true(status, "Complete"):
            entry["succeeded"] = 1
        elif (job.get("spec") or {}).get("suspend"):
            entry["suspended"] = 1
        elif pods:
            entry["active"] = 1
            running = sum(1 for p in pods if self._ready(p))
            if n and running + phases.count("Succeeded") >= n and running:
                entry["ready"] = 1
        return entry

    @staticmethod
    def _ready(p: PodInfo) -> bool:
        st = p.obj.get("status") or {}
        if st.get("phase") != "Running":
            return False
        conds = st.get("conditions") or []
        ready = next((c for c in conds if c.get("type") == "Ready"), None)
        return ready is None or ready.get("status") == "True"

    # ---- pods ---------------------------------------------------------------------------
    def _build_pod(self, job: dict, rtype: str, idx: int) -> dict:
        uid = job["metadata"].get("uid", "")
        attempt = self.attempts.get(uid, 0)
        self.attempts[uid] = attempt + 1
        ref = (job.get("spec") or {}).get("runtimeRef") or {}
        return build_pod(job, self.state.runtimes.get(ref.get("name") or "") or {}, idx,
                         attempt)

    def _pod_created(self, job: dict, rtype: str) -> None:
        """JobSet's headless Service ``<trainjob>`` (the pods' subdomain)."""
        md = job["metadata"]
        svc = {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": md["name"], "namespace": md["namespace"],
                         "labels": {L_JOBSET: md["name"]},
                         "ownerReferences": [owner_reference(md)]},
            "spec": {"clusterIP": "None", "selector": {L_JOBSET: md["name"]},
                     "publishNotReadyAddresses": True},
        }
        # it exists already, or services are not served: optional
        with contextlib.suppress(Exception):
            self.store.create("services", svc, namespace=md["namespace"])
