"""Erasure reaches everything: forgetting a record or an account removes it from every table,
redrafts the drafts that quoted it, rewrites the filed issue GitHub still holds as we filed it,
lists the one a maintainer edited, and audits who, when and why, never what."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from feedback_insights.config import Config
from feedback_insights.drafts import approve, neutralise
from feedback_insights.publish import forget, publish, records_to_forget
from feedback_insights.publish._erasure import ERASED_QUOTE
from feedback_insights.warehouse import Warehouse

from .conftest import drafted_copy, run_cli, sample_copy
from .github_fake import GitHubFake
from .test_publish import _config, _tracker, github  # noqa: F401 (github is a fixture)

TABLES = ("records", "record_signals", "cluster_members", "record_status_history")


def _quoted(wh: Warehouse, draft_id: int, config: Config) -> tuple[str, str, str]:
    """(collector, id, quote) of the first report a draft's body quotes: its cluster's medoid."""
    collector, record_id, summary = wh.con.execute(
        """SELECT r.collector, r.id, r.summary FROM drafts d JOIN clusters c ON c.id = d.cluster_id
           JOIN records r ON r.collector = c.medoid_collector AND r.id = c.medoid_id WHERE d.id = ?""", [draft_id]
    ).fetchall()[0]
    return collector, record_id, neutralise.quote(summary, config.drafts.quote_chars)


def _tables_holding(wh: Warehouse, text: str) -> list[str]:
    """Every table with a text, JSON or list column that holds ``text`` anywhere in a row."""
    columns = wh.con.execute(
        """SELECT table_name, list(column_name) FROM information_schema.columns
           WHERE data_type IN ('VARCHAR', 'JSON', 'VARCHAR[]') AND table_schema = 'main' GROUP BY 1 ORDER BY 1""").fetchall()
    return [table for table, names in columns if wh.con.execute(
        f"SELECT count(*) FROM {table} WHERE " + " OR ".join(f'contains(CAST("{n}" AS VARCHAR), ?)' for n in names),
        [text] * len(names)).fetchall()[0][0]]


def _present(wh: Warehouse, collector: str, record_id: str) -> dict[str, int]:
    return {t: wh.con.execute(f"SELECT count(*) FROM {t} WHERE collector = ? AND id = ?",
                              [collector, record_id]).fetchall()[0][0] for t in TABLES}


@pytest.fixture
def filed(github: GitHubFake, clustered_sample: Path, tmp_path: Path) -> tuple[Config, list[int]]:  # noqa: F811
    """The sample with every draft made, two of them filed on the GitHub fake."""
    path = drafted_copy(clustered_sample, tmp_path)
    config = _config(path, github)
    with Warehouse(path) as wh:
        ids = [row[0] for row in wh.con.execute(
            "SELECT id FROM drafts WHERE status = 'pending' ORDER BY accounts DESC, id LIMIT 2").fetchall()]
        for draft_id in ids:
            approve(wh, draft_id, "maria")
        assert publish(config, wh, _tracker(config), {}).errors == []
    return config, ids


def test_forgetting_a_record_reaches_every_table_and_the_filed_issue(github: GitHubFake, filed) -> None:  # noqa: F811
    config, (first, _) = filed
    with Warehouse(config.warehouse.path) as wh:
        collector, record_id, quote = _quoted(wh, first, config)
        repo, number, body = wh.con.execute("SELECT repo, issue_number, body FROM drafts WHERE id = ?", [first]).fetchall()[0]
        assert quote in body and _present(wh, collector, record_id)["records"] == 1
        target = records_to_forget(config, wh, record=record_id, collector=collector)
        run = forget(config, wh, target, "maria", "the owner asked", _tracker(config))
        left = _present(wh, collector, record_id)
        holding = _tables_holding(wh, record_id)
        draft = wh.con.execute("SELECT body, stale FROM drafts WHERE id = ?", [first]).fetchall()[0]
        audit = wh.con.execute("SELECT * FROM erasures").fetchall()
        marks = wh.con.execute("SELECT kind FROM erasure_ledger ORDER BY 1").fetchall()
        label = wh.con.execute("SELECT c.medoid_id FROM drafts d JOIN clusters c ON c.id = d.cluster_id "
                               "WHERE d.id = ?", [first]).fetchall()[0][0]
    assert target.keys == [(collector, record_id)] and run.erasure.records == 1
    assert left == dict.fromkeys(TABLES, 0)
    assert holding == []  # not even its id, in any table (a draft's citations, a comment's quote)
    assert label != record_id  # the cluster was described again without it
    [issue] = [i for i in github.issues(repo) if i["number"] == number]
    assert quote not in issue["body"] and issue["body"] == draft[0] and draft[1] is False
    assert run.bodies.rewritten == [issue["html_url"]]
    assert [row[2:5] for row in audit] == [("maria", "the owner asked", 1)]
    assert record_id not in str(audit)  # who, when, why and how many: never the id or the content
    assert marks == [("content",), ("id",)]  # keyed marks, so that no source stores it again


@pytest.mark.parametrize("kept", [True, False], ids=["quote-still-verbatim", "quote-rewritten"])
def test_an_issue_edited_on_github_keeps_its_edits_and_an_account_goes_whole(
    github: GitHubFake, filed, kept: bool  # noqa: F811
) -> None:
    config, (_, second) = filed
    with Warehouse(config.warehouse.path) as wh:
        collector, record_id, quote = _quoted(wh, second, config)
        account, repo, number, url, body = wh.con.execute(
            """SELECT r.account, d.repo, d.issue_number, d.issue_url, d.body FROM drafts d, records r
               WHERE d.id = ? AND r.collector = ? AND r.id = ?""", [second, collector, record_id]).fetchall()[0]
        # A maintainer adds a paragraph, keeping what we filed; or rewrites it in their own words.
        text = f"A maintainer's own words.\n\n{body}" if kept else "A maintainer's own words: the cursor repeats."
        edited = httpx.patch(f"{github.url}/repos/{repo}/issues/{number}", headers={"authorization": f"token {github.token}"},
                             json={"body": text})
        assert edited.status_code == 200
        target = records_to_forget(config, wh, account=account)
        run = forget(config, wh, target, "maria", "account closed", _tracker(config))
        remaining = wh.con.execute("SELECT count(*) FROM records WHERE account = ?", [account]).fetchall()[0][0]
    assert len(target.keys) >= 1 and remaining == 0
    [issue] = [i for i in github.issues(repo) if i["number"] == number]
    assert issue["body"].startswith("A maintainer's own words")  # their edit stays
    if kept:
        assert run.bodies.rewritten == [url] and run.bodies.to_check == []
        assert quote not in issue["body"] and ERASED_QUOTE in issue["body"]
        assert issue["body"].replace(ERASED_QUOTE, "").count("\n> ") < text.count("\n> ")  # only quote lines went
    else:
        assert run.bodies.rewritten == [] and issue["body"] == text
        assert any(line.startswith(f"{url} was edited on GitHub since it was filed") for line in run.bodies.to_check)


def test_a_pending_draft_is_redrafted_without_the_forgotten_record(clustered_sample: Path, tmp_path: Path) -> None:
    from feedback_insights.config import embedded_default

    path = drafted_copy(clustered_sample, tmp_path)
    config = embedded_default(path)
    with Warehouse(path) as wh:
        (draft_id,) = wh.con.execute("SELECT id FROM drafts WHERE status = 'pending' ORDER BY id LIMIT 1").fetchall()[0]
        collector, record_id, quote = _quoted(wh, draft_id, config)
        run = forget(config, wh, records_to_forget(config, wh, record=record_id), "maria", "asked")
        body, stale, action = wh.con.execute(
            """SELECT d.body, d.stale, (SELECT action FROM draft_actions a WHERE a.draft_id = d.id ORDER BY a.id DESC LIMIT 1)
               FROM drafts d WHERE d.id = ?""", [draft_id]).fetchall()[0]
    assert draft_id in run.redrafted and quote not in body and stale is False
    assert action == "redrafted after an erasure"


def test_the_commands_forget_and_show_records(clustered_sample: Path, tmp_path: Path) -> None:
    path = sample_copy(clustered_sample, tmp_path)
    (tmp_path / "feedback-insights.toml").write_text(
        f'[warehouse]\npath = "{path.name}"\n[privacy]\nhmac_key = "feedback-insights-embedded-sample"\n')
    with Warehouse(path) as wh:
        collector, record_id = wh.con.execute("SELECT collector, id FROM records ORDER BY id LIMIT 1").fetchall()[0]
    shown = run_cli("records", "show", record_id, "--json", cwd=tmp_path)
    assert shown.returncode == 0 and f'"id":"{record_id}"' in shown.stdout and '"clusters":' in shown.stdout
    refused = run_cli("forget", "--record", record_id, cwd=tmp_path)  # no reason given
    assert refused.returncode == 2 and "--reason" in refused.stderr
    done = run_cli("forget", "--record", record_id, "--reason", "test", "--by", "maria", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("forget: forgot 1 records"), done.stderr
    gone = run_cli("records", "show", record_id, cwd=tmp_path)
    assert gone.returncode == 1 and gone.stderr.strip() == f"error: no such record: {record_id}"
    again = run_cli("forget", "--record", record_id, "--reason", "test", cwd=tmp_path)
    assert again.returncode == 1 and again.stderr.strip() == f"error: no such record: {record_id}"


def test_an_account_is_found_by_the_form_its_source_sends(clustered_sample: Path, tmp_path: Path) -> None:
    import orjson

    from feedback_insights.config import embedded_default
    from feedback_insights.privacy import Pseudonymiser

    path = sample_copy(clustered_sample, tmp_path)
    config = embedded_default(path)
    raw = orjson.loads((Path(__file__).parents[1] / "data" / "sample" / "rfc026.json").read_bytes())[0]["pseudonym_id"]
    assert not raw.startswith("acct_")  # the form a source sends: the user's own id
    pseudonym = Pseudonymiser(config.privacy.key())(raw)
    with Warehouse(path) as wh:
        by_raw = records_to_forget(config, wh, account=raw)
        by_pseudonym = records_to_forget(config, wh, account=pseudonym)
        stored = wh.con.execute("SELECT collector, id FROM records WHERE account = ? ORDER BY 1, 2", [pseudonym]).fetchall()
    assert by_raw.keys == by_pseudonym.keys == [tuple(row) for row in stored] and stored


def test_a_report_quoted_only_after_an_earlier_erasure_is_found_when_it_is_forgotten(github: GitHubFake, filed) -> None:  # noqa: F811
    config, (first, _) = filed
    with Warehouse(config.warehouse.path) as wh:
        collector, record_id, _ = _quoted(wh, first, config)
        (before,) = wh.con.execute("SELECT cited FROM drafts WHERE id = ?", [first]).fetchall()[0]
        forget(config, wh, records_to_forget(config, wh, record=record_id, collector=collector), "maria", "asked",
               _tracker(config))
        repo, number, url, after = wh.con.execute(
            "SELECT repo, issue_number, issue_url, cited FROM drafts WHERE id = ?", [first]).fetchall()[0]
        # The body was rendered again: another report took the erased one's place among the quotes.
        newcomer = next(key for key in after if key not in before)
        other_collector, other_id = newcomer.split(":", 1)
        (summary,) = wh.con.execute("SELECT summary FROM records WHERE collector = ? AND id = ?",
                                    [other_collector, other_id]).fetchall()[0]
        quote = neutralise.quote(summary, config.drafts.quote_chars)
        [issue] = [i for i in github.issues(repo) if i["number"] == number]
        assert quote in issue["body"]
        run = forget(config, wh, records_to_forget(config, wh, record=other_id, collector=other_collector), "maria",
                     "asked", _tracker(config))
    [issue] = [i for i in github.issues(repo) if i["number"] == number]
    assert run.bodies.rewritten == [url] and quote not in issue["body"]


def test_forget_writes_the_digests_on_disk_again_without_the_report(clustered_sample: Path, tmp_path: Path) -> None:
    path = sample_copy(clustered_sample, tmp_path)
    (tmp_path / "feedback-insights.toml").write_text(
        f'[warehouse]\npath = "{path.name}"\n[privacy]\nhmac_key = "feedback-insights-embedded-sample"\n')
    assert run_cli("digest", "--week", "2026-W48", "--no-send", cwd=tmp_path).returncode == 0
    digests = sorted((tmp_path / "digests").iterdir())
    with Warehouse(path) as wh:
        rows = wh.con.execute("SELECT collector, id, summary FROM records WHERE length(summary) > 40 ORDER BY id").fetchall()
    # A report the digest quotes (its cluster's representative), by a stretch of its own words.
    collector, record_id, words = next((c, i, s[5:35]) for c, i, s in rows if words_in(s[5:35], digests))
    done = run_cli("forget", "--collector", collector, "--record", record_id, "--reason", "asked", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.rstrip().endswith("wrote 2 digest files again"), done.stderr
    assert not words_in(words, digests) and sorted((tmp_path / "digests").iterdir()) == digests


def words_in(words: str, paths: list[Path]) -> bool:
    return any(words in p.read_text(encoding="utf-8") for p in paths)
