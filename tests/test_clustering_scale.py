"""Large partitions: the approximate index (``approximate_from``) finds what the exact search
finds, repeatably, and the merge without a matrix of all pairs is average linkage."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import orjson

from feedback_insights.clusters import cluster, place, unit
from feedback_insights.clusters._algorithm import (
    _average_linkage,
    _inside_outside_similarity,
    _merge_linked,
    nearest_neighbours,
)
from feedback_insights.clusters._neighbours import knn
from feedback_insights.config import ClusteringConfig

EXACT = ClusteringConfig(approximate_from=10**9)
APPROXIMATE = ClusteringConfig(approximate_from=500)


def _groups(sizes: list[int], spread: float, seed: int = 0, dims: int = 384) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors around random, nearly orthogonal centres; labels say which centre."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.normal(size=(len(sizes), dims)))
    labels = np.repeat(np.arange(len(sizes)), sizes)
    return unit(centres[labels] + spread * rng.normal(size=(len(labels), dims)) / np.sqrt(dims)).astype(np.float32), labels


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two labellings group the items alike (ids may differ, -1 must match)."""
    if not np.array_equal(a < 0, b < 0):
        return False
    pairs = set(zip(a[a >= 0].tolist(), b[b >= 0].tolist(), strict=True))
    return len(pairs) == len(set(a[a >= 0].tolist())) == len(set(b[b >= 0].tolist()))


def _bcubed_f1(predicted: np.ndarray, gold: np.ndarray) -> float:
    """BCubed F1, an unclustered item (-1) being a cluster of its own."""
    p = np.where(predicted >= 0, predicted, -1 - np.arange(len(predicted)))
    g = np.where(gold >= 0, gold, -1 - np.arange(len(gold)))
    same_p, same_g = p[:, None] == p[None, :], g[:, None] == g[None, :]
    both = (same_p & same_g).sum(axis=1)
    precision, recall = np.mean(both / same_p.sum(axis=1)), np.mean(both / same_g.sum(axis=1))
    return float(2 * precision * recall / (precision + recall))


def _clear_data() -> tuple[np.ndarray, np.ndarray]:
    """2,000 reports: 60 problems of 5 to 60 reports (large ones reach past the index's 32
    candidates, so the pooled search for nearest outsiders runs) and one-offs; in 48 of the
    384 dimensions, as sentence embeddings mostly are (the index searches a 64-d projection)."""
    sizes = list(np.random.default_rng(5).integers(5, 61, 60))
    vectors, labels = _groups([*sizes, *[1] * (2000 - sum(sizes))], spread=0.9, seed=2, dims=48)
    rotation = np.linalg.qr(np.random.default_rng(4).normal(size=(384, 48)))[0].T
    return unit(vectors @ rotation).astype(np.float32), labels


def test_above_the_threshold_the_index_finds_the_same_groups_as_the_exact_search() -> None:
    vectors, truth = _clear_data()
    exact, approximate = cluster(vectors, EXACT), cluster(vectors, APPROXIMATE)
    assert _bcubed_f1(approximate, exact) >= 0.99
    assert _bcubed_f1(approximate, np.where(np.bincount(truth)[truth] > 1, truth, -1)) >= 0.98  # the groups are found


def test_above_the_threshold_new_reports_join_and_cluster_as_with_exact_search() -> None:
    vectors, _ = _clear_data()
    order = np.random.default_rng(1).permutation(len(vectors))
    first, second = order[:1400], order[1400:]
    labels = cluster(vectors[first], EXACT)
    kept = labels >= 0
    pending = np.vstack([vectors[second], vectors[first][~kept]])
    fresh = np.r_[np.ones(len(second), bool), np.zeros(int((~kept).sum()), bool)]
    # from 50 rows on: the left-overs re-clustered with the new reports are a few hundred
    exact, approximate = (place(pending, vectors[first][kept], labels[kept], settings, fresh=fresh)
                          for settings in (EXACT, ClusteringConfig(approximate_from=50)))
    # The joiners' re-check compares each joiner's nearest co-members with its nearest
    # outsiders, which the index finds a little further off deep inside a large cluster: one
    # borderline joiner of 558 goes the other way.
    assert np.mean(exact.existing != approximate.existing) <= 0.005
    assert (exact.existing >= 0).sum() > 300  # most of the second part joined the first's clusters
    assert _bcubed_f1(approximate.new, exact.new) >= 0.99


