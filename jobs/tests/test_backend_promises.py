"""Both admission backends keep the same promises (issue 31), each against kubesim:
Trainyard's engine, and kubesim's Kueue controller fed what Trainyard writes and Trainyard's
recommended Kueue configuration (``deploy/kueue/``). The setting is
``test_backend_scenarios``'s (its ``mode`` fixture: one H800 node of 8 cards, tenant_a's
prod and dev pools granted 4 each); the README's promise table names each test here.
The watermark, a guarantee below a grant, the pod-start deadline, every preemption
recorded, the defragmentation hold, a TrainJob's tier and a gang under one topology
domain."""

from decimal import Decimal

import pytest

from core.texts import english, text_code
from jobs import services as job_services
from jobs.tests import test_backend_scenarios as _scenarios
from jobs.tests.conftest import cycle as _cycle
from jobs.tests.conftest import states as _states
from jobs.tests.test_kueue_mode import _model, _submit, kueue_configured
from k8s_sync.client import get_client
from k8s_sync.observe import relist_all
from tenants import services as tenant_services
from tenants.access import access_for
from tenants.tasks import reconcile_pool

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

mode = _scenarios.mode   # the fixture: both backends, the same cluster and grants
_until = _scenarios._until


# -- issue 31: the eviction watermark and guarantees below a grant, in both modes ---------


