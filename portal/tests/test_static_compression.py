"""Static files are served pre-compressed under hashed names (issue 15, item 8).

Collects plotly.js alone (the one big file, the partial bundle in static/vendor/plotly/)
with the production storage into a temporary STATIC_ROOT, then asks the WSGI app for it as
browsers do: Brotli or gzip when the client accepts it, the same bytes once decoded, and a
cache-forever header on the hashed name.
"""

import gzip
from collections.abc import Iterator
from pathlib import Path

import brotli
import pytest
from django.conf import settings
from django.core.management import call_command
from django.templatetags.static import static
from django.test import Client, override_settings

PLOTLY = "vendor/plotly/plotly-trainyard.min.js"
ORIGINAL = Path(settings.BASE_DIR) / "static" / PLOTLY


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> Iterator[Path]:
    """Collected once for the module (compressing plotly.js takes a fraction of a second)."""
    root = tmp_path_factory.mktemp("static")
    with override_settings(
        STATIC_ROOT=root,
        STORAGES={**settings.STORAGES, "staticfiles": {
            "BACKEND": "portal.staticfiles.CompressedStaticFilesStorage"}},
        STATICFILES_DIRS=[("vendor/plotly", ORIGINAL.parent)],  # plotly.js only: fast
        STATICFILES_FINDERS=["django.contrib.staticfiles.finders.FileSystemFinder"],
        STATIC_BROTLI_QUALITY=5,  # as `make run`; WhiteNoise serves the smaller file
        WHITENOISE_USE_FINDERS=False,  # as in production: STATIC_ROOT only
        WHITENOISE_AUTOREFRESH=False,
    ):
        call_command("static_ready")
        yield root


def _get(url: str, accept: str | None):
    headers = {"HTTP_ACCEPT_ENCODING": accept} if accept is not None else {}
    response = Client().get(url, **headers)   # a new client: WhiteNoise reads STATIC_ROOT
    assert response.status_code == 200
    return response, b"".join(response.streaming_content)


@pytest.mark.parametrize(("accept", "encoding", "decode"), [
    ("gzip, deflate, br, zstd", "br", brotli.decompress),
    ("gzip, deflate", "gzip", gzip.decompress),
])
def test_plotly_is_served_compressed_to_a_client_that_accepts_it(collected, accept, encoding,
                                                                  decode):
    original = ORIGINAL.read_bytes()
    url = static(PLOTLY)
    assert url != f"/static/{PLOTLY}" and url.endswith(".js")  # the hashed name
    response, body = _get(url, accept)
    assert response["Content-Encoding"] == encoding
    assert "Accept-Encoding" in response["Vary"]
    assert len(body) < len(original) / 2.5  # minified JS: gzip about 35%, Brotli 30%
    assert decode(body) == original
    assert "immutable" in response["Cache-Control"] and "max-age=315360000" in \
        response["Cache-Control"]


def test_a_client_that_accepts_no_encoding_gets_the_plain_file(collected):
    original = ORIGINAL.read_bytes()
    response, body = _get(static(PLOTLY), None)
    assert not response.has_header("Content-Encoding")
    assert body == original


def test_static_ready_collects_only_when_a_static_file_changed(collected):
    compressed = next((collected / "vendor" / "plotly").glob("plotly-trainyard.min.*.js.gz"))
    compressed.unlink()
    try:
        call_command("static_ready")                # nothing changed: nothing collected
        assert not compressed.exists()
    finally:
        (collected / ".trainyard-static-fingerprint").write_text("stale")
        call_command("static_ready")
    assert compressed.exists()
