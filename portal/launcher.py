"""``make run``: start the whole product on the embedded default and keep it running.

Migrates, creates the demo cast (credentials printed once), then starts as child
processes: the kubesim cluster, the web server (gunicorn), the k8s watcher, the Celery
worker and beat (broker: kombu's filesystem transport made safe to share,
``portal/broker.py``; no server needed unless CELERY_BROKER_URL says otherwise) and the
demo load. A child that dies is restarted with exponential backoff (``Supervisor``) and
the others keep running; Ctrl-C (or SIGTERM) stops every process it started. Data lives in
``var/`` and survives restarts.

The portal runs with ``TRAINYARD_LOCAL=true`` and ``DEBUG`` off: plain HTTP on this
machine, but a browser sees the portal's own error pages, never settings or URL lists;
tracebacks go to this console.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

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


def _wait_until(ready: Callable[[], bool], timeout: float, proc: subprocess.Popen,
                stop: Callable[[], bool] = lambda: False) -> bool:
    """Poll ``ready()`` (an OSError counts as not yet) until it is true; False when
    ``proc`` exits, ``stop()`` says so or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None or stop():
            return False
        try:
            if ready():
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def _port_open(host: str, port: int) -> bool:
    with socket.create_connection((host, port), timeout=0.5):
        return True


def _wait_for_port(host: str, port: int, timeout: float, proc: subprocess.Popen,
                   stop: Callable[[], bool] = lambda: False) -> bool:
    return _wait_until(lambda: _port_open(host, port), timeout, proc, stop)


@dataclass
class Child:
    """One supervised process and its restart history."""

    name: str
    argv: list[str]
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    restarts: int = 0
    # Exits in a row, each soon after starting: the exponent of the backoff.
    quick_exits: int = 0
    restart_at: float | None = None
    exit_codes: list[int] = field(default_factory=list)


class Supervisor:
    """Start child processes and restart the ones that exit, with exponential backoff.

    A child that exits is restarted after ``backoff`` seconds, doubled for every exit in a
    row that came within ``stable_after`` seconds of its start, up to ``max_backoff``. A
    child that has exited ``crash_loop`` times in a row is reported as crash-looping and
    still retried, at the capped backoff. The others keep running meanwhile. Each child is
    the leader of its own process group, so a dead child's leftovers (gunicorn's workers)
    are killed before it is started again, and ``stop_all`` stops whole groups.
    """

    def __init__(self, env: dict[str, str], cwd: Path, *, backoff: float = 1.0,
                 max_backoff: float = 60.0, stable_after: float = 60.0, crash_loop: int = 5,
                 stop_timeout: float = 15.0, out: TextIO | None = None) -> None:
        self.env, self.cwd = env, cwd
        self.backoff, self.max_backoff = backoff, max_backoff
        self.stable_after, self.crash_loop = stable_after, crash_loop
        self.stop_timeout = stop_timeout
        self.out = out
        self.children: list[Child] = []

    def _say(self, message: str) -> None:
        print(message, file=self.out or sys.stderr, flush=True)

    def _spawn(self, child: Child) -> None:
        child.proc = subprocess.Popen(child.argv, env=self.env, cwd=self.cwd,
                                      start_new_session=True)
        child.started_at = time.monotonic()
        child.restart_at = None

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:
        child = Child(name, argv)
        self._spawn(child)
        self.children.append(child)
        assert child.proc is not None
        return child.proc

    def child(self, name: str) -> Child:
        return next(c for c in self.children if c.name == name)

    def delay(self, child: Child) -> float:
        """Seconds before the next start of ``child``, from its exits in a row."""
        return min(self.max_backoff, self.backoff * 2 ** max(0, child.quick_exits - 1))

    def tick(self) -> None:
        """Notice children that exited, and start the ones whose backoff is over."""
        now = time.monotonic()
        for child in self.children:
            proc = child.proc
            if child.restart_at is None and proc is not None and proc.poll() is not None:
                _kill_group(proc.pid, signal.SIGKILL)  # leftovers hold ports and locks
                child.exit_codes.append(proc.returncode)
                ran = now - child.started_at
                child.quick_exits = child.quick_exits + 1 if ran < self.stable_after else 1
                wait = self.delay(child)
                child.restarts += 1
                child.restart_at = now + wait
                self._say(f"{child.name} exited with code {proc.returncode}; restarting in "
                          f"{wait:g} s (restart {child.restarts})")
                if child.quick_exits == self.crash_loop:
                    self._say(f"{child.name} is crash-looping: it exited {self.crash_loop} "
                              f"times in a row, each within {self.stable_after:g} s of "
                              f"starting; still retrying, at most every "
                              f"{self.max_backoff:g} s. See its output above.")
            elif child.restart_at is not None and now >= child.restart_at:
                self._spawn(child)

    def run(self, stopping: Callable[[], bool], interval: float = 0.2) -> None:
        """Supervise until ``stopping()`` is true."""
        while not stopping():
            self.tick()
            time.sleep(interval)

    def stop_all(self) -> None:
        """SIGTERM every child's group, then SIGKILL what is left after the timeout."""
        running = [c.proc for c in self.children if c.proc is not None]
        for proc in running:
            if proc.poll() is None:
                _kill_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for proc in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _web_argv(host: str, port: int, env: dict[str, str]) -> list[str]:
    """gunicorn, sized for a small machine: 2 processes of 4 threads each.

    ``--preload`` imports Django once, before binding, and forks the workers from it: half
    the start-up CPU of two imports on a 2-core machine, and less memory.
    """
    return [PY, "-m", "gunicorn", "portal.wsgi:application", "--bind", f"{host}:{port}",
            "--workers", env.get("WEB_CONCURRENCY", "2"), "--threads", "4",
            "--worker-class", "gthread", "--preload", "--graceful-timeout", "5",
            # a fresh process now and then bounds any slow leak
            "--max-requests", "2000", "--max-requests-jitter", "200",
            # no $HOME/.gunicorn/gunicorn.ctl, shared by every gunicorn of this user
            "--no-control-socket"]


