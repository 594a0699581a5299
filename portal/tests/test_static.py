"""Every asset is served locally: the product works with no internet."""

import re
from pathlib import Path

from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse

PLOTLY = "vendor/plotly/plotly-trainyard.min.js"


def test_plotly_js_is_served_locally(client: Client):
    assert finders.find(PLOTLY)
    response = client.get(f"/static/{PLOTLY}")
    assert response.status_code == 200
    head = b"".join(response.streaming_content)[:2000] if response.streaming else \
        response.content[:2000]
    assert b"plotly.js" in head


def _header(path: Path) -> str:
    with path.open(encoding="utf-8") as f:
        return f.read(400)


def test_the_plotly_bundle_is_the_pinned_packages_version_with_the_charts_trace_types():
    """The partial bundle (scripts/build-plotly-bundle.sh) is the plotly.js version the
    pinned plotly package ships, and has every trace type portal/charts.py draws."""
    import plotly

    bundle = _header(Path(str(finders.find(PLOTLY))))
    full = _header(Path(str(plotly.__file__)).parent / "package_data" / "plotly.min.js")
    version = re.search(r"plotly\.js (v\S+)", full)
    assert version and f"plotly.js {version.group(1)}," in bundle
    traces = re.search(r"\(traces: ([a-z, ]+)\)", bundle)
    assert traces
    axis_types = {"linear", "log", "date", "category", "multicategory"}
    drawn = set(re.findall(r'"type": "([a-z0-9]+)"',
                           (Path(__file__).parents[1] / "charts.py").read_text())) - axis_types
    assert drawn and drawn <= set(traces.group(1).split(", ")), (drawn, traces.group(1))


def test_pages_reference_no_external_assets(login, bob, tenant_a):
    client = login(bob)
    for url in (reverse("home") + "?all=1", reverse("tenants:detail", kwargs={"slug": "acme"}),
                reverse("account"), reverse("api-docs")):
        html = client.get(url).content.decode()
        external = re.findall(r'(?:src|href)="(https?://[^"]+)"', html)
        assert external == [], (url, external)
        for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', html):
            assert client.get(asset).status_code == 200, asset