def test_approximate_neighbours_are_the_exact_ones_with_exact_cosines() -> None:
    vectors, _ = _groups([40] * 50, spread=1.2, seed=3, dims=64)
    exact, exact_sims = nearest_neighbours(vectors, 15)
    found, sims = knn(vectors, 15)
    recall = np.mean([len(set(a) & set(b)) / 15 for a, b in zip(exact, found, strict=True)])
    assert recall >= 0.97
    assert not (found == np.arange(len(vectors))[:, None]).any()  # never itself
    assert np.allclose(sims, np.einsum("ij,ikj->ik", vectors, vectors[found]), atol=1e-6)
    assert (np.diff(sims, axis=1) <= 0).all()  # most alike first


def test_approximate_nearest_insiders_and_outsiders_match_the_exact_ones() -> None:
    vectors, truth = _clear_data()
    labels = np.where(np.bincount(truth)[truth] > 1, truth, -1)  # one-offs unclustered
    exact = _inside_outside_similarity(vectors, labels, within=True)
    approximate = _inside_outside_similarity(vectors, labels, within=True, approximate_from=500)
    clustered = labels >= 0
    assert np.abs(exact[0] - approximate[0])[clustered].max() < 1e-5  # nearest co-members: exact
    # Nearest outsiders: exact where a member's 32 candidates reach past its cluster; deep inside
    # a larger one, from the pool of outsiders its cluster found, a little further on average.
    served = clustered & (np.bincount(truth)[truth] <= 32)
    assert np.abs(exact[1] - approximate[1])[served].mean() < 0.005
    assert np.abs(exact[1] - approximate[1])[clustered].mean() < 0.03


def test_merging_by_linked_pairs_is_average_linkage() -> None:
    """With every pair in view the merge makes average linkage's clusters exactly (a random
    mess of overlapping groups, where the order of merges matters)."""
    rng = np.random.default_rng(1)
    for _ in range(3):
        centroids = unit(rng.normal(size=(20, 16))[rng.integers(0, 20, 300)] + rng.normal(scale=0.7, size=(300, 16)))
        centroids = centroids.astype(np.float32)
        assert _same_partition(_average_linkage(centroids, 0.5), _merge_linked(centroids, 0.5, reach=299))


_CLUSTER_APPROXIMATELY = """
import sys
import numpy as np
import orjson
from feedback_insights.clusters import cluster
from feedback_insights.config import ClusteringConfig
rng = np.random.default_rng(7)
centres = rng.normal(size=(40, 384))
truth = rng.integers(0, 40, 1200)
base = centres[truth] + rng.normal(scale=0.9, size=(1200, 384))
weights = 1 / np.arange(1, 1201) ** 1.1
repeated = rng.choice(1200, 300, p=weights / weights.sum())
vectors = np.vstack([base, base[repeated]])  # exact repeats
vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
labels = cluster(vectors, ClusteringConfig(approximate_from=500))
sys.stdout.write(orjson.dumps({"labels": labels.tolist(), "truth": np.r_[truth, truth[repeated]].tolist(),
                               "repeated": repeated.tolist()}).decode())
"""


def test_the_approximate_path_clusters_the_same_whatever_the_thread_count() -> None:
    """A one-thread Dask worker must cluster a large partition as the flow's process does: the
    index is built with one thread and its cosines are recomputed pair by pair. And what both
    find is the planted groups: 1,500 reports around 40 centres, 300 of them exact repeats."""
    runs = []
    for threads in ("2", "1"):
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, "-c", _CLUSTER_APPROXIMATELY], env=env, capture_output=True, text=True,
                              check=True)
        runs.append(orjson.loads(done.stdout))
    assert runs[0]["labels"] == runs[1]["labels"]
    labels, truth, repeated = (np.array(runs[0][key]) for key in ("labels", "truth", "repeated"))
    assert (labels[1200:] == labels[repeated]).all()  # an exact repeat is where its original is
    # The exact search scores 0.967 here (the same partition); leaving all unclustered 0.052, one cluster 0.055.
    assert _bcubed_f1(labels, truth) >= 0.95
