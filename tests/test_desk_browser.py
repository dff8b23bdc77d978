"""The review desk in a real browser: Playwright drives Debian's chromium (tests/conftest.py)
against the desk served by uvicorn on 127.0.0.1. A reviewer approves, edits and rejects
drafts, merges and splits clusters, by mouse and by keyboard; a hostile report runs nothing;
no page overflows sideways at 390 or 1280 px. The drafts page at 1280 px is the README's
screenshot (docs/desk.png): taken into the test's own folder on every run, and copied over the
tracked file only on purpose, with ``FI_REFRESH_DESK_PNG=1``, so that running the tests never
changes the repository."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Dialog, Page, expect

from feedback_insights.clusters import cluster_new_records
from feedback_insights.config import Config, FileDropConfig
from feedback_insights.desk import create_app
from feedback_insights.drafts import draft_cluster, get_draft, history, lookalikes
from feedback_insights.ingest import ingest
from feedback_insights.signals import score_new_records
from feedback_insights.warehouse import Warehouse

from .conftest import REPO, write_jsonl
from .page_layout import png_size
from .test_desk import REVIEWER, desk_config, drafted_copy, pending, serving

#: The README's screenshot, written only when FI_REFRESH_DESK_PNG=1.
README_SCREENSHOT = REPO / "docs" / "desk.png"
SCRIPT = "<script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(1)>"
LINK = "[the docs](javascript:alert(1))"
#: The ISO week the hostile reports are received in (Monday 23 to Friday 27 November 2026).
HOSTILE_WEEK = "2026-W48"
HOSTILE = f"Webhook retries stop after one attempt {SCRIPT} {IMAGE} see {LINK}"


@pytest.fixture
def warehouse(clustered_sample: Path, tmp_path: Path) -> Path:
    return drafted_copy(clustered_sample, tmp_path)


@pytest.fixture
def desk(warehouse: Path) -> Iterator[str]:
    with serving(create_app(desk_config(warehouse), "127.0.0.1", None)) as url:
        yield url


@pytest.fixture
def watched(page: Page) -> list[str]:
    """Everything a page must never do: open a dialog, log an error (a CSP violation is one)."""
    problems: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            problems.append(f"console {message.type}: {message.text}")

    page.on("dialog", on_dialog)
    page.on("console", on_console)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    return problems


def _flash(page: Page) -> str:
    return page.locator(".flash").inner_text()


def test_a_reviewer_edits_approves_and_rejects_drafts(page: Page, desk: str, warehouse: Path, watched: list[str],
                                                      tmp_path: Path) -> None:
    one, two = pending(warehouse)[:2]
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{desk}/drafts")
    expect(page.locator("h1")).to_have_text("Drafts")
    shot = tmp_path / "desk.png"
    page.screenshot(path=str(shot))
    assert png_size(shot) == (1280, 900)
    if os.environ.get("FI_REFRESH_DESK_PNG") == "1":
        shutil.copyfile(shot, README_SCREENSHOT)
    page.locator(f'a[href="/drafts/{one}"]').first.click()
    expect(page).to_have_url(f"{desk}/drafts/{one}")
    page.get_by_label("Labels").fill("agent-feedback, pagination")
    page.get_by_label("Workaround").fill("Retry with page_size=50")
    page.get_by_role("button", name="Save changes").click()
    # Exactly these: the body went through the textarea and back unchanged.
    expect(page.locator(".flash")).to_have_text(f"draft {one}: changed labels, workaround")
    expect(page.locator(".meta .label")).to_have_text(["agent-feedback", "pagination"])
    page.get_by_role("button", name="Approve").click()
    expect(page.locator(".flash")).to_contain_text(f"approved draft {one}")
    expect(page.locator(".meta .status")).to_have_text("approved")
    page.goto(f"{desk}/drafts/{two}")
    page.get_by_role("button", name="Reject").click()  # no reason: the browser asks for one first
    expect(page.locator(".meta .status")).to_have_text("pending")
    page.get_by_label("Reason for rejecting").fill("not our bug")
    page.get_by_role("button", name="Reject").click()
    expect(page.locator(".meta .status")).to_have_text("rejected")
    expect(page.locator(".problem")).to_have_text(f"Rejected by {REVIEWER}: not our bug")
    with Warehouse(warehouse) as wh:
        assert get_draft(wh, one)["workaround"] == "Retry with page_size=50"
        assert ("approved", REVIEWER) in [(a["action"], a["actor"]) for a in history(wh, one)]
        assert get_draft(wh, two)["reject_reason"] == "not our bug"
    assert watched == []


def _tab_to(page: Page, element_id: str) -> None:
    """Tab through the page until the element with ``element_id`` has the focus, visibly."""
    for _ in range(200):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.id") == element_id:
            break
    else:
        pytest.fail(f"Tab never reached #{element_id}")
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"  # focus is visible


def test_the_keyboard_approves_rejects_and_merges(page: Page, desk: str, warehouse: Path, watched: list[str]) -> None:
    one, two = pending(warehouse)[:2]
    page.goto(f"{desk}/drafts/{one}")
    _tab_to(page, "approve")
    page.keyboard.press("Enter")
    expect(page.locator(".meta .status")).to_have_text("approved")
    page.goto(f"{desk}/drafts/{two}")
    _tab_to(page, "reason")
    page.keyboard.type("a duplicate")
    page.keyboard.press("Enter")  # submits the reject form
    expect(page.locator(".meta .status")).to_have_text("rejected")
    into, _ = _two_of_a_service(warehouse)
    page.goto(f"{desk}/clusters/{into}")
    _tab_to(page, "other")
    assert page.locator("#other").input_value() == ""  # nothing chosen until the reviewer chooses
    page.keyboard.press("ArrowDown")
    chosen = page.locator("#other").input_value()
    _tab_to(page, "merge-reason")
    page.keyboard.type("same bug")
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_have_text(f"Merge cluster {chosen} into cluster {into}?")  # nothing done yet
    _tab_to(page, "confirm-merge")
    page.keyboard.press("Enter")
    expect(page.locator(".flash")).to_contain_text(f"merged cluster {chosen} into {into}")
    with Warehouse(warehouse) as wh:
        assert get_draft(wh, one)["status"] == "approved"
        assert get_draft(wh, two)["reject_reason"] == "a duplicate"
        merged = wh.con.execute("SELECT status, merged_into FROM clusters WHERE id = ?", [int(chosen)]).fetchone()
    assert merged == ("merged", into) and chosen != str(into)
    assert watched == []


def _two_of_a_service(warehouse: Path) -> tuple[int, int]:
    with Warehouse(warehouse) as wh:
        found = wh.con.execute(
            """SELECT a.id, b.id FROM clusters a JOIN clusters b ON a.service = b.service AND a.view = b.view
               AND a.polarity = b.polarity AND a.id < b.id
               WHERE a.status = 'open' AND b.status = 'open' AND a.view = 'reports' AND a.polarity = 'problem'
               ORDER BY a.id, b.id LIMIT 1"""
        ).fetchone()
    assert found
    return found[0], found[1]


def _members(warehouse: Path, cluster_id: int) -> list[str]:
    with Warehouse(warehouse) as wh:
        return [f"{c}:{i}" for c, i in wh.con.execute(
            "SELECT collector, id FROM cluster_members WHERE cluster_id = ? ORDER BY collector, id", [cluster_id]).fetchall()]


def test_a_reviewer_merges_and_splits_clusters(page: Page, desk: str, warehouse: Path, watched: list[str]) -> None:
    into, other = _two_of_a_service(warehouse)
    before = set(_members(warehouse, into)) | set(_members(warehouse, other))
    page.goto(f"{desk}/clusters")
    page.locator(f'a[href="/clusters/{into}"]').first.click()
    page.get_by_label("Merge another cluster into this one").select_option(str(other))
    page.locator("#merge-reason").fill("the same bug")
    page.get_by_role("button", name="Merge…").click()
    expect(page.locator("#changes + ul")).to_contain_text(f"join cluster {into}, which keeps its name")
    assert set(_members(warehouse, other)) != set()  # the confirmation changed nothing
    page.get_by_role("button", name="Merge", exact=True).click()
    expect(page.locator(".flash")).to_contain_text(f"merged cluster {other} into {into}")
    assert set(_members(warehouse, into)) == before
    page.goto(f"{desk}/clusters/{other}")
    expect(page).to_have_url(f"{desk}/clusters/{into}")  # a merged cluster leads to the survivor
    split_off = sorted(before)[:2]
    for record in split_off:
        page.locator(f'input[name="records"][value="{record}"]').check()
    page.locator("#records-reason").fill("a different problem")
    page.get_by_role("button", name="Split the ticked reports into a new cluster").click()
    expect(page.locator(".flash")).to_contain_text(f"split 2 reports off cluster {into} into this new cluster")
    new = int(re.search(r"new cluster (\d+)", _flash(page)).group(1))  # type: ignore[union-attr]
    expect(page).to_have_url(f"{desk}/clusters/{new}")  # the new cluster, to name or draft
    assert sorted(_members(warehouse, new)) == split_off
    expect(page.get_by_role("button", name="Draft an issue for this cluster")).to_be_visible()
    expect(page.locator("#cluster-history + ol")).to_contain_text(
        f"{REVIEWER} split 2 reports off cluster {into} into new cluster {new}: a different problem")
    page.locator(".flash").get_by_role("link", name=f"cluster {into}").first.click()
    expect(page.locator("#cluster-history + ol")).to_contain_text(
        f"{REVIEWER} merged cluster {other} into cluster {into} (")
    # Undo the split from the history: the reports come back.
    page.locator("#cluster-history + ol li", has_text="split 2 reports").get_by_role("button", name="undo").click()
    expect(page.locator(".flash")).to_contain_text("undid correction #")
    assert set(_members(warehouse, into)) == before
    assert watched == []


@pytest.fixture
def hostile(clustered_sample: Path, tmp_path: Path, embedder) -> tuple[Config, int, int]:
    """The drafted sample and four reports from four accounts whose words are an attack: a
    script, an image with an error handler and a javascript: link. Returns the configuration,
    their cluster and its draft."""
    path = drafted_copy(clustered_sample, tmp_path)
    records = [{
        "id": f"fb_hostile_{n}", "received_at": f"2026-11-2{n}T10:00:00Z", "service": "acme-companies-api",
        "account": f"acct_hostile_{n}", "source": "http",
        "feedback": {"type": "bug", "goal": "Receive webhook deliveries reliably", "message": HOSTILE,
                     "endpoint": "/webhooks/deliveries", "method": "POST", "outcome": "blocked"},
    } for n in range(3, 7)]
    source = FileDropConfig(kind="files", name="hostile", path=write_jsonl(tmp_path / "hostile.jsonl", records))
    config = desk_config(path).model_copy(update={"sources": [source]})
    with Warehouse(path) as wh:
        assert ingest(config, wh).errors == []
        score_new_records(wh)
        cluster_new_records(wh, embedder)
        found = wh.con.execute("SELECT cluster_id FROM cluster_members WHERE view = 'reports' AND id = 'fb_hostile_3'")
        (cluster_id,) = found.fetchone() or (None,)
        assert cluster_id is not None
        drafted = wh.con.execute("SELECT id FROM drafts WHERE cluster_id = ?", [cluster_id]).fetchone()
        draft_id = drafted[0] if drafted else draft_cluster(config, wh, cluster_id, REVIEWER)
    return config, cluster_id, draft_id


def test_a_hostile_report_runs_nothing(page: Page, hostile: tuple[Config, int, int], watched: list[str]) -> None:
    config, cluster_id, draft_id = hostile
    with serving(create_app(config, "127.0.0.1", None)) as desk:
        for url in (f"{desk}/clusters/{cluster_id}", f"{desk}/drafts/{draft_id}"):
            page.goto(url)
            expect(page.get_by_text(SCRIPT).first).to_be_visible()  # shown as text
            expect(page.get_by_text(IMAGE).first).to_be_visible()
            expect(page.locator("main")).to_contain_text(LINK)  # the link's markdown, as text
            assert page.locator("main script, script").count() == 0
            assert page.locator("img").count() == 0
            assert page.locator('a[href^="javascript:"]').count() == 0
            assert page.locator("[onerror]").count() == 0
            for link in page.locator("a").all():  # nothing a report wrote became a link
                href = link.get_attribute("href") or ""
                assert href.startswith(("/", "https://", "#")) or href == "", href  # "#": the page's jump links
        # The draft's body quotes the reports neutralised; rendered, the quotes read as written.
        expect(page.locator(".markdown-body")).to_contain_text(f"{SCRIPT} {IMAGE} see {LINK}")
        # The week of the hostile reports, as the chat channel and the email show it.
        for url in (f"{desk}/digests/{HOSTILE_WEEK}", f"{desk}/digests/{HOSTILE_WEEK}/html"):
            page.goto(url)
            expect(page.locator("body")).to_contain_text("/webhooks/deliveries: Webhook retries stop")  # their card
            assert page.locator("script").count() == 0 and page.locator("[onerror]").count() == 0
            assert page.locator('a[href^="javascript:"]').count() == 0
        assert "alert(1)" in page.locator("body").inner_text()  # the email quotes a report: as text
    assert watched == []


def test_a_draft_possibly_the_same_as_a_filed_issue_is_attached_to_it(page: Page, desk: str, warehouse: Path,
                                                                      watched: list[str]) -> None:
    """The issue's case: the desk proposed drafts for #503's problem without saying so."""
    with Warehouse(warehouse) as wh:
        found = lookalikes(wh, desk_config(warehouse))
        cluster, (like, *_) = max(found.items(), key=lambda item: item[1][0].told)
        pending_draft = wh.con.execute("SELECT id FROM drafts WHERE cluster_id = ? AND status = 'pending'",
                                       [cluster]).fetchall()
        # A lookalike that needs review has no draft until a reviewer drafts it (its page's button).
        draft = pending_draft[0][0] if pending_draft else draft_cluster(desk_config(warehouse), wh, cluster, REVIEWER)
        (words,) = wh.con.execute("SELECT summary FROM records WHERE collector || ':' || id = ?",
                                  [like.examples[0]]).fetchall()[0]
    issue = f"#{like.issue_number}"
    page.goto(f"{desk}/drafts")
    row = page.locator("tr", has=page.locator(f'a[href="/drafts/{draft}"]'))
    expect(row).to_contain_text(f"possibly the same as {issue}")
    row.locator(f'a[href="/drafts/{draft}"]').first.click()
    hint = page.locator("section.possibly")
    expect(hint.get_by_role("heading")).to_have_text(f"Possibly the same as {issue}")
    expect(hint.get_by_role("link", name=issue)).to_have_attribute("href", like.issue_url or "")
    expect(hint).to_contain_text(f"{like.told} of {like.reports} reports of this cluster would be told they are {issue}")
    expect(hint).to_contain_text(f"similarity {like.similarity:.2f}")
    expect(hint).to_contain_text(words)  # the evidence: the closest report's own words
    hint.get_by_role("button", name=f"Attach to {issue}").click()
    expect(page).to_have_url(f"{desk}/clusters/{like.cluster_id}")
    expect(page.locator(".flash")).to_contain_text(f"attached cluster {cluster} to {issue}")
    with Warehouse(warehouse) as wh:
        assert get_draft(wh, draft)["status"] == "superseded"  # nothing new is filed
        assert wh.con.execute("SELECT status, merged_into FROM clusters WHERE id = ?", [cluster]).fetchall() == [
            ("merged", like.cluster_id)]
    page.goto(f"{desk}/drafts")
    expect(page.locator("tr", has=page.locator(f'a[href="/drafts/{draft}"]'))).not_to_contain_text("possibly")
    assert watched == []


PAGES = ("/drafts", "/drafts/{draft}", "/clusters", "/clusters/{cluster}", "/unclustered", "/digests",
         "/digests/2026-W48")


@pytest.mark.parametrize("width", [390, 1280])
def test_no_page_overflows_sideways(page: Page, desk: str, warehouse: Path, width: int, watched: list[str]) -> None:
    draft = pending(warehouse)[0]
    with Warehouse(warehouse) as wh:
        draft_row = get_draft(wh, draft)
    page.set_viewport_size({"width": width, "height": 800})
    for path in PAGES:
        page.goto(desk + path.format(draft=draft, cluster=draft_row["cluster_id"]))
        expect(page.locator("main")).to_be_visible()
        scroll, client = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert scroll <= client, f"{path} at {width} px is {scroll} px wide"
    assert watched == []


#: Where the layout tests also copy their screenshots, for a person to look at (unset: the test's folder only).
SHOTS_ENV = "FI_DESK_SHOTS"


def _shot(page: Page, folder: Path, name: str) -> None:
    """A full-page screenshot into ``folder`` (and into $FI_DESK_SHOTS when set), never the repository."""
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get(SHOTS_ENV):
        Path(os.environ[SHOTS_ENV]).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(os.environ[SHOTS_ENV]) / path.name)


def _on_first_screen(page: Page, selector: str, width: int, height: int) -> None:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not shown"
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (selector, box)
    assert box["y"] + box["height"] <= height, f"{selector} ends at {box['y'] + box['height']:.0f} px, below the first screen"


@pytest.mark.parametrize(("width", "height"), [(390, 844), (1280, 800)])
def test_the_decision_and_the_figures_are_on_the_first_screen(page: Page, desk: str, warehouse: Path, width: int,
                                                              height: int, watched: list[str], tmp_path: Path) -> None:
    from feedback_insights.clusters import demand

    draft = pending(warehouse)[0]
    with Warehouse(warehouse) as wh:
        cluster_id = get_draft(wh, draft)["cluster_id"]
        accounts = demand(wh).filter(cluster_id=cluster_id)["accounts"][0]
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{desk}/drafts/{draft}")
    for selector in (".decision-figures .status", ".decision-figures strong", "#approve", "#edit-link", "#reason", "#reject"):
        _on_first_screen(page, selector, width, height)
    expect(page.locator(".decision-figures strong")).to_have_text(f"{accounts} accounts")
    _shot(page, tmp_path, f"draft-{width}")
    page.locator(".jump").get_by_role("link", name="Evidence").click()
    expect(page).to_have_url(re.compile(r"#evidence$"))
    assert page.evaluate("document.getElementById('evidence').getBoundingClientRect().top") < height / 2
    page.locator("#edit-link").click()
    expect(page.get_by_label("Title")).to_be_in_viewport()

    page.goto(f"{desk}/drafts")  # the queue: each draft's figures on the screen, none scrolled away
    row = page.locator("tbody tr", has=page.locator(f'a[href="/drafts/{draft}"]'))
    for label in ("Status", "Accounts", "This week", "Reports"):
        box = row.locator(f'td[data-label="{label}"]').bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (label, box)
    expect(row.locator('td[data-label="Accounts"]')).to_have_text(str(accounts))
    if width < 820:  # a card: the labels are written beside the figures
        assert page.evaluate("getComputedStyle(document.querySelector('td[data-label=\"Accounts\"]'), '::before').content") \
            == '"Accounts: "'
    _shot(page, tmp_path, f"queue-{width}")
    page.goto(f"{desk}/clusters/{cluster_id}")
    _on_first_screen(page, ".jump", width, height)
    _shot(page, tmp_path, f"cluster-{width}")
    assert watched == []


def test_with_a_token_a_reviewer_logs_in(page: Page, warehouse: Path, watched: list[str]) -> None:
    token = "browser-test-token-0123456789"
    with serving(create_app(desk_config(warehouse), "127.0.0.1", token)) as desk:
        page.goto(f"{desk}/drafts")
        expect(page).to_have_url(f"{desk}/login")
        page.get_by_label("Your name").fill("Ana")
        page.get_by_label("Token").fill(token)
        page.get_by_label("Token").press("Enter")
        expect(page).to_have_url(f"{desk}/drafts")
        expect(page.locator(".who strong")).to_have_text("Ana")
        (cookie,) = page.context.cookies()
        assert cookie["name"] == "desk_session" and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert page.evaluate("document.cookie") == ""  # out of reach of any script
        page.get_by_role("button", name="log out").click()
        expect(page).to_have_url(f"{desk}/login")
    assert watched == []


def test_a_busy_page_retries_by_itself(page: Page, desk: str, warehouse: Path, watched: list[str]) -> None:
    """While a flow holds the warehouse the page says so; once it is done, the page is back
    without anyone reloading it."""
    from feedback_insights.warehouse import exclusive

    with exclusive(warehouse, "the insights flow"):
        page.goto(f"{desk}/drafts")
        expect(page.locator("h1")).to_have_text("Busy, retrying")
        expect(page.locator("main")).to_contain_text("the insights flow")
    expect(page.locator("h1")).to_have_text("Drafts", timeout=15_000)
    assert [p for p in watched if "503" not in p] == []  # the browser logs the 503 itself
