"""deploy/k8s: what `kubectl kustomize` renders, and the ClusterRole held to the code.

* Rendering: ``kubectl kustomize deploy/k8s`` (and the example overlay) in a subprocess;
  every object passes ``kubernetes_validate`` (strict) for Kubernetes 1.29 and 1.33.
  These tests skip, saying why, only when there is no kubectl (scripts/ensure-kubectl.sh
  installs one).
* The ClusterRole (read from base/rbac.yaml, so these run without kubectl too) grants
  nothing beyond :data:`ALLOWED` and nothing the code does not need, and everything it
  needs. The needed set is derived from the code: every call of a KubeClient verb in the
  apps (found by parsing them), the kinds in the code's own tables (``POOL_KINDS``,
  ``observe.KINDS``, the manifest builders) and the tenants' Role, which the API server
  lets Trainyard create and bind only if Trainyard holds its permissions itself.
* The workloads read only variables portal/settings.py reads; the web probes hit a URL
  that resolves and answers 200 with the production settings.
"""

from __future__ import annotations

import ast
import functools
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from django.test import Client, override_settings
from django.urls import resolve

from k8s_sync import client as k8s_client
from k8s_sync import health, kueue, manifests, observe
from k8s_sync.kueue import KueueSpec, QueueSpec
from k8s_sync.manifests import POOL_KINDS
from k8s_sync.naming import LABEL_MANAGED_BY, MANAGED_BY, Tier
from k8s_sync.reconcile import NEVER_DELETED_KINDS
from k8s_sync.specs import JOB_KIND_PYTORCHJOB, WORKLOAD_KINDS, JobSpec, PoolSpec
from k8s_sync.storage import build_iops_storage_class, build_iops_volume_class

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "k8s"
OVERLAY = DEPLOY / "overlays" / "example"
KUBECTL = shutil.which("kubectl")
NAMESPACE = "trainyard"
SECRET = "trainyard-secrets"
VERSIONS = ("1.29", "1.33")

NO_KUBECTL = ("no kubectl on PATH: deploy/k8s is rendered with `kubectl kustomize` "
              "(scripts/ensure-kubectl.sh installs kubectl)")

# --- rendering ------------------------------------------------------------------------------


@functools.cache
def _render(path: Path) -> tuple[dict, ...]:
    assert KUBECTL is not None
    proc = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, f"kubectl kustomize {path} failed:\n{proc.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(proc.stdout) if doc)


@pytest.fixture(scope="module")
def base() -> tuple[dict, ...]:
    if KUBECTL is None:
        pytest.skip(NO_KUBECTL)
    return _render(DEPLOY)


@pytest.fixture(scope="module")
def overlay() -> tuple[dict, ...]:
    if KUBECTL is None:
        pytest.skip(NO_KUBECTL)
    return _render(OVERLAY)


def _one(objs: tuple[dict, ...], kind: str, name: str | None = None) -> dict:
    found = [o for o in objs if o["kind"] == kind
             and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _pod_specs(objs: tuple[dict, ...]) -> Iterator[tuple[str, dict]]:
    for obj in objs:
        if obj["kind"] in ("Deployment", "Job"):
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]


def _containers(pod: dict) -> list[dict]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def _config(objs: tuple[dict, ...]) -> dict[str, str]:
    return _one(objs, "ConfigMap")["data"]


# --- what settings.py reads (the one list of variables) -------------------------------------


@functools.cache
def settings_variables() -> frozenset[str]:
    """Every variable portal/settings.py reads through portal.env (``NAME_FILE`` too for
    secrets)."""
    tree = ast.parse((ROOT / "portal" / "settings.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id.startswith("env_") and node.args
                and isinstance(node.args[0], ast.Constant)):
            names.add(node.args[0].value)
            if node.func.id == "env_secret":
                names.add(f"{node.args[0].value}_FILE")
    return frozenset(names)


def test_the_settings_parser_finds_the_variables():
    assert {"SECRET_KEY", "SECRET_KEY_FILE", "DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL",
            "TRAINYARD_CLUSTER_MODE", "ALLOWED_HOSTS", "PROMETHEUS_URL",
            "EMAIL_HOST_PASSWORD"} <= settings_variables()


# --- the rendered objects ---------------------------------------------------------------------


@pytest.mark.kubectl
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("which", ["base", "overlay"])
def test_every_rendered_object_validates(request, which, version):
    objs = request.getfixturevalue(which)
    for obj in objs:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']} ({which}, {version}): "
                        f"{exc.message} at {list(exc.path)}")


