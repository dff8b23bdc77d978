"""The headless-Chromium harness (tests/browser.py) proven on small pages written here.

No skips: without Chromium every rendering test fails with render()'s RuntimeError, which says
how to install it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .browser import png_size, render


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
def test_fitting_page_has_no_overflow_two_charts_and_a_full_page_screenshot(
    tmp_path: Path, width: int
) -> None:
    page = write_page(tmp_path / "digest.html", FITTING["body"], FITTING["head"])
    shot = tmp_path / f"digest-{width}.png"

    layout = render(page, width, screenshot=shot)

    assert layout.width == width
    assert layout.overflowing == []
    assert layout.document_width == width
    assert layout.svg_count == 2
    assert layout.remote_resources == []
    assert layout.scripts == 0
    assert layout.document_height > 1000  # taller than the 800-px measuring viewport
    assert png_size(shot) == (width, layout.document_height)


def test_wide_table_overflows_a_phone_but_fits_a_wider_viewport(tmp_path: Path) -> None:
    page = write_page(
        tmp_path / "wide.html",
        '<table id="big" class="data" style="width:2000px"><tr><td>a</td><td>b</td></tr></table>',
    )

    narrow = render(page, 390)
    assert narrow.overflowing, narrow
    assert any(entry.startswith("table#big.data right=") for entry in narrow.overflowing)
    assert narrow.document_width > 390

    wide = render(page, 2400)
    assert wide.overflowing == []
    assert wide.document_width == 2400


def test_long_unbreakable_word_fits_only_where_it_may_wrap(tmp_path: Path) -> None:
    word = "supercalifragilistic" * 15
    wrapping = write_page(
        tmp_path / "wrap.html", f'<div style="overflow-wrap:anywhere"><p>{word}</p></div>'
    )
    layout = render(wrapping, 390)
    assert layout.overflowing == []
    assert layout.document_width == 390

    # The control: without overflow-wrap the word sticks out of its paragraph, whose own box
    # still fits, so only the text check catches it.
    plain = write_page(tmp_path / "plain.html", f'<div><p id="word">{word}</p></div>')
    layout = render(plain, 390)
    assert any(entry.startswith("p#word (text) right=") for entry in layout.overflowing)
    assert layout.document_width > 390


def test_remote_resources_and_scripts_are_reported(tmp_path: Path) -> None:
    page = write_page(
        tmp_path / "remote.html",
        '<img src="https://example.com/x.png" alt="" width="10" height="10">\n'
        '<img src="inline-relative.png" alt="">\n'
        "<script>document.body.dataset.ran = 'yes';</script>",
        head='<link rel="stylesheet" href="//cdn.example.com/site.css">',
    )

    layout = render(page, 390)

    assert layout.remote_resources == [
        "//cdn.example.com/site.css",
        "https://example.com/x.png",
    ]
    assert layout.scripts == 1  # the page's own, not the measuring script injected by render()


def test_missing_chromium_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHROMIUM", str(tmp_path / "no-such-chromium"))
    page = write_page(tmp_path / "page.html", "<p>hello</p>")
    with pytest.raises(RuntimeError, match="apt-get install -y chromium"):
        render(page, 390)


def test_failing_chromium_reports_its_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\necho 'cannot open display: boom' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CHROMIUM", str(fake))
    page = write_page(tmp_path / "page.html", "<p>hello</p>")
    with pytest.raises(RuntimeError, match=r"(?s)exit code 3.*cannot open display: boom"):
        render(page, 390)


def test_hanging_chromium_is_killed_at_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "chromium"
    pid_file = tmp_path / "child.pid"
    fake.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pid_file}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CHROMIUM", str(fake))
    page = write_page(tmp_path / "page.html", "<p>hello</p>")
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out"):
        render(page, 390, timeout=1)
    assert time.monotonic() - started < 10
    # The whole process group went with it: the child is gone or a zombie awaiting its reaper.
    stat = Path(f"/proc/{pid_file.read_text().strip()}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
