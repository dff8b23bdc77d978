"""The pipeline on the embedded sample: planted recurring problems come out as their own
clusters, with the distinct-account counts the ground truth gives."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from feedback_insights.clusters import cluster_new_records, demand
from feedback_insights.config import embedded_default
from feedback_insights.ingest import ingest
from feedback_insights.signals import score_new_records
from feedback_insights.warehouse import Warehouse

from .conftest import SAMPLE

TRUTH = [json.loads(line) for line in (SAMPLE / "truth.jsonl").read_text().splitlines()]

def _planted() -> dict[str, tuple[str, int]]:
    """Each recurring problem or praise theme: its polarity and distinct accounts (the
    sample README's table, computed from the truth file)."""
    accounts: dict[str, set[str]] = defaultdict(set)
    polarity: dict[str, str] = {}
    for t in TRUTH:
        if not t["invalid"] and t["problem"]:
            polarity[t["problem"]] = t["polarity"]
            if t["account"]:
                accounts[t["problem"]].add(t["account"])
    return {key: (polarity[key], len(accounts[key])) for key in polarity}


PLANTED = _planted()


@pytest.fixture(scope="module")
def clustered(tmp_path_factory: pytest.TempPathFactory, embedder) -> Warehouse:
    config = embedded_default(tmp_path_factory.mktemp("sample") / "feedback.duckdb")
    wh = Warehouse(config.warehouse.path)
    assert ingest(config, wh).errors == []
    score_new_records(wh)
    cluster_new_records(wh, embedder)
    return wh


def _cluster_of(wh: Warehouse) -> dict[str, int | None]:
    return dict(wh.con.execute("SELECT id, cluster_id FROM cluster_members WHERE view = 'reports'").fetchall())


def _outcomes(clustered: Warehouse) -> dict[str, dict]:
    """For each planted key: the cluster holding most of its reports, and how it came out."""
    cluster_of = _cluster_of(clustered)
    units: dict[str, list[str]] = defaultdict(list)  # planted key -> record ids (units that carry one)
    planted_of: dict[str, str | None] = {}
    for t in TRUTH:
        if not t["invalid"] and t["record_id"]:
            planted_of[t["record_id"]] = t["problem"]
            if t["problem"]:
                units[t["problem"]].append(t["record_id"])
    figures = {r["cluster_id"]: r for r in demand(clustered).iter_rows(named=True)}
    outcomes = {}
    for key, (polarity, accounts) in PLANTED.items():
        votes = Counter(cluster_of[i] for i in units[key] if cluster_of.get(i) is not None)
        if not votes:
            outcomes[key] = {"found": False, "why": "no report clustered"}
            continue
        cluster_id, hits = votes.most_common(1)[0]
        members = [i for i, c in cluster_of.items() if c == cluster_id and i in planted_of]
        foreign = Counter(planted_of[i] or "one-off" for i in members if planted_of[i] != key)
        row = figures[cluster_id]
        whole = hits >= 0.8 * len(units[key]) and row["polarity"] == polarity
        outcomes[key] = {
            "found": whole and not foreign and row["accounts"] == accounts,
            # One stray report (a look-alike one-off) may join, adding at most one account.
            "nearly": whole and foreign.total() <= 1 and accounts <= row["accounts"] <= accounts + 1,
            "cluster": cluster_id,
            "why": f"{hits}/{len(units[key])} reports, foreign {dict(foreign)}, {row['polarity']} with "
                   f"{row['accounts']} accounts (planted {polarity} with {accounts})",
        }
    return outcomes


def test_planted_problems_of_agent_authored_reports_come_out_whole_with_their_accounts(clustered: Warehouse) -> None:
    """acme-companies-api and orbit-mcp: agent-authored reports, whose planted problems are
    separable with these embeddings (each report's 3 nearest neighbours share its problem)."""
    assert len(PLANTED) == 18
    outcomes = _outcomes(clustered)
    separable = [k for k in PLANTED if k.startswith(("acme.", "orbit."))]
    report = "\n".join(f"{k}: {outcomes[k]['why']}" for k in separable)
    # Every one comes out whole (≥ 80 % of its reports in one cluster of its own) with at most
    # one stray look-alike report; most with exactly the planted distinct accounts. Measured:
    # 9 of 12 exact; the strays are a one-off praise of the search *docs* beside the search-speed
    # praise, a one-off beside the hiring filter, and an id-less report beside the deploy failure.
    assert all(outcomes[k]["nearly"] for k in separable), report
    assert sum(outcomes[k]["found"] for k in separable) >= 9, report
    assert len({outcomes[k]["cluster"] for k in separable}) == len(separable)


def test_in_session_complaints_are_not_separable_with_this_model(clustered: Warehouse, embedder) -> None:
    """pags-console's planted problems are people's in-session complaints, paraphrased freely.
    With all-MiniLM-L6-v2 a report is, on average, closer to some report of *another* problem
    than to the reports of its own, so no similarity threshold recovers them. This test pins
    that measurement (README, "Clustering"): when it stops holding, hold pags to the standard
    of the test above."""
    import numpy as np

    from feedback_insights.clusters import record_text, unit

    units = {t["record_id"]: t["problem"] for t in TRUTH
             if not t["invalid"] and t["record_id"] and t["problem"] and t["service"] == "pags-console"
             and t["polarity"] == "problem"}
    rows = clustered.con.execute(
        "SELECT id, category, tool, summary, detail, expected, actual, suggestion FROM records WHERE id IN (SELECT unnest(?))",
        [list(units)],
    ).fetchall()
    fields = ("category", "tool", "summary", "detail", "expected", "actual", "suggestion")
    texts = {r[0]: record_text(dict(zip(fields, r[1:], strict=True))) for r in rows}
    ids = [i for i in texts if texts[i]]
    vectors = unit(embedder.encode([texts[i] for i in ids]))
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, np.nan)
    labels = np.array([units[i] for i in ids])
    within = np.mean([np.nanmean(sims[np.ix_(labels == k, labels == k)]) for k in set(labels)])
    nearest_other = np.mean([np.nanmax(np.where(labels[None, :] != labels[i], sims[i], np.nan)) for i in range(len(ids))])
    assert within < nearest_other


