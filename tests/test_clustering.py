"""The clustering algorithm on synthetic vectors: precision first, incremental, stable."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from feedback_insights.clusters import cluster, place, smoothing_reach, unit
from feedback_insights.clusters._algorithm import (
    _around_fresh,
    _hdbscan,
    _loose,
    _recheck_members,
    _smoothed_gate,
    _snn_distances,
    nearest_neighbours,
)
from feedback_insights.config import ClusteringConfig


def _groups(sizes: list[int], spread: float, seed: int = 0, dims: int = 384) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors around random, nearly orthogonal centres; labels say which centre."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.normal(size=(len(sizes), dims)))
    labels = np.repeat(np.arange(len(sizes)), sizes)
    return unit(centres[labels] + spread * rng.normal(size=(len(labels), dims)) / np.sqrt(dims)), labels


def _pure(found: np.ndarray, truth: np.ndarray) -> bool:
    return all(len(set(truth[found == c])) == 1 for c in set(found[found >= 0]))


def test_tight_groups_are_found_and_never_mixed() -> None:
    vectors, truth = _groups([2, 3, 5, 8, 13], spread=0.6)
    noise, _ = _groups([1] * 20, spread=0.0, seed=1)
    found = cluster(np.vstack([vectors, noise]))
    assert _pure(found[: len(truth)], truth)
    assert len(set(found[: len(truth)])) == 5 and -1 not in found[: len(truth)]  # every group, pairs too
    assert (found[len(truth):] == -1).all()  # lone reports stay unclustered


def test_a_pair_is_a_cluster_only_when_alike() -> None:
    alike, _ = _groups([2], spread=0.5)
    strangers, _ = _groups([1, 1], spread=0.0, seed=3)
    assert list(cluster(alike)) == [0, 0]
    assert list(cluster(strangers)) == [-1, -1]


def test_new_vectors_join_close_clusters_and_members_never_move() -> None:
    vectors, truth = _groups([6, 6, 6, 6], spread=0.6, seed=5)
    first = np.arange(len(truth)) % 3 != 0  # two thirds now, a third later
    labels = cluster(vectors[first])
    member_ids = labels + 100  # the caller's ids
    kept = labels >= 0
    later = place(vectors[~first], vectors[first][kept], member_ids[kept], ClusteringConfig())
    assert (later.existing >= 100).all()  # every later report joined its group's cluster
    expected = {t: member_ids[kept][truth[first][kept] == t][0] for t in set(truth)}
    assert [expected[t] for t in truth[~first]] == list(later.existing)
    assert later.new_count == 0


def test_what_joins_nothing_is_clustered_among_itself() -> None:
    old, _ = _groups([5], spread=0.6, seed=7)
    fresh, _ = _groups([4], spread=0.6, seed=8)
    placement = place(fresh, old, np.full(5, 42), ClusteringConfig())
    assert (placement.existing == -1).all()
    assert placement.new_count == 1 and (placement.new == 0).all()


def test_newcomers_cannot_turn_a_tight_cluster_into_a_loose_one() -> None:
    """Each newcomer passes the joining rule on its own, but the 30 of them are barely alike
    (cosine ≈ 0.34 to each other): together they would make a cluster the gate dissolves."""
    rng = np.random.default_rng(11)
    centre = unit(rng.normal(size=(1, 384)))
    members = unit(centre + 0.2 * unit(rng.normal(size=(3, 384))))
    away = unit(rng.normal(size=(30, 384)))
    away = unit(away - (away @ centre.T) * centre)  # orthogonal to the centre
    newcomers = unit(0.58 * centre + np.sqrt(1 - 0.58**2) * away)
    no_centring = np.zeros(384, dtype=np.float32)
    ids = np.full(3, 7)

    alone = place(newcomers[:1], members, ids, ClusteringConfig(), centre=no_centring)
    assert list(alone.existing) == [7]
    together = place(newcomers, members, ids, ClusteringConfig(), centre=no_centring)
    assert (together.existing == -1).all()
    assert (together.new == -1).all()  # nor are they alike enough to make a cluster of their own


def test_a_cluster_merged_by_a_maintainer_still_takes_reports_of_either_half() -> None:
    """Two unalike groups under one id (``clusters merge``) fail the gate together; a report
    close to one half still joins a curated cluster, as the joining rule alone would have it."""
    halves, _ = _groups([4, 4], spread=0.6, seed=13)
    newcomer = unit(halves[4:].mean(axis=0, keepdims=True) + 0.03 * np.random.default_rng(14).normal(size=(1, 384)))
    no_centring = np.zeros(384, np.float32)
    merged = place(newcomer, halves, np.full(8, 5), ClusteringConfig(), centre=no_centring, curated=np.array([5]))
    assert list(merged.existing) == [5]
    uncurated = place(newcomer, halves, np.full(8, 5), ClusteringConfig(), centre=no_centring)
    assert list(uncurated.existing) == [-1]


def test_only_left_overs_near_a_new_report_are_clustered_again() -> None:
    """A new cluster must hold a new report, so of the earlier left-overs only those among a
    new report's 2 × neighbours nearest are worth re-clustering; the others are set aside."""
    vectors, _ = _groups([5, 10], spread=0.6, seed=17)
    fresh = np.zeros(15, dtype=bool)
    fresh[0] = True  # one new report in the first group, the rest are earlier left-overs
    rest = np.arange(15)
    clustered, aside = _around_fresh(vectors, rest, fresh, ClusteringConfig(neighbours=2))
    assert list(clustered) == [0, 1, 2, 3, 4] and list(aside) == list(range(5, 15))
    nothing_new, all_aside = _around_fresh(vectors, rest, np.zeros(15, dtype=bool), ClusteringConfig())
    assert len(nothing_new) == 0 and list(all_aside) == list(rest)


