"""Step 11 (revision 4): where problems come in twos and threes, a cluster is a clique of duplicates.

In a corpus of bug reports most reports are alone, and the few duplicates come in pairs and
triples, among hundreds of reports that share a component, a template or a stack trace. There
HDBSCAN's density and the merge of fragments grow *topics*: on ``bug_duplicates`` revision 3
made clusters of 26–34 reports whose pairs were 3–6 % one problem, and of all the pairs it
predicted 0.7 % were duplicates. A topic holds together through chains of look-alikes; a
problem holds together pair by pair.

So where the first pass says problems are small — the first-pass cluster of a typical clustered
report (median over reports, as for smoothing) has at most ``2 × duplicates_up_to + 1``
members — the clusters are instead the complete-linkage cliques of *pair-grade* links: two
reports are pair-grade when their cosine exceeds the mean of their local densities by at
least ``pair_margin``, a report's local density being its mean cosine to ten near distinct
reports (the CSLS correction of cross-lingual retrieval, Conneau et al. 2018; the margin of
bitext mining, Artetxe and Schwenk 2019). The density skips a report's ``2 ×
duplicates_up_to`` nearest, which may be its own problem: else a problem of eight reports
would be its own dense region and fall apart. It holds at every size: a cluster of five must
have all ten of its pairs pair-grade, as a pair must have its one. A report among look-alikes
(a template) has a high density, so a link there must be higher still; a report alone in its
region may link at a lower cosine. Identical texts are one report (twins always share a
cluster). Leaving a report alone is better than putting it with the wrong problem: it stays
visible as unclustered.

Chosen on bug_duplicates and the three 300-text clinc150 draws (``pair_margin`` 0.15, 0.2, 0.25
tried on both; 0.2 the only value above the best single-threshold linkage on the first and
above revision 3 on every draw of the second), checked against the 1,000- and 2,000-text
draws, hwu64 and the full sets, which never take this path (``benchmarks/cluster_quality.py``):
bug_duplicates pairwise F1 0.013 → 0.131 (complete linkage at its best single threshold,
picked with the answers, 0.115); clinc150 300 BCubed F1 0.772 / 0.786 / 0.735 → 0.813 /
0.798 / 0.745 (0.837 / 0.822 / 0.790 before the cosine floor, which a unit test of eight
reports needed: two unrelated reports stood out of densities read from far neighbours).

Linking is read from each report's ``neighbours`` nearest (the neighbour graph of step 2), so
a cluster's candidates are the connected components of pair-grade links — a few reports each
— and the complete-linkage cut runs inside each: the cost grows with the partition, not its
square.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..config import ClusteringConfig
from ._knn import _twins, nearest_neighbours

#: Nearest distinct reports a report's local density averages over.
DENSITY_K = 10


def small_problems(labels: np.ndarray, settings: ClusteringConfig) -> bool:
    """Whether the first pass says problems come in twos and threes: the first-pass cluster of
    a typical clustered report has at most ``2 × duplicates_up_to + 1`` members (the median over
    clustered reports; the same reading as the smoothing reach). False with nothing clustered:
    then nothing says what size problems are, and the first pass stands."""
    _, sizes = np.unique(labels[labels >= 0], return_counts=True)
    if settings.algorithm < 4 or not len(sizes):
        return False
    return (int(np.median(np.repeat(sizes, sizes))) - 1) // 2 <= settings.duplicates_up_to


def pair_floor(settings: ClusteringConfig) -> float:
    """The cosine below which two reports are never pair-grade, whatever their densities: the
    one two left-over reports need to pair in step 6. In a partition of a handful of reports
    the densities are read from far neighbours, and two unrelated reports stood out of them."""
    return max(settings.join_nearest, settings.join_centroid, settings.min_cohesion)


def densities(vectors: np.ndarray, settings: ClusteringConfig, outsiders: np.ndarray | None = None) -> np.ndarray:
    """Each row's mean cosine to :data:`DENSITY_K` near distinct rows of ``vectors`` and
    ``outsiders``: the nearest after the ``2 × duplicates_up_to`` closest, which may be the
    report's own problem (so a problem of five or eight reports is not its own dense region);
    0, the centred background, for a row with none that far. Identical rows are one: a report
    filed ten times is not a dense region either."""
    everything = vectors if outsiders is None or not len(outsiders) else np.vstack([vectors, outsiders])
    kinds, first = np.unique(_twins(everything), return_index=True)
    of_row = np.searchsorted(kinds, _twins(everything))
    distinct = everything[first]
    skip = 2 * settings.duplicates_up_to
    if len(distinct) - 1 <= skip:
        return np.zeros(len(vectors))
    k = min(skip + DENSITY_K, len(distinct) - 1)
    _, sims = nearest_neighbours(distinct, k, twins=np.arange(len(distinct)), approximate_from=settings.approximate_from)
    return sims[:, skip:].mean(axis=1)[of_row[: len(vectors)]].astype(np.float64)


def cliques(vectors: np.ndarray, settings: ClusteringConfig, outsiders: np.ndarray | None = None) -> np.ndarray:
    """Labels ``0 .. m-1`` of the complete-linkage cliques of pair-grade links among ``vectors``
    (``outsiders``, placed elsewhere, count in the densities only); -1 for a report in none."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    n = len(vectors)
    labels = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return labels
    density = densities(vectors, settings, outsiders)
    twins = _twins(vectors)
    k = min(settings.neighbours, n - 1)
    near, sims = nearest_neighbours(vectors, k, twins=twins, approximate_from=settings.approximate_from)
    rows = np.repeat(np.arange(n), k)
    alike = sims >= pair_floor(settings)
    linked = (alike & (sims - (density[:, None] + density[near]) / 2 >= settings.pair_margin)) | (twins[:, None] == twins[near])
    graph = sp.csr_matrix((np.ones(int(linked.sum())), (rows[linked.ravel()], near[linked])), shape=(n, n))
    _, component = csgraph.connected_components(graph, directed=False)
    sizes = np.bincount(component)
    order = np.argsort(component, kind="stable")
    next_id = 0
    for group in np.split(order, np.cumsum(sizes)[:-1]):
        if len(group) < 2:
            continue
        group = np.sort(group)
        cosines = vectors[group] @ vectors[group].T
        margin = np.where(cosines >= pair_floor(settings), cosines - (density[group][:, None] + density[group][None, :]) / 2, -1)
        margin[twins[group][:, None] == twins[group][None, :]] = np.inf  # one report filed twice
        distance = 1 - np.minimum(margin, 1)  # ≥ 0; pair-grade ⇔ distance ≤ 1 − pair_margin
        np.fill_diagonal(distance, 0)
        parts = fcluster(linkage(squareform(distance, checks=False), "complete"), 1 - settings.pair_margin,
                         criterion="distance")
        for part in np.unique(parts):
            members = group[parts == part]
            if len(members) >= 2:
                labels[members] = next_id
                next_id += 1
    return labels


