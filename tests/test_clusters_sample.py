"""The pipeline on the embedded sample: planted recurring problems come out as their own
clusters and drafts, with the distinct-account counts the ground truth gives."""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedback_insights.clusters import TEXT_COMPOSITION, cluster_new_records, demand
from feedback_insights.warehouse import Warehouse

from .conftest import REPO, SAMPLE, drafted_copy

sys.path.insert(0, str(REPO / "benchmarks"))
from planted import mixed_drafts, outcomes, truth_by_record  # noqa: E402  (shared with benchmarks/embed_text.py)

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
#: The planted problems agents filed in two partitions: as missing capabilities (feature
#: requests) and as problems (an unknown parameter silently ignored; N+1 calls reported as slow).
#: No cluster spans two partitions, so each comes out as a request cluster and a problem cluster.
IN_TWO_PARTITIONS = ("acme.hiring_role_filter", "orbit.get_record_no_batch")


@pytest.fixture(scope="module")
def clustered(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouse]:
    """The session's sample, ingested, clustered and drafted as the embedded default does it."""
    with Warehouse(drafted_copy(clustered_sample, tmp_path_factory.mktemp("sample"))) as wh:
        yield wh


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
        # A planted problem is drafted demand: a problem cluster, or a request cluster.
        drafted = row["polarity"] in ("problem", "request") if polarity == "problem" else row["polarity"] == polarity
        whole = hits >= 0.8 * len(units[key]) and drafted
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
    separable = [k for k in PLANTED if k.startswith(("acme.", "orbit.")) and k not in IN_TWO_PARTITIONS]
    report = "\n".join(f"{k}: {outcomes[k]['why']}" for k in separable)
    # Every one comes out whole (≥ 80 % of its reports in one cluster of its own) with at most
    # one stray look-alike report; most with exactly the planted distinct accounts. Measured:
    # 8 of 12 exact; the strays are a one-off praise of the search *docs* beside the search-speed
    # praise, a one-off beside the hiring filter, an id-less report beside the deploy failure,
    # and a create_item one-off (tags silently truncated) beside validate-before-create. That
    # last one joined when pags-console's complaints took in the turn they are about: their
    # vectors moved the view's shared centre (9 of 12 before, the same accounts either way).
    # The two planted problems agents filed in two partitions are judged below (7 of the other
    # 10 exact, as before requests had a partition of their own).
    assert all(outcomes[k]["nearly"] for k in separable), report
    assert sum(outcomes[k]["found"] for k in separable) >= 7, report
    assert len({outcomes[k]["cluster"] for k in separable}) == len(separable)


def test_planted_problems_become_one_cluster_and_one_draft(clustered: Warehouse) -> None:
    """The maintainer's check, through the whole pipeline (ingest, signals, clusters, drafts) on
    the embedded default, every valid unit of the truth file matched to its record
    (``benchmarks/planted.py``, which ``benchmarks/embed_text.py`` prints as a table).

    Issue 18 asks for 13 of the 15 and no draft mixing two planted keys. Measured with the
    composition of ``clusters/_embedding.py``: the 10 problems of the agent-authored services
    are each one cluster and one draft of their own; the 5 of pags-console are not yet (the
    reports of one problem come out as one tight group per reply complained about, 10+6+6+4
    for truncated tool results, and the groups are not merged), so the floor was 10; it is 8 since
    feature requests have a partition of their own (issue 29: two planted problems are each filed
    both as a request and as a problem, :data:`IN_TWO_PARTITIONS`).
    Measured alternatives (issue 18): vectors combined instead of one text (the report's own
    lines and the turn lines embedded apart, ``unit(v_own + w·v_turn)``, w 0.25, 0.5, 0.7) make
    10, 11 and 11 with 2, 4 and 2 mixed drafts; the turn lines only under 8 or 12 words of the
    report's own, or the report's own lines alone, make 10. None reaches 13: taken whole, at
    least three of pags-console's five problems have a cohesion of at most 0.31 on the centred
    vectors under every composition measured, below the gate's 0.42, so the first pass keeps
    none of them whole and the fragments (one per reply) are not merged
    (``benchmarks/embed_text.py``). Even with the complaints grouped by the exact turn they are
    about and the groups merged by their own words' centroids, the best threshold, picked with
    the answers, makes 3 of the 5 whole (``embed_text.anchored``)."""
    results = outcomes(clustered.con)
    assert len(results) == 15
    report = "\n".join(" | ".join(o.row()) for o in results)
    agent_authored = [o for o in results if o.problem.startswith(("acme.", "orbit."))]
    assert all(o.whole for o in agent_authored if o.problem not in IN_TWO_PARTITIONS), report
    # Filed both as feature requests and as problems: one cluster and one draft per partition
    # (measured 27+4 and 13+10 reports), none mixed with another planted key.
    assert all(len(o.clusters) == o.drafts == 2 and not o.mixed_with
               for o in agent_authored if o.problem in IN_TWO_PARTITIONS), report
    assert sum(o.whole for o in results) >= 8, report
    # No draft of an agent-authored problem takes in another planted key.
    assert not [keys for _, keys in mixed_drafts(clustered.con) if any(k.startswith(("acme.", "orbit.")) for k in keys)]


def test_the_turn_they_are_about_separates_in_session_complaints(clustered: Warehouse, embedder) -> None:
    """pags-console's reports are people's short complaints; the reply they are about, the turn
    before and a voice turn's dictation (``TURN_CONTEXT``) tell them apart: a report's nearest
    report shares its planted problem far more often with those lines than without."""
    import numpy as np

    from feedback_insights.clusters import text_sql, unit

    truth = truth_by_record(clustered.con)

    def nearest_agrees(sql: str) -> float:
        rows = clustered.con.execute(
            f"""SELECT id, {sql} AS text FROM records r
                WHERE service = 'pags-console' AND lane <> 'positive_feedback' AND text IS NOT NULL ORDER BY id"""
        ).fetchall()
        planted = [truth[i]["problem"] for i, _ in rows]
        vectors = unit(embedder.encode([t for _, t in rows]))
        sims = vectors @ vectors.T
        np.fill_diagonal(sims, -np.inf)
        nearest = sims.argmax(axis=1)
        return float(np.mean([planted[nearest[i]] == p for i, p in enumerate(planted) if p]))

    with_turn = nearest_agrees(text_sql("reports"))
    without = nearest_agrees(text_sql("reports", fields=TEXT_COMPOSITION, turn=()))
    # Measured: 0.96 with the turn, 0.78 without.
    assert with_turn >= 0.9 and with_turn >= without + 0.1, (with_turn, without)


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
        assert label and terms, cluster_id  # a name (a phrase since issue 18) and its key terms
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