@pytest.mark.kubectl
def test_the_base_has_every_piece(base):
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in base
                   if o["kind"] != "ConfigMap")
    assert kinds == sorted([
        ("Namespace", NAMESPACE), ("ServiceAccount", "trainyard"),
        ("ClusterRole", "trainyard"), ("ClusterRoleBinding", "trainyard"),
        ("Service", "trainyard-web"), ("PodDisruptionBudget", "trainyard-web"),
        ("Deployment", "trainyard-web"), ("Deployment", "trainyard-worker"),
        ("Deployment", "trainyard-beat"), ("Deployment", "trainyard-watch"),
        ("Deployment", "trainyard-admission"), ("Job", "trainyard-migrate"),
    ])
    # The ConfigMap's name carries a content hash, so a config change rolls the pods.
    assert _one(base, "ConfigMap")["metadata"]["name"].startswith("trainyard-config-")
    # The operator creates the Secret; the example is not part of the kustomization.
    assert not [o for o in base if o["kind"] == "Secret"]
    for obj in base:
        if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]["name"]


@pytest.mark.kubectl
def test_labels(base, overlay):
    for obj in (*base, *overlay):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "trainyard"
        assert labels["app.kubernetes.io/instance"] == "trainyard"
        assert labels["app.kubernetes.io/part-of"] == "trainyard"
        # Never Trainyard's own managed-by value: resync and prune select on it.
        assert labels.get(LABEL_MANAGED_BY) == "kustomize" != MANAGED_BY
        if obj["kind"] not in ("Namespace", "ServiceAccount"):
            assert labels["app.kubernetes.io/component"], obj["metadata"]["name"]
        if obj["kind"] in ("Deployment", "Job"):
            assert obj["spec"]["template"]["metadata"]["labels"] == labels
        if obj["kind"] in ("Deployment", "PodDisruptionBudget"):
            selector = obj["spec"]["selector"]["matchLabels"]
            assert selector.items() <= labels.items()
    web = _one(base, "Deployment", "trainyard-web")["spec"]["template"]["metadata"]["labels"]
    assert _one(base, "Service")["spec"]["selector"].items() <= web.items()
    pdb = _one(base, "PodDisruptionBudget")["spec"]
    assert pdb["selector"]["matchLabels"].items() <= web.items() and pdb["minAvailable"] == 1


@pytest.mark.kubectl
def test_processes_run_the_right_commands(base):
    def main(name: str) -> dict:
        return _one(base, "Deployment", name)

    web = main("trainyard-web")
    gunicorn = web["spec"]["template"]["spec"]["containers"][0]["command"]
    assert gunicorn[:2] == ["gunicorn", "portal.wsgi"]
    assert "--no-control-socket" in gunicorn  # its default socket is under the read-only $HOME
    assert web["spec"]["replicas"] >= 2
    worker = main("trainyard-worker")["spec"]["template"]["spec"]["containers"][0]["command"]
    assert worker[:4] == ["celery", "-A", "portal", "worker"]
    assert worker[worker.index("-Q") + 1] == "default,k8s,billing"
    for name, command in [("trainyard-beat", ["celery", "-A", "portal", "beat"]),
                          ("trainyard-watch", ["python", "manage.py", "k8s_watch"])]:
        deployment = main(name)
        assert deployment["spec"]["replicas"] == 1, name  # exactly one per cluster
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}, name
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert container["command"][:len(command)] == command
    # The exec probes look at the files the processes write.
    beat = main("trainyard-beat")["spec"]["template"]["spec"]["containers"][0]
    schedule = beat["command"][beat["command"].index("-s") + 1]
    assert beat["livenessProbe"]["exec"]["command"] == ["test", "-f", schedule]
    for name in ("trainyard-watch", "trainyard-admission"):
        watch = main(name)["spec"]["template"]["spec"]["containers"][0]
        heartbeat = watch["command"][watch["command"].index("--heartbeat-file") + 1]
        assert heartbeat.startswith("/tmp/")
        assert watch["startupProbe"]["exec"]["command"] == ["test", "-f", heartbeat]
        assert heartbeat in watch["livenessProbe"]["exec"]["command"][-1]
    # The admission service: a standby takes over from the leader (the lease decides who
    # decides), so two replicas, never both down in a rollout.
    admission = main("trainyard-admission")
    assert admission["spec"]["replicas"] == 2
    assert admission["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 1,
                                                              "maxSurge": 0}
    assert admission["spec"]["template"]["spec"]["containers"][0]["command"][:3] == [
        "python", "manage.py", "admission_service"]
    web_container = web["spec"]["template"]["spec"]["containers"][0]
    bind = gunicorn[gunicorn.index("--bind") + 1]
    assert int(bind.rpartition(":")[2]) == web_container["ports"][0]["containerPort"]
    job = _one(base, "Job", "trainyard-migrate")["spec"]
    assert job["template"]["spec"]["containers"][0]["command"] == [
        "python", "manage.py", "migrate", "--noinput"]
    assert job["template"]["spec"]["restartPolicy"] == "Never"
    # Every Deployment waits for the migration Job: its init container checks the schema.
    for name, pod in _pod_specs(base):
        if name != "trainyard-migrate":
            init = pod["initContainers"][0]
            assert "manage.py migrate --check" in " ".join(init["command"]), name


