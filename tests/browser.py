"""Render a self-contained HTML page in headless Chromium and measure its layout.

Drives the ``chromium`` command line only (no Playwright, no Selenium, no DevTools client):

1. A measuring launch loads a temporary copy of the page with a ``<script>`` injected just
   before ``</body>``. On ``load`` the script measures the layout and writes the result, as
   JSON, into a hidden element; ``--dump-dom`` prints the DOM, which is parsed here.
2. If a screenshot is wanted, a second launch captures the original page in a viewport of the
   given width and the measured document height (capped at ``SCREENSHOT_MAX_HEIGHT``), so the
   PNG holds the whole page (``vh`` units see that taller viewport).

Chromium's new headless mode (the only one left in Debian's chromium) lays pages out in a
browser window whose width is clamped to at least 500 px and whose height loses 143 px (to
browser UI that is not drawn), so ``--window-size=390,800`` gives a 500 x 657 viewport to
``--dump-dom``. ``--screenshot`` resizes the contents to ``--window-size`` itself, but only after
the DOM has been dumped. Both launches therefore use ``--kiosk`` with ``--screen-info={WxH}``:
the full-screen window's viewport is then exactly W x H, and ``render`` checks the page saw the
width it asked for.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"  # overridable by env CHROMIUM
INSTALL_HINT = "install Debian's chromium: apt-get install -y chromium"

VIEWPORT_HEIGHT = 800  # viewport height of the measuring launch
SCREENSHOT_MAX_HEIGHT = 10_000

_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--hide-scrollbars",
    "--force-color-profile=srgb",
    # Even with the flags above Chromium phones home (network time, www.google.com); and a digest
    # must not fetch anything. Every host name, IP literals included, fails to resolve at once.
    "--host-resolver-rules=MAP * ~NOTFOUND",
    # Full-screen window on a W x H screen: the viewport is exactly W x H (see module docstring).
    "--kiosk",
)

_RESULT_ID = "__browser_layout_result__"
_RESULT_RE = re.compile(
    rf'<script type="application/json" id="{_RESULT_ID}">(.*?)</script>', re.DOTALL
)

# Measures after load; writes JSON into a hidden element that --dump-dom then prints.
_MEASURE_JS = """
(function () {
  var RESULT_ID = "__RESULT_ID__";
  var SCRIPT = document.currentScript;
  var CLIPS = {hidden: 1, clip: 1, auto: 1, scroll: 1};
  function describe(el) {
    var s = el.tagName.toLowerCase();
    if (el.id) s += "#" + el.id;
    var cls = el.getAttribute("class");
    if (cls) cls.trim().split(/\\s+/).forEach(function (c) { if (c) s += "." + c; });
    return s;
  }
  function measure() {
    var de = document.documentElement, body = document.body;
    var vw = de.clientWidth, limit = vw + 0.5;
    var fits = new Map();
    // Inside an ancestor (other than html/body, whose overflow only moves to the viewport) that
    // clips or scrolls horizontally and itself fits in the viewport?
    function contained(el) {
      for (var a = el.parentElement; a && a !== body && a !== de; a = a.parentElement) {
        if (!fits.has(a)) {
          var ox = getComputedStyle(a).overflowX;
          fits.set(a, CLIPS[ox] === 1 && a.getBoundingClientRect().right <= limit);
        }
        if (fits.get(a)) return true;
      }
      return false;
    }
    var overflowing = [];
    var all = body ? body.getElementsByTagName("*") : [];
    for (var i = 0; i < all.length; i++) {
      var el = all[i];
      if (el === SCRIPT) continue;
      var r = el.getBoundingClientRect();
      if ((r.width > 0 || r.height > 0) && r.right > limit && !contained(el)) {
        overflowing.push(describe(el) + " right=" + Math.ceil(r.right) + "px");
      }
    }
    // Text sticking out of its element (an unbreakable word) leaves the element's box inside.
    if (body) {
      var walker = document.createTreeWalker(body, NodeFilter.SHOW_TEXT);
      var range = document.createRange();
      for (var t = walker.nextNode(); t; t = walker.nextNode()) {
        var p = t.parentElement;
        if (!p || p === SCRIPT || !t.data.trim()) continue;
        if (/^(script|style|template|noscript|title)$/i.test(p.tagName)) continue;
        range.selectNodeContents(t);
        var right = 0, rects = range.getClientRects();
        for (var j = 0; j < rects.length; j++) {
          if (rects[j].width > 0) right = Math.max(right, rects[j].right);
        }
        if (right > limit && !contained(t)) {
          overflowing.push(describe(p) + " (text) right=" + Math.ceil(right) + "px");
        }
      }
    }
    var svgs = 0, svgList = document.getElementsByTagName("svg");
    for (var k = 0; k < svgList.length; k++) {
      var b = svgList[k].getBoundingClientRect();
      if (b.width > 0 && b.height > 0) svgs++;
    }
    return {
      viewport_width: vw,
      viewport_height: de.clientHeight,
      document_width: de.scrollWidth,
      document_height: de.scrollHeight,
      overflowing: overflowing,
      svg_count: svgs
    };
  }
  window.addEventListener("load", function () {
    var result;
    try { result = measure(); } catch (e) { result = {error: String(e && e.stack || e)}; }
    var out = document.createElement("script");
    out.type = "application/json";
    out.id = RESULT_ID;
    out.textContent = JSON.stringify(result).replace(/</g, "\\\\u003c");
    (document.body || document.documentElement).appendChild(out);
  });
})();
""".replace("__RESULT_ID__", _RESULT_ID)


@dataclass(frozen=True)
class Layout:
    width: int  # the viewport width used
    document_width: int  # document.documentElement.scrollWidth
    document_height: int  # document.documentElement.scrollHeight (at least the viewport height)
    # "tag#id.class right=NNNpx" for every element (or "... (text)" for text) extending past the
    # viewport's right edge, unless inside a non-root element with overflow-x
    # hidden/clip/auto/scroll that itself fits.
    overflowing: list[str]
    svg_count: int  # <svg> elements rendered with non-zero size
    remote_resources: list[str]  # URLs starting with http://, https:// or // (see _PageScan)
    scripts: int  # <script> elements in the original page (before injection)


def render(html: Path, width: int, screenshot: Path | None = None, timeout: float = 60) -> Layout:
    """Lay out ``html`` in a ``width``-px-wide viewport; optionally save a full-page PNG."""
    deadline = time.monotonic() + timeout
    html = Path(html).resolve()
    source = html.read_bytes()
    scan = _PageScan.of(source)
    with tempfile.TemporaryDirectory(prefix="browser-") as tmp:
        page = Path(tmp, "page.html")
        page.write_bytes(_instrument(source, base=html.parent.as_uri() + "/"))
        out = _chromium(
            [f"--screen-info={{{width}x{VIEWPORT_HEIGHT}}}", "--dump-dom", page.as_uri()],
            Path(tmp, "profile-measure"),
            deadline,
        )
        found = _RESULT_RE.findall(out.stdout)
        if not found:
            raise RuntimeError(
                f"chromium printed no layout measurement for {html}; the page may not have "
                f"finished loading.\n{_tail(out.stderr)}"
            )
        data = json.loads(found[-1])
        if "error" in data:
            raise RuntimeError(f"layout measurement failed in {html}: {data['error']}")
        if data["viewport_width"] != width:
            raise RuntimeError(
                f"chromium laid {html} out {data['viewport_width']} px wide, not {width} px"
            )
        if screenshot is not None:
            height = max(1, min(int(data["document_height"]), SCREENSHOT_MAX_HEIGHT))
            screenshot = Path(screenshot).resolve()
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.unlink(missing_ok=True)
            shot = _chromium(
                [
                    f"--screen-info={{{width}x{height}}}",
                    f"--window-size={width},{height}",  # makes --screenshot clip to W x H
                    f"--screenshot={screenshot}",
                    html.as_uri(),
                ],
                Path(tmp, "profile-screenshot"),
                deadline,
            )
            if not screenshot.is_file():
                raise RuntimeError(f"chromium wrote no screenshot to {screenshot}\n"
                                   f"{_tail(shot.stderr)}")
    return Layout(
        width=width,
        document_width=int(data["document_width"]),
        document_height=int(data["document_height"]),
        overflowing=list(data["overflowing"]),
        svg_count=int(data["svg_count"]),
        remote_resources=scan.remote,
        scripts=scan.scripts,
    )


def _executable() -> str:
    name = os.environ.get("CHROMIUM") or CHROMIUM
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"chromium not found at {name!r}: {INSTALL_HINT} "
                           "(or set CHROMIUM to the browser's path)")
    return found


def _chromium(args: list[str], profile: Path, deadline: float) -> subprocess.CompletedProcess[str]:
    """One chromium launch with a fresh profile; its whole process group dies with it."""
    cmd = [_executable(), *_FLAGS, f"--user-data-dir={profile}", *args]
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise RuntimeError("chromium timed out before it could start")
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        raise RuntimeError(f"cannot start chromium ({exc}): {INSTALL_HINT}") from exc
    try:
        stdout, stderr = proc.communicate(timeout=remaining)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        stdout, stderr = proc.communicate()
        raise RuntimeError(
            f"chromium timed out (render's timeout ran out): {' '.join(cmd)}\n{_tail(stderr)}"
        ) from None
    finally:
        _kill_group(proc.pid)  # renderers or zygotes left behind, if any
    if proc.returncode != 0:
        raise RuntimeError(
            f"chromium failed with exit code {proc.returncode}: {' '.join(cmd)}\n{_tail(stderr)}"
        )
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_NOISE = re.compile(r"dbus|unexpected operator")  # D-Bus absent; Debian's launcher's shm check


def _tail(stderr: str, lines: int = 25) -> str:
    kept = [line for line in stderr.splitlines() if line.strip() and not _NOISE.search(line)]
    return "chromium stderr (tail):\n" + "\n".join(kept[-lines:] or ["<empty>"])


_CSP_META = re.compile(
    rb"""http-equiv\s*=\s*(["']?)content-security-policy\1""", re.IGNORECASE
)
_BODY_END = re.compile(rb"</body\s*>", re.IGNORECASE)
_HEAD_START = re.compile(rb"<head(?:\s[^>]*)?>", re.IGNORECASE)
_HAS_BASE = re.compile(rb"<base[\s>]", re.IGNORECASE)


def _instrument(source: bytes, base: str) -> bytes:
    """The page plus the measuring script, relative URLs still resolved next to the original."""
    # A Content-Security-Policy meta (fitting for a page without JavaScript) would block the
    # injected script; it has no bearing on layout, so the copy's is disarmed.
    page = _CSP_META.sub(b'data-disabled-http-equiv="content-security-policy"', source)
    if not _HAS_BASE.search(page) and (head := _HEAD_START.search(page)):
        tag = b'<base href="' + base.replace('"', "%22").encode() + b'">'
        page = page[: head.end()] + tag + page[head.end():]
    script = b"<script>" + _MEASURE_JS.encode() + b"</script>"
    ends = list(_BODY_END.finditer(page))
    if not ends:
        return page + script
    at = ends[-1].start()
    return page[:at] + script + page[at:]


_REMOTE = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
_CSS_URL = re.compile(
    r"""url\(\s*(["']?)([^"')]+)\1\s*\)|@import\s+(["'])([^"']+)\3""", re.IGNORECASE
)
_URL_ATTRS = {"src", "href", "poster", "data", "xlink:href"}
_RESOURCE_TAGS = {
    "img", "image", "link", "script", "iframe", "source", "video", "audio", "track", "embed",
    "object", "input", "use", "frame",
}


class _PageScan(HTMLParser):
    """What the original page asks for: <script> elements, and remote resources.

    Remote: src/href (also srcset, poster, object data, SVG xlink:href) of img, link, script,
    iframe, source, video, audio, track, embed, object, input, SVG image/use, plus url(...) and
    @import in <style> and style attributes, that start with http://, https:// or //.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts = 0
        self.remote: list[str] = []
        self._in_style = False

    @classmethod
    def of(cls, source: bytes) -> _PageScan:
        scan = cls()
        scan.feed(source.decode("utf-8", errors="replace"))
        scan.close()
        return scan

    def _add(self, url: str | None) -> None:
        if url and _REMOTE.match(url) and url.strip() not in self.remote:
            self.remote.append(url.strip())

    def _css(self, text: str) -> None:
        for m in _CSS_URL.finditer(text):
            self._add(m.group(2) or m.group(4))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts += 1
        self._in_style = tag == "style"
        values = dict(attrs)
        if tag in _RESOURCE_TAGS:
            for name in _URL_ATTRS:
                self._add(values.get(name))
            for candidate in (values.get("srcset") or "").split(","):
                self._add(candidate.strip().split(" ")[0])
        if values.get("style"):
            self._css(values["style"] or "")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self._in_style = False

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self._css(data)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    width, height = struct.unpack(">II", head[16:24])
    return width, height


if __name__ == "__main__":  # python -m tests.browser PAGE WIDTH [PNG]
    import sys

    args = sys.argv[1:]
    start = time.monotonic()
    layout = render(Path(args[0]), int(args[1]), Path(args[2]) if len(args) > 2 else None)
    print(json.dumps(layout.__dict__, indent=2))
    print(f"{time.monotonic() - start:.2f}s", file=sys.stderr)
