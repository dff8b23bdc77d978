"""The digest in a real Chromium (Playwright driving Debian's chromium: conftest.py), and the
layout measurement it is judged by (tests/page_layout.py) proven on small pages written here.

Screenshots of the digest at 1280 and 390 px stay in tests/artifacts/.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page

from feedback_insights.config import embedded_default
from feedback_insights.digest import Week, build, render
from feedback_insights.drafts import draft_clusters
from feedback_insights.warehouse import Warehouse

from .conftest import REPO, sample_copy
from .page_layout import measure, png_size

ARTIFACTS = REPO / "tests" / "artifacts"
WEEK = Week.parse("2026-W47")


def write_page(path: Path, body: str, head: str = "") -> Path:
    path.write_text(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>test page</title>{head}</head>\n<body>\n{body}\n</body></html>\n",
        encoding="utf-8",
    )
    return path


CHART = """<svg viewBox="0 0 300 150" role="img" aria-label="{label}">
  <rect x="10" y="{y}" width="40" height="{h}" fill="#4a7"/>
  <rect x="60" y="40" width="40" height="110" fill="#47a"/>
  <circle cx="1000" cy="20" r="30" fill="#a47"/>
</svg>"""

# Like the digest: inline CSS and SVG, no JavaScript, a CSP that forbids any script, a wide table
# that scrolls inside its own box, and a chart whose drawing sticks out of its viewBox (clipped).
FITTING = {
    "head": """
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<style>
  body { margin: 0; font: 16px/1.5 sans-serif; }
  main { max-width: 960px; margin: 0 auto; padding: 16px; }
  .charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(240px, 1fr)); gap: 16px; }
  svg { width: 100%; height: auto; display: block; }
  .scroll { overflow-x: auto; }
  .scroll table { width: 900px; }
  .spacer { height: 1000px; }
</style>""",
    "body": f"""<main>
  <h1 id="top" class="title">Weekly digest</h1>
  <div class="charts">
    <figure>{CHART.format(label="first", y=50, h=100)}</figure>
    <figure>{CHART.format(label="second", y=90, h=60)}</figure>
  </div>
  <div class="scroll"><table><tr><td>wide table</td><td>scrolls in its own box</td></tr></table>
  </div>
  <p>Ordinary prose that wraps at any width.</p>
  <div class="spacer"></div>
</main>""",
}


@pytest.mark.parametrize("width", [390, 1280])
def test_fitting_page_has_no_overflow_two_charts_and_a_full_page_screenshot(page: Page, tmp_path: Path, width: int) -> None:
    html = write_page(tmp_path / "digest.html", FITTING["body"], FITTING["head"])
    shot = tmp_path / f"digest-{width}.png"

    layout = measure(page, html, width, screenshot=shot)

    assert layout.width == width
    assert layout.overflowing == []
    assert layout.document_width == width
    assert layout.svg_count == 2
    assert layout.requests == []
    assert layout.scripts == 0
    assert layout.document_height > 1000  # taller than the 800-px viewport
    assert png_size(shot) == (width, layout.document_height)


def test_wide_table_overflows_a_phone_but_fits_a_wider_viewport(page: Page, tmp_path: Path) -> None:
    html = write_page(tmp_path / "wide.html",
                      '<table id="big" class="data" style="width:2000px"><tr><td>a</td><td>b</td></tr></table>')

    narrow = measure(page, html, 390)
    assert any(entry.startswith("table#big.data right=") for entry in narrow.overflowing), narrow
    assert narrow.document_width > 390

    wide = measure(page, html, 2400)
    assert wide.overflowing == []
    assert wide.document_width == 2400


def test_long_unbreakable_word_fits_only_where_it_may_wrap(page: Page, tmp_path: Path) -> None:
    word = "supercalifragilistic" * 15
    wrapping = write_page(tmp_path / "wrap.html", f'<div style="overflow-wrap:anywhere"><p>{word}</p></div>')
    layout = measure(page, wrapping, 390)
    assert layout.overflowing == []
    assert layout.document_width == 390

    # The control: without overflow-wrap the word sticks out of its paragraph, whose own box
    # still fits, so only the text check catches it.
    plain = write_page(tmp_path / "plain.html", f'<div><p id="word">{word}</p></div>')
    layout = measure(page, plain, 390)
    assert any(entry.startswith("p#word (text) right=") for entry in layout.overflowing)
    assert layout.document_width > 390


def test_requests_and_scripts_are_reported(page: Page, tmp_path: Path) -> None:
    html = write_page(
        tmp_path / "remote.html",
        '<img src="https://example.com/x.png" alt="" width="10" height="10">\n'
        "<script>document.body.dataset.ran = 'yes';</script>",
        head='<link rel="stylesheet" href="http://cdn.example.com/site.css">',
    )

    layout = measure(page, html, 390)

    assert sorted(layout.requests) == ["http://cdn.example.com/site.css", "https://example.com/x.png"]
    assert layout.scripts == 1
    assert (layout.images, layout.images_drawn) == (1, 0)  # no host resolves: nothing came back


@pytest.fixture(scope="module")
def digest_page(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The drafted sample's digest of 2026-W47 as its HTML file, and the charts it draws."""
    path = sample_copy(clustered_sample, tmp_path_factory.mktemp("digest-browser"))
    with Warehouse(path) as wh:
        draft_clusters(embedded_default(path), wh)
        digest = build(wh, WEEK, desk_url="https://desk.example")
    digest.top_problems[0]["quote"] = "x" * 400 + ' <img src="https://evil.example/p.png"> <script>alert(1)</script>'
    ARTIFACTS.mkdir(exist_ok=True)
    html = ARTIFACTS / f"digest-{WEEK}.html"
    html.write_text(render(digest, "html"), encoding="utf-8")
    return html, len(digest.cards) + 2


@pytest.mark.parametrize("width", [1280, 390])
def test_the_digest_fits_a_desktop_and_a_phone(page: Page, digest_page: tuple[Path, int], width: int) -> None:
    """Rendered by Debian's Chromium; an unbreakable 400-character quote wraps too."""
    html, charts = digest_page
    shot = ARTIFACTS / f"digest-{WEEK}-{width}px.png"
    layout = measure(page, html, width, screenshot=shot)
    assert layout.overflowing[:5] == [] and layout.document_width == width
    assert layout.svg_count == charts
    assert layout.requests == [] and layout.scripts == 0 and layout.images == 0
    assert png_size(shot) == (width, layout.document_height)
    assert page.get_by_text("accounts per week, oldest first:").count() == charts - 2  # the sparklines' figures, as text