@pytest.mark.kubectl
def test_every_container_is_locked_down(base):
    for name, pod in _pod_specs(base):
        sec = pod["securityContext"]
        assert sec["runAsNonRoot"] is True
        # Numeric: the Dockerfile's USER is a name, which runAsNonRoot cannot verify.
        assert isinstance(sec["runAsUser"], int) and sec["runAsUser"] > 0
        assert sec["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["enableServiceLinks"] is False, name
        tmp = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
        for container in _containers(pod):
            where = f"{name}/{container['name']}"
            assert container["image"] == "trainyard:latest", where
            csc = container["securityContext"]
            assert csc["allowPrivilegeEscalation"] is False, where
            assert csc["readOnlyRootFilesystem"] is True, where
            assert csc["privileged"] is False, where
            assert csc["capabilities"] == {"drop": ["ALL"]}, where
            assert any(m["mountPath"] == "/tmp" and m["name"] in tmp
                       for m in container["volumeMounts"]), where
            resources = container["resources"]
            assert {"cpu", "memory"} <= resources["requests"].keys(), where
            assert {"cpu", "memory"} <= resources["limits"].keys(), where


@pytest.mark.kubectl
def test_only_pods_that_call_the_api_get_a_token(base):
    for name, pod in _pod_specs(base):
        assert pod["serviceAccountName"] == "trainyard"
        calls_api = name in ("trainyard-web", "trainyard-worker", "trainyard-watch",
                             "trainyard-admission")
        assert pod["automountServiceAccountToken"] is calls_api, name
    binding = _one(base, "ClusterRoleBinding", "trainyard")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": "trainyard"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "trainyard",
                                    "namespace": NAMESPACE}]
    rendered = _one(base, "ClusterRole", "trainyard")["rules"]
    assert rendered == _cluster_role()["rules"]


# --- configuration ----------------------------------------------------------------------------


@functools.cache
def _secret_example() -> dict:
    return yaml.safe_load((DEPLOY / "secret.example.yaml").read_text())


def test_the_secret_example_is_an_example_only():
    secret = _secret_example()
    assert (secret["kind"], secret["metadata"]["name"]) == ("Secret", SECRET)
    assert set(secret["stringData"]) <= settings_variables()
    assert all("CHANGE-ME" in value for value in secret["stringData"].values())
    for folder in (DEPLOY, DEPLOY / "base", OVERLAY):
        kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
        assert not [r for r in kustomization.get("resources", []) if "secret" in r], folder
    kubernetes_validate.validate(secret, "1.33", strict=True)


@pytest.mark.kubectl
def test_workloads_read_only_variables_settings_reads(base, overlay):
    known = settings_variables()
    for objs in (base, overlay):
        config = _one(objs, "ConfigMap")
        assert set(config["data"]) <= known, set(config["data"]) - known
        for name, pod in _pod_specs(objs):
            for container in _containers(pod):
                where = f"{name}/{container['name']}"
                assert container["envFrom"] == [
                    {"configMapRef": {"name": config["metadata"]["name"]}}], where
                for var in container.get("env", []):
                    assert var["name"] in known, f"{where}: {var['name']} is not read"
                    ref = var["valueFrom"]["secretKeyRef"]
                    assert ref["name"] == SECRET and ref["key"] == var["name"], where
                    assert ref["key"] in _secret_example()["stringData"] or ref.get(
                        "optional"), f"{where}: {ref['key']} missing from secret.example.yaml"


@pytest.mark.kubectl
def test_required_secrets_reach_every_main_container(base):
    for name, pod in _pod_specs(base):
        container = pod["containers"][0]
        env = {v["name"]: v["valueFrom"]["secretKeyRef"] for v in container["env"]}
        for key in ("SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"):
            assert key in env and not env[key].get("optional"), f"{name}: {key}"
        if name != "trainyard-migrate":
            assert env["EMAIL_HOST_PASSWORD"]["optional"] is True


