"""Maintainers' corrections: merge, split, move, ignore — recorded, and respected by later runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedback_insights.clusters import CorrectionError, cluster_new_records, merge, move, rename, set_ignored, split
from feedback_insights.config import Config, FileDropConfig, PrivacyConfig, WarehouseConfig
from feedback_insights.ingest import ingest
from feedback_insights.warehouse import Warehouse

from .conftest import run_cli, write_jsonl
from .test_cluster_command import GLOB, WEBHOOK

KEY = "corrections-test-key-with-32-characters"


def _afp(key: str, message: str, endpoint: str, service: str = "orbit-mcp") -> dict:
    return {"id": key, "received_at": "2026-11-20T10:00:00Z", "service": service, "account": f"acct_{sum(map(ord, key)):024x}",
            "source": "http", "feedback": {"type": "bug", "goal": "Get work done", "message": message,
                                           "endpoint": endpoint}}


@pytest.fixture
def setup(tmp_path: Path):
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "first.jsonl", [_afp(f"g{i}", t, "search_files") for i, t in enumerate(GLOB)]
                + [_afp(f"w{i}", t, "/webhooks") for i, t in enumerate(WEBHOOK)])
    config = Config(
        warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"),
        privacy=PrivacyConfig(hmac_key=KEY),
        sources=[FileDropConfig(kind="files", name="drop", path=drop)],
    )
    return config, drop


def _clusters(wh: Warehouse) -> dict[str, int | None]:
    return dict(wh.con.execute("SELECT id, cluster_id FROM cluster_members WHERE view = 'reports'").fetchall())


def test_merge_split_and_ignore_are_recorded_and_respected(setup, embedder) -> None:
    config, drop = setup
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        cluster_new_records(wh, embedder)
        before = _clusters(wh)
        glob, webhook = before["g0"], before["w0"]
        assert glob is not None and webhook is not None and glob != webhook

        merge(wh, glob, webhook, actor="maintainer-a", reason="same root cause")
        after = _clusters(wh)
        assert set(after.values()) == {glob}
        status, merged_into = wh.con.execute("SELECT status, merged_into FROM clusters WHERE id = ?", [webhook]).fetchall()[0]
        assert (status, merged_into) == ("merged", glob)

        moved = split(wh, glob, ["w0", "drop:w1", "w2"], actor="maintainer-b")
        assert {k: v for k, v in _clusters(wh).items() if k.startswith("w")} == {"w0": moved, "w1": moved, "w2": moved}
        set_ignored(wh, moved, actor="maintainer-b", reason="a docs problem, tracked elsewhere")

        actions = wh.con.execute(
            "SELECT action, cluster_id, other_id, actor, reason FROM cluster_actions ORDER BY id"
        ).fetchall()
        assert actions == [
            ("merge", glob, webhook, "maintainer-a", "same root cause"),
            ("split", glob, moved, "maintainer-b", None),
            ("ignore", moved, None, "maintainer-b", "a docs problem, tracked elsewhere"),
        ]

        # A later run: a new webhook report joins the ignored cluster (it does not surface as a
        # new one), a new glob report joins the glob cluster, and nobody already placed moves.
        write_jsonl(drop / "second.jsonl", [
            _afp("w9", "Webhook deliveries fail signature checks: the docs describe sha1, the header is sha256", "/webhooks"),
            _afp("g9", "search_files returns all files no matter what glob pattern is given", "search_files"),
        ])
        ingest(config, wh)
        run = cluster_new_records(wh, embedder)
        final = _clusters(wh)
        assert run.new_clusters.get("reports", 0) == 0
        assert final["w9"] == moved and final["g9"] == glob
        assert {k: final[k] for k in after} == {k: _clusters(wh)[k] for k in after}
        assert wh.con.execute("SELECT status FROM clusters WHERE id = ?", [moved]).fetchall() == [("ignored",)]


def test_a_merged_cluster_keeps_taking_reports_of_both_problems(setup, embedder) -> None:
    """Merged, the glob and webhook reports make one cluster that is loose on purpose: a later
    report of either problem still joins it (the gate a grown cluster must pass spares it)."""
    config, drop = setup
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        cluster_new_records(wh, embedder)
        before = _clusters(wh)
        merge(wh, before["g0"], before["w0"], actor="maintainer-a", reason="one root cause")
        write_jsonl(drop / "second.jsonl", [
            _afp("w9", "Webhook deliveries fail signature checks: the docs describe sha1, the header is sha256", "/webhooks"),
        ])
        ingest(config, wh)
        cluster_new_records(wh, embedder)
        assert _clusters(wh)["w9"] == before["g0"]


def test_corrections_that_cannot_apply_say_why(setup, embedder) -> None:
    config, drop = setup
    write_jsonl(drop / "other.jsonl", [_afp(f"o{i}", t, "search_files", service="other-api") for i, t in enumerate(GLOB)])
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        cluster_new_records(wh, embedder)
        ids = _clusters(wh)
        with pytest.raises(CorrectionError, match="differ in service"):
            merge(wh, ids["g0"], ids["o0"], actor="a")
        with pytest.raises(CorrectionError, match="not a member"):
            split(wh, ids["g0"], ["w0"], actor="a")
        everyone = [i for i, c in ids.items() if c == ids["g0"]]
        with pytest.raises(CorrectionError, match="every member"):
            split(wh, ids["g0"], everyone, actor="a")
        with pytest.raises(CorrectionError, match="no cluster 999"):
            set_ignored(wh, 999, actor="a")


def test_the_cli_names_who_acted(setup, embedder, tmp_path: Path) -> None:
    config, _ = setup
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        cluster_new_records(wh, embedder)
        glob = _clusters(wh)["g0"]
    toml = tmp_path / "feedback-insights.toml"
    toml.write_text(f'[warehouse]\npath = "{config.warehouse.path}"\n[privacy]\nhmac_key = "{KEY}"\n')
    done = run_cli("clusters", "ignore", str(glob), "--config", str(toml), "--by", "dana", "--reason", "noise")
    assert done.returncode == 0, done.stderr
    again = run_cli("clusters", "ignore", str(glob), "--config", str(toml))
    assert again.returncode != 0 and f"cluster {glob} is already ignored" in again.stderr
    with Warehouse(config.warehouse.path) as wh:
        assert wh.con.execute("SELECT actor, reason FROM cluster_actions").fetchall() == [("dana", "noise")]


def test_move_takes_reports_from_any_cluster_and_a_cluster_it_empties_points_at_the_target(setup, embedder) -> None:
    config, drop = setup
    write_jsonl(drop / "other.jsonl", [_afp(f"o{i}", t, "search_files", service="other-api") for i, t in enumerate(GLOB)])
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        cluster_new_records(wh, embedder)
        ids = _clusters(wh)
        glob, webhook = ids["g0"], ids["w0"]
        webhooks = sorted(k for k, v in ids.items() if v == webhook)
        moved = move(wh, webhooks[:1], glob, actor="dana", reason="read it again")
        assert moved.taken == {webhook: [f"drop:{webhooks[0]}"]} and moved.emptied == [] and moved.sources == [webhook]
        assert _clusters(wh)[webhooks[0]] == glob
        assert wh.con.execute("SELECT assigned_by FROM cluster_members WHERE view = 'reports' AND id = ?", [webhooks[0]]).fetchall() == [("maintainer",)]
        emptied = move(wh, webhooks[1:], glob, actor="dana")
        assert emptied.emptied == [webhook] and emptied.sources == []
        assert wh.con.execute("SELECT status, merged_into FROM clusters WHERE id = ?", [webhook]).fetchall() == [("merged", glob)]
        assert wh.con.execute("SELECT action, cluster_id, other_id, actor FROM cluster_actions ORDER BY id").fetchall() == [
            ("move", glob, webhook, "dana"), ("move", glob, webhook, "dana")]
        before = _clusters(wh)
        with pytest.raises(CorrectionError, match="never moves across services"):
            move(wh, ["g1"], ids["o0"], actor="dana")
        with pytest.raises(CorrectionError, match=f"cluster {webhook} was merged into {glob}"):
            move(wh, ["g1"], webhook, actor="dana")
        with pytest.raises(CorrectionError, match="name at least one record"):
            move(wh, [], glob, actor="dana")
        assert _clusters(wh) == before


def test_a_maintainer_s_name_survives_a_clustering_run(setup, embedder) -> None:
    """A run that grows a cluster re-describes it (key terms, medoid), but the name a maintainer
    gave it stays: describe, the LLM's naming and a rebuild all leave ``given_name`` alone."""
    config, drop = setup
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        cluster_new_records(wh, embedder)
        glob = _clusters(wh)["g0"]
        rename(wh, glob, "search_files: the glob is ignored", "dana")
        write_jsonl(drop / "more.jsonl", [_afp("g9", "search_files returns every file whatever the glob", "search_files")])
        ingest(config, wh)
        cluster_new_records(wh, embedder)
        assert _clusters(wh)["g9"] == glob
        assert wh.con.execute("SELECT label FROM clusters WHERE id = ?", [glob]).fetchall() == [
            ("search_files: the glob is ignored",)]
