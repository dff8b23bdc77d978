"""Maintainers' corrections reach the drafts: merge, split, move and ignore on the drafted sample,
through the library functions the CLI (and a review desk) call, and the CLI itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from feedback_insights.clusters import CorrectionError, demand, undoable
from feedback_insights.clusters import history as clusters_history
from feedback_insights.config import SAMPLE_HMAC_KEY, Config, embedded_default
from feedback_insights.drafts import (
    approve,
    cluster_of,
    draft_clusters,
    edit_form,
    get_draft,
    history,
    ignore_cluster,
    merge_clusters,
    merge_preview,
    move_records,
    rename_cluster,
    save_edit,
    split_cluster,
    undo_correction,
    unmerge_cluster,
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
    toml.write_text(f'[warehouse]\npath = "{path}"\n[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n')
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
    assert refused.returncode != 0 and refused.stderr.strip().startswith("error: no record nope")


def _cluster(wh: Warehouse, cluster_id: int) -> dict:
    return wh.con.sql("SELECT * FROM clusters WHERE id = $id", params={"id": cluster_id}).pl().row(0, named=True)


def test_a_maintainer_s_merge_is_undone_with_its_drafts_and_recorded(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        survivor, absorbed = _pending(wh)[:2]
        into, other = survivor["cluster_id"], absorbed["cluster_id"]
        names = {c: _cluster(wh, c)["label"] for c in (into, other)}
        members = _members(wh, other)
        done = merge_clusters(config, wh, into, other, "dana", "one root cause")
        assert _cluster(wh, into)["label"] == names[into]  # the survivor keeps its name
        assert done.action is not None and [a.id for a in undoable(wh, other)][0] == done.action

        undone = undo_correction(config, wh, done.action, "dana", "they were two problems")
        back = _cluster(wh, other)
        assert (back["status"], back["merged_into"], back["label"]) == ("open", None, names[other])
        assert _members(wh, other) == members and not set(members) & set(_members(wh, into))
        assert undone.restored == [other] and undone.revived == [absorbed["id"]]
        revived = get_draft(wh, absorbed["id"])
        assert (revived["status"], revived["superseded_by"]) == ("pending", None)
        assert absorbed["id"] in undone.rerendered and survivor["id"] in undone.rerendered
        assert get_draft(wh, survivor["id"])["reports"] == survivor["reports"]
        # Recorded: who, when, what; the merge says it was undone, and cannot be undone twice.
        merged, taken_back = clusters_history(wh, other)[-2:]
        assert merged.undone_by == taken_back.id and taken_back.undoes == merged.id and taken_back.actor == "dana"
        assert taken_back.sentence() == (f"dana undid correction #{merged.id} ({len(members)} reports went back): "
                                         "they were two problems")
        assert merged.sentence().startswith(f"dana merged cluster {other} into cluster {into} ({len(members)} reports): "
                                            "one root cause")
        with pytest.raises(CorrectionError, match="already undone"):
            undo_correction(config, wh, merged.id, "dana")


def test_clusters_unmerge_takes_back_a_maintainer_s_merge_too(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        survivor, absorbed = _pending(wh)[:2]
        merge_clusters(config, wh, survivor["cluster_id"], absorbed["cluster_id"], "dana")
        done = unmerge_cluster(config, wh, absorbed["cluster_id"], "dana")
        assert done.restored == [absorbed["cluster_id"]] and _cluster(wh, absorbed["cluster_id"])["status"] == "open"
        with pytest.raises(CorrectionError, match=f"cluster {survivor['cluster_id']} was not merged into another"):
            unmerge_cluster(config, wh, survivor["cluster_id"], "dana")


def test_a_split_and_a_move_are_undone(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        source, target = _pending(wh)[:2]
        members = _members(wh, source["cluster_id"])
        split = split_cluster(config, wh, source["cluster_id"], members[:2], "dana")
        assert split.action is not None and split.new_cluster is not None
        undone = undo_correction(config, wh, split.action, "dana")
        assert _members(wh, source["cluster_id"]) == members
        assert _cluster(wh, split.new_cluster)["merged_into"] == source["cluster_id"]  # its id still resolves
        assert undone.restored == [source["cluster_id"]]

        before = {c: _members(wh, c) for c in (source["cluster_id"], target["cluster_id"])}
        moved = move_records(config, wh, members[:3], target["cluster_id"], "dana")
        assert set(members[:3]) <= set(_members(wh, target["cluster_id"]))
        assert moved.action is not None
        undo_correction(config, wh, moved.action, "dana")
        assert {c: _members(wh, c) for c in before} == before


def test_a_move_that_emptied_a_cluster_is_undone_with_the_cluster_back(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        source, target = _pending(wh)[:2]
        name, members = _cluster(wh, source["cluster_id"])["label"], _members(wh, source["cluster_id"])
        moved = move_records(config, wh, members, target["cluster_id"], "dana")
        assert _cluster(wh, source["cluster_id"])["status"] == "merged"
        assert moved.action is not None
        undo_correction(config, wh, moved.action, "dana")
        back = _cluster(wh, source["cluster_id"])
        assert (back["status"], back["label"], _members(wh, source["cluster_id"])) == ("open", name, members)
        assert get_draft(wh, source["id"])["status"] == "pending"


def test_a_maintainer_s_name_is_kept_through_corrections_and_can_be_handed_back(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        named, other = _pending(wh)[:2]
        rule = _cluster(wh, named["cluster_id"])["label"]
        done = rename_cluster(config, wh, named["cluster_id"], "  search_files:   ignores the glob ", "dana")
        assert _cluster(wh, named["cluster_id"])["label"] == "search_files: ignores the glob"
        assert get_draft(wh, named["id"])["title"] == "search_files: ignores the glob"  # the title follows
        # Corrections describe the cluster again; the maintainer's name stays.
        split = split_cluster(config, wh, named["cluster_id"], _members(wh, named["cluster_id"])[:1], "dana")
        merge_clusters(config, wh, named["cluster_id"], other["cluster_id"], "dana")
        assert _cluster(wh, named["cluster_id"])["label"] == "search_files: ignores the glob"
        assert split.new_cluster is not None and _cluster(wh, split.new_cluster)["label"]  # the new one is named
        assert done.action is not None
        undo_correction(config, wh, done.action, "dana")
        assert (_cluster(wh, named["cluster_id"])["given_name"], _cluster(wh, named["cluster_id"])["label"]) == (None, rule)
        for bad, why in (("", "must say something"), ("x" * 81, "at most 80"), ("a bell \x07 rings", "printable")):
            with pytest.raises(CorrectionError, match=why):
                rename_cluster(config, wh, named["cluster_id"], bad, "dana")


def test_a_merge_preview_says_what_will_change_and_changes_nothing(drafted) -> None:
    config, path = drafted
    with Warehouse(path) as wh:
        survivor, absorbed = _pending(wh)[:2]
        approve(wh, survivor["id"], "maria")
        into, other = survivor["cluster_id"], absorbed["cluster_id"]
        before = wh.con.execute("SELECT count(*), max(id) FROM cluster_actions").fetchall()
        said = merge_preview(wh, into, other)
        assert wh.con.execute("SELECT count(*), max(id) FROM cluster_actions").fetchall() == before
        assert get_draft(wh, absorbed["id"])["status"] == "pending"
        reports = len(_members(wh, other))
        assert said[0].startswith(f"cluster {other}'s {reports} reports (") and f"join cluster {into}, which keeps its name" in said[0]
        assert f"draft {absorbed['id']} (pending) is superseded by draft {survivor['id']}: it will never be filed" in said
        assert f"draft {survivor['id']} (approved) is re-rendered with the merged reports; approved, it goes back to pending" in said
        done = merge_clusters(config, wh, into, other, "dana")
        assert done.superseded == [(absorbed["id"], survivor["id"])] and done.reopened == [survivor["id"]]
        with pytest.raises(CorrectionError, match="merged"):
            merge_preview(wh, into, other)
