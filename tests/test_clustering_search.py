"""The exact searches behind the separation tests: a bfloat16 first pass rescored in float32
finds the float32 answer, and rows repeated (one vector, one label) are searched once and
counted as many, with the answers of a search over every row."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from feedback_insights.clusters import unit
from feedback_insights.clusters._algorithm import _inside_outside_similarity
from feedback_insights.clusters._search import Scores


def _crowd(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """600 unit vectors in 30 tight groups, a third of them repeats of another row, some
    repeats under another label (a report filed again that a gate left elsewhere)."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.normal(size=(30, 384)))
    labels = rng.integers(0, 30, 400)
    vectors = unit(centres[labels] + 0.6 * rng.normal(size=(400, 384)) / np.sqrt(384))
    again = rng.integers(0, 400, 200)
    relabelled = np.where(rng.random(200) < 0.2, rng.integers(-1, 30, 200), labels[again])
    vectors, labels = np.vstack([vectors, vectors[again]]).astype(np.float32), np.concatenate([labels, relabelled])
    labels[rng.random(600) < 0.1] = -1
    return vectors, labels


def _mean_best(scores: np.ndarray, k: int) -> float:
    best = np.sort(scores)[::-1][:k]
    return float(best.mean()) if len(best) else -1.0


def _reference(vectors: np.ndarray, labels: np.ndarray, outsiders: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Row by row in float64: the mean of each clustered row's k nearest co-members (itself
    excluded, its repeats included) and of its k nearest rows of any other label."""
    everything = np.vstack([vectors, outsiders]).astype(np.float64)
    every_label = np.concatenate([labels, np.full(len(outsiders), -1)])
    scores = everything[: len(vectors)] @ everything.T
    inside, outside = np.zeros(len(vectors)), np.zeros(len(vectors))
    for row in np.flatnonzero(labels >= 0):
        same = every_label == labels[row]
        same[row] = False
        inside[row] = _mean_best(scores[row, same], k)
        outside[row] = _mean_best(scores[row, every_label != labels[row]], k)
    return inside, outside


@pytest.mark.parametrize("low_precision", [False, True])
def test_the_k_best_scores_are_the_exact_ones_with_and_without_a_bfloat16_pass(low_precision: bool) -> None:
    vectors, labels = _crowd()
    search = Scores(vectors, low_precision=low_precision)
    rows = np.flatnonzero(labels >= 0)
    scores = search.block(rows)
    scores[torch.from_numpy(labels[rows][:, None] == labels[None, :])] = -float("inf")  # outsiders only
    values, found = search.top(rows, scores, 10)
    exact = vectors[rows].astype(np.float64) @ vectors.T.astype(np.float64)
    for line, row in enumerate(rows):
        allowed = labels != labels[row]
        assert np.allclose(values[line].numpy(), np.sort(exact[line, allowed])[::-1][:10], atol=1e-6)
        assert allowed[found[line].numpy()].all()
        assert np.allclose(values[line].numpy(), exact[line, found[line].numpy()], atol=1e-6)


def test_a_dense_tie_past_every_candidate_is_searched_exactly() -> None:
    """Forty copies of one vector tie past the widest candidate list (eighty, for k = 2): the
    rows fall back to the float32 product and still get the true best."""
    rng = np.random.default_rng(3)
    base = unit(rng.normal(size=(1, 384)))
    near = unit(base + 0.01 * rng.normal(size=(200, 384)) / np.sqrt(384))
    vectors = np.vstack([np.repeat(base, 40, axis=0), near]).astype(np.float32)
    search = Scores(vectors, low_precision=True)
    rows = np.arange(40, 60)
    scores = search.block(rows)
    values, _ = search.top(rows, scores, 2)
    exact = np.sort(vectors[rows].astype(np.float64) @ vectors.T.astype(np.float64), axis=1)[:, ::-1][:, :2]
    assert np.allclose(values.numpy(), exact, atol=1e-6)


def test_a_row_with_fewer_columns_than_k_gets_what_there_is() -> None:
    vectors, _ = _crowd()
    search = Scores(vectors[:30], low_precision=True)
    rows = np.arange(5)
    scores = search.block(rows)
    scores[:, 3:] = -float("inf")
    values, found = search.top(rows, scores, 10)
    assert torch.isfinite(values).sum(dim=1).tolist() == [3] * 5
    assert set(found[0, :3].tolist()) == {0, 1, 2}


def test_nearest_co_members_and_outsiders_count_every_repeat_as_a_row() -> None:
    vectors, labels = _crowd()
    outsiders = _crowd(seed=1)[0][:150]
    inside, outside = _inside_outside_similarity(vectors, labels, outsiders, within=True)
    expected_inside, expected_outside = _reference(vectors, labels, outsiders)
    clustered = labels >= 0
    assert np.abs(inside - expected_inside)[clustered].max() < 1e-6
    assert np.abs(outside - expected_outside)[clustered].max() < 1e-6
    asked = np.flatnonzero(clustered)[::5]
    _, some = _inside_outside_similarity(vectors, labels, outsiders, rows=asked)
    assert np.abs(some - expected_outside)[asked].max() < 1e-6
    assert not some[np.setdiff1d(np.flatnonzero(clustered), asked)].any()  # rows not asked: 0
