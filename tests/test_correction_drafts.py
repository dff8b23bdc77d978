"""Maintainers' corrections reach the drafts: merge, split, move and ignore on the drafted sample,
through the library functions the CLI (and a review desk) call, and the CLI itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from feedback_insights.clusters import CorrectionError, demand
from feedback_insights.config import Config, embedded_default
from feedback_insights.drafts import (
    approve,
    cluster_of,
    draft_clusters,
    edit_form,
    get_draft,
    history,
    ignore_cluster,
    merge_clusters,
    move_records,
    save_edit,
    split_cluster,
)
from feedback_insights.warehouse import Warehouse

from .conftest import drafted_copy, run_cli

SERVICE = "orbit-mcp"


@pytest.fixture
def drafted(clustered_sample: Path, tmp_path: Path) -> tuple[Config, Path]:
    path = drafted_copy(clustered_sample, tmp_path)
    return embedded_default(path), path


def _pending(wh: Warehouse, service: str = SERVICE) -> list[dict]:
    return wh.con.sql(
        """SELECT d.* FROM drafts d JOIN clusters c ON c.id = d.cluster_id
           WHERE c.service = $service AND d.status = 'pending' ORDER BY d.id""", params={"service": service},
    ).pl().to_dicts()


def _members(wh: Warehouse, cluster_id: int) -> list[str]:
    return [i for (i,) in wh.con.execute(
        "SELECT id FROM cluster_members WHERE view = 'reports' AND cluster_id = ? ORDER BY id", [cluster_id]).fetchall()]


def _figures(config: Config, wh: Warehouse, cluster_id: int) -> dict:
    return demand(wh, half_life_days=config.demand.half_life_days).filter(cluster_id=cluster_id).row(0, named=True)


def _actions(wh: Warehouse, draft_id: int) -> list[tuple[str, str]]:
    return [(a["action"], a["actor"]) for a in history(wh, draft_id)]


def test_a_merge_supersedes_the_absorbed_draft_and_rerenders_the_survivors(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        survivor, absorbed = _pending(wh)[:2]
        approve(wh, survivor["id"], "maria")
        absorbed_members = _members(wh, absorbed["cluster_id"])
        done = merge_clusters(config, wh, survivor["cluster_id"], absorbed["cluster_id"], "dana", "one root cause")

        assert done.superseded == [(absorbed["id"], survivor["id"])]
        assert done.reopened == [survivor["id"]] and done.rerendered == [survivor["id"]]
        gone = get_draft(wh, absorbed["id"])
        assert gone["status"] == "superseded" and gone["superseded_by"] == survivor["id"]
        assert gone["body"] == absorbed["body"]  # kept as it was, never to be filed

        now = get_draft(wh, survivor["id"])
        figures = _figures(config, wh, survivor["cluster_id"])
        assert figures["accounts"] > survivor["accounts"]  # the merge brought accounts
        assert now["status"] == "pending"
        assert (now["accounts"], now["reports"]) == (figures["accounts"], figures["reports"])
        assert f"**{figures['accounts']} accounts**" in now["body"] and now["body"] != survivor["body"]
        # The evidence now draws on the absorbed cluster's reports too.
        assert {c.split(":", 1)[1] for c in now["cited"]} & set(absorbed_members)
        assert cluster_of(now["body"]) == survivor["cluster_id"]
        assert ("back to pending", "dana") in _actions(wh, survivor["id"])
        assert ("superseded", "dana") in _actions(wh, absorbed["id"])
        note = next(a for a in history(wh, survivor["id"]) if a["action"] == "back to pending")
        assert f"cluster {absorbed['cluster_id']} was merged into it" in note["detail"]

        # The drafting stage leaves it so: no draft for the merged-away cluster, none twice.
        run = draft_clusters(config, wh)
        assert run.drafted == [] and run.refreshed == []
        assert wh.con.execute("SELECT count(*) FROM drafts WHERE cluster_id = ?", [absorbed["cluster_id"]]).fetchall() == [(1,)]


def test_a_survivor_without_a_draft_takes_over_the_absorbed_one(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        split_from, absorbed = _pending(wh)[:2]
        into = split_cluster(config, wh, split_from["cluster_id"], _members(wh, split_from["cluster_id"])[:2], "dana").new_cluster
        assert into is not None
        done = merge_clusters(config, wh, into, absorbed["cluster_id"], "dana")
        assert done.taken_over == [(absorbed["id"], into)] and done.rerendered == [absorbed["id"]]
        draft = get_draft(wh, absorbed["id"])
        assert draft["cluster_id"] == into and draft["status"] == "pending"
        assert cluster_of(draft["body"]) == into  # publishing finds its issue by this marker
        assert draft["reports"] == _figures(config, wh, into)["reports"]


def test_an_edited_draft_keeps_its_text_and_says_why_to_check_it(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        survivor, absorbed = _pending(wh)[:2]
        text = edit_form(get_draft(wh, survivor["id"])).replace("title: ", "title: Hand-written: ", 1)
        save_edit(wh, survivor["id"], "maria", text)
        edited = get_draft(wh, survivor["id"])
        done = merge_clusters(config, wh, survivor["cluster_id"], absorbed["cluster_id"], "dana")
        assert done.kept == [survivor["id"]] and done.rerendered == []
        kept = get_draft(wh, survivor["id"])
        assert (kept["title"], kept["body"]) == (edited["title"], edited["body"])
        assert any("check the figures" in line for line in done.lines())
        assert ("cluster corrected", "dana") in _actions(wh, survivor["id"])


def test_a_split_rerenders_the_draft_without_the_reports_split_off(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        [draft, *_] = _pending(wh)
        members = _members(wh, draft["cluster_id"])
        gone = members[: len(members) // 2]
        done = split_cluster(config, wh, draft["cluster_id"], gone, "dana", "two problems")
        assert done.new_cluster is not None and done.rerendered == [draft["id"]]
        now = get_draft(wh, draft["id"])
        figures = _figures(config, wh, draft["cluster_id"])
        assert now["reports"] == figures["reports"] == draft["reports"] - len(gone)
        assert not {c.split(":", 1)[1] for c in now["cited"]} & set(gone)
        assert set(_members(wh, done.new_cluster)) == set(gone)


def test_a_report_moves_to_praise_and_its_drafts_follow(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        [draft, *_] = _pending(wh)
        praise = wh.con.execute(
            """SELECT id FROM clusters WHERE view = 'reports' AND service = ? AND polarity = 'praise' AND status = 'open'
               ORDER BY id LIMIT 1""", [SERVICE]).fetchall()[0][0]
        record = _members(wh, draft["cluster_id"])[0]
        done = move_records(config, wh, [record], praise, "dana", "it is praise, read it again")
        assert done.rerendered == [draft["id"]]
        assert record in _members(wh, praise) and record not in _members(wh, draft["cluster_id"])
        assert get_draft(wh, draft["id"])["reports"] == draft["reports"] - 1
        assert wh.con.execute("SELECT action, cluster_id, other_id, actor FROM cluster_actions").fetchall() == [
            ("move", praise, draft["cluster_id"], "dana")]
        # The rest of the cluster goes too: the emptied cluster now points at praise, its draft
        # is superseded by nothing (praise is never drafted).
        rest = _members(wh, draft["cluster_id"])
        done = move_records(config, wh, rest, praise, "dana")
        assert done.superseded == [(draft["id"], None)]
        assert wh.con.execute("SELECT status, merged_into FROM clusters WHERE id = ?", [draft["cluster_id"]]).fetchall() == [
            ("merged", praise)]
        assert get_draft(wh, draft["id"])["status"] == "superseded"


def test_moves_that_cannot_apply_say_why_and_change_nothing(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        [draft, *_] = _pending(wh)
        [other_service] = _pending(wh, "acme-companies-api")[:1]
        record = _members(wh, draft["cluster_id"])[0]
        before = wh.con.execute("SELECT * FROM cluster_members ORDER BY ALL").fetchall()
        with pytest.raises(CorrectionError, match="never moves across services") as refused:
            move_records(config, wh, [record], other_service["cluster_id"], "dana")
        assert "\n" not in str(refused.value)
        with pytest.raises(CorrectionError, match="already in cluster"):
            move_records(config, wh, [record], draft["cluster_id"], "dana")
        with pytest.raises(CorrectionError, match="no record nope"):
            move_records(config, wh, ["nope"], draft["cluster_id"], "dana")
        assert wh.con.execute("SELECT * FROM cluster_members ORDER BY ALL").fetchall() == before
        assert history(wh, draft["id"]) == history(wh, draft["id"])[:1]  # drafted, nothing since


def test_ignoring_withdraws_an_approval_and_taking_it_back_rerenders(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        [draft, *_] = _pending(wh)
        approve(wh, draft["id"], "maria")
        done = ignore_cluster(config, wh, draft["cluster_id"], "dana", True, "noise")
        assert done.reopened == [draft["id"]] and get_draft(wh, draft["id"])["status"] == "pending"
        # While ignored the draft is not refreshed; taken back, it is re-rendered at once.
        wh.con.execute("UPDATE drafts SET body = 'stale text' WHERE id = ?", [draft["id"]])
        done = ignore_cluster(config, wh, draft["cluster_id"], "dana", False)
        assert done.rerendered == [draft["id"]] and get_draft(wh, draft["id"])["body"] == draft["body"]


def test_the_cli_prints_what_happened_to_the_drafts(drafted, tmp_path: Path) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        survivor, absorbed = _pending(wh)[:2]
        approve(wh, survivor["id"], "maria")
    toml = tmp_path / "feedback-insights.toml"
    toml.write_text(f'[warehouse]\npath = "{path}"\n[privacy]\nhmac_key = "k"\n')
    env = {**os.environ, "FEEDBACK_INSIGHTS_USER": "dana"}
    done = run_cli("clusters", "merge", str(survivor["cluster_id"]), str(absorbed["cluster_id"]), "--config", str(toml), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == [
        f"merged cluster {absorbed['cluster_id']} into {survivor['cluster_id']}",
        f"draft {absorbed['id']} superseded by draft {survivor['id']}: it will not be filed",
        f"re-rendered draft {survivor['id']}",
    ]
    assert f"approved draft {survivor['id']} back to pending" in done.stdout
    shown = run_cli("drafts", "show", str(survivor["id"]), "--config", str(toml), env=env)
    assert "back to pending by dana" in shown.stdout and "review it again" in shown.stdout
    refused = run_cli("clusters", "move", "nope", "--to", str(survivor["cluster_id"]), "--config", str(toml), env=env)
    assert refused.returncode == 2 and refused.stderr.strip().startswith("error: no record nope")
