"""Settings come from the environment; production values pass `check --deploy`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "k" * 20 + "-a-long-random-production-secret-0123456789-xyz",
    "ALLOWED_HOSTS": "trainyard.example.org",
    "DATABASE_URL": "postgres://trainyard:pw@db.example.org:5432/trainyard",
    "CELERY_BROKER_URL": "redis://redis.example.org:6379/0",
    "REDIS_URL": "redis://redis.example.org:6379/1",
    "TRAINYARD_CLUSTER_MODE": "in-cluster",
}


def _run(env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DEBUG", "SECRET_KEY",
                          "DJANGO_SETTINGS_MODULE", "ALLOWED_HOSTS", "SECURE_SSL_REDIRECT",
                          "STATIC_MANIFEST", "KUBECONFIG", "TRAINYARD_VAR_DIR"}}
    clean.update(env, DJANGO_SETTINGS_MODULE="portal.settings")
    return subprocess.run([sys.executable, "-c", code], env=clean, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def _settings(env: dict[str, str]) -> dict:
    code = ("import json, django; django.setup(); from django.conf import settings as s; "
            "print(json.dumps({'db': s.DATABASES['default']['ENGINE'], "
            "'db_name': str(s.DATABASES['default']['NAME']), 'broker': s.CELERY_BROKER_URL, "
            "'cache': s.CACHES['default']['BACKEND'], 'cluster': s.TRAINYARD_CLUSTER, "
            "'secure': s.SESSION_COOKIE_SECURE, 'debug': s.DEBUG, "
            "'transport': s.CELERY_BROKER_TRANSPORT}))")
    result = _run(env, code)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_check_deploy_is_clean_with_production_values():
    result = _run(PRODUCTION, "import sys; from django.core.management import "
                              "execute_from_command_line as m; "
                              "m(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING'])")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_values_select_postgres_redis_and_secure_cookies():
    values = _settings(PRODUCTION)
    assert values["db"] == "django.db.backends.postgresql"
    assert values["broker"].startswith("redis://")
    assert values["cache"].endswith("RedisCache")
    assert values["secure"] is True and values["debug"] is False
    assert values["cluster"]["mode"] == "in-cluster"


def test_the_embedded_default_needs_no_server(tmp_path):
    """make run's settings: the launcher's environment (local, plain HTTP, DEBUG off)."""
    from portal.launcher import _env

    env = {k: v for k, v in _env().items() if k in {"TRAINYARD_LOCAL", "DEBUG"}}
    values = _settings({**env, "TRAINYARD_VAR_DIR": str(tmp_path)})
    assert values["debug"] is False  # the portal's error pages, never settings or URL lists
    assert values["secure"] is False  # plain HTTP on this machine
    assert values["db"] == "django.db.backends.sqlite3"
    assert values["db_name"] == str(tmp_path / "trainyard.sqlite3")
    assert values["broker"] == "filesystem://localhost//"
    assert values["transport"] == "portal.broker:Transport"
    assert values["cache"].endswith("FileBasedCache")
    assert values["cluster"]["embedded"] is True
    assert values["cluster"]["kubeconfig"] == str(tmp_path / "kubesim" / "kubeconfig")


@pytest.mark.parametrize("env,message", [
    ({"DEBUG": "false"}, "SECRET_KEY must be set"),
    ({"DEBUG": "maybe"}, "DEBUG must be true or false"),
    ({"DEBUG": "true", "TRAINYARD_CLUSTER_MODE": "minikube"}, "TRAINYARD_CLUSTER_MODE"),
])
def test_bad_configuration_fails_loudly(env, message):
    result = _run(env, "import django; django.setup()")
    assert result.returncode != 0
    assert message in result.stderr
