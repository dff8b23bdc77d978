"""A page's layout measured in a real Chromium (Playwright's ``page``, Debian's chromium: see
conftest.py): what sticks out past the viewport's right edge, how wide the document is, how many
charts are drawn, what the page asked the network for, and how many scripts it holds.

:func:`load` opens a file at a given width and records every request that is not for the file
itself (``data:`` URIs aside); :func:`measure` then runs the measurement in the page.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Page

VIEWPORT_HEIGHT = 800

# An element (or a text run: an unbreakable word leaves its element's box inside) past the
# viewport's right edge counts unless an ancestor other than html/body clips or scrolls it
# horizontally and itself fits.
_MEASURE = """() => {
  const de = document.documentElement, body = document.body;
  const limit = de.clientWidth + 0.5, clips = new Set(["hidden", "clip", "auto", "scroll"]), fits = new Map();
  const describe = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
    + [...el.classList].map(c => "." + c).join("");
  const contained = node => {
    for (let a = node.parentElement; a && a !== body && a !== de; a = a.parentElement) {
      if (!fits.has(a)) fits.set(a, clips.has(getComputedStyle(a).overflowX) && a.getBoundingClientRect().right <= limit);
      if (fits.get(a)) return true;
    }
    return false;
  };
  const overflowing = [];
  for (const el of body.getElementsByTagName("*")) {
    const r = el.getBoundingClientRect();
    if ((r.width > 0 || r.height > 0) && r.right > limit && !contained(el)) overflowing.push(describe(el) + " right=" + Math.ceil(r.right) + "px");
  }
  const walker = document.createTreeWalker(body, NodeFilter.SHOW_TEXT), range = document.createRange();
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    const p = t.parentElement;
    if (!p || !t.data.trim() || /^(script|style|template|noscript|title)$/i.test(p.tagName)) continue;
    range.selectNodeContents(t);
    const right = Math.max(0, ...[...range.getClientRects()].filter(r => r.width > 0).map(r => r.right));
    if (right > limit && !contained(t)) overflowing.push(describe(p) + " (text) right=" + Math.ceil(right) + "px");
  }
  const drawn = [...document.querySelectorAll("svg, img")].filter(e => {
    const b = e.getBoundingClientRect();
    return b.width > 0 && b.height > 0 && (e.tagName !== "IMG" || e.naturalWidth > 0);
  });
  return {
    viewport_width: de.clientWidth, document_width: de.scrollWidth, document_height: de.scrollHeight,
    overflowing, svg_count: drawn.filter(e => e.tagName.toLowerCase() === "svg").length,
    images_drawn: drawn.filter(e => e.tagName === "IMG").length, images: document.images.length,
    scripts: document.scripts.length,
  };
}"""


@dataclass(frozen=True)
class Layout:
    width: int  # the viewport width used
    document_width: int  # document.documentElement.scrollWidth
    document_height: int  # document.documentElement.scrollHeight
    # "tag#id.class right=NNNpx" (or "... (text)") for what extends past the viewport's right edge.
    overflowing: list[str]
    svg_count: int  # <svg> elements drawn with a non-zero size
    images: int  # <img> elements in the page
    images_drawn: int  # … of which loaded and drawn with a non-zero size
    requests: list[str]  # every URL the page asked for besides itself (data: URIs aside)
    scripts: int  # <script> elements in the page


def load(page: Page, html: Path, width: int) -> list[str]:
    """Open ``html`` in a ``width``-px-wide viewport; returns the (live) list of the URLs it asks for."""
    requests: list[str] = []
    own = html.resolve().as_uri()
    page.on("request", lambda request: requests.append(request.url)
            if request.url != own and not request.url.startswith("data:") else None)
    page.set_viewport_size({"width": width, "height": VIEWPORT_HEIGHT})
    page.goto(own, wait_until="load")
    return requests


def measure(page: Page, html: Path, width: int, screenshot: Path | None = None) -> Layout:
    """Lay ``html`` out ``width`` px wide and measure it; optionally save a full-page PNG."""
    requests = load(page, html, width)
    data = page.evaluate(_MEASURE)
    if data["viewport_width"] != width:
        raise AssertionError(f"chromium laid {html} out {data['viewport_width']} px wide, not {width} px")
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=True)
    return Layout(width=width, document_width=data["document_width"], document_height=data["document_height"],
                  overflowing=data["overflowing"], svg_count=data["svg_count"], images=data["images"],
                  images_drawn=data["images_drawn"], requests=list(requests), scripts=data["scripts"])


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    width, height = struct.unpack(">II", head[16:24])
    return width, height
