"""`make run`'s supervision (portal.launcher.Supervisor) with dummy children.

Issue 16: one dead worker stopped the whole product. Now a dead child is restarted with
exponential backoff while the others keep running, and stopping still stops them all.
"""

import io
import os
import signal
import time
from pathlib import Path

import pytest

from portal.launcher import Supervisor

SLEEPER = ["sleep", "60"]


def _until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def supervisor(tmp_path):
    out = io.StringIO()
    sup = Supervisor(dict(os.environ), tmp_path, backoff=0.05, max_backoff=0.2,
                     stable_after=30, crash_loop=3, stop_timeout=2, out=out)
    sup.output = out  # type: ignore[attr-defined]
    yield sup
    sup.stop_all()


def test_a_killed_child_is_restarted_and_the_others_keep_running(supervisor):
    for name in ("kubesim", "web", "worker"):
        supervisor.start(name, SLEEPER)
    first = {c.name: c.proc.pid for c in supervisor.children}
    os.kill(first["worker"], signal.SIGKILL)

    def restarted() -> bool:
        supervisor.tick()
        worker = supervisor.child("worker")
        return worker.proc.pid != first["worker"] and worker.proc.poll() is None
    assert _until(restarted)

    assert "worker exited with code -9; restarting in 0.05 s (restart 1)" in \
        supervisor.output.getvalue()
    for name in ("kubesim", "web"):
        child = supervisor.child(name)
        assert child.proc.pid == first[name] and child.proc.poll() is None
        assert child.restarts == 0


def test_a_crash_looping_child_backs_off_is_reported_and_still_retried(supervisor):
    supervisor.start("web", SLEEPER)
    supervisor.start("beat", ["sh", "-c", "exit 3"])

    assert _until(lambda: (supervisor.tick(), supervisor.child("beat").restarts >= 5)[1])
    beat = supervisor.child("beat")
    assert set(beat.exit_codes) == {3}
    text = supervisor.output.getvalue()
    # Exponential, then capped: 0.05, 0.1, 0.2, 0.2, ...
    assert "restarting in 0.05 s (restart 1)" in text
    assert "restarting in 0.1 s (restart 2)" in text
    assert "restarting in 0.2 s (restart 3)" in text
    assert "restarting in 0.2 s (restart 5)" in text
    assert text.count("beat is crash-looping") == 1
    assert supervisor.child("web").restarts == 0


def test_a_dead_childs_leftover_processes_are_killed_before_it_restarts(supervisor, tmp_path):
    """gunicorn's workers outlive a master killed with -9; they would hold the port."""
    pidfile = tmp_path / "grandchild.pid"
    supervisor.start("web", ["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"])
    assert _until(lambda: pidfile.exists() and pidfile.read_text().strip())
    grandchild = int(pidfile.read_text())
    first = supervisor.child("web").proc.pid
    assert grandchild in _live_members(first)
    os.kill(first, signal.SIGKILL)
    assert _until(lambda: (supervisor.tick(), grandchild not in _live_members(first))[1])


def test_stop_all_stops_every_child_even_one_that_ignores_sigterm(supervisor):
    supervisor.start("web", SLEEPER)
    supervisor.start("stubborn", ["sh", "-c", "trap '' TERM; sleep 60 & wait; sleep 60"])
    supervisor.stop_timeout = 0.3
    supervisor.stop_all()
    for child in supervisor.children:
        assert child.proc.poll() is not None
        assert _live_members(child.proc.pid) == []


def _live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies (a container's init may not reap)."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(stat.parent.name))
    return live


def test_the_launcher_serves_with_gunicorn_and_debug_off():
    from portal.launcher import _env, _web_argv

    argv = _web_argv("127.0.0.1", 8000, {})
    assert argv[1:3] == ["-m", "gunicorn"] and "runserver" not in argv
    env = _env()
    assert env["TRAINYARD_LOCAL"] == "true"
    assert env.get("DEBUG", "false") == os.environ.get("DEBUG", "false")
