"""kubesim's Kueue controller checked against Kueue's own test scenarios.

The scenarios are data (``kubesim/tests/kueue_scenarios/``, format in its ``__init__``),
transcribed from Kueue's sources on ``main`` (each names its file and test). Each one is built
as real objects through the official client over HTTP (the ``kubesim`` fixture, as
``test_sim_kueue.py``): flavors, cohorts, ClusterQueues, LocalQueues, WorkloadPriorityClasses
and one suspended, queue-labelled PyTorchJob per workload (kubesim's controller makes the
Workload, as Kueue's jobframework does). The simulation runs until nothing moves and the
admissions, preemptions (with their ``Preempted`` reason) and pending reasons are compared.
"""

from __future__ import annotations

import re

import kubernetes
import pytest

from .kueue_scenarios import all_scenarios

K, V = "kueue.x-k8s.io", "v1beta2"
NS = "sc"
SCENARIOS = all_scenarios()


def _params() -> list:
    out = []
    for sc in SCENARIOS:
        marks = [pytest.mark.xfail(reason=sc["xfail"], strict=True)] if sc.get("xfail") else []
        out.append(pytest.param(sc, id=sc["name"], marks=marks))
    return out


def _quota(q) -> str | int:
    return q if isinstance(q, str | int) else str(q)


def _flavor_quotas(flavors: dict) -> tuple[list[str], list[dict]]:
    covered: list[str] = []
    out = []
    for fname, res in flavors.items():
        rows = []
        for rname, q in res.items():
            if rname not in covered:
                covered.append(rname)
            row: dict = {"name": rname}
            if isinstance(q, dict):
                row["nominalQuota"] = _quota(q.get("nominal", 0))
                for k in ("borrowingLimit", "lendingLimit"):
                    if k in q:
                        row[k] = _quota(q[k])
            else:
                row["nominalQuota"] = _quota(q)
            rows.append(row)
        out.append({"name": fname, "resources": rows})
    return covered, out


def _resource_groups(groups: list[dict]) -> list[dict]:
    rgs = []
    for flavors in groups:
        covered, fq = _flavor_quotas(flavors)
        # every flavor of a group lists every covered resource (Kueue's validation)
        for f in fq:
            have = {r["name"] for r in f["resources"]}
            f["resources"] += [{"name": r, "nominalQuota": 0} for r in covered if r not in have]
            f["resources"].sort(key=lambda r: covered.index(r["name"]))
        rgs.append({"coveredResources": covered, "flavors": fq})
    return rgs


def _wpc_name(p: int) -> str:
    return f"p{p}" if p >= 0 else f"pm{-p}"


def _job_name(idx: int, name: str) -> str:
    return f"w{idx:02d}-" + re.sub(r"[^a-z0-9-]", "-", name.lower())


def _container(requests: dict) -> dict:
    q = {r: _quota(v) for r, v in requests.items()}
    return {"name": "pytorch", "image": "registry.example/train:1.0",
            "resources": {"requests": q, "limits": q}}


