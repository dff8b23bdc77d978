"""The clustering algorithm on synthetic vectors: precision first, incremental, stable."""

from __future__ import annotations

import numpy as np

from feedback_insights.clustering import ClusterSettings, cluster, place, unit


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
    later = place(vectors[~first], vectors[first][kept], member_ids[kept], ClusterSettings())
    assert (later.existing >= 100).all()  # every later report joined its group's cluster
    expected = {t: member_ids[kept][truth[first][kept] == t][0] for t in set(truth)}
    assert [expected[t] for t in truth[~first]] == list(later.existing)
    assert later.new_count == 0


def test_what_joins_nothing_is_clustered_among_itself() -> None:
    old, _ = _groups([5], spread=0.6, seed=7)
    fresh, _ = _groups([4], spread=0.6, seed=8)
    placement = place(fresh, old, np.full(5, 42), ClusterSettings())
    assert (placement.existing == -1).all()
    assert placement.new_count == 1 and (placement.new == 0).all()


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
