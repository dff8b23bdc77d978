"""Step 8 of the clustering (smoothing) on real utterances: clinc150, embedded by the packaged
model. Smoothing must help where problems are well populated, leave sparse sets alone, and a
cluster cut on smoothed vectors must keep taking its own reports in later runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from feedback_insights.clusters import background, cluster, place
from feedback_insights.clusters._versions import VERSIONS
from feedback_insights.config import ClusteringConfig

from .conftest import SHARED

NO_SMOOTHING = ClusteringConfig(smooth_from=10_000)


@pytest.fixture(scope="module")
def clinc(embedder) -> tuple[np.ndarray, np.ndarray]:
    """The 30 test utterances of each of 25 intents (the first by name), embedded."""
    rows = [json.loads(line) for line in (SHARED / "data" / "clinc150.jsonl").read_text().splitlines() if line]
    intents = sorted({row["label"] for row in rows} - {"oos"})[:25]
    rows = [row for row in rows if row["label"] in intents]
    return embedder.encode([row["text"] for row in rows]), np.array([row["label"] for row in rows])


def _pairwise(found: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """Precision (share of co-clustered pairs with one intent) and recall (share of one-intent
    pairs co-clustered); an unclustered utterance pairs with nothing."""
    same_cluster = (found[:, None] == found[None, :]) & (found[:, None] >= 0)
    same_intent = gold[:, None] == gold[None, :]
    np.fill_diagonal(same_cluster, False)
    np.fill_diagonal(same_intent, False)
    both = (same_cluster & same_intent).sum()
    return both / max(same_cluster.sum(), 1), both / same_intent.sum()


def test_well_populated_problems_come_out_more_whole_and_as_pure(clinc) -> None:
    vectors, gold = clinc
    smoothed_p, smoothed_r = _pairwise(cluster(vectors), gold)
    plain_p, plain_r = _pairwise(cluster(vectors, NO_SMOOTHING), gold)
    assert smoothed_r > plain_r + 0.1  # 30 utterances an intent: fragments join up (0.59 → 0.76)
    assert smoothed_p > 0.9 and plain_p > 0.9


def test_sparse_problems_are_not_smoothed(clinc) -> None:
    """Three utterances an intent: a report's nearest neighbours are mostly other intents', so
    the first pass decides against smoothing and the result is the plain one."""
    vectors, gold = clinc
    three_each = np.concatenate([np.flatnonzero(gold == intent)[:3] for intent in np.unique(gold)])
    assert list(cluster(vectors[three_each])) == list(cluster(vectors[three_each], NO_SMOOTHING))


def test_a_cluster_cut_on_smoothed_vectors_takes_its_own_reports_back(clinc) -> None:
    """Hold out every tenth member of the clusters of a dense set and offer them again: they
    rejoin their own clusters. Judged on unsmoothed vectors, the join gate refuses many of them,
    since a cluster cut on smoothed vectors need not pass the gate on the vectors themselves."""
    vectors, _ = clinc
    labels = cluster(vectors)
    clustered = np.flatnonzero(labels >= 0)
    held, kept = clustered[::10], np.setdiff1d(clustered, clustered[::10])
    centre = background(vectors)

    def rejoined(settings: ClusteringConfig) -> float:
        placement = place(vectors[held], vectors[kept], labels[kept], settings, centre=centre)
        return float(np.mean(placement.existing == labels[held]))

    assert rejoined(ClusteringConfig()) >= 0.9
    assert rejoined(ClusteringConfig()) > rejoined(NO_SMOOTHING) + 0.05


def test_new_problems_arriving_among_existing_clusters_are_smoothed_too(clinc) -> None:
    """Thirteen intents arrive after twelve others were clustered: they are smoothed together
    with the existing clusters' reports (as if all had arrived at once) and come out about as
    whole as a set clustered from scratch, without joining the other intents' clusters."""
    vectors, gold = clinc
    earlier = np.isin(gold, np.unique(gold)[:12])

    def arrivals(settings: ClusteringConfig) -> tuple[float, float, float]:
        labels = cluster(vectors[earlier], settings)
        kept = labels >= 0
        placement = place(vectors[~earlier], vectors[earlier][kept], labels[kept], settings)
        found = np.where(placement.existing >= 0, placement.existing + labels.max() + 1, placement.new)
        return float(np.mean(placement.existing >= 0)), *_pairwise(found, gold[~earlier])

    joined, precision, recall = arrivals(ClusteringConfig())
    _, plain_precision, plain_recall = arrivals(NO_SMOOTHING)
    assert joined < 0.05
    assert recall > plain_recall + 0.1  # 0.45 → 0.62
    # 0.90 measured (0.93 clustering the 13 intents from scratch): the loss is one pair of
    # near-identical intents, "calendar" and "calendar_update", that smoothing partly merges.
    assert precision > 0.88 and plain_precision > 0.9


def test_a_later_run_does_not_re_admit_what_the_first_run_left_out(clinc) -> None:
    """Revision 3: where a partition is smoothed, the reports the gates left out are offered
    once more within the run (step 10) and each joiner is re-checked on its own vector, as in
    a later run. So offering a run's left-overs again, as the next run does, admits (almost)
    none: the two runs agree. Revision 2 re-admitted left-overs the re-check had taken out."""
    vectors, _ = clinc
    centre = background(vectors)

    def left_and_readmitted(version: str) -> tuple[int, int]:
        settings = VERSIONS[version].settings
        labels = cluster(vectors, settings)
        left, kept = np.flatnonzero(labels < 0), np.flatnonzero(labels >= 0)
        again = place(vectors[left], vectors[kept], labels[kept], settings, centre=centre, fresh=np.zeros(len(left), bool))
        return len(left), int((again.existing >= 0).sum())

    left, readmitted = left_and_readmitted("3")
    _, readmitted_before = left_and_readmitted("2")
    assert readmitted <= 0.03 * left  # 1 of 54 measured
    assert readmitted < readmitted_before  # 4 of 57
