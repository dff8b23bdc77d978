"""Exact nearest neighbours of unit vectors (an approximate index in large partitions), with
identical rows tied the same way on any number of threads: shared by the algorithm's steps
(:mod:`._algorithm`) and the cliques of step 11 (:mod:`._duplicates`)."""

from __future__ import annotations

import numpy as np

from ._search import Scores


def nearest_neighbours(
    vectors: np.ndarray, k: int, block: int = 4096, twins: np.ndarray | None = None, approximate_from: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine k-nearest neighbours (self excluded) of unit vectors: indices and similarities.

    Identical rows (the same text, reported again) tie exactly, and which of them ``topk``
    returns depends on how the matrix product was split across threads: a Dask worker with one
    thread would cluster differently from the flow's process. So identical rows are found
    first (``twins``: a group id per row, when the caller knows them from before a projection
    that may round them apart) and take each other, in row order, as their nearest neighbours;
    the rest come from the neighbours of one row per group. From ``approximate_from`` distinct
    rows on, those come from an approximate index (:mod:`._neighbours`)."""
    if twins is None:
        twins = _twins(vectors)
    twins = np.asarray(twins).ravel()
    sizes = np.bincount(twins)
    if sizes.max() == 1:
        return _topk(vectors, k, block, approximate_from)
    order = np.argsort(twins, kind="stable")  # the rows of each group, in row order, group after group
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    firsts = order[starts]
    if len(firsts) > 1:
        group_neighbours, group_sims = _topk(vectors[firsts], min(k, len(firsts) - 1), block, approximate_from)
    else:
        group_neighbours, group_sims = np.empty((1, 0), np.int64), np.empty((1, 0), np.float32)
    # What every row of a group sees after its twins: the rows of the group's nearest groups, the
    # first k of each (no row needs more), as one (groups, k) table.
    taken = np.minimum(sizes[group_neighbours], k)
    flat = taken.ravel()
    offsets = np.arange(flat.sum()) - np.repeat(np.cumsum(flat) - flat, flat)
    found = order[np.repeat(starts[group_neighbours].ravel(), flat) + offsets]
    scores = np.repeat(group_sims.ravel(), flat)
    per_group = taken.sum(axis=1)
    begins = np.cumsum(per_group) - per_group
    at = np.minimum(np.arange(k)[None, :], np.maximum(per_group[:, None] - 1, 0)) + begins[:, None]
    if len(found) == 0:  # one group: only twins
        found, scores, at = np.zeros(1, np.int64), np.ones(1, np.float32), np.zeros((len(sizes), k), np.int64)
    indices, sims = found[at][twins], scores[at][twins].astype(np.float32)
    # Rows with twins take them first (in row order), then their group's list; fewer than k
    # others in all repeats the last. One step per group of identical rows, not per row.
    for group in np.flatnonzero(sizes > 1):
        rows = order[starts[group] : starts[group] + sizes[group]]
        m = len(rows)
        twins_of = np.broadcast_to(rows, (m, m))[~np.eye(m, dtype=bool)].reshape(m, m - 1)
        listed = np.hstack([twins_of, indices[rows]])[:, :k]
        listed_sims = np.hstack([np.ones((m, m - 1), np.float32), sims[rows]])[:, :k]
        if per_group[group] == 0 and m - 1 < k:  # no other group: the last twin repeats
            listed[:, m - 1 :], listed_sims[:, m - 1 :] = listed[:, m - 2 : m - 1], 1.0
        indices[rows], sims[rows] = listed, listed_sims
    return indices, sims


def _topk(vectors: np.ndarray, k: int, block: int, approximate_from: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Blocked matrix products searched with ``torch.topk`` (numpy's argpartition was twice the
    whole clustering time at 50k points), exact (:mod:`._search`); an approximate index from
    ``approximate_from`` rows on."""
    if approximate_from is not None and len(vectors) >= approximate_from:
        from ._neighbours import knn

        return knn(vectors, k)
    import torch

    search = Scores(vectors)
    n = len(vectors)
    indices = np.empty((n, k), dtype=np.int64)
    sims = np.empty((n, k), dtype=np.float32)
    for start in range(0, n, block):
        rows = np.arange(start, min(start + block, n))
        scores = search.block(rows)
        scores[torch.arange(len(rows)), torch.from_numpy(rows)] = -float("inf")
        values, found = search.top(rows, scores, k)
        indices[rows], sims[rows] = found.numpy(), values.numpy()
    return indices, sims


def _twins(vectors: np.ndarray) -> np.ndarray:
    """A group id per row, the same for identical rows."""
    rows = np.ascontiguousarray(vectors)
    return np.unique(rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel(), return_inverse=True)[1].ravel()