def pair_grade_joins(
    pending: np.ndarray, members: np.ndarray, member_ids: np.ndarray, joins: np.ndarray, settings: ClusteringConfig,
    beyond: np.ndarray | None = None,
) -> np.ndarray:
    """The joins a clique may take: a newcomer joins its cluster only when it is pair-grade with
    every member and with every newcomer admitted before it (closest to the cluster first), so
    a grown cluster is still a clique — what one run over everything would have made of it."""
    joined = np.flatnonzero(joins >= 0)
    if len(joined) == 0:
        return joins
    others = [pending[joins < 0]] + ([beyond] if beyond is not None and len(beyond) else [])
    every = np.vstack([members, pending[joined], *others])
    density = densities(every, settings)
    member_density, joiner_density = density[: len(members)], density[len(members) : len(members) + len(joined)]
    twin = _twins(every)
    member_twin, joiner_twin = twin[: len(members)], twin[len(members) : len(members) + len(joined)]
    joins = joins.copy()
    for cluster in np.unique(joins[joined]):
        these = np.flatnonzero(joins[joined] == cluster)
        own = np.flatnonzero(member_ids == cluster)
        to_members = pending[joined[these]] @ members[own].T
        margin = np.where(to_members >= pair_floor(settings),
                          to_members - (joiner_density[these][:, None] + member_density[own][None, :]) / 2, -1)
        margin[joiner_twin[these][:, None] == member_twin[own][None, :]] = np.inf
        worst = margin.min(axis=1)
        kept: list[int] = []
        for i in np.argsort(-worst, kind="stable"):
            j = these[i]
            if worst[i] < settings.pair_margin:
                continue
            if kept:
                cosines = pending[joined[j]] @ pending[joined[kept]].T
                with_new = np.where(cosines >= pair_floor(settings),
                                    cosines - (joiner_density[j] + joiner_density[kept]) / 2, -1)
                with_new[joiner_twin[j] == joiner_twin[kept]] = np.inf
                if with_new.min() < settings.pair_margin:
                    continue
            kept.append(int(j))
        refused = np.setdiff1d(these, kept)
        joins[joined[refused]] = -1
    return joins
