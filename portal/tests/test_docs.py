"""The README and the guides in docs/: every image and relative link they reference
exists, every screenshot in docs/img is one the browser tests take (tests/e2e, saved by
``make docs-screenshots``), and the architecture picture is well-formed SVG."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
IMG = DOCS / "img"
E2E = ROOT / "tests" / "e2e"
GUIDES = ["researcher", "tenant-admin", "platform-admin", "finance"]
# [text](target) and ![alt](target), optionally with a "title"; <img src="...">
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMG_TAG = re.compile(r"<img\b[^>]*\bsrc=[\"']([^\"']+)[\"']", re.IGNORECASE)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def targets(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return LINK.findall(text) + IMG_TAG.findall(text)


def _local(target: str) -> str | None:
    """The file part of a relative link; None for URLs, mail and in-page anchors."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or target.startswith("#"):
        return None
    return unquote(parts.path) or None


def test_the_guides_exist_and_the_readme_links_them():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in GUIDES:
        assert (DOCS / "guides" / f"{name}.md").is_file(), name
        assert f"docs/guides/{name}.md" in readme, f"README does not link the {name} guide"
    assert "docs/architecture.svg" in readme


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_image_exists(path):
    missing = []
    for target in targets(path):
        local = _local(target)
        if local is None:
            continue
        resolved = (path.parent / local).resolve()
        if not resolved.is_relative_to(ROOT):
            continue  # outside the repository: not ours to check
        if not resolved.exists():
            missing.append(target)
    assert missing == [], f"{path.relative_to(ROOT)} links to missing files: {missing}"


def test_every_guide_shows_screenshots():
    for name in GUIDES:
        images = [t for t in targets(DOCS / "guides" / f"{name}.md") if t.endswith(".png")]
        assert images, f"the {name} guide has no screenshot"


def test_every_screenshot_is_taken_by_a_browser_test():
    """docs/img/<name>.png comes from ``shot(..., "<name>", doc=True)`` in tests/e2e;
    ``<name>-zh.png`` is the same shot in the Chinese run (``zh_doc=True``)."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in E2E.rglob("*.py"))
    orphans = []
    for png in sorted(IMG.glob("*.png")):
        name = png.stem.removesuffix("-zh")
        if not re.search(rf"""["']{re.escape(name)}["']""", source):
            orphans.append(png.name)
    assert orphans == [], f"screenshots no browser test takes (make docs-screenshots): {orphans}"


def test_every_screenshot_is_used_and_small():
    used = {Path(_local(t) or "").name for p in markdown_files() for t in targets(p)}
    pngs = sorted(IMG.glob("*.png"))
    assert pngs, "no screenshots: run make docs-screenshots"
    assert [p.name for p in pngs if p.name not in used] == []
    assert sum(p.stat().st_size for p in pngs) < 3_000_000
    for png in pngs:
        width, height = _png_size(png)
        assert width <= 1600 and height <= 1000, (png.name, width, height)


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path.name
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_the_architecture_picture_is_valid_svg():
    root = ET.parse(DOCS / "architecture.svg").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    text = " ".join("".join(el.itertext()) for el in root.iter())
    for piece in ("Django", "Postgres", "Redis", "Celery worker", "Celery beat", "k8s_sync",
                  "k8s_watch", "Kubernetes API", "kubesim", "PyTorchJob", "dcgm-exporter",
                  "billing"):
        assert piece in text, piece
