"""The scorers of ``benchmarks/metrics.py`` against their definitions, pair by pair: every
quality table's pairwise figures and "groups found" come from them."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from metrics import bcubed, groups_found, pairwise, scores, singleton_share


def _brute_pairs(predicted: list, gold: list) -> tuple[int, int, int]:
    """(both, predicted, gold) pairs, counted pair by pair: unclustered (-1) pairs with nothing."""
    both = said = true = 0
    for i, j in itertools.combinations(range(len(gold)), 2):
        same_cluster = predicted[i] != -1 and predicted[i] == predicted[j]
        same_gold = gold[i] is not None and gold[i] == gold[j]
        said += same_cluster
        true += same_gold
        both += same_cluster and same_gold
    return both, said, true


@pytest.mark.parametrize("seed", range(8))
def test_pairwise_counts_what_a_pair_by_pair_loop_counts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    predicted = rng.integers(-1, 6, n).tolist()  # -1: unclustered
    gold = [f"g{x}" for x in rng.integers(0, 10, n)]
    both, said, true = _brute_pairs(predicted, gold)
    p, r, f = pairwise(predicted, gold)
    assert (p if said else 0) == pytest.approx(both / said if said else 0)
    assert r == pytest.approx(both / true)
    assert f == pytest.approx(2 * both / (said + true))


def test_unclustered_items_are_singletons_not_one_cluster() -> None:
    gold = ["a", "a", "b", "b"]
    assert pairwise([-1, -1, -1, -1], gold)[1:] == (0.0, 0.0)
    assert math.isnan(pairwise([-1, -1, -1, -1], gold)[0])  # nothing paired: no precision to speak of
    assert pairwise([0, 0, 1, 1], gold) == (1.0, 1.0, 1.0)
    assert pairwise([0, 0, 0, 0], gold) == pytest.approx((2 / 6, 1.0, 4 / 8))


def test_doing_nothing_wins_bcubed_but_not_pairs_on_a_corpus_of_singletons() -> None:
    gold = [f"alone{i}" for i in range(96)] + ["d1", "d1", "d2", "d2"]
    nothing = [-1] * len(gold)
    assert bcubed(nothing, gold)[2] > 0.97
    assert pairwise(nothing, gold)[2] == 0.0
    assert groups_found(nothing, gold).found == 0
    assert singleton_share(gold) == 0.96


def test_groups_found_needs_the_whole_group_in_one_cluster_and_reports_its_purity() -> None:
    gold = ["a", "a", "a", "b", "b", "c", "x", "y", "e", "e", "e"]
    # a whole in a cluster with x; b half unclustered; c a singleton group; two of e's three together
    predicted = [0, 0, 0, 1, -1, 2, 0, 5, 3, 3, 4]
    found = groups_found(predicted, gold)
    assert (found.found, found.groups) == (1, 3)
    assert found.purity == pytest.approx(3 / 4)
    everything = groups_found([0] * len(gold), gold)
    assert (everything.found, everything.purity) == (3, pytest.approx((3 / 11 + 2 / 11 + 3 / 11) / 3))
    assert math.isnan(groups_found([-1] * len(gold), gold).purity)


def test_scores_keeps_its_keys_and_adds_the_pair_scores() -> None:
    s = scores([0, 0, 1, -1], ["a", "a", "b", "b"])
    assert {"P", "R", "F1", "ARI", "V", "unclustered"} <= set(s)
    assert (s["pair P"], s["pair R"], s["pair F1"]) == (1.0, pytest.approx(0.5), pytest.approx(2 / 3))
    assert s["groups found"] == 0.5 and s["unclustered"] == 0.25
