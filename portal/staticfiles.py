"""Static files: plotly.js from the pinned plotly package, and the storage that serves
every static file pre-compressed (gzip and Brotli) under a hashed, cache-forever name.

``PlotlyFinder`` exposes only ``vendor/plotly/plotly.min.js`` of the plotly package (not
its 60 MB of datasets and widget bundles). ``CompressedStaticFilesStorage`` is WhiteNoise's
``CompressedManifestStaticFilesStorage`` (``collectstatic`` writes ``name.<hash>.js`` with
``.gz`` and ``.br`` beside it; WhiteNoise serves the smallest the client accepts, with a
one-year ``immutable`` cache header) with the Brotli quality taken from
``STATIC_BROTLI_QUALITY`` (default 11, the smallest files, for the image; ``make run`` uses
5, which compresses plotly.js in about 0.5 s instead of 20 s for 16% more bytes). With DEBUG on
(``make run``) pages link the plain names (Django's rule), which are compressed too, but
only hashed names are cached for a year.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage
from whitenoise.compress import Compressor
from whitenoise.storage import CompressedManifestStaticFilesStorage

PLOTLY_NAME = "plotly.min.js"
PLOTLY_PREFIX = "vendor/plotly"


def plotly_js_dir() -> Path:
    import plotly

    return Path(str(plotly.__file__)).parent / "package_data"


class PlotlyFinder(BaseFinder):
    """``vendor/plotly/plotly.min.js``, from the installed plotly package."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(plotly_js_dir()))
        self.storage.prefix = PLOTLY_PREFIX  # type: ignore[attr-defined]

    def check(self, **kwargs: Any) -> list:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        match = str(plotly_js_dir() / PLOTLY_NAME) if path == f"{PLOTLY_PREFIX}/{PLOTLY_NAME}" \
            else None
        if find_all or kwargs.get("all"):
            return [match] if match else []
        return match or []

    def list(self, ignore_patterns: Any) -> Any:
        yield PLOTLY_NAME, self.storage


class _Compressor(Compressor):
    def compress_brotli(self, data: bytes) -> bytes:  # type: ignore[override]
        import brotli

        return brotli.compress(data, quality=getattr(settings, "STATIC_BROTLI_QUALITY", 11))


class CompressedStaticFilesStorage(CompressedManifestStaticFilesStorage):
    def create_compressor(self, **kwargs: Any) -> Compressor:
        return _Compressor(**kwargs)
