"""`make run`: the launcher starts everything, serves the portal, and Ctrl-C stops it all.

Runs the real launcher in a subprocess on free ports with its own var/ folder.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(var: Path, port: int, sim_port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE",
                        "SECRET_KEY", "ALLOWED_HOSTS", "SECURE_SSL_REDIRECT", "STATIC_MANIFEST",
                        "KUBECONFIG"}}
    env.update(TRAINYARD_VAR_DIR=str(var), TRAINYARD_PORT=str(port), KUBESIM_PORT=str(sim_port),
               PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "portal.launcher"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _read_until(proc: subprocess.Popen, marker: str, timeout: float) -> str:
    """Collect output until ``marker`` appears (a reader thread keeps the pipe drained)."""
    import threading

    lines: list[str] = []
    seen = threading.Event()

    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if marker in line:
                seen.set()
    threading.Thread(target=pump, daemon=True).start()
    seen.wait(timeout)
    proc._pumped = lines  # type: ignore[attr-defined]
    return "".join(lines)


def _stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=40)


def _port_closed(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return False
    except OSError:
        return True


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_make_run_serves_the_portal_and_ctrl_c_stops_everything(tmp_path):
    port, sim_port = _free_port(), _free_port()
    proc = _start(tmp_path, port, sim_port)
    try:
        output = _read_until(proc, "Trainyard is running at", 120)
        assert f"http://127.0.0.1:{port}/" in output, output
        assert "platform" in output and "finance" in output  # credentials, printed once
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=10) as resp:
            assert resp.status == 200
            page = resp.read().decode()
            assert "Trainyard" in page
            # gunicorn, not Django's development server (issue 16)
            assert "WSGIServer" not in resp.headers.get("Server", "")
        # The portal's own 404 page: no URL list (DEBUG is off in make run).
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/no-such-page/", timeout=10)
        assert missing.value.code == 404
        body = missing.value.read().decode()
        assert "Not found" in body and "urlpatterns" not in body and "URLconf" not in body
        # Static files pre-compressed (collected at start), under their hashed names.
        css = re.search(r'href="(/static/css/portal(\.[0-9a-f]{12})?\.css)"', page)
        assert css, page
        request = urllib.request.Request(f"http://127.0.0.1:{port}{css[1]}",
                                         headers={"Accept-Encoding": "gzip, br"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.headers["Content-Encoding"] in ("br", "gzip")
    finally:
        code = _stop(proc)
    assert code == 0
    time.sleep(0.5)
    assert _port_closed(port) and _port_closed(sim_port)
    assert (tmp_path / "trainyard.sqlite3").exists()

    # Running it again keeps the data and does not print passwords again.
    proc = _start(tmp_path, port, sim_port)
    try:
        output = _read_until(proc, "Trainyard is running at", 120)
        assert "Demo accounts exist already" in output, output
    finally:
        assert _stop(proc) == 0
