"""A chart page's cold load: the tenant dashboard in Chromium with an empty cache, with the
partial plotly.js bundle the pages load (static/vendor/plotly/plotly-trainyard.min.js,
1.2 MB: only the trace types portal/charts.py draws) and with the full plotly.js of the
plotly package (4.8 MB) the pages loaded before, each served uncompressed (from the
finders through runserver, as `make run` once did) and pre-compressed (WhiteNoise, as
`make run` and production do).

Prepares a demo database in a temporary folder (demo_setup), starts `manage.py runserver`
on a free port per setup (the full bundle: a settings module in the temporary folder puts
the package's plotly.min.js first under the partial bundle's name), logs in once per
server, then loads the dashboard ``--runs`` times per server, each in a new browser
context (empty HTTP cache), and prints the median time to the load event (plotly.js is a
deferred script, so it is downloaded, parsed and run before the load event) and the bytes
plotly.js took on the wire. A first, uncounted load per server also opens the cluster page
and checks that the charts drew (trace types of the drawn figures; no script error). A last
setup blocks plotly.js: the page's own floor (HTML, styles, dashboard.js).

Baselines in the same run: the full bundle, uncompressed and pre-compressed. Goal (issue 15,
item 8): < 500 ms.

    .venv/bin/python bench/static_cold_load.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
PASSWORD = "bench-password-0123456789"
SETUP = f"""
from django.contrib.auth import get_user_model
from tenants.models import Membership
m = Membership.objects.select_related("user", "tenant").order_by("pk").first()
m.user.set_password({PASSWORD!r}); m.user.save()
print("BENCH", m.user.username, m.tenant.slug)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(env: dict[str, str], *args: str) -> str:
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout


def start(env: dict[str, str], port: int, *extra: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "runserver",
                             f"127.0.0.1:{port}", "--noreload", "--skip-checks", *extra],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2).read()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("runserver did not start")


FULL_SETTINGS = """
from portal.settings import *  # noqa: F403
STATICFILES_DIRS = [("vendor/plotly", {folder!r}), *STATICFILES_DIRS]  # noqa: F405
"""
DRAWN_JS = ("() => [...document.querySelectorAll('.js-plotly-plot')]"
            ".flatMap(el => (el._fullData || []).map(t => t.type))")


