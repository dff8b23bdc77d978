"""Versioned clustering configs: clusters record the version that made them, a warehouse keeps
its version until ``clusters rebuild``, and a rebuild keeps ids, ignores and maintainers' moves."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedback_insights.clusters import (
    LATEST,
    TEXT_COMPOSITION,
    TURN_CONTEXT,
    VERSIONS,
    UnknownVersion,
    in_force,
    rebuild,
    set_ignored,
    split,
)
from feedback_insights.clusters._embedding import MIN_WORDS
from feedback_insights.config import ClusteringConfig
from feedback_insights.warehouse import Warehouse

from .conftest import run_cli, sample_copy


def test_the_defaults_are_the_latest_version_so_changing_them_needs_a_new_one() -> None:
    latest = VERSIONS[LATEST]
    assert ClusteringConfig().version == LATEST == list(VERSIONS)[-1]
    assert latest.settings == ClusteringConfig(), "a change of ClusteringConfig's defaults is a new version"
    assert (latest.text_composition, latest.turn_context, latest.min_words) == (TEXT_COMPOSITION, TURN_CONTEXT, MIN_WORDS)
    for name, v in VERSIONS.items():
        assert v.name == v.settings.version == name and v.changelog


def test_a_warehouse_keeps_the_version_its_clusters_were_made_with(clustered_sample: Path, tmp_path: Path) -> None:
    with Warehouse(sample_copy(clustered_sample, tmp_path)) as wh:
        made_by = {v for (v,) in wh.con.execute("SELECT DISTINCT config_version FROM clusters").fetchall()}
        assert made_by == {LATEST}
        wh.con.execute("UPDATE clusters SET config_version = '1'")
        assert in_force(wh.con).name == "1"
        assert in_force(wh.con, ClusteringConfig(version=LATEST)).settings == VERSIONS["1"].settings
        # A knob the config sets explicitly applies on top of the version in force.
        mine = in_force(wh.con, ClusteringConfig(min_cohesion=0.55))
        assert mine.name == "1" and mine.settings.min_cohesion == 0.55
        assert mine.settings.model_copy(update={"min_cohesion": VERSIONS["1"].settings.min_cohesion}) == VERSIONS["1"].settings
    with Warehouse(tmp_path / "empty.duckdb") as empty:
        assert in_force(empty.con, ClusteringConfig(version="1")).name == "1"
        assert in_force(empty.con).name == LATEST
        with pytest.raises(UnknownVersion):
            in_force(empty.con, ClusteringConfig(version="99"))


def _state(wh: Warehouse) -> tuple[list[tuple], list[tuple]]:
    return (wh.con.execute("SELECT view, collector, id, cluster_id, text_sha256 FROM cluster_members ORDER BY ALL").fetchall(),
            wh.con.execute("SELECT id, status, merged_into, config_version FROM clusters ORDER BY id").fetchall())


def test_a_dry_run_changes_nothing_and_an_unchanged_version_keeps_every_cluster(
    clustered_sample: Path, tmp_path: Path, embedder
) -> None:
    with Warehouse(sample_copy(clustered_sample, tmp_path)) as wh:
        before = _state(wh)
        dry = rebuild(wh, embedder, ClusteringConfig(), "tester", dry_run=True)
        assert _state(wh) == before
        assert wh.con.execute("SELECT count(*) FROM cluster_actions WHERE action = 'rebuild'").fetchall() == [(0,)]
        done = rebuild(wh, embedder, ClusteringConfig(), "tester")
        assert done.views["reports"].mapped == dry.views["reports"].mapped
        # The same version re-clusters into the same clusters: every id kept, every member where it was.
        assert _state(wh)[0] == before[0]
        assert all(before == now == shared for before, now, shared in done.views["reports"].mapped.values())
        assert not done.views["reports"].fresh and not done.views["reports"].merged
        actions = wh.con.execute("SELECT count(*) FROM cluster_actions WHERE action = 'rebuild'").fetchall()[0][0]
        assert actions == sum(len(v.mapped) + len(v.kept) + len(v.fresh) + len(v.merged) + len(v.dissolved)
                              for v in done.views.values())


def test_a_rebuild_with_other_settings_maps_old_ids_and_keeps_maintainers_corrections(
    clustered_sample: Path, tmp_path: Path, embedder
) -> None:
    with Warehouse(sample_copy(clustered_sample, tmp_path)) as wh:
        con = wh.con
        con.execute("UPDATE clusters SET config_version = '1'")
        ignored, moved_from = (r[0] for r in con.execute(
            """SELECT c.id FROM clusters c JOIN cluster_members m ON m.cluster_id = c.id
               WHERE c.view = 'reports' AND c.service = 'acme-companies-api'
               GROUP BY c.id HAVING count(*) >= 10 ORDER BY count(*) DESC LIMIT 2"""
        ).fetchall())
        set_ignored(wh, ignored, "tester")
        taken = [r[0] for r in con.execute(
            "SELECT id FROM cluster_members WHERE cluster_id = ? ORDER BY id LIMIT 2", [moved_from]).fetchall()]
        split_off = split(wh, moved_from, taken, "tester")
        members = dict(con.execute(
            "SELECT cluster_id, list(id ORDER BY id) FROM cluster_members WHERE view = 'reports' GROUP BY ALL").fetchall())
        # Stricter settings: some clusters must change.
        absorbed: dict[int, int | None] = {}
        result = rebuild(wh, embedder, ClusteringConfig(min_cohesion=0.55, separation=0.2), "tester", then=absorbed.update)
        reports = result.views["reports"]
        assert absorbed and absorbed == {old: into for v in result.views.values()
                                         for old, into in [*v.merged.items(), *((d, None) for d in v.dissolved)]}
        assert result.from_version == "1" and result.to_version == LATEST
        assert reports.merged or reports.dissolved or any(b != n for b, n, _ in reports.mapped.values())
        after = dict(con.execute(
            "SELECT cluster_id, list(id ORDER BY id) FROM cluster_members WHERE view = 'reports' GROUP BY ALL").fetchall())
        # The maintainer's split stands: its records are where they were put, in clusters with their ids.
        assert set(taken) <= set(after[split_off])
        assert moved_from in reports.kept and split_off in reports.kept
        assert set(members[moved_from]) <= set(after[moved_from])
        status = dict(con.execute("SELECT id, status FROM clusters").fetchall())
        # Each surviving old id holds mostly its old members; the ignored one is still ignored.
        for old, (_, now, shared) in reports.mapped.items():
            assert shared * 2 > min(len(members[old]), now) and set(after[old]) & set(members[old])
        if ignored in reports.mapped:
            assert status[ignored] == "ignored"
        # Old clusters with no successor point at the cluster their reports went to, or are dissolved.
        for old, into in reports.merged.items():
            assert status[old] == "merged" and status[into] != "merged" and old not in after
        assert all(status[old] == "dissolved" and old not in after for old in reports.dissolved)
        assert {v for (v,) in con.execute("SELECT DISTINCT config_version FROM clusters").fetchall()} == {LATEST}
        assert in_force(con).name == LATEST
        named = con.execute("SELECT count(*) FROM clusters WHERE status NOT IN ('merged', 'dissolved') AND confidence IS NULL"
                            ).fetchall()[0][0]
        assert named == 0  # every live cluster described again


def test_the_command_prints_the_mapping(clustered_sample: Path, tmp_path: Path) -> None:
    sample_copy(clustered_sample, tmp_path)
    done = run_cli("clusters", "rebuild", "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"would re-cluster with clustering version {LATEST}" in done.stdout
    assert "reports:" in done.stdout and "goals:" in done.stdout


def test_an_unknown_configured_version_is_refused_even_where_clusters_name_theirs(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        wh.con.execute("INSERT INTO clusters (view, polarity, created_at, updated_at, config_version) "
                       "VALUES ('reports', 'problem', now(), now(), '1')")
        assert in_force(wh.con, ClusteringConfig()).name == "1"  # the warehouse's version, not the default
        with pytest.raises(UnknownVersion, match="unknown clustering version '5'; known: 1, 2, 3, 4"):
            in_force(wh.con, ClusteringConfig(version="5"))


def test_a_version_embeds_its_own_text() -> None:
    assert "the reply it is about" not in VERSIONS["1"].text_sql("reports")
    assert "the reply it is about" in VERSIONS["2"].text_sql("reports")
    assert f">= {MIN_WORDS} THEN" in VERSIONS["1"].text_sql("reports")
    assert VERSIONS["1"].text_sql("goals") == VERSIONS["2"].text_sql("goals")


def test_each_version_runs_its_own_revision_of_the_steps() -> None:
    """Version 1 keeps issue 17's code path, not only its numbers: the smoothing reach from the
    median cluster (not the typical report's cluster, halved), so a corpus of many pairs beside
    a few large clusters is not smoothed at all; version 2 reaches half of the cluster of 20."""
    import numpy as np

    from feedback_insights.clusters import smoothing_reach

    first, second, third, fourth = (VERSIONS[v].settings for v in "1234")
    assert (first.algorithm, second.algorithm, third.algorithm, fourth.algorithm) == (1, 2, 3, 4)
    assert third.model_copy(update={"version": "2", "algorithm": 2}) == second  # revision 3 changes steps, not knobs
    assert fourth.model_copy(update={"version": "3", "algorithm": 3}) == third  # so does revision 4
    pairs_and_large = np.repeat(np.arange(23), [2] * 20 + [20, 25, 30])
    assert smoothing_reach(pairs_and_large, 15, first) == 0  # the median cluster is a pair
    assert smoothing_reach(pairs_and_large, 15, second) == 9
    large = np.repeat(np.arange(3), [21, 25, 31])
    assert smoothing_reach(large, 30, first) == 24 and smoothing_reach(large, 30, second) == 12
