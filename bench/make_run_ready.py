"""How long a fresh clone takes from `make run` to a live demo.

Clones this repository (HEAD) into a temporary folder and runs `make run` there with the
package caches off (PIP_NO_CACHE_DIR, UV_NO_CACHE), as on a new machine, on free ports.
It prints when each phase ends, read off the command's own output:

  venv      the virtual environment exists
  install   the dependencies are installed (uv, or pip when uv is unavailable)
  prepared  the database is migrated and the demo seeded (demo_setup)
  web       GET /login/ answers 200
  live      the demo is alive: the demo platform admin, logged in, sees a running job in
            the REST API's cluster queue and a tenant dashboard's quota gauges

Baseline in the same run: installing the same dependencies with plain pip (no cache)
into another fresh venv, the way `make run` installed before it used uv; and the issue's
goal of 60 s to a live demo.

    .venv/bin/python bench/make_run_ready.py [--skip-baseline] [--keep]
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Run:
    """`make run` in ``where``, its output lines timestamped."""

    def __init__(self, where: Path, env: dict[str, str]) -> None:
        self.t0 = time.monotonic()
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(["make", "run"], cwd=where, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.t0, line.rstrip("\n")))

    def when(self, pattern: str) -> float | None:
        for t, line in self.lines:
            if re.search(pattern, line):
                return t
        return None

    def output(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            # Ctrl-C as a terminal sends it: the launcher stops every child.
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


def get(opener: urllib.request.OpenerDirector, url: str) -> tuple[int, str]:
    try:
        with opener.open(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


def login(opener: urllib.request.OpenerDirector, base: str, user: str, password: str) -> bool:
    status, page = get(opener, f"{base}/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if status != 200 or not token:
        return False
    data = urllib.parse.urlencode({"username": user, "password": password,
                                   "csrfmiddlewaretoken": token.group(1)}).encode()
    req = urllib.request.Request(f"{base}/login/", data=data,
                                 headers={"Referer": f"{base}/login/"})
    try:
        with opener.open(req, timeout=10) as resp:
            return "/login/" not in resp.geturl()
    except urllib.error.HTTPError:
        return False


def measure(where: Path, timeout: float) -> dict[str, float | None]:
    port, sim_port = free_port(), free_port()
    env = dict(os.environ, PIP_NO_CACHE_DIR="1", UV_NO_CACHE="1",
               TRAINYARD_PORT=str(port), KUBESIM_PORT=str(sim_port))
    for name in ("VIRTUAL_ENV", "DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL",
                 "KUBECONFIG", "DJANGO_SETTINGS_MODULE"):
        env.pop(name, None)
    base = f"http://127.0.0.1:{port}"
    run = Run(where, env)
    result: dict[str, float | None] = {}
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and result.get("web") is None:
            if run.proc.poll() is not None:
                raise SystemExit("make run exited:\n" + run.output()[-3000:])
            if get(opener, f"{base}/login/")[0] == 200:
                result["web"] = time.monotonic() - run.t0
            time.sleep(0.2)
        match = re.search(r"^\s+platform\s+(\S+)\s", run.output(), re.M)
        if result.get("web") is None or not match:
            raise SystemExit("no web server or no demo credentials:\n" + run.output()[-3000:])
        if not login(opener, base, "platform", match.group(1)):
            raise SystemExit("could not log in as the demo platform admin")
        while time.monotonic() < deadline:
            _, jobs = get(opener, f"{base}/api/v1/jobs/")
            _, gauges = get(opener, f"{base}/t/vision/dashboard/data.json")
            listed = json.loads(jobs) if jobs else []
            rows = listed.get("results", []) if isinstance(listed, dict) else listed
            states = {row.get("state") for row in rows}
            if "running" in states and "gauges" in (json.loads(gauges) if gauges else {}):
                result["live"] = time.monotonic() - run.t0
                break
            time.sleep(0.5)
    finally:
        run.stop()
    result["venv"] = run.when(r"^Installing Trainyard")
    result["install"] = run.when(r"portal\.launcher")
    result["prepared"] = run.when(r"^Demo history|^Closed |Demo accounts exist")
    return result


def pip_baseline(where: Path) -> float:
    venv = where / "pip-venv"
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                    "--no-cache-dir", "--disable-pip-version-check", "-e", str(where / "repo")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temporary clone")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="trainyard-fresh-"))
    try:
        repo = tmp / "repo"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(repo)], check=True)
        result = measure(repo, args.timeout)
        print(f"fresh clone of {ROOT.name} at HEAD, caches off, make run:")
        for phase in ("venv", "install", "prepared", "web", "live"):
            value = result.get(phase)
            print(f"  {phase:<9} {'n/a' if value is None else f'{value:6.1f} s'}")
        live = result.get("live")
        verdict = "within" if live is not None and live <= GOAL else "OVER"
        print(f"  goal      {GOAL:6.1f} s to a live demo: {verdict}")
        if not args.skip_baseline:
            install = (result["install"] or 0) - (result["venv"] or 0)
            pip_s = pip_baseline(tmp)
            print(f"baseline: venv + plain pip install (no cache) {pip_s:6.1f} s; "
                  f"make run's venv + install took {result['install'] or 0:6.1f} s "
                  f"(install alone {install:.1f} s)")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