@pytest.mark.kubectl
def test_the_configuration_runs_in_cluster_in_production_mode(base):
    config = _config(base)
    assert config["TRAINYARD_CLUSTER_MODE"] == "in-cluster"
    assert config["DEBUG"] == "false"
    assert config["USE_X_FORWARDED_PROTO"] == "true"
    assert config["PROMETHEUS_URL"].startswith("http")
    assert config["TRAINYARD_VAR_DIR"].startswith("/tmp/")  # the only writable path
    assert {"ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "SITE_URL", "TIME_ZONE",
            "LOG_LEVEL"} <= set(config)


@pytest.mark.kubectl
@pytest.mark.timeout(90)
@pytest.mark.slow
def test_django_accepts_the_configuration(base):
    """``manage.py check --deploy`` with the ConfigMap and Secret-shaped values: the
    settings load (no ImproperlyConfigured) and no security warning is raised."""
    env = {k: v for k, v in os.environ.items()
           if k not in settings_variables() and k != "DJANGO_SETTINGS_MODULE"}
    env.update(_config(base))
    env.update(_secret_example()["stringData"])
    env["SECRET_KEY"] = secrets.token_urlsafe(50)
    proc = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=80, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "(security." not in output, output


# --- the web probes -----------------------------------------------------------------------------