def test_hdbscan_labels_are_the_hdbscan_packages_own() -> None:
    """``_hdbscan`` computes the mutual reachability graph itself (the package's sparse path does
    it entry by entry in Python) and hands the rest to the package: the labels must not change,
    also where the neighbour graph falls apart into bridged components."""
    import hdbscan

    groups, _ = _groups([2, 3, 5, 8, 13, 21], spread=0.9, seed=21)
    noise, _ = _groups([1] * 15, spread=0.0, seed=22)
    vectors = np.vstack([groups, noise])
    distances = _snn_distances(nearest_neighbours(vectors, 6)[0])
    for single in (False, True):
        expected = hdbscan.HDBSCAN(
            metric="precomputed", min_cluster_size=2, min_samples=2, max_dist=2.0, allow_single_cluster=single
        ).fit_predict(distances)
        assert expected.max() >= 3  # a non-trivial case
        assert list(_hdbscan(distances, ClusteringConfig(), len(vectors), single)) == list(expected)


def test_smoothing_reaches_half_as_far_as_a_typical_reports_cluster_has_other_members() -> None:
    """Half as many as a typical report's cluster has other members. The median is taken over
    clustered reports, not over clusters: 63 reports, of which 42 are in clusters of 12 or
    more, make a typical report's cluster 12 strong, so the reach is 11 // 2."""
    settings = ClusteringConfig(smooth_from=5)
    assert smoothing_reach(np.repeat(np.arange(5), [9, 10, 12, 30, 2]), 15, settings) == 5
    assert smoothing_reach(np.repeat(np.arange(3), [40, 50, 60]), 15, settings) == 15  # at most k
    assert smoothing_reach(np.repeat(np.arange(6), [2, 3, 4, 5, 6, 7]), 15, settings) == 0  # too sparse
    assert smoothing_reach(np.full(10, -1), 15, settings) == 0  # nothing clustered
    # Many pairs beside a few large clusters (broad problems with near-identical phrasings
    # paired off): a median over clusters would call this sparse; most reports are not.
    pairs_and_large = np.repeat(np.arange(23), [2] * 20 + [20, 25, 30])
    assert smoothing_reach(pairs_and_large, 15, settings) == 9  # a typical report is in the cluster of 20


