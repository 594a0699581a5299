#!/usr/bin/env bash
# Rebuilds static/vendor/plotly/plotly-trainyard.min.js, the partial plotly.js bundle the
# chart pages load: plotly.js's core (scatter included) plus the indicator, histogram and
# heatmap traces, the only trace types portal/charts.py draws (issue 15, item 8: 1.2 MB
# instead of the full 4.8 MB bundle, which Chromium took about 1.5 s to parse and run).
#
# Reproducible: the exact plotly.js and esbuild versions and every dependency are pinned
# in scripts/plotly-bundle/package-lock.json and installed with `npm ci --ignore-scripts`
# in a temporary folder outside the repository (no node_modules here); the same inputs
# give the same bytes. The plotly.js version must be the one the pinned plotly Python
# package ships (plotly/package_data/plotly.min.js), so that figures built with plotly.py
# conventions draw the same way; the script stops if they differ.
#
# To change the traces: edit scripts/plotly-bundle/entry.js. To follow a new plotly
# Python release: set "plotly.js" in scripts/plotly-bundle/package.json to the version
# its plotly.min.js names, run `npm install --package-lock-only` in that folder, then this
# script. Needs node and npm (the npm registry) and the project's Python (PYTHON, default
# .venv/bin/python) to read the pinned version.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/scripts/plotly-bundle"
OUT_DIR="$ROOT/static/vendor/plotly"
OUT="$OUT_DIR/plotly-trainyard.min.js"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
TRACES="scatter, indicator, histogram, heatmap"

want="$(node -p "require('$SRC/package.json').dependencies['plotly.js']")"
esbuild_version="$(node -p "require('$SRC/package.json').dependencies.esbuild")"
pinned="$("$PYTHON" - <<'PY'
import pathlib, re, plotly
head = (pathlib.Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()[:300]
print(re.search(r"plotly\.js v(\S+)", head).group(1))
PY
)"
if [ "$want" != "$pinned" ]; then
    echo "scripts/plotly-bundle/package.json has plotly.js $want but the pinned plotly" \
         "Python package ships plotly.js $pinned: update package.json and its lock file" >&2
    exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/trainyard-plotly-bundle.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$SRC/package.json" "$SRC/package-lock.json" "$SRC/entry.js" "$work/"
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)

# As plotly.js's own build (esbuild-config.js in the package): an IIFE that sets the
# browser global Plotly, `global` is `window`, AMD off, ES2016. CSS imports (only
# maplibre-gl's, for map traces, which are not in this bundle) become empty modules.
(cd "$work" && ./node_modules/.bin/esbuild entry.js --bundle --minify --format=iife \
    --global-name=Plotly --define:global=window --define:define.amd=false \
    --loader:.css=empty --target=es2016 --legal-comments=eof --log-level=warning \
    --outfile=bundle.js)

mkdir -p "$OUT_DIR"
{
    printf '/*! plotly.js v%s, partial bundle for Trainyard (traces: %s).\n' "$want" "$TRACES"
    printf ' * Copyright 2012-2026, Plotly, Inc. Licensed under the MIT license (LICENSE beside\n'
    printf ' * this file); bundled dependencies keep their licence comments at the end.\n'
    printf ' * Built by scripts/build-plotly-bundle.sh (esbuild %s); do not edit. */\n' \
        "$esbuild_version"
    cat "$work/bundle.js"
} > "$OUT"
cp "$work/node_modules/plotly.js/LICENSE" "$OUT_DIR/LICENSE"

raw=$(wc -c < "$OUT")
gz=$(gzip -9 -c "$OUT" | wc -c)
br=$("$PYTHON" -c "import brotli,sys; print(len(brotli.compress(open(sys.argv[1],'rb').read(), quality=11)))" "$OUT")
echo "$OUT: $raw bytes, gzip -9 $gz, Brotli 11 $br (plotly.js v$want: $TRACES)"
