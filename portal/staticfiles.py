"""Static files: the storage that serves every static file pre-compressed (gzip and
Brotli) under a hashed, cache-forever name.

plotly.js is ``static/vendor/plotly/plotly-trainyard.min.js``, a partial bundle of the
plotly.js version the pinned plotly package ships, with only the trace types
``portal/charts.py`` draws (1.2 MB instead of 4.8 MB; rebuilt by
``scripts/build-plotly-bundle.sh``). ``CompressedStaticFilesStorage`` is WhiteNoise's
``CompressedManifestStaticFilesStorage`` (``collectstatic`` writes ``name.<hash>.js`` with
``.gz`` and ``.br`` beside it; WhiteNoise serves the smallest the client accepts, with a
one-year ``immutable`` cache header) with the Brotli quality taken from
``STATIC_BROTLI_QUALITY`` (default 11, the smallest files, for the image; ``make run`` uses
5, which compresses plotly.js in a fraction of a second instead of many seconds, for
about 12% more bytes). With DEBUG on (``make run``) pages link the plain names (Django's
rule), which are compressed too, but only hashed names are cached for a year.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from whitenoise.compress import Compressor
from whitenoise.storage import CompressedManifestStaticFilesStorage


class _Compressor(Compressor):
    def compress_brotli(self, data: bytes) -> bytes:  # type: ignore[override]
        import brotli

        return brotli.compress(data, quality=getattr(settings, "STATIC_BROTLI_QUALITY", 11))


class CompressedStaticFilesStorage(CompressedManifestStaticFilesStorage):
    def create_compressor(self, **kwargs: Any) -> Compressor:
        return _Compressor(**kwargs)