def test_a_broad_problem_apart_from_its_neighbours_survives_the_smoothed_gate() -> None:
    """A problem phrased along a range (a chain of reports from one wording to another) has a
    low mean pairwise similarity, lower than its members' similarity to a parallel group of
    other reports: the pairwise test dissolves it. Each member's nearest co-members are far
    more alike to it than its nearest outsiders, which is what the smoothed gate asks."""
    rng = np.random.default_rng(0)
    c = unit(rng.normal(size=(4, 384)))
    t = np.linspace(0, 1, 60)[:, None]

    def chain(shift: float) -> np.ndarray:
        path = np.where(t < 0.5, (1 - 2 * t) * c[0] + 2 * t * c[1], (2 - 2 * t) * c[1] + (2 * t - 1) * c[2])
        return unit(unit(path) + shift * c[3] + 0.3 * rng.normal(size=(60, 384)) / np.sqrt(384))

    vectors = np.vstack([chain(0.0), chain(1.0)])
    labels = np.concatenate([np.zeros(60, np.int64), np.full(60, -1)])
    settings = ClusteringConfig()
    assert list(_loose(vectors, labels, settings)[1]) == [True]
    assert list(_loose(vectors, labels, _smoothed_gate(settings), smoothed=True)[1]) == [False]


def test_a_member_carried_in_by_smoothing_is_taken_out_on_its_own_vector() -> None:
    """Step 9: a report labelled into group A whose own vector sits among group B's reports
    (smoothing pulled it across) leaves A; A's own members, and B, stay as they were."""
    vectors, truth = _groups([10, 10], spread=0.6, seed=23)
    stray = unit(vectors[10:].mean(axis=0, keepdims=True) + 0.05 * np.random.default_rng(24).normal(size=(1, 384)))
    labels = np.concatenate([truth, [0]])  # the stray is put in A
    checked = _recheck_members(np.vstack([vectors, stray]), labels, ClusteringConfig())
    assert list(checked[:20]) == list(truth) and checked[20] == -1


def test_loose_groups_are_left_unclustered() -> None:
    loose, _ = _groups([6], spread=3.0, seed=9)  # members barely alike
    assert (cluster(loose) == -1).all()


def test_a_new_cluster_must_hold_something_new() -> None:
    # Earlier left-overs that cluster only among themselves are left as they were; with one
    # fresh report among them, they form a cluster.
    leftovers, _ = _groups([4], spread=0.6, seed=11)
    stale = place(leftovers, np.empty((0, 384), np.float32), np.empty(0, np.int64), fresh=np.zeros(4, bool))
    assert stale.new_count == 0 and (stale.new == -1).all()
    one_new = place(leftovers, np.empty((0, 384), np.float32), np.empty(0, np.int64),
                    fresh=np.array([False, False, False, True]))
    assert one_new.new_count == 1 and (one_new.new == 0).all()


_CLUSTER_WITH_TWINS = """
import sys, numpy as np
from feedback_insights.clusters import cluster
from feedback_insights.config import ClusteringConfig
rng = np.random.default_rng(7)
centres = rng.normal(size=(20, 384))
base = centres[rng.integers(0, 20, 300)] + rng.normal(scale=0.8, size=(300, 384))
weights = 1 / np.arange(1, 301) ** 1.1
vectors = np.vstack([base, base[rng.choice(300, 200, p=weights / weights.sum())]])  # exact repeats
vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
sys.stdout.write(",".join(map(str, cluster(vectors, ClusteringConfig()))))
"""


def test_repeated_reports_cluster_the_same_whatever_the_thread_count() -> None:
    """Exact repeats tie in the kNN search, and how ``topk`` breaks a tie depends on how the
    matrix product was split across threads: a one-thread Dask worker clustered the same
    vectors differently (177 of 500 labels, before the fix)."""
    runs = []
    for threads in ("2", "1"):
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, "-c", _CLUSTER_WITH_TWINS], env=env, capture_output=True, text=True, check=True)
        runs.append(done.stdout)
    assert runs[0] == runs[1] and runs[0].count("-1") < 400


