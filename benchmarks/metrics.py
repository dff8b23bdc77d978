"""Clustering scores shared by the benchmarks: BCubed, ARI, V-measure, unclustered share.

An unclustered item (label -1 or None) counts as a cluster of its own, as MEASURED.md's
reference figures do: leaving a duplicate alone costs recall, never precision.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def scores(predicted: Sequence, gold: Sequence) -> dict[str, float]:
    p, r, f = bcubed(predicted, gold)
    codes = _codes(predicted)
    return {
        "P": p, "R": r, "F1": f,
        "ARI": adjusted_rand_score(gold, codes),
        "V": v_measure_score(gold, codes),
        "unclustered": float(np.mean(codes < 0)),
    }
