"""Every asset is served locally: the product works with no internet."""

import re

from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse


def test_plotly_js_is_served_locally(client: Client):
    assert finders.find("vendor/plotly/plotly.min.js")
    response = client.get("/static/vendor/plotly/plotly.min.js")
    assert response.status_code == 200
    head = b"".join(response.streaming_content)[:2000] if response.streaming else \
        response.content[:2000]
    assert b"plotly.js" in head


def test_pages_reference_no_external_assets(login, bob, tenant_a):
    client = login(bob)
    for url in (reverse("home"), reverse("tenants:detail", kwargs={"slug": "acme"}),
                reverse("account"), reverse("api-docs")):
        html = client.get(url).content.decode()
        external = re.findall(r'(?:src|href)="(https?://[^"]+)"', html)
        assert external == [], (url, external)
        for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', html):
            assert client.get(asset).status_code == 200, asset
