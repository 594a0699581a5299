"""``make run``: start the whole product on the embedded default and stop it on Ctrl-C.

Migrates, creates the demo cast (credentials printed once), then starts as child
processes: the kubesim cluster, the Celery worker and beat (broker: kombu's filesystem
transport, no server needed unless CELERY_BROKER_URL says otherwise) and the web
server. Ctrl-C (or SIGTERM) stops every process it started; if any of them dies, the
others are stopped too and the exit code says so. Data lives in ``var/`` and survives
restarts.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _wait_for_port(host: str, port: int, timeout: float, proc: subprocess.Popen,
                   stop: Callable[[], bool] = lambda: False) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None or stop():
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def _env(var: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("DEBUG", "true")
    # Static files hashed and pre-compressed into var/staticfiles (static_ready collects them
    # when they changed), served by WhiteNoise with gzip/Brotli: plotly.js is 4.8 MB raw,
    # 1.3 MB as Brotli. Quality 5: about 0.5 s for plotly.js where 11 takes about 20 s.
    env.setdefault("STATIC_MANIFEST", "true")
    env.setdefault("STATIC_BROTLI_QUALITY", "5")
    if var is not None:
        env.setdefault("STATIC_ROOT", str(var / "staticfiles"))
    env.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([PY, str(ROOT / "manage.py"), *args], env=env, check=True, cwd=ROOT)


def main() -> int:
    var = Path(os.environ.get("TRAINYARD_VAR_DIR", str(ROOT / "var")))
    env = _env(var)
    host = env.get("TRAINYARD_HOST", "127.0.0.1")
    port = int(env.get("TRAINYARD_PORT", "8000"))
    for sub in ("", "broker/out", "broker/processed", "broker/control", "kubesim", "cache"):
        (var / sub).mkdir(parents=True, exist_ok=True)

    sim_port = int(env.get("KUBESIM_PORT", "6443"))
    embedded = env.get("TRAINYARD_CLUSTER_MODE", "embedded") == "embedded"
    for name, p in [("web server", port)] + ([("kubesim", sim_port)] if embedded else []):
        if not _port_free(host, p):
            print(f"Port {p} on {host} (for the {name}) is in use. Stop what uses it, or set "
                  f"{'TRAINYARD_PORT' if name == 'web server' else 'KUBESIM_PORT'}.",
                  file=sys.stderr)
            return 2

    demo_load = env.get("TRAINYARD_DEMO_LOAD", "true").lower() in ("1", "true", "yes", "on")
    procs: list[tuple[str, subprocess.Popen]] = []

    def start(name: str, argv: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, start_new_session=True)
        procs.append((name, proc))
        return proc

    def stop_all() -> None:
        for _, proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for _, proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)

    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        sim = None
        if embedded and (ROOT / "kubesim" / "__main__.py").exists():
            # kubesim needs no database: it starts while the database is prepared.
            kubeconfig = var / "kubesim" / "kubeconfig"
            sim = start("kubesim", [
                PY, "-m", "kubesim", "--host", "127.0.0.1", "--port", str(sim_port),
                "--profile", env.get("KUBESIM_PROFILE", "default"),
                "--speed", env.get("KUBESIM_SPEED", "60"),
                "--state", str(var / "kubesim" / "state.json"),
                "--kubeconfig", str(kubeconfig),
            ])
        # The static files (needs no database) are collected while the database is prepared.
        static = subprocess.Popen([PY, str(ROOT / "manage.py"), "static_ready"], env=env,
                                  cwd=ROOT, start_new_session=True)
        procs.append(("static files", static))
        print("Preparing the database ...", flush=True)
        # Migrate, the demo cast and (once) 30 days of jobs, usage and last month's invoices.
        _manage(env, "demo_setup", *(["--history"] if demo_load else []))
        if static.wait() != 0:
            print("collectstatic failed; see its output above.", file=sys.stderr)
            return 1
        procs.remove(("static files", static))
        if stopping:
            return 0
        if sim is not None:
            if not _wait_for_port("127.0.0.1", sim_port, 30, sim, lambda: stopping):
                if stopping:
                    return 0
                print("kubesim did not start; see its output above.", file=sys.stderr)
                return 1
            env["KUBECONFIG"] = str(kubeconfig)
        # The web server first, alone, so the portal answers as soon as it can
        # (demo_setup has just migrated, so no system checks); then the watcher, which
        # observes the cluster into the database (after kubesim is up, when embedded), the
        # worker, beat and the demo load.
        web = start("web", [PY, str(ROOT / "manage.py"), "runserver", f"{host}:{port}",
                            "--noreload", "--skip-checks", "--nostatic"])
        if _wait_for_port(host, port, 60, web, lambda: stopping):
            print(f"\nTrainyard is running at http://{host}:{port}/  (Ctrl-C stops it)\n",
                  flush=True)
        start("watch", [PY, str(ROOT / "manage.py"), "k8s_watch"])
        start("worker", [PY, "-m", "celery", "-A", "portal", "worker", "-P", "solo",
                         "-Q", "default,k8s,billing", "--loglevel", "WARNING"])
        start("beat", [PY, "-m", "celery", "-A", "portal", "beat", "--loglevel", "WARNING",
                       "-s", str(var / "celerybeat-schedule")])
        if demo_load:
            start("demo-load", [PY, str(ROOT / "manage.py"), "demo_load"])
        while not stopping:
            for name, proc in procs:
                if proc.poll() is not None:
                    print(f"{name} exited with code {proc.returncode}; stopping the rest.",
                          file=sys.stderr)
                    return 1
            time.sleep(0.5)
        print("\nStopping ...", flush=True)
        return 0
    finally:
        stop_all()


if __name__ == "__main__":
    sys.exit(main())