def _submit_cpu(mode, user, tenant, name, tier, pool, gpus, cpu, run_seconds=7200):
    with mode["capture"](execute=True):
        return job_services.job_submit(
            access=access_for(user, tenant), actor=user, pool=pool, data={
                "name": name, "image": "registry.example.org/ml/trainer:1", "tier": tier,
                "workers": 1, "gpus_per_worker": gpus, "gpu_model": mode["h800"],
                "cpu_per_worker": cpu, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
                "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds)}})


def _workload_active(job):
    from k8s_sync import kueue

    views = kueue.workloads_by_job(get_client().list_objects(kueue.KUEUE_API, "Workload"))
    return views[(job.pool.namespace, job.k8s_name)].active


def test_watermark_eviction_takes_the_engines_victim_and_it_comes_back_when_use_falls(
        mode, cluster, platform_admin, bob, tenant_a):
    """Batch work fills the 8 cards and requests 86% of the node's CPU while the
    watermark is off; set to 85%, the most recently admitted batch job (the engine's
    order) is evicted with the engine's words and the batch grace (Kueue mode: its
    Workload deactivated by Trainyard, which measures physical use as the engine does),
    waits with the watermark named (Kueue mode: its Workload kept inactive, not admitted
    and evicted in a loop), and comes back once use falls (a sweep cancelled)."""
    tenant_services.policy_update(actor=platform_admin, eviction_watermark=Decimal("1"))
    sweeps = [_submit_cpu(mode, bob, tenant_a, f"batch-{i}", "batch", "dev", 2, 82)
              for i in range(4)]
    assert _until(mode, cluster, sweeps, ["running"] * 4, rounds=10) == [
        "running"] * 4, mode["backend"]
    held = list(type(sweeps[0]).objects.filter(pk__in=[j.pk for j in sweeps]))
    expected = max(held, key=lambda j: (j.admitted_at, j.pk))   # the engine's victim order

    tenant_services.policy_update(actor=platform_admin, eviction_watermark=Decimal("0.85"))
    _cycle(mode, cluster)
    evicted = [j for j in sweeps if _states(j) == ["preempting"]]
    assert [j.pk for j in evicted] == [expected.pk], mode["backend"]
    victim = type(expected).objects.get(pk=expected.pk)
    words = ("NVIDIA-H800 are at 86% of their physical capacity, above the 85% eviction "
             "watermark")
    assert text_code(victim.preempt_reason) == "jobs.preempt.watermark_use", mode["backend"]
    assert english(victim.preempt_reason).startswith(words), english(victim.preempt_reason)
    moved = victim.transitions.get(to_state="preempting")
    assert english(moved.message).startswith(words) and moved.reason == "Preempted"
    grace = (victim.preempt_deadline - moved.at).total_seconds()
    assert 25 < grace <= 30, (mode["backend"], grace)   # the batch grace

    for _ in range(8):   # the batch grace is 30 s: then back in the queue, and kept there
        _cycle(mode, cluster, 10)
    assert sorted(_states(*sweeps)) == ["queued", "running", "running", "running"], \
        mode["backend"]
    victim.refresh_from_db()
    assert victim.state == "queued" and victim.restart_count == 1
    assert "above the 85% eviction watermark" in english(victim.wait_reason), \
        english(victim.wait_reason)
    assert victim.transitions.filter(to_state="preempting").count() == 1   # no loop
    assert [t.to_state for t in victim.transitions.order_by("at", "id")][-2:] == [
        "preempting", "queued"]
    if mode["backend"] == "kueue":   # not admitted and evicted again: kept inactive
        assert _workload_active(victim) is False

    other = next(j for j in sweeps if j.pk != victim.pk)
    with mode["capture"](execute=True):   # use falls: one sweep is cancelled
        job_services.job_cancel(access=access_for(bob, tenant_a), actor=bob,
                                job=type(other).objects.get(pk=other.pk))
    assert _until(mode, cluster, [victim], ["running"], rounds=20) == ["running"], (
        mode["backend"], english(type(victim).objects.get(pk=victim.pk).wait_reason))
    victim.refresh_from_db()
    assert victim.restart_count == 1
    assert victim.transitions.filter(to_state="preempting").count() == 1
    if mode["backend"] == "kueue":
        assert _workload_active(victim) is True


def test_a_guarantee_held_against_a_borrower(mode, cluster, platform_admin, bob, charlie,
                                            tenant_a, tenant_b):
    """globex (overcommitted) is granted 8 H800 in dev next to acme's static 4 on 8 cards
    (GPU overcommit 1.5): 4 of globex's 8 are guaranteed. acme borrows globex's idle
    guaranteed cards; globex's job within its guarantee gets them back with the
    borrower's grace (Kueue: globex's queue has its guarantee as nominal quota and
    reclaims, ``InCohortReclamation``). A second globex job, on the overcommitted part,
    waits: acme's own 4 are not reclaimed for it (Kueue: it would borrow, and a borrower
    reclaims nothing)."""
    tenant_services.policy_update(actor=platform_admin,
                                  overcommit_factors={"gpu": 1.5, "cpu": 4, "memory": 4})
    tenant_b.quota_mode = "overcommitted"
    tenant_b.save(update_fields=["quota_mode"])
    h800 = f"gpu:{mode['h800']}"
    with mode["capture"](execute=True):
        for pool, cards in ((tenant_a.pools.get(kind="prod"), 0),
                            (tenant_b.pools.get(kind="prod"), 0),
                            (tenant_b.pools.get(kind="dev"), 8)):
            tenant_services.quota_set(actor=platform_admin, pool=pool, reason="t", amounts={
                h800: cards, "cpu": 128, "memory": 1024})
            reconcile_pool.apply(args=[pool.pk]).get()
    relist_all(get_client(), kinds=["quotas"])
    a1 = _submit(mode, bob, tenant_a, "a-own", "development", "dev", gpus=4,
                 run_seconds=7200)
    assert _until(mode, cluster, [a1], ["running"], rounds=10) == ["running"], mode["backend"]
    # admitted in a later pass: the most recently admitted, the victim in both modes (Kueue
    # breaks a tie of reservation times by UID: common/ordering.go CandidatesOrdering)
    a2 = _submit(mode, bob, tenant_a, "a-borrows", "development", "dev", gpus=4,
                 run_seconds=7200)
    assert _until(mode, cluster, [a1, a2], ["running", "running"], rounds=10) == [
        "running", "running"], mode["backend"]
    if mode["backend"] == "kueue":   # nominal quota = the guarantee; the rest borrowed
        from k8s_sync import kueue

        cq = get_client().read(kueue.KUEUE_API, "ClusterQueue", "ty-globex-dev")
        gpu = next(r for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
                   if f["name"] == kueue.gpu_flavor_name(mode["h800"])
                   for r in f["resources"])
        assert gpu["nominalQuota"] == "4" and "lendingLimit" not in gpu, gpu

    g1 = _submit(mode, charlie, tenant_b, "g-guaranteed", "development", "dev", gpus=4,
                 run_seconds=7200)
    assert _until(mode, cluster, [a2], ["preempting"], rounds=5, seconds=5) == [
        "preempting"], mode["backend"]
    a2.refresh_from_db()
    preempted = a2.transitions.get(to_state="preempting")
    grace = (a2.preempt_deadline - preempted.at).total_seconds()
    assert 240 < grace <= 300, (mode["backend"], grace)   # development's grace
    if mode["backend"] == "kueue":
        assert "InCohortReclamation" in english(preempted.message), english(
            preempted.message)
    assert _until(mode, cluster, [a1, a2, g1], ["running", "queued", "running"], rounds=40,
                  seconds=20) == ["running", "queued", "running"], mode["backend"]

    g2 = _submit(mode, charlie, tenant_b, "g-overcommitted", "development", "dev", gpus=4,
                 run_seconds=7200)
    for _ in range(4):   # beyond its guarantee: acme's own cards are not taken for it
        _cycle(mode, cluster, 20)
    assert _states(a1, g1, g2) == ["running", "running", "queued"], mode["backend"]


def _pod_start_policy(mode, cluster, deadline, attempts):
    """The policy's pod-start deadline; in Kueue mode, Kueue's waitForPodsReady follows
    it (the platform team applies ``deploy/kueue/`` rendered from it)."""
    from core.models import Policy

    Policy.objects.filter(pk=Policy.current().pk).update(
        pod_start_deadline_seconds=deadline, pod_start_attempts=attempts)
    if mode["backend"] == "kueue":
        kueue_configured(cluster)


def test_pod_start_requeue_then_fail_with_the_same_words(mode, cluster, api, bob, tenant_a):
    """A job whose image cannot be pulled for now (the registry answers 503) holds its
    cards only until the pod-start deadline: it is sent back to the queue with the
    cluster's reason, then fails after the policy's attempts, in the same words in both
    modes (Kueue: waitForPodsReady's PodsReadyTimeout, then its requeuing limit)."""
    import datetime as dt

    import time_machine
    from django.utils import timezone

    _pod_start_policy(mode, cluster, deadline=120, attempts=2)
    with mode["capture"](execute=True):
        bad = job_services.job_submit(
            access=access_for(bob, tenant_a), actor=bob, pool="dev", data={
                "name": "bad-image", "image": "registry.example.org/ml/trainer:1",
                "tier": "development", "workers": 1, "gpus_per_worker": 4,
                "gpu_model": mode["h800"], "cpu_per_worker": 8, "memory_gib_per_worker": 32,
                "max_run_seconds": 86400,
                "annotations": {"kubesim.trainyard.io/image-pull": "unavailable"}})
    assert _until(mode, cluster, [bad], ["admitted"], rounds=5, seconds=5) == ["admitted"]
    start = timezone.now()
    with time_machine.travel(start + dt.timedelta(minutes=3), tick=True):
        for _ in range(8):  # (the engine may admit it again in the same pass)
            _cycle(mode, cluster, 20)
            if bad.transitions.filter(to_state="queued", reason="NotStarted").exists():
                break
        bad.refresh_from_db()
        step = bad.transitions.filter(to_state="queued", reason="NotStarted").get()
        assert step.from_state == "admitted"
        text = english(step.message)
        assert text.startswith("Its pods did not start within 2 minutes: the cluster "
                               "cannot pull the image registry.example.org/ml/trainer:1 ("), (
            mode["backend"], text)
        assert "attempt 1 of 2" in text and "back in the queue" in text, text
        assert bad.restart_count == 1
        # the API, the job page and the owner's notification say it in the same words
        steps = api(bob).get(f"/api/v1/tenants/{tenant_a.slug}/jobs/{bad.pk}/transitions/")
        said = [t for t in steps.json() if t["reason_code"] == "NotStarted"]
        assert said and said[0]["message_code"] == "jobs.transition.start_requeued"
        assert said[0]["message"] == text
        from django.test import Client

        from tenants.models import Notification

        page = Client()
        page.force_login(bob)
        assert "cannot pull the image registry.example.org/ml/trainer:1" in page.get(
            f"/t/{tenant_a.slug}/jobs/{bad.pk}/").content.decode()
        assert any("back in the queue" in english(n.text)
                   for n in Notification.objects.filter(user=bob)), mode["backend"]
    with time_machine.travel(start + dt.timedelta(minutes=9), tick=True):
        assert _until(mode, cluster, [bad], ["failed"], rounds=20, seconds=20) == [
            "failed"], mode["backend"]
        bad.refresh_from_db()
        step = bad.transitions.order_by("-at", "-id").first()
        assert (step.to_state, step.reason) == ("failed", "NotStarted")
        text = english(step.message)
        assert text.startswith("Its pods did not start within 2 minutes, 2 times: the "
                               "cluster cannot pull the image"), (mode["backend"], text)
        assert bad.finished_at is not None
        _cycle(mode, cluster, 20)
        if mode["backend"] == "kueue":  # Trainyard left Kueue's deactivation alone
            from k8s_sync import kueue

            views = kueue.workloads_by_job(get_client().list_objects(
                kueue.KUEUE_API, "Workload", "ty-acme-dev"))
            view = views.get(("ty-acme-dev", bad.k8s_name))
            assert view is None or not view.active


def test_a_preemption_between_passes_is_recorded(mode, cluster, alice, bob, tenant_a):
    """A batch job on idle cards is preempted twice by short production jobs and is
    running again each time. Trainyard mode decides each preemption in a pass; in Kueue
    mode both happen (evicted, requeued, admitted again) between two of Trainyard's
    passes, and each is still recorded as the job's transition, with Kueue's reason."""
    sweep = _submit(mode, bob, tenant_a, "sweep", "batch", "dev", gpus=8, run_seconds=7200)
    assert _until(mode, cluster, [sweep], ["running"], rounds=10) == ["running"]
    before = sweep.transitions.count()
    for n in (1, 2):
        p = _submit(mode, alice, tenant_a, f"prod-{n}", "production", "prod", gpus=4,
                    run_seconds=30)
        if mode["backend"] == "kueue":
            for _ in range(40):   # no Trainyard pass: Kueue alone
                cluster.advance(15, step=5)
                wl = [w for w in get_client().list_objects("kueue.x-k8s.io/v1beta2",
                                                           "Workload", "ty-acme-prod")
                      if w["metadata"]["ownerReferences"][0]["name"] == p.k8s_name]
                if wl and any(c["type"] == "Finished" and c["status"] == "True"
                              for c in wl[0]["status"].get("conditions") or []):
                    break
            cluster.advance(120, step=5)   # the sweep is admitted and running again
        else:
            assert _until(mode, cluster, [p], ["succeeded"], rounds=40, seconds=15) == [
                "succeeded"]
    assert _until(mode, cluster, [sweep], ["running"], rounds=20, seconds=15) == ["running"]
    preempted = sweep.transitions.filter(reason="Preempted")
    assert preempted.count() == 2, (mode["backend"], list(sweep.transitions.values_list(
        "from_state", "to_state", "reason")))
    assert sweep.transitions.count() > before
    if mode["backend"] == "kueue":
        texts = [english(t.message) for t in preempted]
        assert all("Kueue evicted it (InCohortReclamation)" in t for t in texts), texts
# --- issue 31: the defrag hold, a TrainJob with a tier (h-defrag) -------------------------


def _submit_gang(mode, user, tenant, name, model, workers, gpus, run_seconds=3600,
                 kind="pytorchjob", tier="development", pool="dev"):
    with mode["capture"](execute=True):
        return job_services.job_submit(
            access=access_for(user, tenant), actor=user, pool=pool, data={
                "name": name, "kind": kind, "image": "registry.example.org/ml/trainer:1",
                "tier": tier, "workers": workers, "gpus_per_worker": gpus, "gpu_model": model,
                "cpu_per_worker": 8, "memory_gib_per_worker": 32, "max_run_seconds": 86400,
                "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds)}})


def _rack_is_the_last_level(mode, admin):
    """The policy's topology levels become the rack alone (a gang may span the rack's
    switches); Kueue's queues and Topology follow at once."""
    from k8s_sync.placement import RACK_LABEL
    from tenants.tasks import reconcile_kueue

    tenant_services.policy_update(actor=admin, topology_levels=[RACK_LABEL])
    relist_all(get_client())
    if mode["backend"] == "kueue":
        # Kueue v0.19 refuses a change of a Topology's levels (its CRD's rule
        # ``self == oldSelf``) and reconcile_kueue does not yet write it anew: the test does
        from k8s_sync.kueue import KUEUE_API, TOPOLOGY

        get_client().ensure_absent(KUEUE_API, "Topology", TOPOLOGY)
    with mode["capture"](execute=True):
        reconcile_kueue.apply()


def _job_pods(cluster, job):
    from kubernetes import client as k8s

    pods = k8s.CoreV1Api(cluster.api_client).list_namespaced_pod(job.pool.namespace).items
    return [p for p in pods if (p.metadata.labels or {}).get("trainyard.io/job-id") == str(job.pk)
            or p.metadata.name.startswith(job.k8s_name + "-")]


def test_the_defrag_hold_keeps_the_freed_nodes_for_the_target_job(
        mode, cluster, platform_admin, bob, tenant_a):
    """A maintenance window frees the two whole A100 nodes of one rack for a queued
    two-node job (its target), moving the job in the way with its grace to the room left
    elsewhere: during the window no other job takes them, though one that fits only there
    is waiting, and the target runs there. Trainyard: the engine dedicates the held nodes
    to the target (``JobView.scope``), whose pods tolerate the cordon and the window's
    taint. Kueue: the move is a deactivation; a ResourceFlavor selecting the held nodes and
    tolerating the taint, offered by one ClusterQueue that only the target's LocalQueue
    feeds; the held capacity leaves the cohort (``k8s_sync.kueue_hold``)."""
    import datetime as dt

    from django.utils import timezone

    from jobs.tasks import apply_maintenance_windows

    def windows():
        with mode["capture"](execute=True):
            apply_maintenance_windows.apply().get()

    # one topology domain holds both 8-card A100 nodes (kubesim's small profile puts them
    # on two switches of rack-a1), so a two-node gang is placeable in both modes
    _rack_is_the_last_level(mode, platform_admin)
    a100 = _model(cluster, "A100")
    # GPUs bin-packed (engine and kube-scheduler alike): the short job takes the 4 whole
    # cards of a100-mig-0, the long one half of a100-0
    short = _submit_gang(mode, bob, tenant_a, "short", a100, workers=1, gpus=4,
                         run_seconds=120)
    assert _until(mode, cluster, [short], ["running"], rounds=10) == ["running"]
    mover = _submit_gang(mode, bob, tenant_a, "mover", a100, workers=1, gpus=4,
                         run_seconds=7200)
    assert _until(mode, cluster, [mover], ["running"], rounds=10) == ["running"]
    target = _submit_gang(mode, bob, tenant_a, "two-node", a100, workers=2, gpus=8,
                          run_seconds=600)
    assert _until(mode, cluster, [short, target], ["succeeded", "queued"], rounds=20) == [
        "succeeded", "queued"], mode["backend"]
    start = timezone.now()
    window = job_services.window_schedule(
        actor=platform_admin, gpu_model=a100, nodes_wanted=2, starts_at=start,
        ends_at=start + dt.timedelta(hours=2), reason="two-node run", target_job_id=target.pk)
    assert sorted(window.plan["nodes"]) == ["a100-0", "a100-1"], window.plan
    assert window.plan["moves"] == [mover.pk], window.plan
    windows()
    mover.refresh_from_db()
    assert mover.state == "preempting", mode["backend"]
    # a job that fits only on a held node, submitted during the window
    other = _submit_gang(mode, bob, tenant_a, "one-node", a100, workers=1, gpus=8)
    for _ in range(20):
        _cycle(mode, cluster, 20)
        windows()
        if _states(target, other) == ["running", "queued"]:
            break
    assert _states(target, other) == ["running", "queued"], mode["backend"]
    for _ in range(3):   # and it stays so: nobody else takes the held nodes
        _cycle(mode, cluster, 20)
        windows()
    assert _states(target, other) == ["running", "queued"], mode["backend"]
    nodes = sorted(p.spec.node_name for p in _job_pods(cluster, target))
    assert nodes == ["a100-0", "a100-1"], (mode["backend"], nodes)
    assert all(p.spec.node_name in (None, "a100-mig-0")
               for p in _job_pods(cluster, other) + _job_pods(cluster, mover)), mode["backend"]
    mover.refresh_from_db()
    assert mover.restart_count == 1 and mover.state in ("queued", "running"), mode["backend"]
    if mode["backend"] == "kueue":
        from k8s_sync.kueue import KUEUE_API

        client = get_client()
        flavor = client.read(KUEUE_API, "ResourceFlavor", f"trainyard-window-{window.pk}")
        assert flavor["spec"]["nodeLabels"] == {
            "trainyard.io/maintenance-hold": str(window.pk)}
        assert flavor["metadata"]["labels"]["trainyard.io/component"] == "kueue"
        queue = client.read(KUEUE_API, "ClusterQueue", f"trainyard-window-{window.pk}")
        assert "cohortName" not in queue["spec"]
        assert queue["spec"]["namespaceSelector"]["matchLabels"] == {
            "kubernetes.io/metadata.name": target.pool.namespace}
        node = client.read("v1", "Node", "a100-0")
        assert not node["spec"].get("unschedulable")   # tainted, not cordoned (TAS)
        assert {"key": "trainyard.io/maintenance", "value": str(window.pk),
                "effect": "NoSchedule"} in node["spec"]["taints"]

    # the target done, the window is cancelled: its nodes go back, the waiting job runs
    assert _until(mode, cluster, [target], ["succeeded"], rounds=60, seconds=20) == [
        "succeeded"], mode["backend"]
    with mode["capture"](execute=True):
        job_services.window_cancel(actor=platform_admin, window_id=window.pk)
    windows()
    for name in ("a100-0", "a100-1"):
        node = get_client().read("v1", "Node", name)
        assert not node["spec"].get("unschedulable") and not node["spec"].get("taints")
        assert "trainyard.io/maintenance-hold" not in node["metadata"].get("labels", {})
    if mode["backend"] == "kueue":
        from k8s_sync.kueue import KUEUE_API

        for kind in ("ResourceFlavor", "ClusterQueue"):
            assert get_client().read(KUEUE_API, kind, f"trainyard-window-{window.pk}") is None
    assert _until(mode, cluster, [other], ["running"], rounds=15) == ["running"], mode[
        "backend"]


def test_a_trainjob_runs_at_its_tiers_priority_class(mode, cluster, alice, bob, tenant_a):
    """A TrainJob's pods carry their tier's PriorityClass in both modes: Trainer's runtime
    patch cannot set ``priorityClassName``, so the TrainJob runs on Trainyard's copy of
    its runtime at the tier's class (``k8s_sync.tier_runtime``)."""
    h800 = mode["h800"]
    prod = _submit_gang(mode, alice, tenant_a, "tj-prod", h800, workers=1, gpus=4,
                        kind="trainjob", tier="production", pool="prod")
    dev = _submit_gang(mode, bob, tenant_a, "tj-dev", h800, workers=1, gpus=4,
                       kind="trainjob", tier="development", pool="dev")
    assert _until(mode, cluster, [prod, dev], ["running", "running"], rounds=15) == [
        "running", "running"], mode["backend"]
    client = get_client()
    for job, tier in ((prod, "production"), (dev, "development")):
        obj = client.read("trainer.kubeflow.org/v1alpha1", "TrainJob", job.k8s_name,
                          job.pool.namespace)
        assert obj["spec"]["runtimeRef"]["name"] == f"torch-distributed-{tier}"
        pods = _job_pods(cluster, job)
        assert pods, (mode["backend"], tier)
        for pod in pods:
            assert pod.spec.priority_class_name == f"trainyard-{tier}", mode["backend"]
            assert pod.spec.priority == client.read(
                "scheduling.k8s.io/v1", "PriorityClass", f"trainyard-{tier}")["value"]


def test_a_gang_is_admitted_whole_under_one_domain_of_the_last_topology_level(
        mode, cluster, platform_admin, bob, tenant_a):
    """A two-node gang of 8 A100 cards a worker: under the default levels (rack, switch)
    no one switch holds it (kubesim's small profile puts the two 8-card A100 nodes on two
    switches), so it is refused at submission with the reason, in both modes; once the
    policy's last level is the rack it is admitted whole, both workers at once, on the two
    nodes of that rack (trainyard: the engine's placement; Kueue: the Topology's required
    level, TAS)."""
    from core.exceptions import ApplicationError

    a100 = _model(cluster, "A100")
    with pytest.raises(ApplicationError) as refused:
        _submit_gang(mode, bob, tenant_a, "too-wide", a100, workers=2, gpus=8)
    assert "under one switch" in str(refused.value), str(refused.value)
    _rack_is_the_last_level(mode, platform_admin)
    gang = _submit_gang(mode, bob, tenant_a, "two-node", a100, workers=2, gpus=8,
                        run_seconds=600)
    assert _until(mode, cluster, [gang], ["running"], rounds=20) == ["running"], mode["backend"]
    pods = _job_pods(cluster, gang)
    assert sorted(p.spec.node_name for p in pods) == ["a100-0", "a100-1"], mode["backend"]
    gang.refresh_from_db()
    admitted = [t for t in gang.transitions.all() if t.to_state == "admitted"]
    assert len(admitted) == 1, mode["backend"]   # whole: one admission for both workers
