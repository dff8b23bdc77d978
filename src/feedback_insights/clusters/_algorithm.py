"""Precision-first clustering of report embeddings, incremental, with stable ids.

Merging two different problems into one issue is worse than splitting one, so every step leans
towards precision. Raw HDBSCAN on 384-d vectors grows with n² and UMAP costs a minute of
compilation per process, so neither is used directly. The steps:

1. **Centre** the vectors on the view's background direction (:func:`background`) and
   re-normalise: sentence embeddings share a large common direction (reports about one service
   all "look alike"); removing it lets one set of cosine thresholds hold across corpora.
2. **Neighbours:** exact k-nearest neighbours (blocked matrix products) on a 64-d PCA
   projection: cheap, and as good as 384-d for neighbour search (approximate in a large
   partition: see below).
3. **HDBSCAN** (``hdbscan`` package, clusters of two allowed) on shared-nearest-neighbour
   distances (``1 − |N(i) ∩ N(j)| / (k + 1)``) over that sparse graph: density that adapts to
   the local scale. It yields pure fragments.
4. **Merge fragments** whose centroids are close (average linkage, ``merge_similarity``).
5. **Attach** left-over points by the rule that places a new report in an existing cluster
   (:func:`assign`): its nearest centroid must be close *and* so must one member; then **trim**
   members the same rule would not admit, so one stray report cannot sink a cluster.
6. **Pairs:** two left-over reports that are each other's nearest and would each join the
   other form a cluster (HDBSCAN's density view misses duplicates that come in twos, the
   common case); attach and trim again.
7. **Cohesion gate:** a cluster whose members are, on average, less alike than
   ``min_cohesion``, or hardly more alike to each other (mean over all pairs) than to their
   ten nearest outsiders (``separation``), is dissolved: better unclustered than merged wrongly.
8. **Smoothing**, where problems are well populated. ``m`` is the size of the first-pass
   cluster (steps 3–7) a typical clustered report is in (the median over clustered reports,
   so many pairs beside a few large clusters do not make a corpus look sparse); when
   ``(m − 1) // 2`` is at least ``smooth_from``, each vector is pulled towards that many
   nearest neighbours (at most ``neighbours``): ``x ← 0.3·x₀ + 0.7·W x``, twice, ``W`` the
   cosine weights of the neighbour graph. Half a typical cluster, so that even a report at
   the edge of its problem is pulled mostly by reports of that problem. Steps 2–6 run again
   with HDBSCAN and the merge on the smoothed vectors (``smoothed_merge_similarity``);
   attaching, trimming and pairing still judge the reports themselves. The gate on the
   smoothed vectors compares like with like: each member's ten nearest co-members against
   its ten nearest outsiders, at least ``smoothed_separation`` apart on average (the mean over
   all pairs of a large, broad problem is lower than its members' similarity to their nearest
   outsiders even when it stands well apart, so the test of step 7 dissolved most of hwu64's
   intents). Averaging over a neighbourhood removes the noise of single phrasings, so a
   problem with thirty reports comes out as one cluster instead of several fragments. With a
   handful of reports per problem a report's neighbours are mostly other problems' reports
   and averaging would merge them: that is why the first pass decides.
9. **Members re-checked on their own vectors** (after step 8 only, twice): a member whose ten
   nearest co-members are on average less alike to it than its ten nearest outsiders, by more
   than ``−member_separation`` (0.02), was carried in by its neighbours' phrasing and leaves;
   a cluster left with one member dissolves. Smoothing buys recall; this step keeps it from
   paying with precision. The separation tests (steps 7–9) are relative — a report's or a
   cluster's nearest insiders, or all its pairs, against its nearest outsiders — so they hold
   in corpora of tight and of broad problems alike; ``min_cohesion``, the merge thresholds
   and the joining rule are the absolute cosines.
10. **A second chance** (after step 9 only, :func:`_second_chance`): the reports the gates
    left out are offered to the clusters that passed them, as the next run would offer them
    (below). A report attached in step 5 to a cluster that step 8's gate dissolved, or taken
    out in step 9 from a cluster it then fits no worse than its neighbours, was otherwise
    offered again only by the next run, so one run and two runs over the same reports differed.

11. **Problems that come in twos and threes** (revision 4, :mod:`._duplicates`): where the
    first pass's typical cluster (median over clustered reports, after the gate) has at most
    ``2 × duplicates_up_to + 1`` members, steps 8–10 do not run and the clusters are instead
    the complete-linkage cliques of pair-grade reports (cosine above the mean of the two
    reports' local densities by ``pair_margin``): HDBSCAN and the merge chain look-alikes into
    topics there (bug reports sharing a template), and a clique cannot chain. Joiners of such
    a partition's clusters must be pair-grade with every member (:func:`_gate_joins`).

Incremental runs (:func:`place`): new reports first try to join existing clusters with
:func:`assign`, and a cluster they join must still pass the gate of step 7 with them in it, or
step 8's on smoothed vectors where the partition's clusters are large enough for step 8 (else
they stay out); on smoothed vectors each joiner must also pass step 9's re-check on its own
vector (:func:`_recheck_joiners`), or a member step 9 took out would pass the joining rule and
the gate in the next run and go back in; what
is left is clustered among itself (steps 2–10), together with the earlier left-overs
near a new report (a new cluster must hold one). Members never move, so cluster ids are stable
by construction. Defaults and their measured effect: README, "Clusters and demand";
``benchmarks/cluster_quality.py`` and ``benchmarks/embed_text.py``.

**Large partitions** (``approximate_from`` reports or more, 20,000 by default): every search
for nearest rows above — the neighbour graph, smoothing, pairs, the nearest co-members and
outsiders of the separation tests, the left-overs near a fresh report, a member's nearest in
trimming a cluster of thousands — asks an HNSW index (:mod:`._neighbours`) for candidates and
scores them exactly, and fragments merge by :func:`_merge_linked` (average linkage without
its matrix of all pairs); the projection is fitted on a sample of :data:`PCA_SAMPLE` rows.
The cost of one partition then grows near-linearly instead of with n² (at 50,000 reports
the exact searches for nearest outsiders alone took 270 of 306 s). Below the threshold
nothing changes: the labels of the benchmark corpora, all smaller, are those of the exact
path; forcing the index on them moves BCubed F1 by at most 0.004 (0.007 with revision 2)
(``benchmarks/cluster_scale.py``).

**Revisions** (``settings.algorithm``; each clustering version names its own, so a warehouse
clustered by an old version goes on clustering with that version's steps): revision 1 (issue 17)
smooths towards one fewer neighbours than the median first-pass cluster has members, measured
before the gate; gates smoothed clusters by all their pairs, as step 7; and has no step 9.
Revision 2 (issue 18) has no step 10 and does not re-check joiners. Revision 3 (issue 20) has
no step 11. Revision 4 (issue 31) is what the steps above describe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    import torch

from ..config import ClusteringConfig
from ._duplicates import cliques, pair_grade_joins, small_problems
from ._knn import _twins, nearest_neighbours
from ._search import Scores


@dataclass(slots=True)
class Placement:
    """Where each pending vector went: an existing cluster (by the caller's id) or a new one
    (by a local index ``0 .. new_count-1``); -1 in both for a vector that joined nothing."""

    existing: np.ndarray
    new: np.ndarray
    new_count: int


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def place(
    pending: np.ndarray,
    members: np.ndarray,
    member_ids: np.ndarray,
    settings: ClusteringConfig = ClusteringConfig(),
    centre: np.ndarray | None = None,
    fresh: np.ndarray | None = None,
    curated: np.ndarray | None = None,
) -> Placement:
    """Offer ``pending`` vectors to the clusters of ``members`` (labelled ``member_ids``), then
    cluster what joined nothing among itself. ``centre`` defaults to :func:`background` of both
    sets. ``fresh`` marks the pending vectors never seen before (default: all): a new cluster
    must hold one, because earlier left-overs that cluster only among themselves would have
    done so when they were first seen — without this rule every run would re-cut the same
    left-overs a little differently. ``curated`` lists the clusters a maintainer shaped (merged
    or split): reports join them by the joining rule alone (see :func:`_gate_joins`)."""
    if len(pending) == 0:
        empty = np.empty(0, dtype=np.int64)
        return Placement(existing=empty, new=empty, new_count=0)
    if centre is None:
        centre = background(np.vstack([members, pending]))
    pending_c, members_c = _centred(pending, centre), _centred(members, centre)
    existing = np.full(len(pending), -1, dtype=np.int64)
    if len(members):
        joins = assign(pending_c, members_c, member_ids, settings)
        existing = _gate_joins(pending_c, members_c, member_ids, joins, settings, curated)
    rest = np.flatnonzero(existing < 0)
    if fresh is not None:
        rest, aside = _around_fresh(pending_c, rest, fresh, settings)
    else:
        aside = np.empty(0, dtype=np.int64)
    # Everything already placed, or set aside, stays in view as outsiders, so a new cluster is
    # judged against the same neighbourhood as it would have been had everything arrived at once.
    outsiders = np.vstack([members_c, pending_c[existing >= 0], pending_c[aside]])
    labels = cluster_centred(pending_c[rest], settings, outsiders)
    if fresh is not None:
        with_fresh = np.unique(labels[(labels >= 0) & fresh[rest]])
        labels = _renumber(np.where(np.isin(labels, with_fresh), labels, -1))
    new = np.full(len(pending), -1, dtype=np.int64)
    new[rest] = labels
    return Placement(existing=existing, new=new, new_count=int(labels.max()) + 1 if len(labels) else 0)


def _around_fresh(
    vectors: np.ndarray, rest: np.ndarray, fresh: np.ndarray, settings: ClusteringConfig, block: int = 1024
) -> tuple[np.ndarray, np.ndarray]:
    """Split the unplaced rows ``rest`` into those worth clustering — the fresh ones and the
    earlier left-overs among a fresh one's ``2 × neighbours`` nearest — and the rest, set
    aside. A new cluster must hold a fresh report, so left-overs far from every fresh one could
    only be re-cut among themselves; skipping them keeps a run's cost with what is new rather
    than with the whole pool of one-off reports."""
    import torch

    is_fresh = fresh[rest]
    if not is_fresh.any():
        return rest[:0], rest  # without a fresh report no new cluster can form
    old = rest[~is_fresh]
    if len(old) == 0:
        return rest, old
    new_vectors = torch.from_numpy(np.ascontiguousarray(vectors[rest[is_fresh]], dtype=np.float32))
    old_vectors = torch.from_numpy(np.ascontiguousarray(vectors[old], dtype=np.float32))
    reach = min(2 * settings.neighbours, len(old))
    near = np.zeros(len(old), dtype=bool)
    if len(old) >= settings.approximate_from:
        from ._neighbours import nearest

        near[nearest(vectors[old], vectors[rest[is_fresh]], reach)] = True
        return np.sort(np.concatenate([rest[is_fresh], old[near]])), old[~near]
    for start in range(0, len(new_vectors), block):
        scores = new_vectors[start : start + block] @ old_vectors.T
        near[torch.topk(scores, reach, dim=1).indices.numpy().ravel()] = True
    return np.sort(np.concatenate([rest[is_fresh], old[near]])), old[~near]


def _gate_joins(
    pending: np.ndarray,
    members: np.ndarray,
    member_ids: np.ndarray,
    joins: np.ndarray,
    settings: ClusteringConfig,
    curated: np.ndarray | None = None,
    beyond: np.ndarray | None = None,
) -> np.ndarray:
    """Undo the joins to any cluster that, grown by them, would fail the gate a new cluster must
    pass (step 7); those reports are clustered with the rest instead. Each newcomer passes the
    joining rule on its own, yet together they can turn a tight cluster into a broad one that a
    run over everything at once would have dissolved: in a crowded corpus (bug reports sharing a
    template) that made incremental runs far less precise than one run over everything.
    ``curated`` clusters are exempt: a maintainer who merged two unalike clusters of one problem
    made a cluster that fails the gate on purpose, and it must keep taking that problem's reports.
    ``beyond``: vectors of the partition outside both sets (placed before), outsiders too."""
    joined = np.flatnonzero(joins >= 0)
    if len(joined) == 0:
        return joins
    spared = curated if curated is not None else np.empty(0, np.int64)
    if small_problems(member_ids, settings):  # the clusters are cliques (step 11): they stay cliques
        judged = np.where(np.isin(joins, spared), -1, joins)
        return np.where(np.isin(joins, spared), joins, pair_grade_joins(pending, members, member_ids, judged, settings, beyond))
    beyond = beyond if beyond is not None else np.empty((0, members.shape[1]), members.dtype)
    grown = np.isin(member_ids, joins[joined])
    vectors = np.vstack([members[grown], pending[joined]])
    outsiders = np.vstack([members[~grown], pending[joins < 0], beyond])
    gate = settings
    reach = smoothing_reach(member_ids, settings.neighbours, settings)
    if reach:  # the clusters were cut and gated on smoothed vectors (step 8): judge them there too
        everything = smooth(np.vstack([vectors, outsiders]), reach, settings)
        vectors, outsiders, gate = everything[: len(vectors)], everything[len(vectors) :], _smoothed_gate(settings)
    ids, loose = _loose(vectors, np.concatenate([member_ids[grown], joins[joined]]), gate, outsiders,
                        bool(reach) and settings.algorithm >= 2)
    joins = joins.copy()
    joins[joined[np.isin(joins[joined], ids[loose & ~np.isin(ids, spared)])]] = -1
    if reach and settings.algorithm >= 3:
        joins = _recheck_joiners(pending, members, member_ids, joins, settings, spared, beyond)
    return joins


def _recheck_joiners(
    pending: np.ndarray, members: np.ndarray, member_ids: np.ndarray, joins: np.ndarray, settings: ClusteringConfig,
    spared: np.ndarray, beyond: np.ndarray,
) -> np.ndarray:
    """Step 9 for the reports joining clusters cut on smoothed vectors (revision 3): a joiner
    whose own ten nearest co-members are less alike to it than its ten nearest outsiders, by
    more than ``member_separation``, is refused. Without it a report step 9 took out of a
    cluster passed the joining rule and the cluster's gate on the next run and went back in:
    an incremental run undid the re-check (at 50,000 records, two in three of the first run's
    left-overs rejoined on the second)."""
    judged = np.flatnonzero((joins >= 0) & ~np.isin(joins, spared))
    if len(judged) == 0:
        return joins
    grown = np.isin(member_ids, joins[judged])
    others = np.flatnonzero((joins >= 0) & ~np.isin(np.arange(len(joins)), judged))
    vectors = np.vstack([members[grown], pending[judged]])
    labels = np.concatenate([member_ids[grown], joins[judged]])
    outsiders = np.vstack([members[~grown], pending[joins < 0], pending[others], beyond])
    rows = np.arange(grown.sum(), len(vectors))
    inside, outside = _inside_outside_similarity(
        vectors, labels, outsiders, within=True, approximate_from=settings.approximate_from, rows=rows
    )
    stray = inside[rows] - outside[rows] < settings.member_separation
    joins = joins.copy()
    joins[judged[stray]] = -1
    return joins


def background(vectors: np.ndarray, prior: int = 20) -> np.ndarray:
    """The direction every report shares: the mean of the unit vectors, shrunk towards zero as
    if ``prior`` more vectors had no common direction, so a handful of reports (whose mean is
    mostly themselves) is barely centred at all."""
    n = len(vectors)
    return unit(vectors.astype(np.float32)).mean(axis=0) * (n / (n + prior)) if n else np.zeros(vectors.shape[1])


def cluster(vectors: np.ndarray, settings: ClusteringConfig = ClusteringConfig()) -> np.ndarray:
    """Labels ``0 .. k-1`` for a set clustered from scratch; -1 for unclustered."""
    return place(vectors, np.empty((0, vectors.shape[1]), np.float32), np.empty(0, np.int64), settings).new


def _centred(vectors: np.ndarray, centre: np.ndarray) -> np.ndarray:
    return unit(unit(vectors.astype(np.float32)) - centre)


def cluster_centred(vectors: np.ndarray, settings: ClusteringConfig, outsiders: np.ndarray | None = None) -> np.ndarray:
    """Steps 2–8 on vectors already centred; ``outsiders`` (already placed elsewhere) only
    count in the separation test."""
    n = len(vectors)
    if n < 3:  # too few for HDBSCAN
        return _pair_up(vectors, np.full(n, -1, dtype=np.int64), settings)
    # Small sets get fewer neighbours: with k close to n every point shares every neighbour.
    k = min(settings.neighbours, max(2, round(np.sqrt(n))))
    # Identical rows are found before the projection, which may round them apart.
    twins = _twins(vectors)
    neighbours, sims = nearest_neighbours(_project(vectors, settings), k, twins=twins, approximate_from=settings.approximate_from)
    labels = _cut(vectors, vectors, neighbours, settings, settings.merge_similarity)
    if settings.algorithm >= 2:  # the reach is read from the clusters that passed the gate
        labels = _dissolve_loose(vectors, labels, settings, outsiders)
    if small_problems(labels, settings):  # step 11: problems come in twos and threes
        return _renumber(cliques(vectors, settings, outsiders))
    reach = smoothing_reach(labels, k, settings)
    if reach == 0:
        return _renumber(labels if settings.algorithm >= 2 else _dissolve_loose(vectors, labels, settings, outsiders))
    smoothed_outsiders = outsiders
    if outsiders is not None and len(outsiders):  # smoothed among everything in view, as in one run
        everything = smooth(np.vstack([vectors, outsiders]), reach, settings)
        smoothed, smoothed_outsiders = everything[:n], everything[n:]
    else:
        smoothed = _smooth_along(vectors, neighbours[:, :reach], sims[:, :reach], settings)
    neighbours, _ = nearest_neighbours(_project(smoothed, settings), k, twins=twins, approximate_from=settings.approximate_from)
    labels = _cut(vectors, smoothed, neighbours, settings, settings.smoothed_merge_similarity)
    revised = settings.algorithm >= 2
    labels = _dissolve_loose(smoothed, labels, _smoothed_gate(settings), smoothed_outsiders, smoothed=revised)
    labels = _recheck_members(vectors, labels, settings, outsiders) if revised else labels
    return _renumber(_second_chance(vectors, labels, settings, outsiders) if settings.algorithm >= 3 else labels)


def _second_chance(
    vectors: np.ndarray, labels: np.ndarray, settings: ClusteringConfig, outsiders: np.ndarray | None
) -> np.ndarray:
    """Step 10 (revision 3): the reports the gates left out are offered to the clusters that
    passed them, as the next run would offer them: the joining rule, then the gate of the
    clusters they grow and the re-check of each joiner (:func:`_gate_joins`). A report
    attached early to a cluster that was then dissolved had no other chance, and the next run
    gave it one: a run over everything at once and the same reports in two runs came apart."""
    left, clustered = np.flatnonzero(labels < 0), np.flatnonzero(labels >= 0)
    if len(left) == 0 or len(clustered) == 0:
        return labels
    joins = assign(vectors[left], vectors[clustered], labels[clustered], settings)
    joins = _gate_joins(vectors[left], vectors[clustered], labels[clustered], joins, settings, beyond=outsiders)
    labels = labels.copy()
    labels[left] = joins
    return labels


def _cut(
    vectors: np.ndarray, space: np.ndarray, neighbours: np.ndarray, settings: ClusteringConfig, merge: float
) -> np.ndarray:
    """Steps 3–6: HDBSCAN on the neighbour graph of ``space`` (the vectors, or their smoothed
    version), fragments merged by their centroids there; attaching, trimming and pairing always
    judge the vectors themselves, so a report joins a cluster for what it says, not for what
    its neighbours say."""
    n = len(vectors)
    distances = _snn_distances(neighbours)
    fragments = _hdbscan(distances, settings, n, single=False)
    if (fragments >= 0).sum() == 0:  # nothing splits: the whole set may be one problem; the gates judge it
        fragments = _hdbscan(distances, settings, n, single=True)
    labels = _merge_fragments(space, fragments, merge, approximate=n >= settings.approximate_from)
    labels = _trim(vectors, _attach(vectors, labels, settings), settings)
    return _trim(vectors, _attach(vectors, _pair_up(vectors, labels, settings), settings), settings)


def smoothing_reach(labels: np.ndarray, k: int, settings: ClusteringConfig) -> int:
    """How many neighbours a vector is smoothed towards: half as many as the first-pass
    cluster of a typical clustered report has other members (the median over clustered
    reports of their cluster's size, less one, halved; at most ``k``), so that even a report
    at the edge of its problem is pulled mostly by reports of that problem; 0 (no smoothing)
    when that is fewer than ``smooth_from``. Where problems have only a handful of reports
    each, smoothing would average across problems. Counted per report, not per cluster: many
    pairs beside a few large clusters (a corpus of broad problems, where the first pass also
    pairs off near-identical phrasings) do not make a typical report's problem small. Half,
    not all: with as many neighbours as a cluster has members, two close problems of thirty
    reports each (clinc150's "calendar" and "calendar update") were averaged into one."""
    _, sizes = np.unique(labels[labels >= 0], return_counts=True)  # labels may be any ids
    if not len(sizes):
        return 0
    if settings.algorithm == 1:  # revision 1: the median cluster, all of it
        reach = min(k, int(np.median(sizes)) - 1)
    else:
        reach = min(k, (int(np.median(np.repeat(sizes, sizes))) - 1) // 2)
    return reach if reach >= settings.smooth_from else 0


def smooth(vectors: np.ndarray, reach: int, settings: ClusteringConfig) -> np.ndarray:
    """``vectors`` each pulled towards its ``reach`` nearest neighbours (step 8)."""
    reach = min(reach, len(vectors) - 1)
    twins = _twins(vectors)
    neighbours, sims = nearest_neighbours(_project(vectors, settings), reach, twins=twins, approximate_from=settings.approximate_from)
    return _smooth_along(vectors, neighbours, sims, settings)


def _smooth_along(vectors: np.ndarray, neighbours: np.ndarray, sims: np.ndarray, settings: ClusteringConfig) -> np.ndarray:
    """``x ← keep·x₀ + (1 − keep)·W x``, re-normalised, ``smooth_rounds`` times; ``W`` holds the
    cosine weights of the symmetrised neighbour graph, rows summing to one."""
    n, k = neighbours.shape
    weights = sp.csr_matrix(
        (np.maximum(sims, 0).ravel(), (np.repeat(np.arange(n), k), neighbours.ravel())), shape=(n, n), dtype=np.float32
    )
    weights = weights.maximum(weights.T).tocsr()
    weights = sp.diags(1 / np.maximum(np.asarray(weights.sum(axis=1)).ravel(), 1e-12)) @ weights
    smoothed = vectors
    for _ in range(settings.smooth_rounds):
        smoothed = unit(settings.smooth_keep * vectors + (1 - settings.smooth_keep) * (weights @ smoothed))
    return smoothed.astype(np.float32)


def _smoothed_gate(settings: ClusteringConfig) -> ClusteringConfig:
    """The gate on smoothed vectors: there members are alike by construction (mean cosine well
    above any ``min_cohesion``), so separation from outsiders decides."""
    return settings.model_copy(update={"separation": settings.smoothed_separation})


def _recheck_members(
    vectors: np.ndarray, labels: np.ndarray, settings: ClusteringConfig, outsiders: np.ndarray | None = None,
    rounds: int = 2,
) -> np.ndarray:
    """Step 9: the members of clusters cut on smoothed vectors, judged on their own vectors.
    Smoothing pulls a report towards its neighbours; one whose own ten nearest co-members are
    less alike to it than its ten nearest outsiders (by more than ``member_separation``) was
    carried in by its neighbours' phrasing, not by what it says, and leaves. The test is
    relative to each report's own neighbourhood, so it holds in a corpus of tight problems
    and in one of broad ones alike; it is how smoothing keeps its recall without paying for it
    in precision. Clusters left with one member dissolve."""
    labels = labels.copy()
    for _ in range(rounds):
        if not (labels >= 0).any():
            break
        inside, outside = _inside_outside_similarity(
            vectors, labels, outsiders, within=True, approximate_from=settings.approximate_from
        )
        stray = (labels >= 0) & (inside - outside < settings.member_separation)
        if not stray.any():
            break
        labels[stray] = -1
        kept, sizes = np.unique(labels[labels >= 0], return_counts=True)
        labels[np.isin(labels, kept[sizes < 2])] = -1
    return labels


def _attach(vectors: np.ndarray, labels: np.ndarray, settings: ClusteringConfig) -> np.ndarray:
    """Left-over points join a cluster by the same rule as new reports."""
    labels = labels.copy()
    noise = np.flatnonzero(labels < 0)
    labels[noise] = assign(vectors[noise], vectors, labels, settings)
    return labels


def _pair_up(vectors: np.ndarray, labels: np.ndarray, settings: ClusteringConfig) -> np.ndarray:
    """Two left-over reports that are each other's nearest and would each join the other make a
    cluster: HDBSCAN's density view misses duplicates that come in pairs, the common case."""
    labels = labels.copy()
    left = np.flatnonzero(labels < 0)
    if len(left) < 2 or settings.min_cluster_size > 2:
        return labels
    nearest, sims = nearest_neighbours(vectors[left], 1, approximate_from=settings.approximate_from)
    nearest, sims = nearest[:, 0], sims[:, 0]
    mutual = (nearest[nearest] == np.arange(len(left))) & (np.arange(len(left)) < nearest)
    alike = sims >= max(settings.join_nearest, settings.join_centroid, settings.min_cohesion)
    first = np.flatnonzero(mutual & alike)
    start = labels.max() + 1
    labels[left[first]] = start + np.arange(len(first))
    labels[left[nearest[first]]] = start + np.arange(len(first))
    return labels


def _hdbscan(distances: sp.csr_matrix, settings: ClusteringConfig, n: int, single: bool) -> np.ndarray:
    """HDBSCAN labels for the sparse distances, as ``hdbscan.HDBSCAN(metric="precomputed")``
    gives them. Its sparse path computes the mutual reachability graph one entry at a time in
    Python (at 50,000 reports, clustering took 63.8 s with it, 44.9 s without), so that step
    is done here with array operations; the spanning tree, the cluster tree and its selection
    are hdbscan's own (``tests/test_clustering.py`` checks the labels are the same)."""
    from scipy.sparse import csgraph

    from ._hdbscan_tree import tree_to_labels  # imported here: hdbscan takes a while to import

    reachability = _mutual_reachability(distances, max(1, min(settings.min_samples, n - 1)))
    tree = csgraph.minimum_spanning_tree(reachability)
    rows, cols = tree.nonzero()
    weights = np.asarray(tree[rows, cols]).ravel()
    edges = np.column_stack([rows, cols, weights])[np.argsort(weights)]
    return tree_to_labels(edges, settings.min_cluster_size, single)


def _mutual_reachability(distances: sp.csr_matrix, min_samples: int, max_dist: float = 2.0) -> sp.csr_matrix:
    """``max(core(i), core(j), d(i, j))`` over the stored entries, ``core`` being a row's
    ``min_samples``-th smallest distance (infinite, then ``max_dist``, when it has fewer)."""
    distances = distances.tocsr().sorted_indices()
    counts = np.diff(distances.indptr)
    row = np.repeat(np.arange(distances.shape[0]), counts)
    ordered = distances.data[np.lexsort((distances.data, row))]
    core = np.full(distances.shape[0], np.inf)
    enough = counts >= min_samples
    core[enough] = ordered[distances.indptr[:-1][enough] + min_samples - 1]
    reach = np.maximum(np.maximum(core[row], core[distances.indices]), distances.data)
    reach[~np.isfinite(reach)] = max_dist
    return sp.csr_matrix((reach, distances.indices, distances.indptr), shape=distances.shape)


def assign(vectors: np.ndarray, members: np.ndarray, labels: np.ndarray, settings: ClusteringConfig) -> np.ndarray:
    """The joining rule: each vector goes to the cluster whose centroid is nearest, if that
    centroid is within ``join_centroid`` and some member within ``join_nearest``; else -1.
    The second condition keeps a report from joining a broad cluster it only resembles on
    average."""
    out = np.full(len(vectors), -1, dtype=np.int64)
    ids, centroids = _centroids(members, labels)
    if len(ids) == 0 or len(vectors) == 0:
        return out
    clustered = np.flatnonzero(labels >= 0)
    order = clustered[np.argsort(labels[clustered], kind="stable")]
    starts = np.searchsorted(labels[order], ids)
    ends = np.r_[starts[1:], len(order)]
    for start in range(0, len(vectors), 4096):
        block = vectors[start : start + 4096]
        sims = block @ centroids.T
        best = sims.argmax(axis=1)
        close = np.flatnonzero(sims[np.arange(len(block)), best] >= settings.join_centroid)
        for i in close:
            own = order[starts[best[i]] : ends[best[i]]]
            if float((members[own] @ block[i]).max()) >= settings.join_nearest:
                out[start + i] = ids[best[i]]
    return out


def _reduce(vectors: np.ndarray, dimensions: int, fit_on: int | None = None) -> np.ndarray:
    """The PCA projection of ``vectors``, fitted on every row or, beyond ``fit_on`` rows, on
    an even sample of that many (the approximate path: the directions of 20,000 reports are
    those of 400,000, at a twentieth of the cost)."""
    if dimensions >= vectors.shape[1] or dimensions >= len(vectors):
        return vectors
    from sklearn.decomposition import PCA

    pca = PCA(dimensions, svd_solver="randomized", random_state=0)
    sample = None if fit_on is None else max(fit_on, 4 * dimensions)
    if sample is None or len(vectors) <= sample:
        return unit(pca.fit_transform(vectors).astype(np.float32))
    pca.fit(vectors[:: -(-len(vectors) // sample)])
    return unit(pca.transform(vectors).astype(np.float32))


#: Rows the projection is fitted on in a partition of ``approximate_from`` reports or more.
PCA_SAMPLE = 20_000


def _project(vectors: np.ndarray, settings: ClusteringConfig) -> np.ndarray:
    """Step 2's projection; fitted on a sample of :data:`PCA_SAMPLE` rows in a large partition."""
    large = len(vectors) >= settings.approximate_from
    return _reduce(vectors, settings.pca_dimensions, fit_on=PCA_SAMPLE if large else None)


def _snn_distances(neighbours: np.ndarray) -> sp.csr_matrix:
    """Shared-nearest-neighbour distances on the symmetrised kNN graph, components bridged at
    distance 2 (HDBSCAN needs one connected graph; bridges are the last links it would cut)."""
    from scipy.sparse import csgraph

    n, k = neighbours.shape
    rows, cols = np.repeat(np.arange(n), k), neighbours.ravel()
    adjacency = sp.csr_matrix((np.ones(n * k), (rows, cols)), shape=(n, n)) + sp.identity(n, format="csr")
    shared = np.asarray(adjacency[rows].multiply(adjacency[cols]).sum(axis=1)).ravel()
    distances = sp.csr_matrix((1 - shared / (k + 1) + 1e-6, (rows, cols)), shape=(n, n))
    distances = distances.maximum(distances.T).tocsr()
    count, component = csgraph.connected_components(distances, directed=False)
    if count > 1:
        first = np.unique(component, return_index=True)[1]
        bridges = sp.csr_matrix((np.full(count - 1, 2.0), (first[:-1], first[1:])), shape=(n, n))
        distances = (distances + bridges + bridges.T).tocsr()
    return distances


def _sums(vectors: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cluster ids, the sum of each cluster's vectors, and sizes."""
    clustered = labels >= 0
    ids = np.unique(labels[clustered])
    membership = sp.csr_matrix(
        (np.ones(clustered.sum()), (np.searchsorted(ids, labels[clustered]), np.flatnonzero(clustered))),
        shape=(len(ids), len(vectors)),
    )
    return ids, np.asarray(membership @ vectors), np.asarray(membership.sum(axis=1)).ravel()


def _centroids(vectors: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids, sums, _ = _sums(vectors, labels)
    return ids, unit(sums).astype(np.float32)


def _merge_fragments(
    vectors: np.ndarray, fragments: np.ndarray, similarity: float, approximate: bool = False
) -> np.ndarray:
    ids, centroids = _centroids(vectors, fragments)
    if len(ids) < 2:
        return fragments.astype(np.int64)
    if approximate:
        merged = _merge_linked(centroids, similarity)
    else:
        merged = _average_linkage(centroids, similarity)
    mapping = np.full(fragments.max() + 1, -1, dtype=np.int64)
    mapping[ids] = merged - 1
    return np.where(fragments >= 0, mapping[np.maximum(fragments, 0)], -1)


def _average_linkage(centroids: np.ndarray, similarity: float) -> np.ndarray:
    """Flat clusters ``1 .. m`` of average linkage on cosine distance, cut at ``1 − similarity``."""
    from scipy.cluster.hierarchy import fcluster, linkage

    return fcluster(linkage(centroids, method="average", metric="cosine"), 1 - similarity, criterion="distance")


def _merge_linked(centroids: np.ndarray, similarity: float, reach: int = 32) -> np.ndarray:
    """:func:`_average_linkage` without its matrix of all pairs, which at tens of thousands of
    fragments is gigabytes (and most fragments of a large partition are one connected region).
    On unit centroids the average cosine between two groups is ``S_a · S_b / (n_a n_b)`` (``S``
    the sum of a group's centroids), and two groups whose average is above the cut have a pair
    of members above it: so merging, closest first, only groups linked by a pair more alike
    than ``similarity`` makes the same merges as average linkage. The pairs are read from each
    centroid's ``reach`` nearest (approximate) centroids."""
    import heapq

    from ._neighbours import knn

    n = len(centroids)
    near, sims = knn(centroids, min(reach, n - 1))
    sums, sizes = centroids.astype(np.float64), np.ones(n)
    linked: list[set[int]] = [set() for _ in range(n)]
    for i, j in zip(np.repeat(np.arange(n), near.shape[1])[(sims >= similarity).ravel()].tolist(),
                    near[sims >= similarity].tolist(), strict=True):
        linked[i].add(j)
        linked[j].add(i)
    version = np.zeros(n, dtype=np.int64)
    heap = [(-float(sums[i] @ sums[j]), i, j, 0, 0) for i in range(n) for j in linked[i] if i < j]
    heapq.heapify(heap)
    group = np.arange(n)  # the surviving group each centroid is in, resolved at the end
    while heap:
        score, i, j, vi, vj = heapq.heappop(heap)
        if -score < similarity:
            break
        if vi != version[i] or vj != version[j]:  # a group changed since: a fresher entry exists
            continue
        sums[i] += sums[j]
        sizes[i] += sizes[j]
        version[i] += 1
        version[j] = -1  # j is gone
        group[j] = i
        for m in linked[j]:
            linked[m].discard(j)
            if m != i:
                linked[m].add(i)
                linked[i].add(m)
        linked[j] = set()
        linked[i].discard(j)
        others = np.fromiter(linked[i], dtype=np.int64)
        if len(others):
            scores = sums[others] @ sums[i] / (sizes[others] * sizes[i])
            for m, sim in zip(others.tolist(), scores.tolist(), strict=True):
                a, b = (i, m) if i < m else (m, i)
                heapq.heappush(heap, (-sim, a, b, int(version[a]), int(version[b])))
    while not np.array_equal(group, group[group]):  # follow merges to the surviving group
        group = group[group]
    return np.unique(group, return_inverse=True)[1].ravel() + 1


def _trim(vectors: np.ndarray, labels: np.ndarray, settings: ClusteringConfig, rounds: int = 2) -> np.ndarray:
    """Drop members that the joining rule would not let in (leave-one-out centroid, nearest
    other member), so a cluster is never judged loose because of one stray report. In a
    partition of ``approximate_from`` reports or more, a member's nearest in a cluster of
    over 2,048 comes from the approximate index."""
    large = 2048 if len(vectors) >= settings.approximate_from else len(vectors)
    labels = labels.copy()
    for _ in range(rounds):
        ids, sums, _ = _sums(vectors, labels)
        members = np.flatnonzero(labels >= 0)
        if len(members) == 0:
            break
        cluster = np.searchsorted(ids, labels[members])
        others = sums[cluster] - vectors[members]
        norms = np.linalg.norm(others, axis=1)
        to_centroid = np.where(norms > 1e-9, (others * vectors[members]).sum(axis=1) / np.maximum(norms, 1e-9), -1.0)
        nearest = np.full(len(members), -1.0)
        order = np.argsort(cluster, kind="stable")
        for group in np.split(order, np.flatnonzero(np.diff(cluster[order])) + 1):
            if len(group) > large:  # a pair matrix of a cluster this size is gigabytes: its index
                from ._neighbours import knn

                nearest[group] = knn(vectors[members[group]], 1)[1][:, 0]
            elif len(group) > 1:
                sims = vectors[members[group]] @ vectors[members[group]].T
                np.fill_diagonal(sims, -1.0)
                nearest[group] = sims.max(axis=1)
        stray = (to_centroid < settings.join_centroid) | (nearest < settings.join_nearest)
        if not stray.any():
            break
        labels[members[stray]] = -1
        kept, sizes = np.unique(labels[labels >= 0], return_counts=True)
        labels[np.isin(labels, kept[sizes < 2])] = -1
    return labels


def _dissolve_loose(
    vectors: np.ndarray, labels: np.ndarray, settings: ClusteringConfig, outsiders: np.ndarray | None = None,
    smoothed: bool = False,
) -> np.ndarray:
    """Dissolve the clusters that :func:`_loose` finds."""
    ids, loose = _loose(vectors, labels, settings, outsiders, smoothed)
    return np.where(np.isin(labels, ids[loose]), -1, labels)


def _loose(
    vectors: np.ndarray, labels: np.ndarray, settings: ClusteringConfig, outsiders: np.ndarray | None = None,
    smoothed: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Cluster ids, and which of them are not alike enough: mean pairwise cosine (for unit
    vectors ``(|Σx|² − n) / (n(n − 1))``) below ``min_cohesion``, or not ``separation`` above the
    members' mean similarity to their ten nearest outsiders. The second test is what catches a
    loose group in a dense region (reports sharing a template), which any fixed cohesion
    threshold either lets through or, set higher, takes real clusters with it.

    On ``smoothed`` vectors the clusters are large (that is when smoothing runs), and the mean
    similarity of *all* pairs in a large, broad problem is lower than that of any member to its
    ten nearest outsiders even when the problem is well apart from its neighbours: the test
    compares like with like there, each member's ten nearest co-members against its ten
    nearest outsiders."""
    ids, sums, sizes = _sums(vectors, labels)
    if len(ids) == 0:
        return ids, np.zeros(0, dtype=bool)
    cohesion = ((sums**2).sum(axis=1) - sizes) / np.maximum(sizes * (sizes - 1), 1)
    clustered = labels >= 0
    inside, outside = _inside_outside_similarity(
        vectors, labels, outsiders, within=smoothed, approximate_from=settings.approximate_from
    )
    alike = inside if smoothed else np.zeros(len(vectors))
    margin = np.bincount(
        np.searchsorted(ids, labels[clustered]), weights=(alike - outside)[clustered], minlength=len(ids),
    ) / sizes
    if not smoothed:
        margin += cohesion
    return ids, (cohesion < settings.min_cohesion) | (margin < settings.separation)


def _inside_outside_similarity(
    vectors: np.ndarray, labels: np.ndarray, outsiders: np.ndarray | None = None, within: bool = False,
    k: int = 10, block: int = 2048, approximate_from: int | None = None, rows: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each clustered point's mean cosine to its ``k`` nearest co-members (only ``within``,
    else zeros) and to its ``k`` nearest points outside its own cluster, ``outsiders`` included
    (-1 when there are none); unclustered points get 0, unused, and so do clustered points not
    among ``rows`` when it is given. Below ``approximate_from`` points in all the search is exact
    (:mod:`._search`: a bfloat16 pass rescored in float32 where the CPU has one); from it on, the
    nearest come from an approximate index (:mod:`._neighbours`)."""
    import torch

    if outsiders is not None and len(outsiders):
        everything = np.vstack([vectors, outsiders])
        every_label = np.concatenate([labels, np.full(len(outsiders), -1, dtype=labels.dtype)])
    else:
        everything, every_label = vectors, labels
    if approximate_from is not None and len(everything) >= approximate_from:
        from ._neighbours import inside_outside

        inside, outside = np.zeros(len(vectors)), np.zeros(len(vectors))
        members = np.flatnonzero(labels >= 0) if rows is None else rows
        space = _reduce(everything, 64, fit_on=PCA_SAMPLE)  # the index searches a projection; cosines are the vectors'
        inside[members], outside[members] = inside_outside(everything, space, every_label, members, within, k)
        return inside, outside
    members = np.flatnonzero(labels >= 0) if rows is None else rows
    inside, outside = np.zeros(len(vectors)), np.zeros(len(vectors))
    if len(members) == 0:
        return inside, outside
    # Rows of one vector and one label are one *kind*, searched once and counted as many:
    # a report filed again adds a row, not a search (the goals view is mostly repeats).
    # Kinds come sorted by label, so a kind's co-member kinds are one run of them.
    keys, kind_of, count = np.unique(
        np.column_stack([every_label, _twins(everything)]), axis=0, return_inverse=True, return_counts=True
    )
    kind_of = kind_of.ravel()
    kind_label, count_t = keys[:, 0], torch.from_numpy(count)
    representative = np.empty(len(keys), np.int64)
    representative[kind_of[::-1]] = np.arange(len(kind_of))[::-1]  # each kind's first row
    search = Scores(everything[representative])
    first, last = np.searchsorted(kind_label, kind_label, "left"), np.searchsorted(kind_label, kind_label, "right")
    wanted = np.unique(kind_of[members])
    kind_inside, kind_outside = np.zeros(len(keys)), np.zeros(len(keys))
    for start in range(0, len(wanted), block):
        these = wanted[start : start + block]
        these_t = torch.from_numpy(these)
        scores = search.block(these)
        sizes = last[these] - first[these]
        at = np.repeat(np.arange(len(these)), sizes)
        within_run = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        column = np.repeat(first[these], sizes) + within_run
        at_t, column_t, within_t = torch.from_numpy(at), torch.from_numpy(column), torch.from_numpy(within_run)
        if within:
            shape = (len(these), int(sizes.max()))
            own, columns = torch.full(shape, -float("inf"), dtype=scores.dtype), torch.zeros(shape, dtype=torch.int64)
            alike = scores[at_t, column_t]
            alike[torch.from_numpy((column == these[at]) & (count[column] == 1))] = -float("inf")  # not itself
            own[at_t, within_t], columns[at_t, within_t] = alike, column_t
            values, found = search.top(these, own, k, columns)
            kind_inside[these] = _mean_of_rows(values, count_t[found] - (found == these_t[:, None]).long(), k)
        scores[at_t, column_t] = -float("inf")
        values, found = search.top(these, scores, k)
        kind_outside[these] = _mean_of_rows(values, count_t[found], k)
    inside[members], outside[members] = kind_inside[kind_of[members]], kind_outside[kind_of[members]]
    return inside, outside


def _mean_of_rows(best: torch.Tensor, counts: torch.Tensor, k: int) -> np.ndarray:
    """The mean of the ``k`` best rows' scores, from the best kinds' scores (``best``, best
    first, ``-inf`` for none) and how many rows each kind stands for; -1 for a row with none."""
    values = best.numpy().astype(np.float64)
    weights = np.where(np.isfinite(values), counts.numpy(), 0)
    before = np.cumsum(weights, axis=1) - weights
    taken = np.clip(k - before, 0, weights)
    total = taken.sum(axis=1)
    return np.where(total > 0, (np.where(taken > 0, values, 0) * taken).sum(axis=1) / np.maximum(total, 1), -1.0)


def _renumber(labels: np.ndarray) -> np.ndarray:
    if labels.size == 0:
        return labels.astype(np.int64)
    kept = np.unique(labels[labels >= 0])
    mapping = np.full(labels.max() + 2, -1, dtype=np.int64)
    mapping[kept] = np.arange(len(kept))
    return np.where(labels >= 0, mapping[labels], -1)