def _web(objs: tuple[dict, ...]) -> dict:
    return _one(objs, "Deployment", "trainyard-web")["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.kubectl
def test_web_probes_hit_a_url_that_exists(base, db):
    web = _web(base)
    config = _config(base)
    allowed_hosts = config["ALLOWED_HOSTS"].split(",")
    ports = {p["name"]: p["containerPort"] for p in web["ports"]}
    assert _one(base, "Service")["spec"]["ports"][0]["targetPort"] in ports
    client = Client()
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = web[kind]["httpGet"]
        assert probe["port"] in ports
        resolve(probe["path"])  # raises Resolver404 for a URL that does not exist
        headers = {h["name"]: h["value"] for h in probe.get("httpHeaders", [])}
        assert headers["Host"] in allowed_hosts, kind
        # What the kubelet sends, against the production security settings.
        with override_settings(ALLOWED_HOSTS=allowed_hosts, SECURE_SSL_REDIRECT=True,
                               SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")):
            response = client.get(probe["path"], HTTP_HOST=headers["Host"],
                                  HTTP_X_FORWARDED_PROTO=headers["X-Forwarded-Proto"])
        assert response.status_code == 200, (kind, response.status_code)


@pytest.mark.kubectl
def test_the_overlay_changes_image_and_hosts_and_adds_an_ingress(overlay):
    for _name, pod in _pod_specs(overlay):
        for container in _containers(pod):
            assert container["image"] == "registry.example.org/platform/trainyard:1.0.0"
    config = _config(overlay)
    ingress = _one(overlay, "Ingress", "trainyard")
    service = _one(overlay, "Service", "trainyard-web")
    for rule in ingress["spec"]["rules"]:
        assert rule["host"] in config["ALLOWED_HOSTS"].split(",")
        assert f"https://{rule['host']}" in config["CSRF_TRUSTED_ORIGINS"].split(",")
        backend = rule["http"]["paths"][0]["backend"]["service"]
        assert backend["name"] == service["metadata"]["name"]
        assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
    # Keys the overlay does not set keep the base's values.
    assert config["TRAINYARD_CLUSTER_MODE"] == "in-cluster"
    assert _one(overlay, "Deployment", "trainyard-beat")["spec"]["replicas"] == 1


# --- the ClusterRole against the code --------------------------------------------------------

#: Everything the ClusterRole may ever grant, per (apiGroup, resource). Widening this is a
#: security review, not a refactoring: say in the commit which code path needs it.
ALLOWED: dict[tuple[str, str], set[str]] = {
    ("", "namespaces"): {"get", "list", "create", "patch", "delete"},
    ("", "serviceaccounts"): {"get", "list", "create", "patch", "delete"},
    ("", "limitranges"): {"get", "list", "watch", "create", "patch", "delete"},
    ("", "resourcequotas"): {"get", "list", "watch", "create", "patch", "delete"},
    ("", "persistentvolumeclaims"): {"get", "list", "watch", "create", "delete"},
    ("", "nodes"): {"list", "watch", "patch"},
    ("", "pods"): {"get", "list", "watch"},
    ("", "events"): {"get", "list", "watch"},
    ("", "pods/log"): {"get", "list", "watch"},
    ("", "services"): {"get", "list", "watch"},
    ("events.k8s.io", "events"): {"get", "list", "watch"},
    ("rbac.authorization.k8s.io", "roles"): {"get", "list", "create", "patch", "delete"},
    ("rbac.authorization.k8s.io", "rolebindings"): {"get", "list", "create", "patch", "delete"},
    ("networking.k8s.io", "networkpolicies"): {"get", "list", "create", "patch", "delete"},
    ("scheduling.k8s.io", "priorityclasses"): {"get", "create", "patch"},
    ("storage.k8s.io", "storageclasses"): {"get", "list", "watch", "create", "patch",
                                           "delete"},
    ("storage.k8s.io", "volumeattributesclasses"): {"get", "list", "create", "patch"},
    ("kubeflow.org", "pytorchjobs"): {"get", "list", "watch", "create", "patch", "delete"},
    ("kubeflow.org", "pytorchjobs/status"): {"get", "list", "watch"},
    ("trainer.kubeflow.org", "trainjobs"): {"get", "list", "watch", "create", "patch",
                                            "delete"},
    ("trainer.kubeflow.org", "trainjobs/status"): {"get", "list", "watch"},
    # a TrainJob's tier: the runtime's copy at the tier's class (k8s_sync.tier_runtime)
    ("trainer.kubeflow.org", "clustertrainingruntimes"): {"get", "create", "patch"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"get"},
    # Kueue mode (jobs.backends.kueue, tenants.tasks.reconcile_kueue)
    ("kueue.x-k8s.io", "clusterqueues"): {"list", "create", "patch", "delete"},
    ("kueue.x-k8s.io", "localqueues"): {"list", "create", "patch", "delete"},
    ("kueue.x-k8s.io", "resourceflavors"): {"list", "create", "patch", "delete"},
    ("kueue.x-k8s.io", "workloadpriorityclasses"): {"list", "create", "patch", "delete"},
    ("kueue.x-k8s.io", "cohorts"): {"list", "create", "patch", "delete"},
    ("kueue.x-k8s.io", "topologies"): {"list", "create", "patch", "delete"},
    # watch: the watcher records Workloads (observe.KINDS "kueueworkloads")
    ("kueue.x-k8s.io", "workloads"): {"list", "watch", "patch"},
    ("visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads"): {"get"},
}
#: Resources the role may grant only for these object names.
NAMED_ONLY = {("apiextensions.k8s.io", "customresourcedefinitions"): {health.TRAINING_CRD}}

#: What each KubeClient method sends (see k8s_sync/client.py).
VERBS_OF_METHOD = {
    "read": {"get"},
    "list_objects": {"list"},
    "list_with_resource_version": {"list"},
    "watch": {"watch"},
    "apply": {"patch", "create"},  # server-side apply creates a missing object
    "create_if_absent": {"create", "get"},  # POST; GET when it already exists
    "patch": {"patch"},
    "ensure_absent": {"delete"},
    "kueue_pending_workloads": {"get"},  # GET on Kueue's visibility API
}
#: Kueue's visibility API as an (apiVersion, "kind") for the tables here: a subresource.
VISIBILITY_PENDING = ("visibility.kueue.x-k8s.io/v1beta2", "ClusterQueue/pendingworkloads")
#: Kinds outside the client's static table (found by API discovery): their plurals.
DISCOVERED = {
    ("storage.k8s.io/v1", "StorageClass"): "storageclasses",
    ("storage.k8s.io/v1", "VolumeAttributesClass"): "volumeattributesclasses",
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): "customresourcedefinitions",
    # Kueue's visibility API: KubeClient.kueue_pending_workloads
    (VISIBILITY_PENDING[0], VISIBILITY_PENDING[1]): "clusterqueues/pendingworkloads",
    # Trainer's runtimes (jobs.converge.ensure_tier_runtime)
    ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"): "clustertrainingruntimes",
}
APPS = ("core", "portal", "tenants", "jobs", "billing", "k8s_sync")

Kind = tuple[str, str]  # (apiVersion, kind)


def _sample_pool() -> PoolSpec:
    return PoolSpec(tenant_slug="acme", pool="dev", tenant_group="trainyard:acme")


def _sample_job(kind: str = JOB_KIND_PYTORCHJOB) -> JobSpec:
    return JobSpec(job_id=1, tenant_slug="acme", pool="dev", tier=Tier.DEVELOPMENT,
                   image="registry.example.org/ml/train:1", command=("python", "train.py"),
                   max_run_seconds=3600, grace_seconds=300, checkpoint_interval_seconds=300,
                   checkpoint_storage_class="standard", checkpoint_size_gib=10, kind=kind)


def _job_kinds() -> list[Kind]:
    """The kinds a job runs as (sync_job's kind comes from k8s_sync.specs.WORKLOAD_KINDS):
    each kind's builder renders its own."""
    kinds = _kinds_of([manifests.build_workload(_sample_job(kind)) for kind in WORKLOAD_KINDS])
    assert sorted(kinds) == sorted(WORKLOAD_KINDS.values())
    return kinds


def _kinds_of(objs) -> list[Kind]:
    return [(o["apiVersion"], o["kind"]) for o in objs if o is not None]


def _converged_kinds() -> list[Kind]:
    """What reconcile.converge applies: a pool's objects (with an IOPS StorageClass,
    tenants.selectors.pool_objects), the cluster-wide objects and, in Kueue mode, Kueue's
    objects (tenants.tasks.reconcile_kueue)."""
    return [*_pool_object_kinds(), *_shared_pool_object_kinds(),
            *_kinds_of(manifests.desired_cluster_objects()), *_kueue_kinds()]


def _kueue_kinds() -> list[Kind]:
    """What tenants.tasks.reconcile_kueue converges (every kind its owner lists and
    prunes; the sample builds one of each)."""
    spec = KueueSpec(queues=(QueueSpec("acme", "dev", "dev", nominal={"gpu:H800": 1}),),
                     topology_levels=("trainyard.io/switch",))
    built = _kinds_of(kueue.desired_kueue_objects(spec))
    assert set(built) == set(kueue.KINDS)
    return list(kueue.KINDS)


def _pool_object_kinds() -> list[Kind]:
    """A pool's own objects (and an older Trainyard's per-pool IOPS StorageClass, which
    its converge prunes)."""
    iops = build_iops_storage_class({"provisioner": "ebs.csi.aws.com",
                                     "metadata": {"name": "gp3"}},
                                    name="ty-acme-dev-gp3-3000iops", iops=3000, labels={})
    return _kinds_of([*manifests.desired_pool_objects(_sample_pool()), iops])


def _shared_pool_object_kinds() -> list[Kind]:
    """What pool_objects adds that is no pool's own: the IOPS tiers' shared
    VolumeAttributesClasses (read one by one, never pruned)."""
    return _kinds_of([build_iops_volume_class("ebs.csi.aws.com", 3000)])


def _converge_read_kinds() -> list[Kind]:
    """What converge reads one by one: the desired objects of kinds its owner does not
    list. A pool's owner lists POOL_KINDS, which hold every kind of a pool's own objects
    (the assertion), so the IOPS tiers' VolumeAttributesClasses and the cluster-wide
    objects (converged without an owner) are read."""
    assert set(_pool_object_kinds()) <= set(POOL_KINDS)
    assert not set(_shared_pool_object_kinds()) & set(POOL_KINDS)
    return [*_shared_pool_object_kinds(), *_kinds_of(manifests.desired_cluster_objects())]


def _observed_kinds() -> list[Kind]:
    return [(spec.api_version, spec.kind) for spec in observe.KINDS.values()]


def _informed_kinds() -> list[Kind]:
    from jobs.informers import ClusterCache

    return [(spec.api_version, spec.kind) for spec in observe.KINDS.values()
            if spec.name in ClusterCache.KINDS]


#: Call sites whose (apiVersion, kind) is not a literal: where the kinds come from.
DYNAMIC_CALL_SITES = {
    ("k8s_sync/reconcile.py", "converge", "read"): _converge_read_kinds,
    ("k8s_sync/reconcile.py", "converge", "apply"): _converged_kinds,
    # with a pool's owner (reconcile.pool_owner): list each owned kind, delete the stale
    ("k8s_sync/reconcile.py", "converge", "list_objects"): lambda: [
        *POOL_KINDS, *_kueue_kinds()],
    ("k8s_sync/reconcile.py", "converge", "ensure_absent"): lambda: [
        kind for kind in [*POOL_KINDS, *_kueue_kinds()] if kind not in NEVER_DELETED_KINDS],
    ("tenants/tasks.py", "pool_drift", "list_objects"): lambda: list(POOL_KINDS),
    ("k8s_sync/observe.py", "relist", "list_with_resource_version"): _observed_kinds,
    ("k8s_sync/observe.py", "relist_all", "list_with_resource_version"): _observed_kinds,
    ("k8s_sync/observe.py", "_watch", "watch"): _observed_kinds,
    # the admission service's informers (jobs.informers.ClusterCache): kinds of KINDS
    ("k8s_sync/informer.py", "relist", "list_with_resource_version"): _informed_kinds,
    ("k8s_sync/informer.py", "_watch", "watch"): _informed_kinds,
    ("jobs/converge.py", "sync_one", "create_if_absent"): lambda: [
        *_kinds_of([manifests.build_checkpoint_pvc(_sample_job())]), *_job_kinds()],
    ("jobs/converge.py", "sync_one", "ensure_absent"): _job_kinds,
    ("jobs/converge.py", "sync_one", "read"): _job_kinds,
    ("jobs/converge.py", "sync_one", "patch"): _job_kinds,
    ("jobs/backends/kueue.py", "sync_job", "create_if_absent"): lambda: [
        *_kinds_of([manifests.build_checkpoint_pvc(_sample_job())]), *_job_kinds()],
    ("jobs/backends/kueue.py", "sync_job", "ensure_absent"): _job_kinds,
    # a requeued job's resume variables, on its own kind (WORKLOAD_KINDS[job.kind])
    ("jobs/backends/kueue.py", "refresh_resume", "read"): _job_kinds,
    ("jobs/backends/kueue.py", "refresh_resume", "patch"): _job_kinds,
    ("jobs/backends/kueue.py", "_positions", "kueue_pending_workloads"): lambda: [
        VISIBILITY_PENDING],
    # a TrainJob's tier: the runtime it names, and its copy (k8s_sync.tier_runtime)
    ("jobs/converge.py", "ensure_tier_runtime", "read"): lambda: [
        (manifests.TRAINJOB_API_VERSION, manifests.TRAINING_RUNTIME_KIND)],
    ("jobs/converge.py", "ensure_tier_runtime", "apply"): lambda: [
        (manifests.TRAINJOB_API_VERSION, manifests.TRAINING_RUNTIME_KIND)],
    # a maintenance window's target moved between queues (jobs.window_kueue)
    ("jobs/window_kueue.py", "hold_in_kueue", "read"): _job_kinds,
    ("jobs/window_kueue.py", "hold_in_kueue", "patch"): lambda: [("v1", "Node"),
                                                                *_job_kinds()],
}


class _CallFinder(ast.NodeVisitor):
    """Calls of a KubeClient verb, each attributed to its innermost enclosing function
    (``<module>`` outside any)."""

    def __init__(self) -> None:
        self.stack = ["<module>"]
        self.found: list[tuple[str, str, Kind | None]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        if (isinstance(node.func, ast.Attribute) and node.func.attr in VERBS_OF_METHOD
                and node.args):
            first = node.args[:2]
            kind = None
            if len(first) == 2 and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                       for a in first):
                kind = (first[0].value, first[1].value)  # type: ignore[union-attr]
            self.found.append((self.stack[-1], node.func.attr, kind))
        self.generic_visit(node)


def _call_sites() -> Iterator[tuple[str, str, str, Kind | None]]:
    """Every call of a KubeClient verb in the apps: (file, function, method, kind or None
    when the kind is not a literal)."""
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "tests" in path.parts or "migrations" in path.parts or rel == "k8s_sync/client.py":
                continue
            finder = _CallFinder()
            finder.visit(ast.parse(path.read_text(), rel))
            for func, method, kind in finder.found:
                yield rel, func, method, kind


def _resource(kind: Kind) -> tuple[str, str]:
    api_version = kind[0]
    group = api_version.rpartition("/")[0]
    if kind in k8s_client._STATIC_RESOURCES:
        return group, k8s_client._STATIC_RESOURCES[kind][0]
    assert kind in DISCOVERED, f"{kind}: add its plural to DISCOVERED in test_deploy.py"
    return group, DISCOVERED[kind]


Perm = tuple[str, str, str]  # (apiGroup, resource, verb)


@functools.cache
def needed() -> dict[Perm, str]:
    """Every permission the code needs, with the first code path that needs it."""
    perms: dict[Perm, str] = {}

    def need(kinds: list[Kind], verbs: set[str], why: str) -> None:
        for kind in kinds:
            group, plural = _resource(kind)
            for verb in verbs:
                perms.setdefault((group, plural, verb), why)

    dynamic_seen = set()
    for rel, func, method, kind in _call_sites():
        why = f"{rel}:{func} -> {method}"
        if kind is not None:
            need([kind], VERBS_OF_METHOD[method], why)
            continue
        site = (rel, func, method)
        assert site in DYNAMIC_CALL_SITES, (
            f"{why} names its kind at run time: add it to DYNAMIC_CALL_SITES in "
            "portal/tests/test_deploy.py with where its kinds come from")
        dynamic_seen.add(site)
        need(DYNAMIC_CALL_SITES[site](), VERBS_OF_METHOD[method], why)
    stale = set(DYNAMIC_CALL_SITES) - dynamic_seen
    assert not stale, f"DYNAMIC_CALL_SITES names calls that no longer exist: {stale}"
    # RBAC escalation prevention: Trainyard may create the tenants' Role and bind it only
    # if it holds every permission the Role grants (no `escalate`/`bind` is granted).
    for rule in manifests.build_role(_sample_pool())["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    perms.setdefault((group, resource, verb), "researcher Role (escalation)")
    return perms


@functools.cache
def _cluster_role() -> dict:
    docs = list(yaml.safe_load_all((DEPLOY / "base" / "rbac.yaml").read_text()))
    return next(d for d in docs if d["kind"] == "ClusterRole")


def _granted() -> dict[Perm, frozenset[str] | None]:
    """(apiGroup, resource, verb) -> the resourceNames it is limited to (None: all)."""
    granted: dict[Perm, frozenset[str] | None] = {}
    for rule in _cluster_role()["rules"]:
        names = frozenset(rule["resourceNames"]) if rule.get("resourceNames") else None
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    perm = (group, resource, verb)
                    assert perm not in granted, f"{perm} granted twice"
                    granted[perm] = names
    return granted


def test_the_code_scan_sees_the_known_call_sites():
    sites = {(rel, func, method, kind) for rel, func, method, kind in _call_sites()}
    assert ("tenants/tasks.py", "reconcile_nodes", "patch", ("v1", "Node")) in sites
    assert ("jobs/converge.py", "sync_one", "ensure_absent", None) in sites
    assert ("k8s_sync/health.py", "_live_check", "read",
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition")) in sites


def test_the_cluster_role_has_no_wildcards_and_no_dangerous_verbs():
    for rule in _cluster_role()["rules"]:
        assert "nonResourceURLs" not in rule
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(key, []), rule
            assert not any("*" in value for value in rule.get(key, [])), rule
        assert "secrets" not in rule["resources"], "Trainyard reads no secrets"
        assert not {"escalate", "bind", "impersonate", "update", "deletecollection"} & set(
            rule["verbs"]), rule
        assert not {"pods/exec", "pods/attach", "pods/portforward", "serviceaccounts/token",
                    "clusterroles", "clusterrolebindings"} & set(rule["resources"]), rule


def test_the_cluster_role_grants_nothing_beyond_the_allow_list():
    for (group, resource, verb), names in _granted().items():
        assert verb in ALLOWED.get((group, resource), set()), (group, resource, verb)
        if (group, resource) in NAMED_ONLY:
            assert names is not None and names <= NAMED_ONLY[(group, resource)], resource


def test_the_cluster_role_grants_everything_the_code_needs():
    granted = _granted()
    missing = {perm: why for perm, why in needed().items() if perm not in granted}
    assert not missing, "the ClusterRole lacks (apiGroup, resource, verb): " + "; ".join(
        f"{perm} for {why}" for perm, why in sorted(missing.items()))
    # The one name-restricted read is exactly the object the code reads.
    assert granted[("apiextensions.k8s.io", "customresourcedefinitions", "get")] == {
        health.TRAINING_CRD}


def test_the_cluster_role_grants_nothing_the_code_does_not_need():
    unused = sorted(set(_granted()) - set(needed()))
    assert not unused, f"granted but never used by the code: {unused}"


def test_the_needed_set_follows_the_code_tables():
    perms = needed()
    for kind in POOL_KINDS:
        group, plural = _resource(kind)
        assert {(group, plural, v) for v in ("list", "create", "patch")} <= set(perms)
        if kind not in NEVER_DELETED_KINDS:  # converge prunes what a pool no longer declares
            assert (group, plural, "delete") in perms
    for spec in observe.KINDS.values():
        group, plural = _resource((spec.api_version, spec.kind))
        assert {(group, plural, "list"), (group, plural, "watch")} <= set(perms)
    assert ("kubeflow.org", "pytorchjobs", "create") in perms
    assert {("trainer.kubeflow.org", "trainjobs", verb)
            for verb in ("create", "get", "patch", "delete", "list", "watch")} <= set(perms)
    assert ("", "nodes", "patch") in perms
