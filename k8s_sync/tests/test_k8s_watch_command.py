"""``manage.py k8s_watch`` and the ``k8s_sync.relist`` task."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from k8s_sync.models import ObservedKind, ObservedNode, ObservedStorageClass
from k8s_sync.tasks import relist
from portal.schedules import BEAT_SCHEDULE

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_once_relists_every_kind_and_reports_counts(cluster):
    out = StringIO()
    call_command("k8s_watch", "--once", stdout=out)
    assert "nodes: 6" in out.getvalue() and "storageclasses: 2" in out.getvalue()
    assert ObservedNode.objects.count() == 6
    assert set(ObservedKind.objects.values_list("kind", flat=True)) == {
        "nodes", "pods", "quotas", "pvcs", "storageclasses", "events", "pytorchjobs",
        "trainjobs", "kueueworkloads"}


@pytest.mark.django_db
def test_once_fails_loudly_when_a_kind_cannot_be_listed(cluster):
    cluster.faults.add(method="GET", path_regex=r"/api/v1/nodes", status=500)
    with pytest.raises(CommandError, match="relist failed for nodes"):
        call_command("k8s_watch", "--once", stdout=StringIO())
    assert "500" in ObservedKind.objects.get(kind="nodes").last_error
    assert ObservedStorageClass.objects.count() == 2  # the other kinds were still recorded


@pytest.mark.django_db
@pytest.mark.parametrize("args", [["--kinds", "nodes,gpus"], ["--kinds", ","],
                                  ["--watch-timeout", "0"]])
def test_bad_options_are_refused_with_a_clear_error(args):
    with pytest.raises(CommandError):
        call_command("k8s_watch", *args)


@pytest.mark.django_db
def test_the_relist_task_does_what_once_does(cluster):
    result = relist()
    assert result["nodes"] == 6 and result["storageclasses"] == 2


def test_the_relist_task_is_scheduled_every_ten_minutes_on_the_k8s_queue():
    entry = BEAT_SCHEDULE["k8s_sync.relist"]
    assert entry["task"] == "k8s_sync.relist"
    assert entry["options"]["queue"] == "k8s" and 600 < entry["options"]["expires"] <= 900
    assert len(entry["schedule"].minute) == 6


@pytest.mark.slow
def test_the_watcher_observes_until_sigterm_and_then_exits_cleanly(kubesim, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(DEBUG="true", TRAINYARD_VAR_DIR=str(tmp_path), KUBECONFIG=str(kubesim.kubeconfig),
               TRAINYARD_CLUSTER_MODE="kubeconfig", PYTHONUNBUFFERED="1")
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, cwd=ROOT, check=True, timeout=60)
    alive = tmp_path / "alive"
    proc = subprocess.Popen([*manage, "k8s_watch", "--watch-timeout", "5", "--heartbeat-file",
                             str(alive)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        db = tmp_path / "trainyard.sqlite3"
        deadline, nodes = time.monotonic() + 20, 0
        while time.monotonic() < deadline and nodes < 6:
            time.sleep(0.2)
            with sqlite3.connect(db) as conn:
                nodes = conn.execute("SELECT count(*) FROM k8s_sync_observednode").fetchone()[0]
        assert nodes == 6
        while time.monotonic() < deadline and not alive.exists():
            time.sleep(0.1)
        assert alive.exists()  # the heartbeat a container healthcheck reads
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, output
    assert "watching nodes, pods" in output and "stopped" in output


def test_compose_runs_one_watcher_with_a_heartbeat_healthcheck():
    import yaml

    watch = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["watch"]
    assert watch["command"][:3] == ["python", "manage.py", "k8s_watch"]
    heartbeat = watch["command"][watch["command"].index("--heartbeat-file") + 1]
    assert heartbeat in watch["healthcheck"]["test"][1]
