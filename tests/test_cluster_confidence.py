"""Each cluster's confidence from its cohesion, separation and size, and "needs review"."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from feedback_insights.clusters import RULE, confidence, merge
from feedback_insights.clusters._confidence import cluster_quality
from feedback_insights.warehouse import Warehouse

from .conftest import SAMPLE, sample_copy


def _around(direction: np.ndarray, n: int, spread: float, rng: np.random.Generator) -> np.ndarray:
    noisy = direction + spread * rng.standard_normal((n, len(direction)))
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def _directions(k: int, d: int, rng: np.random.Generator) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((d, k)))[0].T  # k orthonormal directions


def test_cohesion_and_separation_are_the_mean_pairwise_and_the_margin_over_the_nearest_outsiders() -> None:
    rng = np.random.default_rng(0)
    a, b = _directions(2, 32, rng)
    vectors = np.vstack([_around(a, 6, 0.1, rng), _around(b, 4, 0.1, rng), _around(a + b, 12, 0.3, rng)])
    labels = np.r_[np.zeros(6), np.ones(4), np.full(12, -1)].astype(np.int64)
    quality = cluster_quality(vectors, labels).sort("cluster")
    for cluster in (0, 1):
        own = vectors[labels == cluster]
        sims = own @ own.T
        n = len(own)
        pairwise = (sims.sum() - n) / (n * (n - 1))
        outside = np.mean([np.sort(vectors[labels != cluster] @ v)[-10:].mean() for v in own])
        row = quality.row(cluster, named=True)
        assert row["size"] == n
        assert row["cohesion"] == pytest.approx(pairwise, abs=1e-6)
        assert row["separation"] == pytest.approx(pairwise - outside, abs=1e-6)


def test_asking_for_some_clusters_gives_their_figures_as_asking_for_all() -> None:
    # describe() asks only for the clusters a run touched; the others still count as outsiders
    rng = np.random.default_rng(3)
    a, b, c = _directions(3, 32, rng)
    vectors = np.vstack([_around(a, 8, 0.2, rng), _around(b, 5, 0.2, rng), _around(c, 6, 0.2, rng),
                         _around(a + c, 10, 0.3, rng)])
    labels = np.r_[np.full(8, 4), np.full(5, 7), np.full(6, 9), np.full(10, -1)].astype(np.int64)
    every = cluster_quality(vectors, labels).sort("cluster")
    some = cluster_quality(vectors, labels, only=[7, 4]).sort("cluster")
    assert some.get_column("cluster").to_list() == [4, 7]
    for row in some.iter_rows(named=True):
        full = every.filter(every["cluster"] == row["cluster"]).row(0, named=True)
        assert row == pytest.approx(full)
    alone = cluster_quality(vectors[:8], labels[:8])  # one cluster and nothing else: no outsider, 0
    assert alone.item(0, "separation") == pytest.approx(alone.item(0, "cohesion"))


def test_a_tight_apart_cluster_is_confident_a_loose_one_and_a_pair_need_review() -> None:
    rng = np.random.default_rng(1)
    a, b, c, d = _directions(4, 64, rng)
    tight = _around(a, 15, 0.08, rng)
    loose = _around(b, 15, 0.25, rng)  # its members as alike to the crowd around them as to each other
    crowd = _around(b, 40, 0.25, rng)
    pair = _around(c, 2, 0.05, rng)
    others = _around(d, 20, 0.6, rng)
    vectors = np.vstack([tight, loose, pair, crowd, others])
    labels = np.r_[np.zeros(15), np.ones(15), np.full(2, 2), np.full(60, -1)].astype(np.int64)
    scores = {r["cluster"]: r for r in confidence(vectors, labels).iter_rows(named=True)}
    assert scores[0]["confidence"] > 0.8 and not scores[0]["needs_review"]
    assert scores[1]["separation"] < 0.05 and scores[1]["needs_review"]
    assert scores[2]["confidence"] <= 0.5 and scores[2]["needs_review"]  # a pair never reaches more than 0.5


def test_the_rule_is_the_documented_product() -> None:
    # min(1, s / 0.15) × min(1, c / 0.5) × n / (n + 2), needs review at or below 0.5
    got = RULE.confidence(np.array([0.6, 0.25, 0.6]), np.array([0.3, 0.075, -0.1]), np.array([10.0, 4.0, 30.0]))
    assert got == pytest.approx([10 / 12, 0.5 * 0.5 * 4 / 6, 0.0])
    assert RULE.needs_review(np.array([0.5, 0.51])).tolist() == [True, False]


TRUTH = [json.loads(line) for line in (SAMPLE / "truth.jsonl").read_text().splitlines()]


def test_on_the_sample_planted_problems_are_confident_and_tiny_clusters_need_review(clustered_sample: Path) -> None:
    with Warehouse(clustered_sample) as wh:
        clusters = wh.con.execute(
            """SELECT c.id, c.confidence, c.needs_review, count(m.id) FROM clusters c
               JOIN cluster_members m ON m.cluster_id = c.id WHERE c.view = 'reports' GROUP BY ALL"""
        ).fetchall()
        cluster_of = dict(wh.con.execute("SELECT id, cluster_id FROM cluster_members WHERE view = 'reports'").fetchall())
    assert all(conf is not None and 0 <= conf <= 1 for _, conf, _, _ in clusters)
    by_id = {cid: (conf, review, size) for cid, conf, review, size in clusters}
    units: dict[str, list[str]] = defaultdict(list)
    for t in TRUTH:
        if not t["invalid"] and t.get("record_id") and t.get("problem"):
            units[t["problem"]].append(t["record_id"])
    # The cluster holding most of each planted problem's reports, where one holds most of them.
    homes = {}
    for problem, ids in units.items():
        votes = Counter(cluster_of[i] for i in ids if cluster_of.get(i) is not None)
        if votes and votes.most_common(1)[0][1] >= 0.5 * len(ids):
            homes[problem] = votes.most_common(1)[0][0]
    assert len(homes) >= 12
    flagged = {p: by_id[c] for p, c in homes.items() if by_id[c][1]}
    assert not flagged, flagged
    assert all(review for conf, review, size in by_id.values() if size == 2)


def test_a_merge_describes_the_survivor_again_with_its_confidence(clustered_sample: Path, tmp_path: Path) -> None:
    with Warehouse(sample_copy(clustered_sample, tmp_path)) as wh:
        (a, b), = wh.con.execute(
            """SELECT list(id ORDER BY confidence DESC)[1:2] FROM clusters
               WHERE view = 'reports' AND service = 'acme-companies-api' AND polarity = 'problem'
                 AND NOT needs_review"""
        ).fetchall()[0]
        before = wh.con.execute("SELECT confidence FROM clusters WHERE id = ?", [a]).fetchall()[0][0]
        merge(wh, a, b, "tester")
        after, review = wh.con.execute("SELECT confidence, needs_review FROM clusters WHERE id = ?", [a]).fetchall()[0]
    # Two different problems in one cluster: far less alike inside than either was.
    assert after < before
    assert review == bool(RULE.needs_review(np.array([after]))[0])