def test_no_cluster_spans_two_services_or_polarities(clustered: Warehouse) -> None:
    spans = clustered.con.execute(
        """SELECT m.cluster_id, count(DISTINCT r.service), count(DISTINCT r.lane = 'positive_feedback'),
                  any_value(c.service) IS NOT DISTINCT FROM any_value(r.service)
           FROM cluster_members m JOIN records r USING (collector, id) JOIN clusters c ON c.id = m.cluster_id
           GROUP BY m.cluster_id"""
    ).fetchall()
    assert spans
    assert all(services <= 1 and polarities == 1 and same for _, services, polarities, same in spans)


def test_clusters_carry_a_label_a_medoid_and_their_tools(clustered: Warehouse) -> None:
    rows = clustered.con.execute(
        """SELECT c.id, c.label, c.key_terms, c.top_tools, m.cluster_id FROM clusters c
           LEFT JOIN cluster_members m ON m.collector = c.medoid_collector AND m.id = c.medoid_id AND m.view = c.view
           WHERE c.view = 'reports'"""
    ).fetchall()
    for cluster_id, label, terms, _tools, medoid_cluster in rows:
        assert label and terms and label.split(" · ")[0] == terms[0], cluster_id
        assert medoid_cluster == cluster_id  # the representative report is a member
    search = [r for r in rows if "search_files" in (r[3] or [])]
    assert search, "the search_files cluster names its tool"


def test_the_goal_view_groups_what_agents_were_trying_to_do(clustered: Warehouse) -> None:
    goals = demand(clustered, view="goals")
    assert goals.height >= 5
    assert set(goals.get_column("polarity")) == {"problem"}
    webhook = [r for r in goals.iter_rows(named=True) if "webhook" in (r["label"] or "")]
    assert webhook and webhook[0]["service"] == "acme-companies-api"


def test_a_second_run_with_nothing_new_changes_nothing(clustered: Warehouse, embedder) -> None:
    def state() -> list[tuple]:
        return clustered.con.execute(
            "SELECT view, collector, id, cluster_id FROM cluster_members ORDER BY ALL"
        ).fetchall()

    before = state()
    clusters_before = clustered.con.execute("SELECT count(*) FROM clusters").fetchall()
    unclustered = clustered.con.execute(
        "SELECT count(*) FROM cluster_members WHERE view = 'reports' AND cluster_id IS NULL AND text_sha256 IS NOT NULL"
    ).fetchall()[0][0]
    run = cluster_new_records(clustered, embedder)
    assert run.new_clusters.get("reports", 0) == 0 and run.joined.get("reports", 0) == 0
    assert run.unclustered("reports") == run.considered["reports"] == unclustered > 0  # the summary line tells
    assert state() == before
    assert clustered.con.execute("SELECT count(*) FROM clusters").fetchall() == clusters_before
