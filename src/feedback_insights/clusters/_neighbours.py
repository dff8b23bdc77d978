"""Approximate nearest neighbours for large partitions: an HNSW graph (``usearch``) proposes
candidates, exact cosines on them decide.

Exact neighbours cost a matrix product over every pair, so clustering one partition grew with
n² (at 50,000 reports the nearest-outsider searches alone took 270 of 306 s). Above
``ClusteringConfig.approximate_from`` rows the algorithm asks this module instead. Three
choices keep its answers repeatable, as the exact path's are (a Dask worker with one thread
must cluster like the flow's process):

- the graph is built with one thread, so its links do not depend on the order in which
  threads inserted rows; searching it is a pure function of the graph, per query, so queries
  may use every core;
- the similarities returned are recomputed from the vectors, one dot product per pair (no
  product of large matrices whose rounding depends on how it was split across threads), not
  taken from the index's kernels — which may also search a projection of the vectors;
- candidates are ordered by similarity, then by row, so ties break the same way every time.

usearch rather than faiss: its thread count is an argument of each call, where faiss's is
OpenMP's process-wide setting, which a one-thread build would have to flip under every other
thread of a Dask worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from usearch.index import Index

#: Graph degree and build beam: recall 0.99 of the exact 15 nearest on 64-d projections of
#: real report vectors (benchmarks/cluster_scale.py), at a tenth of a beam of 128's build time.
CONNECTIVITY = 12
EXPANSION_ADD = 48
#: The search beam: at least this, and twice the neighbours asked for.
EXPANSION_SEARCH = 64
_BLOCK = 4096


def build(vectors: np.ndarray) -> Index:
    """An inner-product HNSW index over unit ``vectors`` (row ``i`` under key ``i``), built
    with one thread so that the same rows always give the same graph."""
    from usearch.index import Index

    index = Index(
        ndim=vectors.shape[1], metric="ip", dtype="f32",
        connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH,
    )
    index.add(np.arange(len(vectors), dtype=np.uint64), np.ascontiguousarray(vectors, dtype=np.float32), threads=1)
    return index


class Neighbourhood:
    """An index over the rows of ``vectors``, searched in ``space`` (their projection, row for
    row; default the vectors themselves), answering with exact cosines on ``vectors``."""

    def __init__(self, vectors: np.ndarray, space: np.ndarray | None = None) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.space = self.vectors if space is None else np.ascontiguousarray(space, dtype=np.float32)
        self.index = build(self.space)

    def of_rows(self, rows: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``count`` nearest other rows to each of ``rows``: row indices, most alike first, and cosines."""
        return self.search(self.space[rows], self.vectors[rows], count, own=rows)

    def search(
        self, queries: np.ndarray, full: np.ndarray, count: int, own: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``count`` nearest rows to each query (``queries`` in the search space, ``full``
        the same queries as vectors); ``own[i]``, when given, is the row query ``i`` is, never
        its own neighbour."""
        count = min(count, len(self.vectors) - (own is not None))
        wanted = count + (own is not None)
        from usearch.index import BatchMatches

        # usearch's setter is declared in a way mypy reads as no setter
        self.index.expansion_search = max(EXPANSION_SEARCH, 2 * wanted)  # type: ignore[misc]
        found = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), wanted, threads=0)
        if isinstance(found, BatchMatches):
            keys, counts = np.asarray(found.keys, dtype=np.int64), np.asarray(found.counts)
        else:  # one query: its matches alone, trimmed
            keys = np.zeros((1, wanted), dtype=np.int64)
            keys[0, : len(found.keys)] = found.keys
            counts = np.array([len(found.keys)])
        valid = np.arange(wanted)[None, :] < counts[:, None]
        if own is not None:
            valid &= keys != np.asarray(own)[:, None]
        keys = np.where(valid, keys, 0)
        sims = np.where(valid, _dots(full, self.vectors, keys), -np.inf).astype(np.float32)
        order = np.lexsort((keys, -sims), axis=1)[:, :count]
        keys, sims = np.take_along_axis(keys, order, axis=1), np.take_along_axis(sims, order, axis=1)
        short = np.flatnonzero(~np.isfinite(sims[:, -1])) if count else np.empty(0, np.int64)
        if len(short):  # the graph gave too few (rare): those rows, exactly
            keys[short], sims[short] = exact(self.vectors, full[short], count, None if own is None else own[short])
        return keys, sims


def exact(
    vectors: np.ndarray, queries: np.ndarray, count: int, own: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Neighbourhood.search` by brute force, for the few rows the graph cannot serve."""
    keys = np.empty((len(queries), count), dtype=np.int64)
    sims = np.empty((len(queries), count), dtype=np.float32)
    columns = np.arange(len(vectors))
    for start in range(0, len(queries), _BLOCK):
        block = queries[start : start + _BLOCK]
        scores = _dots(block, vectors, np.broadcast_to(columns, (len(block), len(vectors))))
        if own is not None:
            scores[np.arange(len(block)), own[start : start + _BLOCK]] = -np.inf
        order = np.lexsort((np.broadcast_to(columns, scores.shape), -scores), axis=1)[:, :count]
        keys[start : start + _BLOCK], sims[start : start + _BLOCK] = order, np.take_along_axis(scores, order, axis=1)
    return keys, sims


def _dots(queries: np.ndarray, vectors: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``queries[i] · vectors[keys[i, j]]``: one small product per query, so each cosine is
    computed the same way whatever the thread count."""
    out = np.empty(keys.shape, dtype=np.float32)
    step = max(1, 2**14 // max(keys.shape[1], 1))  # rows gathered at a time: a few megabytes
    for start in range(0, len(keys), step):
        block = keys[start : start + step]
        out[start : start + step] = np.matmul(vectors[block], queries[start : start + step, :, None])[..., 0]
    return out


def knn(vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Approximate k-nearest neighbours of each row among the others (``_knn._topk``'s answer)."""
    return Neighbourhood(vectors).of_rows(np.arange(len(vectors)), k)


def nearest(vectors: np.ndarray, queries: np.ndarray, count: int) -> np.ndarray:
    """The rows of ``vectors`` among the ``count`` nearest to some query."""
    keys, _ = Neighbourhood(vectors).search(queries, queries, count)
    return np.unique(keys)


def inside_outside(
    everything: np.ndarray, space: np.ndarray, labels: np.ndarray, members: np.ndarray, within: bool, k: int,
    count: int = 32, wide: int = 160,
) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``members`` (clustered rows of ``everything``, whose cluster ids are
    ``labels``; ``space`` their projection, where the index searches): the mean cosine to its
    ``k`` nearest co-members (only ``within``, else zeros) and to its ``k`` nearest rows of
    another label (-1 when there are none), as ``_algorithm._inside_outside_similarity``
    computes them exactly.

    Each member's ``count`` nearest rows serve most members; those of a member whose list holds
    fewer than ``k`` of either kind, its ``wide`` nearest. What is left is deep inside a cluster
    larger than that, per cluster: co-members exactly among the cluster; nearest outsiders
    exactly over the outsiders any member of the cluster found (or, if none did, those among
    the nearest rows to its centroid)."""
    near = Neighbourhood(everything, space)
    own_label = labels[members]
    _, position, sizes = np.unique(own_label, return_inverse=True, return_counts=True)
    size = sizes[position]
    want_out, want_in = np.minimum(k, len(everything) - size), np.minimum(k, size - 1)
    inside, outside = np.zeros(len(members)), np.full(len(members), -1.0)
    short_in, short_out = np.zeros(len(members), bool), np.ones(len(members), bool)
    seen: list[tuple[np.ndarray, np.ndarray]] = []  # (positions in members, the outsiders each found)
    for reach in (count, wide):
        rows = np.flatnonzero(short_in | short_out)
        if len(rows) == 0:
            break
        found, sims = near.of_rows(members[rows], reach)
        same = labels[found] == own_label[rows][:, None]
        outside[rows], got_out = _first_mean(sims, ~same, k)
        short_out[rows] = got_out < want_out[rows]
        if within:
            inside[rows], got_in = _first_mean(sims, same, k)
            short_in[rows] = got_in < want_in[rows]
        seen.append((rows, np.where(same, -1, found)))
    order = np.argsort(position, kind="stable")
    bounds = np.r_[0, np.cumsum(sizes)]
    owner = np.concatenate([rows for rows, _ in seen])
    outsiders = np.vstack([np.pad(o, ((0, 0), (0, wide - o.shape[1])), constant_values=-1) for _, o in seen])
    for cluster in np.unique(position[short_out | short_in]):
        rows = order[bounds[cluster] : bounds[cluster + 1]]  # positions in members of this cluster's rows
        group = members[rows]
        fix = rows[short_in[rows]]
        if len(fix):
            scores = everything[members[fix]] @ everything[group].T
            scores[members[fix][:, None] == group[None, :]] = -np.inf
            inside[fix] = _top_mean(scores, k)
        fix = rows[short_out[rows]]
        if len(fix):
            pool = outsiders[np.isin(owner, rows)]
            pool = np.unique(pool[pool >= 0])
            if len(pool) == 0:
                pool = _around(near, group, labels, count)
            outside[fix] = _top_mean(everything[members[fix]] @ everything[pool].T, k)
    return inside, outside


def _around(near: Neighbourhood, group: np.ndarray, labels: np.ndarray, count: int) -> np.ndarray:
    """Rows of another label among the ``len(group) + count`` nearest to the group's centroid
    (every row of another label if the index finds none)."""
    label = labels[group[0]]
    centroid = near.space[group].sum(axis=0, keepdims=True)
    full = near.vectors[group].sum(axis=0, keepdims=True)
    around, _ = near.search(centroid / np.linalg.norm(centroid), full / np.linalg.norm(full), len(group) + count)
    pool = around[0][labels[around[0]] != label]
    return pool if len(pool) else np.flatnonzero(labels != label)


def _first_mean(sims: np.ndarray, keep: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the mean of the first ``k`` ``sims`` that ``keep`` marks (-1 for none) and how many there were."""
    taken = keep & (np.cumsum(keep, axis=1) <= k) & np.isfinite(sims)
    counts = taken.sum(axis=1)
    means = np.where(counts > 0, np.where(taken, sims, 0).sum(axis=1) / np.maximum(counts, 1), -1.0)
    return means, counts


def _top_mean(scores: np.ndarray, k: int) -> np.ndarray:
    """Row means of the ``k`` largest finite ``scores`` (-1 for a row with none)."""
    if scores.shape[1] > k:
        scores = -np.partition(-scores, k - 1, axis=1)[:, :k]
    finite = np.isfinite(scores)
    counts = finite.sum(axis=1)
    return np.where(counts > 0, np.where(finite, scores, 0).sum(axis=1) / np.maximum(counts, 1), -1.0)