def _wait_for_http(url: str, timeout: float, proc: subprocess.Popen,
                   stop: Callable[[], bool] = lambda: False) -> bool:
    """Wait until ``url`` gives any HTTP answer (the workers serve, not only the socket)."""
    def answers() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=5):  # noqa: S310 - our own http URL
                return True
        except urllib.error.HTTPError:  # an answer all the same
            return True

    return _wait_until(answers, timeout, proc, stop)


def _env(var: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # A plain-HTTP install on this machine, but no settings, URL lists or tracebacks in the
    # browser (DEBUG stays off unless set); tracebacks go to the console.
    env.setdefault("TRAINYARD_LOCAL", "true")
    # demo_setup runs Django's system checks once; the worker need not repeat them at every
    # (re)start (seconds of CPU), as gunicorn does not.
    env.setdefault("CELERY_SKIP_CHECKS", "1")
    # Static files hashed and pre-compressed into var/staticfiles (static_ready collects them
    # when they changed), served by WhiteNoise with gzip/Brotli: plotly.js (the partial
    # bundle) is 1.2 MB raw, 0.39 MB as Brotli 5. Quality 5: a fraction of a second for
    # plotly.js where 11 takes many seconds, for about 12% more bytes.
    env.setdefault("STATIC_MANIFEST", "true")
    env.setdefault("STATIC_BROTLI_QUALITY", "5")
    if var is not None:
        env.setdefault("STATIC_ROOT", str(var / "staticfiles"))
    env.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    env.setdefault("PYTHONUNBUFFERED", "1")
    # The demo's invoices have an issuer to print (a real install sets its own)
    env.setdefault("TRAINYARD_INVOICE_ISSUER_ADDRESS", "1 Platform Way|Springfield 01101")
    env.setdefault("TRAINYARD_INVOICE_ISSUER_TAX_ID", "DEMO-VAT-0000001")
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
    supervisor = Supervisor(env, ROOT)
    start = supervisor.start
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
                # Kueue mode: kubesim's Kueue gets the Configuration a cluster is given
                *(["--kueue-config", str(ROOT / "deploy" / "kueue" / "kueue-manager-config.yaml")]
                  if env.get("TRAINYARD_ADMISSION_BACKEND") == "kueue" else []),
            ])
        # The static files (needs no database) are collected while the database is prepared.
        static = subprocess.Popen([PY, str(ROOT / "manage.py"), "static_ready"], env=env,
                                  cwd=ROOT, start_new_session=True)
        print("Preparing the database ...", flush=True)
        # Migrate, the demo cast and (once) 30 days of jobs, usage and last month's invoices.
        _manage(env, "demo_setup", *(["--history"] if demo_load else []))
        if static.wait() != 0:
            print("collectstatic failed; see its output above.", file=sys.stderr)
            return 1
        if stopping:
            return 0
        if sim is not None:
            if not _wait_for_port("127.0.0.1", sim_port, 30, sim, lambda: stopping):
                if stopping:
                    return 0
                print("kubesim did not start; see its output above.", file=sys.stderr)
                return 1
            env["KUBECONFIG"] = str(kubeconfig)
        # The web server first, alone, so the portal answers as soon as it can; then the
        # watcher, which observes the cluster into the database (after kubesim is up, when
        # embedded), the worker, beat and the demo load.
        web = start("web", _web_argv(host, port, env))
        if _wait_for_http(f"http://{host}:{port}/healthz", 60, web, lambda: stopping):
            print(f"\nTrainyard is running at http://{host}:{port}/  (Ctrl-C stops it)\n",
                  flush=True)
        start("watch", [PY, str(ROOT / "manage.py"), "k8s_watch"])
        # The admission service decides (jobs.service); the worker's passes defer to it.
        # In Kueue mode Kueue decides and the worker's passes read it: no service.
        if env.get("TRAINYARD_ADMISSION_BACKEND", "trainyard") == "trainyard":
            start("admission", [PY, str(ROOT / "manage.py"), "admission_service"])
        # One worker, no peers: no mingle or gossip (a faster start, no broadcast files).
        start("worker", [PY, "-m", "celery", "-A", "portal", "worker", "-P", "solo",
                         "-Q", "default,k8s,billing", "--loglevel", "WARNING",
                         "--without-mingle", "--without-gossip"])
        start("beat", [PY, "-m", "celery", "-A", "portal", "beat", "--loglevel", "WARNING",
                       "-s", str(var / "celerybeat-schedule")])
        if demo_load:
            # It waits (up to a minute) for the pools to be in the cluster first: the worker
            # applies them from the tasks demo_setup queued, the watcher records them.
            start("demo-load", [PY, str(ROOT / "manage.py"), "demo_load", "--pool-wait", "60"])
        supervisor.run(lambda: stopping)
        print("\nStopping ...", flush=True)
        return 0
    finally:
        supervisor.stop_all()


if __name__ == "__main__":
    sys.exit(main())
