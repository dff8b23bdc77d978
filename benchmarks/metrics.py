"""Clustering scores shared by the benchmarks: BCubed, pairwise, duplicate groups found, ARI,
V-measure, unclustered share.

An unclustered item (label -1 or None) counts as a cluster of its own, as MEASURED.md's
reference figures do: leaving a duplicate alone costs recall, never precision. So does a gold
label of None (an item that is the same problem as nothing else).

BCubed averages over items, so on a corpus where most items are alone in their gold group it
rewards doing nothing: on ``bug_duplicates`` (3,375 of 3,467 gold groups have one report)
"every report alone" scores BCubed F1 0.984. The pairwise scores count only the pairs that
matter there — unordered pairs of items, gold-positive when both share a gold label — and
"duplicate groups found" asks of each gold group with two or more members whether one cluster
holds them all, and how pure that cluster is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.metrics import adjusted_rand_score, v_measure_score


def _codes(labels: Sequence) -> np.ndarray:
    """Integer codes with every unclustered item given a code of its own."""
    out = np.empty(len(labels), dtype=np.int64)
    seen: dict = {}
    for i, label in enumerate(labels):
        if label is None or label == -1:
            out[i] = -(i + 1)
        else:
            out[i] = seen.setdefault(label, len(seen))
    return out


def bcubed(predicted: Sequence, gold: Sequence) -> tuple[float, float, float]:
    """BCubed precision, recall and F1 (Amigó et al., 2009)."""
    p, g = _codes(predicted), _codes(gold)
    pairs, joint = np.unique(np.stack([p, g]), axis=1, return_counts=True)
    _, p_inverse, p_size = np.unique(p, return_inverse=True, return_counts=True)
    _, g_inverse, g_size = np.unique(g, return_inverse=True, return_counts=True)
    joint_of = dict(zip(map(tuple, pairs.T.tolist()), joint.tolist(), strict=True))
    shared = np.array([joint_of[(a, b)] for a, b in zip(p.tolist(), g.tolist(), strict=True)])
    precision = float(np.mean(shared / p_size[p_inverse]))
    recall = float(np.mean(shared / g_size[g_inverse]))
    return precision, recall, 2 * precision * recall / (precision + recall)


def _pairs(sizes: np.ndarray) -> int:
    """Unordered pairs within groups of these sizes."""
    sizes = sizes.astype(np.int64)
    return int((sizes * (sizes - 1) // 2).sum())


def pairwise(predicted: Sequence, gold: Sequence) -> tuple[float, float, float]:
    """Pairwise precision, recall and F1 over unordered pairs of items: a pair is predicted
    when both items share a cluster (an unclustered item is in no pair), gold when both share a
    gold label. Counted from the (cluster, label) contingency, not pair by pair. Precision is NaN
    when nothing is paired (no pair predicted, none wrong) and recall NaN when the gold has no
    pair; F1 is ``2·TP / (predicted + gold pairs)``, 0 when either side has pairs and none agree."""
    p, g = _codes(predicted), _codes(gold)
    _, joint = np.unique(np.stack([p, g]), axis=1, return_counts=True)
    both = _pairs(joint)
    said = _pairs(np.unique(p, return_counts=True)[1])
    true = _pairs(np.unique(g, return_counts=True)[1])
    precision = both / said if said else math.nan
    recall = both / true if true else math.nan
    f1 = 2 * both / (said + true) if said + true else math.nan
    return precision, recall, f1


@dataclass(frozen=True, slots=True)
class GroupsFound:
    """Gold groups of two or more members that one cluster holds whole."""

    found: int
    groups: int  # gold groups with ≥ 2 members
    purity: float  # mean, over the groups found, of the share of their cluster's members in the group (NaN: none)

    @property
    def share(self) -> float:
        return self.found / self.groups if self.groups else math.nan


def groups_found(predicted: Sequence, gold: Sequence) -> GroupsFound:
    """How many gold groups of ≥ 2 members have every member in one cluster (unclustered items
    are in none), and the mean purity of those clusters: one cluster of everything finds every
    group at a purity near 0, so the share alone is no score."""
    p, g = _codes(predicted), _codes(gold)
    pairs, joint = np.unique(np.stack([p, g]), axis=1, return_counts=True)
    p_ids, p_size = np.unique(p, return_counts=True)
    g_ids, g_size = np.unique(g, return_counts=True)
    of_cluster = p_size[np.searchsorted(p_ids, pairs[0])]
    of_group = g_size[np.searchsorted(g_ids, pairs[1])]
    whole = (of_group >= 2) & (joint == of_group)  # an unclustered item's code is its own: never whole
    purity = joint[whole] / of_cluster[whole]
    return GroupsFound(int(whole.sum()), int((g_size >= 2).sum()), float(purity.mean()) if whole.any() else math.nan)


def singleton_share(gold: Sequence) -> float:
    """The share of items alone in their gold group."""
    g = _codes(gold)
    _, inverse, size = np.unique(g, return_inverse=True, return_counts=True)
    return float(np.mean(size[inverse] == 1))


def scores(predicted: Sequence, gold: Sequence) -> dict[str, float]:
    """Every score of one labelling: BCubed ``P``/``R``/``F1``, pairwise ``pair P``/``pair R``/
    ``pair F1``, ``groups found`` (share) and ``group purity``, ``ARI``, ``V``, ``unclustered``."""
    p, r, f = bcubed(predicted, gold)
    pp, pr, pf = pairwise(predicted, gold)
    found = groups_found(predicted, gold)
    codes = _codes(predicted)
    return {
        "P": p, "R": r, "F1": f,
        "pair P": pp, "pair R": pr, "pair F1": pf,
        "groups found": found.share, "group purity": found.purity,
        "ARI": adjusted_rand_score(gold, codes),
        "V": v_measure_score(gold, codes),
        "unclustered": float(np.mean(codes < 0)),
    }