def _job(name: str, wl: dict) -> dict:
    podsets = wl.get("podsets") or [{"count": wl.get("count", 1),
                                     "requests": wl.get("requests") or {}}]
    assert len(podsets) <= 2, "a PyTorchJob has two replica types"
    replicas = {}
    for rtype, ps in zip(("Master", "Worker") if len(podsets) == 2 else ("Worker",),
                         podsets, strict=True):
        spec = {"containers": [_container(ps.get("requests") or {})],
                "terminationGracePeriodSeconds": 0}
        if wl.get("tolerations"):
            spec["tolerations"] = wl["tolerations"]
        if wl.get("nodeSelector"):
            spec["nodeSelector"] = wl["nodeSelector"]
        replicas[rtype] = {"replicas": int(ps.get("count", 1)), "restartPolicy": "Never",
                           "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}
    labels = {f"{K}/queue-name": wl["queue"]}
    if "priority" in wl:
        labels[f"{K}/priority-class"] = _wpc_name(int(wl["priority"]))
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": wl.get("namespace", NS), "labels": labels},
            "spec": {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": replicas}}


class Run:
    def __init__(self, kubesim, sc: dict):
        self.k = kubesim
        self.sc = sc
        self.co = kubernetes.client.CustomObjectsApi(kubesim.api_client)
        self.core = kubernetes.client.CoreV1Api(kubesim.api_client)
        self.jobs: dict[str, tuple[str, str]] = {}   # scenario name -> (namespace, job name)
        self.preempted: dict[str, set[str]] = {}
        self.messages: dict[str, set[str]] = {}
        self.seq = 0
        self.withdrawn: set[str] = set()

    def create(self, resource: str, body: dict, ns: str | None = None) -> None:
        body = {"apiVersion": f"{K}/{V}", **body}
        if ns:
            self.co.create_namespaced_custom_object(K, V, ns, resource, body)
        else:
            self.co.create_cluster_custom_object(K, V, resource, body)

    def build(self) -> None:
        sc = self.sc
        namespaces = {NS: {}, **(sc.get("namespaces") or {})}
        for ns, labels in namespaces.items():
            self.core.create_namespace({"metadata": {"name": ns, "labels": labels}})
        for f in sc.get("flavors") or ["default"]:
            f = {"name": f} if isinstance(f, str) else f
            spec = {k: f[k] for k in ("nodeLabels", "nodeTaints") if k in f}
            self.create("resourceflavors", {"kind": "ResourceFlavor",
                                            "metadata": {"name": f["name"]}, "spec": spec})
        prios = {int(w["priority"]) for w in self._all_workloads() if "priority" in w}
        for p in sorted(prios):
            self.create("workloadpriorityclasses", {
                "kind": "WorkloadPriorityClass", "metadata": {"name": _wpc_name(p)},
                "value": p})
        for c in sc.get("cohorts") or []:
            spec: dict = {}
            if c.get("parentName"):
                spec["parentName"] = c["parentName"]
            if c.get("quota"):
                spec["resourceGroups"] = _resource_groups([c["quota"]])
            self.create("cohorts", {"kind": "Cohort", "metadata": {"name": c["name"]},
                                    "spec": spec})
        for q in sc["clusterQueues"]:
            groups = q.get("resourceGroups") or [q["flavors"]]
            spec = {"namespaceSelector": q.get("namespaceSelector", {}),
                    "resourceGroups": _resource_groups(groups)}
            if q.get("cohort"):
                spec["cohortName"] = q["cohort"]
            for key in ("preemption", "queueingStrategy", "flavorFungibility"):
                if key in q:
                    spec[key] = q[key]
            self.create("clusterqueues", {"kind": "ClusterQueue",
                                          "metadata": {"name": q["name"]}, "spec": spec})
            for ns in namespaces:
                self.create("localqueues", {
                    "kind": "LocalQueue", "metadata": {"name": q["name"], "namespace": ns},
                    "spec": {"clusterQueue": q["name"]}}, ns=ns)

    def _all_workloads(self) -> list[dict]:
        out = list(self.sc.get("admitted") or [])
        for group in self._incoming_groups():
            out += [w for w in group if "finish" not in w]
        return out

    def _incoming_groups(self) -> list[list[dict]]:
        inc = self.sc.get("incoming") or []
        if inc and isinstance(inc[0], list):
            return inc
        return [inc] if inc else []

    def submit(self, wl: dict) -> None:
        assert wl["name"] not in self.jobs, f"duplicate workload {wl['name']}"
        name = _job_name(self.seq, wl["name"])
        self.seq += 1
        ns = wl.get("namespace", NS)
        self.co.create_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs",
                                                _job(name, wl))
        self.jobs[wl["name"]] = (ns, name)

    def finish(self, name: str) -> None:
        """The workload's job ends (deleted with its Workload: its quota is released, as
        Kueue's tests ``FinishWorkloads``); it is not expected at the end."""
        ns, job = self.jobs[name]
        self.co.delete_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", job)
        self.withdrawn.add(name)

    def workloads(self) -> dict[str, dict]:
        by_job = {}
        for ns in {ns for ns, _ in self.jobs.values()}:
            for w in self.co.list_namespaced_custom_object(K, V, ns, "workloads")["items"]:
                for ref in w["metadata"].get("ownerReferences") or []:
                    by_job[(ns, ref["name"])] = w
        return {n: by_job[key] for n, key in self.jobs.items()
                if key in by_job and n not in self.withdrawn}

    def snapshot(self) -> dict:
        snap = {}
        for n, w in self.workloads().items():
            conds = {c["type"]: c for c in (w.get("status") or {}).get("conditions") or []}
            pre = conds.get("Preempted")
            if pre and pre["status"] == "True":
                self.preempted.setdefault(n, set()).add(pre["reason"])
                self.messages.setdefault(n, set()).add(pre.get("message", ""))
                if self.sc.get("withdraw_preempted") and n not in self.withdrawn:
                    # as the Go unit tests, which look at one preemption: the preempted
                    # job is deleted before it could be requeued and preempt in turn
                    ns, job = self.jobs[n]
                    self.co.delete_namespaced_custom_object("kubeflow.org", "v1", ns,
                                                            "pytorchjobs", job)
                    self.withdrawn.add(n)
                    continue
            if n in self.withdrawn:
                continue
            snap[n] = (tuple(sorted((t, c["status"], c["reason"], c.get("message", ""))
                                    for t, c in conds.items())),
                       repr((w.get("status") or {}).get("admission")))
        return snap

    def settle(self, max_seconds: int = 60) -> dict:
        """Advance one simulated second at a time until nothing changed for 3 seconds."""
        last, same = None, 0
        for _ in range(max_seconds):
            self.k.advance(1)
            snap = self.snapshot()
            same = same + 1 if snap == last else 0
            last = snap
            if same >= 3 and len(snap) + len(self.withdrawn) == len(self.jobs):
                break
        return self.workloads()


def _cond(w: dict, ctype: str) -> dict | None:
    return next((c for c in (w.get("status") or {}).get("conditions") or []
                 if c["type"] == ctype), None)


def _admitted(w: dict) -> bool:
    c = _cond(w, "Admitted")
    return bool(c and c["status"] == "True")


def _flavors(w: dict):
    psa = ((w.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    used = {f for p in psa for f in (p.get("flavors") or {}).values()}
    return used


def _check_flavor(name: str, w: dict, want) -> None:
    if want is None:
        return
    psa = w["status"]["admission"]["podSetAssignments"]
    if isinstance(want, str):
        assert _flavors(w) == {want}, (name, psa)
    elif isinstance(want, dict):
        got = {}
        for p in psa:
            got.update(p.get("flavors") or {})
        assert got == want, (name, psa)
    else:
        assert [p.get("flavors") for p in psa] == want, (name, psa)


@pytest.mark.parametrize("sc", _params())
def test_kueue_scenario(kubesim, sc):
    run = Run(kubesim, sc)
    run.build()
    for wl in sc.get("admitted") or []:
        run.submit(wl)
        w = run.settle()[wl["name"]]
        assert _admitted(w), (wl["name"], w.get("status"))
        _check_flavor(wl["name"], w, wl.get("flavor"))
    for group in run._incoming_groups():
        for wl in group:
            if "finish" in wl:
                run.finish(wl["finish"])
            else:
                run.submit(wl)
        run.settle()
    final = run.settle()
    exp = sc["expect"]
    states = {}
    for n, w in final.items():
        qr = _cond(w, "QuotaReserved") or {}
        states[n] = ("admitted", sorted(_flavors(w))) if _admitted(w) else (
            "pending", qr.get("reason"), qr.get("message"))
    want_names = set(exp.get("admitted") or {}) | set(exp.get("pending") or {}) | set(
        exp.get("unchecked") or ())
    left = set(run.jobs) - run.withdrawn
    assert want_names == left, ("every workload is expected admitted or pending",
                                sorted(left ^ want_names))
    unchecked = set(exp.get("unchecked") or ())
    assert {n for n in final if _admitted(final[n]) and n not in unchecked} == set(
        exp.get("admitted") or {}), states
    for n, fl in (exp.get("admitted") or {}).items():
        _check_flavor(n, final[n], fl)
    for n, want in (exp.get("pending") or {}).items():
        if want is None:
            continue
        qr = _cond(final[n], "QuotaReserved") or {}
        if want == "NoCondition":  # never tried (behind a StrictFIFO head)
            assert qr == {}, (n, qr)
            continue
        reason, msg = (want, None) if isinstance(want, str) else want
        assert (n, qr.get("status"), qr.get("reason")) == (n, "False", reason), states
        if msg:
            assert msg in qr.get("message", ""), (n, qr.get("message"))
    want_pre = {n: {r} for n, r in (exp.get("preempted") or {}).items()}
    assert run.preempted == want_pre, states
    for n, text in (exp.get("preempted_messages") or {}).items():
        assert any(text in m for m in run.messages.get(n, ())), (n, run.messages.get(n))