def test_a_repeated_row_lists_its_twins_first() -> None:
    vectors = unit(np.random.default_rng(3).normal(size=(30, 16)).astype(np.float32))
    vectors = np.vstack([vectors, vectors[[4, 4, 9]]])  # rows 30 and 31 repeat row 4, 32 repeats 9
    indices, sims = nearest_neighbours(vectors, 3)
    assert set(indices[4, :2]) == {30, 31} and list(sims[4, :2]) == [1.0, 1.0]
    assert indices[32, 0] == 9 and indices[9, 0] == 32


def _topic_among_pairs(seed: int = 0, dims: int = 384) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A corpus where problems come in twos: 40 reports sharing a template (cosine ≈ 0.58 to
    each other), six pairs of them true duplicates (≈ 0.8); 30 pairs of duplicates elsewhere;
    100 lone reports. Returns the vectors, the gold duplicate group (-1: none) and the
    template's direction."""
    rng = np.random.default_rng(seed)
    template = unit(rng.normal(size=(1, dims)))
    own = unit(rng.normal(size=(40, dims)))
    own[1:12:2] = own[0:12:2]  # a duplicate pair says the same thing
    in_topic = unit(0.85 * template + 0.5 * own + 0.025 * rng.normal(size=own.shape))
    apart = unit(rng.normal(size=(30, dims)))
    twos = unit(np.repeat(apart, 2, axis=0) + 0.03 * rng.normal(size=(60, dims)))
    lone = unit(rng.normal(size=(100, dims)))
    gold = np.concatenate([np.repeat(np.arange(6), 2), np.full(28, -1), 6 + np.repeat(np.arange(30), 2), np.full(100, -1)])
    return np.vstack([in_topic, twos, lone]), gold, template


def _as_gold(found: np.ndarray, gold: np.ndarray) -> bool:
    """Exactly the gold duplicate groups, and nothing else clustered."""
    if not np.array_equal(found < 0, gold < 0):
        return False
    pairs = set(zip(found[found >= 0].tolist(), gold[gold >= 0].tolist(), strict=True))
    return len(pairs) == len(set(found[found >= 0].tolist())) == len(set(gold[gold >= 0].tolist()))


def test_a_topic_of_look_alikes_is_split_into_the_duplicates_inside_it() -> None:
    vectors, gold, _ = _topic_among_pairs()
    before = cluster(vectors, ClusteringConfig(version="3", algorithm=3))
    assert len(set(before[:40])) == 1 and before[0] >= 0  # revision 3 chained the whole topic into one cluster
    found = cluster(vectors)
    assert _as_gold(found, gold)  # the six pairs inside the topic, the thirty outside, no topic, no stray


def test_repeats_of_one_report_stay_together_where_problems_are_pairs() -> None:
    vectors, gold, _ = _topic_among_pairs(seed=1)
    repeated = np.vstack([vectors, np.repeat(vectors[-1:], 4, axis=0)])  # a lone report filed four times more
    found = cluster(repeated)
    assert len(set(found[-5:])) == 1 and found[-1] >= 0
    assert _as_gold(found[:-5], gold[:-1])  # the rest as before: the repeats made no dense region


def test_a_newcomer_joins_a_clique_only_when_it_is_pair_grade_with_every_member() -> None:
    vectors, gold, template = _topic_among_pairs(seed=2)
    labels = cluster(vectors)
    kept = labels >= 0
    rng = np.random.default_rng(9)
    third_copy = unit(vectors[:1] + vectors[1:2] + 0.03 * rng.normal(size=(1, vectors.shape[1])))[0]  # a third of the first pair
    look_alike = unit(0.85 * template + 0.5 * unit(rng.normal(size=(1, vectors.shape[1]))))[0]  # the template, another problem
    # As the pipeline runs: the new reports and the earlier left-overs are offered together.
    pending = np.vstack([third_copy, look_alike, vectors[~kept]])
    fresh = np.arange(len(pending)) < 2
    later = place(pending, vectors[kept], labels[kept] + 100, ClusteringConfig(), fresh=fresh)
    assert later.existing[0] == labels[0] + 100
    assert later.existing[1] == -1 and later.new[1] == -1  # alike only by the template: it stays alone
    assert (later.existing[2:] == -1).all() and (later.new[2:] == -1).all()  # and so do the left-overs
