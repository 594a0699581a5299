"""One clock: kubesim stamps objects, conditions, managedFields, events, container states and
log lines with the wall clock, as kube-apiserver and the kubelet do; ``speed`` only shortens
what the simulated workload takes (over HTTP with the official client)."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
import urllib.request

import kubernetes
import pytest

from kubesim.clock import Clock, parse_rfc3339
from kubesim.sim.harness import condition, make_job

NS = "team-clock"
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) (.*)$")


def _apis(handle):
    core = kubernetes.client.CoreV1Api(handle.api_client)
    co = kubernetes.client.CustomObjectsApi(handle.api_client)
    core.create_namespace(kubernetes.client.V1Namespace(
        metadata=kubernetes.client.V1ObjectMeta(name=NS)))
    return core, co


def _clock_now(handle) -> dt.datetime:
    with urllib.request.urlopen(handle.url + "/kubesim/clock", timeout=10) as resp:
        return parse_rfc3339(json.load(resp)["now"])


def _create(co, name, **kwargs):
    body = make_job(name, **kwargs)
    body["metadata"]["namespace"] = NS
    return co.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body)


def _stamped_log(core, pod):
    text = core.read_namespaced_pod_log(pod, NS, timestamps=True)
    out = []
    for line in text.splitlines():
        m = STAMP.match(line)
        assert m, line
        out.append((parse_rfc3339(m.group(1)[:19] + "Z"), m.group(2)))
    return out


def _every_stamp(core, co, name):
    """Every time the cluster wrote about the job: the job's and its pods' metadata, managed
    fields, conditions and container states, and their events."""
    job = co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
    objs = [job] + [p.to_dict() for p in core.list_namespaced_pod(NS).items]
    stamps = []
    for obj in objs:
        md = obj["metadata"]
        stamps.append(md.get("creationTimestamp") or md.get("creation_timestamp"))
        for mf in md.get("managedFields") or md.get("managed_fields") or []:
            stamps.append(mf.get("time"))
        st = obj.get("status") or {}
        for c in st.get("conditions") or []:
            stamps.append(c.get("lastTransitionTime") or c.get("last_transition_time"))
        for cs in st.get("container_statuses") or []:
            for state in (cs.get("state") or {}).values():
                if state:
                    stamps.extend([state.get("started_at"), state.get("finished_at")])
    for ev in core.list_namespaced_event(NS).items:
        stamps.extend([ev.first_timestamp, ev.last_timestamp])
    return [s if isinstance(s, dt.datetime) else parse_rfc3339(s) for s in stamps if s]


def test_speed_shortens_the_run_never_the_clock_deterministic(kubesim_factory):
    """speed 60, the test's clock: a job that "trains for 2 h" finishes after 2 minutes of
    the clock, and every stamp (objects, conditions, events, log lines) says so."""
    handle = kubesim_factory(speed=60)
    core, co = _apis(handle)
    t0 = _clock_now(handle)
    _create(co, "two-hours", gpus=1, run_seconds=7200)
    handle.advance(60, step=1)
    pod = core.read_namespaced_pod("two-hours-master-0", NS)
    assert pod.status.phase == "Running", "2 simulated hours are not over after 1 minute"
    handle.advance(70, step=1)
    t1 = _clock_now(handle)
    assert t1 - t0 == dt.timedelta(seconds=130)   # the clock moved as it was advanced
    pod = core.read_namespaced_pod("two-hours-master-0", NS)
    assert pod.status.phase == "Succeeded"
    term = pod.status.container_statuses[0].state.terminated
    ran = (term.finished_at - term.started_at).total_seconds()
    assert 118 <= ran <= 122, ran   # 7200 simulated seconds / 60
    job = co.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "two-hours")
    assert condition(job, "Succeeded")["status"] == "True"

    stamps = _every_stamp(core, co, "two-hours")
    assert len(stamps) > 10
    assert all(t0 <= s <= t1 for s in stamps), (t0, t1, sorted(set(stamps)))

    lines = _stamped_log(core, "two-hours-master-0")
    times = [t for t, _ in lines]
    assert times == sorted(times)
    assert term.started_at <= times[0] and times[-1] <= term.finished_at
    steps = [text for _, text in lines if re.search(r" step \d+ loss=", text)]
    assert len(steps) == 7200 // 30    # the script's steps are simulated time
    # the lines carry no clock of their own: the kubelet's stamp is the only time
    assert not any(re.search(r"\d\d:\d\d:\d\d", text) for _, text in lines)


def test_speed_shortens_the_run_never_the_clock_real_time(kubesim_factory):
    """Real mode at speed 300: stamps are the wall clock (not 300 times ahead of it), and a
    job of 10 simulated minutes finishes in about 2 s of wall time, stamped so."""
    handle = kubesim_factory(deterministic=False, speed=300, tick_seconds=0.02)
    core, co = _apis(handle)
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    created = _create(co, "ten-minutes", gpus=1, run_seconds=600)
    stamp = parse_rfc3339(created["metadata"]["creationTimestamp"])
    assert before - dt.timedelta(seconds=1) <= stamp <= before + dt.timedelta(seconds=2)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pod = core.list_namespaced_pod(NS).items
        if pod and pod[0].status.phase == "Succeeded":
            break
        time.sleep(0.1)
    else:
        pytest.fail("a job of 600 simulated seconds did not finish at speed 300")
    after = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    term = pod[0].status.container_statuses[0].state.terminated
    assert 1 <= (term.finished_at - term.started_at).total_seconds() <= 3
    stamps = _every_stamp(core, co, "ten-minutes")
    assert stamps and all(before - dt.timedelta(seconds=1) <= s <= after for s in stamps)
    lines = _stamped_log(core, pod[0].metadata.name)
    assert lines and all(before - dt.timedelta(seconds=1) <= t <= after for t, _ in lines)


def test_clock_speed_is_not_a_clock_rate():
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    fast = Clock(speed=60, deterministic=True, start=start)
    fast.advance(120)
    assert fast.now() == start + dt.timedelta(seconds=120)
    assert fast.wall_seconds(7200) == 120 and fast.simulated_seconds(120) == 7200
    real = Clock(speed=1000)
    wall = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    assert abs((real.now() - dt.datetime.now(dt.UTC)).total_seconds()) < 1.5
    assert real.now() >= wall - dt.timedelta(seconds=1)