def drawn(page, url: str) -> set[str]:
    """The trace types of the figures the page drew (after its charts appeared)."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url, wait_until="load")
    page.wait_for_function("() => !document.querySelector('.chart')"  # none (no data yet)
                           " || document.querySelector('.js-plotly-plot .main-svg')")
    page.wait_for_load_state("networkidle")  # the JSON the charts poll has arrived
    assert not errors, f"{url}: {errors}"
    return set(page.evaluate(DRAWN_JS))


def measure(browser, base: str, user: str, slug: str, runs: int,
            block: bool) -> tuple[list[float], int, str, set[str]]:
    context = browser.new_context(base_url=base)
    page = context.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state()
    state = context.storage_state()
    context.close()
    times: list[float] = []
    wire, encoding = 0, ""
    types: set[str] = set()
    for i in range(runs + 1):  # the first warms the server up and is not counted
        context = browser.new_context(base_url=base, storage_state=state)
        if block:  # the page without plotly.js: the floor
            context.route("**/vendor/plotly/**", lambda route: route.abort())
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        sizes: dict[str, int] = {}
        urls: dict[str, tuple[str, str]] = {}

        def received(event, urls=urls):
            headers = {k.lower(): v for k, v in event["response"]["headers"].items()}
            urls[event["requestId"]] = (event["response"]["url"],
                                        headers.get("content-encoding", ""))

        def finished(event, sizes=sizes):
            sizes[event["requestId"]] = int(event["encodedDataLength"])

        cdp.on("Network.responseReceived", received)
        cdp.on("Network.loadingFinished", finished)
        page.goto(f"/t/{slug}/dashboard/", wait_until="load")
        ms = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                           " return n.loadEventStart - n.startTime; }")
        assert block or page.evaluate("() => typeof Plotly") == "object", "no plotly.js"
        for rid, (url, enc) in urls.items():
            if "plotly" in url:
                wire, encoding = sizes.get(rid, 0), enc or "none"
        if i:
            times.append(ms)
        elif not block:
            types = drawn(page, f"/t/{slug}/dashboard/") | drawn(page, "/cluster/")
        context.close()
    return times, wire, encoding, types


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="trainyard-bench-static-") as tmp:
        base_env = {k: v for k, v in os.environ.items()
                    if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL",
                                 "DJANGO_SETTINGS_MODULE", "STATIC_MANIFEST", "STATIC_ROOT"}}
        base_env.update(DEBUG="true", TRAINYARD_VAR_DIR=tmp, PYTHONUNBUFFERED="1")
        t0 = time.monotonic()
        manage(base_env, "demo_setup")
        user, slug = manage(base_env, "shell", "-c", SETUP).split("BENCH")[1].split()
        print(f"demo database ready in {time.monotonic() - t0:.1f} s (user {user}, tenant {slug})")
        import plotly

        full_dir = Path(tmp) / "full-plotly"
        full_dir.mkdir()
        shutil.copyfile(Path(str(plotly.__file__)).parent / "package_data" / "plotly.min.js",
                        full_dir / "plotly-trainyard.min.js")
        (Path(tmp) / "bench_full_plotly_settings.py").write_text(
            FULL_SETTINGS.format(folder=str(full_dir)))
        full = {**base_env, "DJANGO_SETTINGS_MODULE": "bench_full_plotly_settings",
                "PYTHONPATH": os.pathsep.join(filter(None, [tmp, str(ROOT),
                                                            os.environ.get("PYTHONPATH")]))}
        compressed = {"STATIC_MANIFEST": "true", "STATIC_BROTLI_QUALITY": "5"}
        setups = []
        for name, env in [
            ("full plotly.js, uncompressed (finders)", {**full, "STATIC_MANIFEST": "false"}),
            ("full plotly.js, pre-compressed (WhiteNoise)",
             {**full, **compressed, "STATIC_ROOT": str(Path(tmp) / "static-full")}),
            ("partial bundle, uncompressed (finders)", {**base_env, "STATIC_MANIFEST": "false"}),
            ("partial bundle, pre-compressed (WhiteNoise)",
             {**base_env, **compressed, "STATIC_ROOT": str(Path(tmp) / "static-partial")}),
        ]:
            extra: tuple[str, ...] = ()
            if env["STATIC_MANIFEST"] == "true":
                t0 = time.monotonic()
                manage(env, "static_ready")
                print(f"{name}: static_ready (collect + compress) "
                      f"{time.monotonic() - t0:.1f} s")
                extra = ("--nostatic",)
            setups.append((name, env, extra, False))
        setups.append(("floor: the page without plotly.js", setups[-1][1], ("--nostatic",), True))
        results = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
            for name, env, extra, block in setups:
                port = free_port()
                proc = start(env, port, *extra)
                try:
                    results.append((name, *measure(browser, f"http://127.0.0.1:{port}", user,
                                                   slug, args.runs, block)))
                finally:
                    proc.terminate()
                    proc.wait(timeout=20)
            browser.close()
    print(f"\ncold load of /t/{slug}/dashboard/ to the load event, {args.runs} runs each, "
          "empty browser cache:")
    print(f"{'setup':44} {'median ms':>10} {'min':>7} {'max':>7} {'plotly.js on the wire':>24}"
          "  charts drawn (dashboard + cluster page)")
    for name, times, wire, enc, types in results:
        print(f"{name:44} {statistics.median(times):10.0f} {min(times):7.0f} {max(times):7.0f} "
              f"{wire / 1e6:17.2f} MB {enc:>5}  {', '.join(sorted(types))}")
    print("goal: < 500 ms")
    assert len({frozenset(r[-1]) for r in results[:-1]}) == 1, "the setups drew different charts"


if __name__ == "__main__":
    main()
