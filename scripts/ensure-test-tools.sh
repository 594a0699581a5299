#!/usr/bin/env bash
# Test tools from Debian that some tests use when present (they skip with a reason
# otherwise): pdftoppm, pdftotext and pdffonts (poppler-utils, with poppler-data) render
# invoice PDFs to images and read their text; chromium runs the
# browser tests; fonts-wqy-microhei gives chromium Chinese glyphs. Installs what is
# missing when apt-get is available and we are root; never fails the build.
set -u
missing=()
command -v pdftoppm >/dev/null 2>&1 || missing+=(poppler-utils)
# poppler's CMaps: a Chinese invoice's CID font (STSong-Light, not embedded) is read and
# drawn through them (billing/tests/test_invoice_document.py); poppler-utils only
# recommends it
[ -d /usr/share/poppler/cMap ] || missing+=(poppler-data)
# Debian's chromium for the Playwright browser tests (tests/e2e); never a downloaded browser
[ -x /usr/bin/chromium ] || missing+=(chromium)
# A Chinese font, so the Chinese pages chromium renders (screenshots for the guides) show
# glyphs instead of empty boxes, and pdftoppm has a face for a Chinese invoice's STSong-Light
[ -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ] || missing+=(fonts-wqy-microhei)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-test-tools: missing ${missing[*]} (not root or no apt-get); their tests skip"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
(apt-get update -qq && apt-get install -y -qq "${missing[@]}") >/dev/null 2>&1 \
    || echo "ensure-test-tools: could not install ${missing[*]}; their tests skip"
exit 0
