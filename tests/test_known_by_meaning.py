"""Known issues recognised by meaning: the representation the pipeline publishes with a filed
problem, the collector telling reworded reports of it "known issue" over HTTP and MCP, and the
desk's lookalikes by the same measure."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from feedback_insights.config import embedded_default
from feedback_insights.drafts import draft_clusters, lookalikes, split_cluster
from feedback_insights.warehouse import Warehouse

from .conftest import sample_copy


@pytest.fixture(scope="module")
def drafted(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The clustered sample drafted once: its pags-console clusters holding a report filed by
    hand are attached to those issues (filed), the others wait for review."""
    path = sample_copy(clustered_sample, tmp_path_factory.mktemp("drafted"))
    with Warehouse(path) as wh:
        draft_clusters(embedded_default(path), wh)
    return path


def _copy(path: Path, folder: Path) -> Path:
    shutil.copyfile(path, folder / "feedback.duckdb")
    return folder / "feedback.duckdb"


def _members(wh: Warehouse, cluster: int) -> list[str]:
    rows = wh.con.execute("SELECT collector || ':' || id FROM cluster_members WHERE view = 'reports' AND cluster_id = ? "
                          "ORDER BY collector, id", [cluster]).fetchall()
    return [r[0] for r in rows]


def test_reports_split_off_a_filed_problem_look_like_it(drafted: Path, tmp_path: Path) -> None:
    path = _copy(drafted, tmp_path)
    config = embedded_default(path)
    with Warehouse(path) as wh:
        filed = wh.con.sql("""SELECT d.cluster_id, d.issue_url, count(*) AS n FROM drafts d
                              JOIN cluster_members m ON m.cluster_id = d.cluster_id AND m.view = 'reports'
                              WHERE d.status = 'filed' GROUP BY ALL ORDER BY n DESC, d.cluster_id LIMIT 1""").fetchall()
        cluster, url, _ = filed[0]
        before = lookalikes(wh, config)
        assert cluster not in before  # a filed cluster is no lookalike of anything: it is filed
        members = _members(wh, cluster)
        half = members[: len(members) // 2]
        new = split_cluster(config, wh, cluster, half, "maria").new_cluster
        assert new is not None
        found = lookalikes(wh, config)
    like = found[new][0]
    assert (like.cluster_id, like.issue_url) == (cluster, url)
    assert like.reports == len(half) and like.told >= 0.8 * len(half) and like.share == like.told / like.reports
    assert set(like.examples) <= set(half) and 1 <= len(like.examples) <= 3
    assert like.similarity >= config.embedding.known_issue_similarity


def test_a_cluster_looks_like_filed_problems_of_its_own_service_only(drafted: Path, tmp_path: Path) -> None:
    path = _copy(drafted, tmp_path)
    config = embedded_default(path)
    with Warehouse(path) as wh:
        service = dict(wh.con.execute("SELECT id, service FROM clusters").fetchall())
        filed = {r[0] for r in wh.con.execute("SELECT cluster_id FROM drafts WHERE status = 'filed'").fetchall()}
        found = lookalikes(wh, config)
        assert found and not set(found) & filed
        for cluster, likes in found.items():
            assert all(service[like.cluster_id] == service[cluster] for like in likes)
            assert all(set(like.examples) <= set(_members(wh, cluster)) for like in likes)
        # A filed problem of another service is never a lookalike, however close its reports.
        wh.con.execute("UPDATE clusters SET service = 'elsewhere' WHERE id IN (SELECT cluster_id FROM drafts WHERE status = 'filed')")
        assert lookalikes(wh, config) == {}
