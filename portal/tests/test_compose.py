"""docker-compose.yml: no engine runs here, so parse it and check what it promises."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_it_has_every_service_with_a_healthcheck():
    services = _compose()["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "migrate", "watch",
            "admission"} <= set(services)
    for name in ("postgres", "redis", "web", "worker", "beat", "watch", "admission"):
        assert services[name]["healthcheck"]["test"], name


def test_processes_run_the_right_commands():
    services = _compose()["services"]
    assert services["web"]["command"][:2] == ["gunicorn", "portal.wsgi"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "portal", "worker"]
    assert "default,k8s,billing" in services["worker"]["command"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "portal", "beat"]
    assert services["migrate"]["command"][-2:] == ["migrate", "--noinput"]
    assert services["watch"]["command"][:3] == ["python", "manage.py", "k8s_watch"]
    assert services["admission"]["command"][:3] == ["python", "manage.py", "admission_service"]


def test_app_services_get_production_configuration():
    services = _compose()["services"]
    for name in ("web", "worker", "beat", "migrate", "watch", "admission"):
        env = services[name]["environment"]
        assert env["DEBUG"] == "false"
        assert env["DATABASE_URL"].startswith("postgres://")
        assert "@postgres:5432/" in env["DATABASE_URL"]
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        assert env["REDIS_URL"].startswith("redis://redis:6379/")
        assert "SECRET_KEY:?" in env["SECRET_KEY"]  # compose refuses to start without it
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("web", "worker", "beat", "watch", "admission"):
        assert services[name]["depends_on"]["migrate"]["condition"] == \
            "service_completed_successfully"


def test_the_image_it_builds_exists():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install ." in dockerfile and "collectstatic" in dockerfile
