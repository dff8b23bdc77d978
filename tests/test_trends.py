"""The trend sweep: every view of every cluster of the sample says a trend its own figures bear
out, by the one rule (``clusters._demand``): ``clusters list --json``, the desk's cluster table,
cluster pages, draft queue and draft pages, each week's digest, and the drafted issue bodies."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from html import unescape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from feedback_insights.clusters import weeks
from feedback_insights.clusters._demand import default_as_of
from feedback_insights.config import DeskConfig, embedded_default
from feedback_insights.desk import create_app
from feedback_insights.digest import Week, build, render
from feedback_insights.warehouse import Warehouse

from .conftest import drafted_copy, run_cli

#: The sample's eight weeks (5 October to 29 November 2026), each digest as of its end.
WEEKS = [f"2026-W{n}" for n in range(41, 49)]
#: A mid-week instant, when "this week" is a part of one: Thursday 26 November, noon.
MID_WEEK = datetime(2026, 11, 26, 12, tzinfo=UTC)


def consistent(trend: str, this: int, last: int, elapsed: float) -> bool:
    """Whether ``trend`` is what the rule says of these figures (``elapsed``: the share of this
    week gone by)."""
    return {
        "new": last == 0,
        "rising": this > last,
        "falling": this < last,
        "steady": math.floor(last * elapsed + 0.5) <= this <= last,
    }[trend]


@pytest.fixture(scope="module")
def drafted(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return drafted_copy(clustered_sample, tmp_path_factory.mktemp("trends"))


@pytest.fixture(scope="module")
def elapsed(drafted: Path) -> float:
    """The share of this week gone by as of the default instant (just after the newest report)."""
    with Warehouse(drafted) as wh:
        as_of = default_as_of(wh)
    assert as_of is not None
    return weeks(as_of).elapsed


@pytest.fixture(scope="module")
def desk(drafted: Path) -> Iterator[TestClient]:
    config = embedded_default(drafted).model_copy(update={"desk": DeskConfig(reviewer="rita")})
    with TestClient(create_app(config, "127.0.0.1", None), base_url="http://127.0.0.1:8790") as client:
        yield client


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _rows(html: str) -> list[list[str]]:
    """The cells of every table body row of a page, as text."""
    return [[_text(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for body in re.findall(r"<tbody>(.*?)</tbody>", html, re.S) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def _figures(html: str) -> dict[str, str]:
    """A page's figures list (``<dt>`` → ``<dd>``), the week's name left out of the terms."""
    return {re.sub(r" \(.*\)$", "", _text(term)): _text(value)
            for term, value in re.findall(r"<dt>(.*?)</dt>\s*<dd>(.*?)</dd>", html, re.S)}


def _count(text: str) -> int:
    return int(text.split()[0])


def test_clusters_list_says_what_its_figures_say(drafted: Path, elapsed: float) -> None:
    config = drafted.parent / "feedback-insights.toml"
    config.write_text(f'[warehouse]\npath = "{drafted}"\n')
    for view, as_of in (("goals", None), ("reports", None), ("reports", MID_WEEK)):
        done = run_cli("clusters", "list", "--json", "-n", "0", "--all", "--view", view, "--config", str(config),
                       *(("--as-of", as_of.isoformat()) if as_of else ()))
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        assert len(rows) > 20
        share = weeks(as_of).elapsed if as_of else elapsed
        for row in rows:
            assert consistent(row["trend"], row["accounts_this_week"], row["accounts_last_week"], share), row
        trends = {row["trend"] for row in rows}
        assert {"rising", "steady"} <= trends, trends
    assert share < 0.8 and "falling" in trends  # mid-week: short of last week's pace


def test_the_desk_says_what_its_figures_say(desk: TestClient, elapsed: float) -> None:
    table = _rows(desk.get("/clusters").text)
    assert len(table) > 20
    seen = set()
    for cells in table:
        cluster, this, last, trend = cells[0], int(cells[3]), int(cells[4]), cells[7].split()[0]
        assert consistent(trend, this, last, elapsed), cells
        seen.add(trend)
        figures = _figures(desk.get(f"/clusters/{cluster}").text)
        shown = figures["Trend"].split()[0]
        assert consistent(shown, _count(figures["This week"]), _count(figures["Last week"]), elapsed), figures
    assert {"rising", "falling", "steady", "new"} <= seen
    queue = desk.get("/drafts").text
    drafts = re.findall(r'<a href="/drafts/(\d+)">#', queue)
    assert len(drafts) > 10
    for cells in _rows(queue):
        if cells[7] != "—":  # a draft whose cluster has no live report has no trend
            assert consistent(cells[7].split()[0], int(cells[5]), int(cells[6]), elapsed), cells
    for draft in drafts:
        figures = _figures(desk.get(f"/drafts/{draft}").text)
        if "Trend" in figures:
            assert consistent(figures["Trend"].split()[0], int(figures["This week"]), int(figures["Last week"]),
                              elapsed), (draft, figures)


#: A digest card in Markdown: its title line's tag, then its figures' line.
_CARD = re.compile(r"^\d+\. \*\*.+?\*\*(?P<tags>.*)\n+ {4}\*\*(?P<this>\d+) accounts? this week\*\*, "
                   r"(?P<last>\d+) last week \((?P<delta>[−+±]\d+)\)", re.M)


def test_every_digest_card_says_what_its_figures_say(drafted: Path) -> None:
    cards = 0
    with Warehouse(drafted) as wh:
        for name in WEEKS:
            markdown = render(build(wh, Week.parse(name)), "md")
            for card in _CARD.finditer(markdown):
                cards += 1
                this, last = int(card["this"]), int(card["last"])
                tags = card["tags"]
                trend = next((t for t in ("new", "rising", "falling") if f" · {t}" in tags), "steady")
                if "came back after its fix" not in tags:
                    assert consistent(trend, this, last, 1.0), (name, card.group(0))  # as of the week's end
                assert card["delta"] == ("±0" if this == last else f"{'+' if this > last else '−'}{abs(this - last)}")
            rising = markdown.split("## Also rising", 1)[1].split("\n## ", 1)[0]
            assert "(−" not in rising and "(±0)" not in rising, (name, rising)
    assert cards > 8 * 10


def test_every_drafted_issue_says_what_its_figures_say(drafted: Path, elapsed: float) -> None:
    with Warehouse(drafted) as wh:
        bodies = [body for (body,) in wh.con.execute(
            "SELECT body FROM drafts WHERE drafted_by <> 'hand'").fetchall()]
    assert len(bodies) > 10
    for body in bodies:
        lines = body.splitlines()
        header = next(i for i, line in enumerate(lines) if "| this week | last week |" in line)
        names = [cell.strip() for cell in lines[header].strip("|").split("|")]
        values = dict(zip(names, (cell.strip() for cell in lines[header + 2].strip("|").split("|")), strict=True))
        trend = values["trend"].split()[0]
        assert consistent(trend, int(values["this week"]), int(values["last week"]), elapsed), values
