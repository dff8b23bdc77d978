"""Clustering quality: ours against trivial baselines, BERTopic and KMeans, and its stability.

Three labelled sets from ``../shared/data``:

- ``clinc150.jsonl``: 4,500 short user utterances in 150 intents (the "oos" rows are noise
  with no intent, so they are left out);
- ``hwu64.jsonl``: 10,060 home-assistant queries in 64 intents of 36–194 utterances, broader
  than clinc's (an intent such as ``general_quirky`` or ``qa_factoid`` is a topic, not a phrasing);
- ``bug_duplicates.jsonl``: 3,579 long bug reports (``text``) of two projects (``project``:
  hadoop, seamonkey), gold ``label`` = the duplicate group: 3,375 of its 3,467 groups are one
  report, 92 hold the 204 reports that have a duplicate.

Each file is embedded once with the pipeline's default embedder (ONNX Runtime fp32, whose
vectors are the torch path's: cosine 1.00000, README "Embedding backends"), and every method
clusters the same vectors. The embeddings are cached as ``benchmarks/.cache/<set>-<hash of the
model id and texts>.npy`` (the folder ignores itself for git), whole files, as
``known_issues.py`` caches them too, so only the first run pays the embedding.

**What the defaults were chosen on.** :class:`ClusteringConfig`'s defaults were tuned on the
project's sample, on these three full sets and on the sparse and label-subset draws below of
clinc150 and hwu64 (``min_cohesion`` on the sample, clinc150 and bug_duplicates; smoothing on
clinc150 and its draws; clustering versions 2 and 3 on hwu64 and the label-subset draws). Every
row here is tuning data; none is held out. Each table says so.

**Scores** (``metrics.py``; an unclustered report counts as a singleton throughout — a cluster of
its own for BCubed, in no predicted pair for the pairwise scores):

- BCubed precision / recall / F1, averaged over reports. On a corpus where most reports are
  alone in their gold group it rewards doing nothing: "every report alone" scores BCubed F1
  0.984 on bug_duplicates;
- pairwise precision / recall / F1 over unordered pairs of reports, a pair gold-positive when
  both share a gold label: only the pairs that are one problem count, so doing nothing scores 0;
- groups found: the share of gold groups with ≥ 2 members whose members all share one cluster,
  with the mean purity of those clusters (one cluster of everything finds every group, at a
  purity near 0);
- ARI, V-measure, the unclustered share, clustering seconds.

A set is **judged** by pairwise scores when most of its reports are gold singletons
(bug_duplicates: 94 %), by BCubed otherwise (clinc150 and hwu64: none); both are shown
everywhere.

**Methods**:

- **ours**: default :class:`ClusteringConfig`, through the stateless ``cluster`` command's own
  :func:`feedback_insights.clusters.cluster_inputs` (one centre over all vectors, then ``place``
  with no members) fed the cached vectors; checked to give the same partition as
  :func:`clustering.cluster`;
- **ours, strict**: ``min_cohesion=0.5`` (the README's setting for crowded corpora such as bug
  trackers, where many reports share a template);
- **BERTopic** (the ``bench`` extra): its default pipeline on the precomputed embeddings, its
  default UMAP given a seed for repeatability; topic -1 (outliers) = unclustered;
- **ours, version 3**: the previous default (clustering version 3), for before and after in one run;
- **KMeans** (scikit-learn) told the true number of clusters;
- **average / complete linkage, best cut (picked with the answers)**: scipy's linkage on the
  cosine distance of the same vectors, cut at every threshold from 0.05 to 0.95 (step 0.025),
  the one kept scoring best on the set's judging F1 — an upper bound for one-threshold methods;
- trivial baselines: **every report alone**; **one cluster** for the whole set, and on
  bug_duplicates **one cluster per project** (the pipeline's partition is the service).

Tables:

1. Each full set: every method and score.
2. Targets on the full sets, on the set's judging scores: ours' F1 above every trivial
   baseline's; precision at least BERTopic's and F1 above it (stretch: precision ≥ 0.85 too);
   on a set judged by pairs, F1 above the best single-threshold linkage's too.
3. Sparse: random draws of 2,000, 1,000 and 300 clinc150 texts (about 13, 7 and 2 per intent)
   and of 3,000 and 1,000 hwu64 texts (about 47 and 16 per intent); three draws each, means.
   Feedback partitions look like the smaller draws (most problems have a handful of reports).
4. Label-subset draws: corpora made from the tuning sets by label — two random halves of
   hwu64's intents, two random thirds of clinc150's, and clinc150's banking and credit-card
   domains (30 intents that differ by a word or two, the hard case for precision). Subsets of
   the tuning corpora, not held-out data.
5. Stability of incremental runs (default settings, three random splits: seeds 0, 1, 2), as the
   pipeline runs them: a random 80 % is clustered from scratch; then the other 20 %, together
   with the 80 %'s unclustered points (the pipeline re-offers those), go through a second
   ``place`` with the first run's clustered points as members and the centre recomputed over
   all 100 %. Reported: "kept", the share of points clustered in run 1 that keep their id;
   "unchanged", the share of all the 80 % whose label is unchanged (an unclustered point that
   gains a cluster counts as changed); the set's judging F1 of the combined labels against ours
   clustering all 100 % at once. Targets: ≥ 99 % kept and |ΔF1| ≤ 0.03.

The run ends with one PASS/FAIL line per check and exits non-zero when a full set misses a
target. Run by hand (one process; the first run embeds, ~5 min on 2 cores)::

    python benchmarks/cluster_quality.py [--markdown FILE] [--llm URL --model M]

``--markdown`` writes every table as Markdown too; ``--llm`` adds ``benchmarks/cluster_llm.py``'s
table (ours next to ours with LLM problem statements and judged pairs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from metrics import scores, singleton_share
from report import Report, number, percent, verdict

from feedback_insights.clusters import Embedder, cluster, cluster_inputs, embedder_for, place
from feedback_insights.config import ClusteringConfig, EmbeddingConfig

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
CACHE = REPO / "benchmarks" / ".cache"

DEFAULT = ClusteringConfig()
STRICT = ClusteringConfig(min_cohesion=0.5)
SEEDS = (0, 1, 2)
SPARSE_SIZES = {"clinc150": (2000, 1000, 300), "hwu64": (3000, 1000)}
#: Rows kept of each set (clinc150's "oos" rows share a label but are no intent).
CORPORA: dict[str, Callable[[dict], bool]] = {
    "clinc150": lambda row: row["label"] != "oos",
    "hwu64": lambda row: True,
    "bug_duplicates": lambda row: True,
}
#: clinc150's banking and credit-card domains: 30 intents that differ by a word or two.
BANKING = set(
    "transfer transactions balance freeze_account pay_bill bill_balance bill_due interest_rate routing min_payment "
    "order_checks pin_change report_fraud account_blocked spending_history credit_score report_lost_card "
    "credit_limit rewards_balance new_card application_status card_declined international_fees apr "
    "redeem_rewards credit_limit_change damaged_card replacement_card_duration improve_credit_score "
    "expiration_date".split()
)
#: Said under every table: what the defaults were tuned on, and how unclustered reports count.
TUNED_ON = (
    "Defaults chosen on: the project's sample, clinc150, hwu64 and bug_duplicates (full sets) and the sparse and "
    "label-subset draws of clinc150 and hwu64 — every row is tuning data, none held out. Unclustered reports "
    "count as singletons (BCubed: a cluster of one; pairs: in no predicted pair)."
)
BCUBED, PAIRS = ("P", "R", "F1"), ("pair P", "pair R", "pair F1")
BASELINE = "baseline: "


@dataclass(slots=True)
class Dataset:
    name: str
    texts: list[str]
    gold: list[str]
    vectors: np.ndarray
    services: list[str] | None = None  # the partition a pipeline would cluster apart, when the set has one

    @property
    def judged_by(self) -> tuple[str, str, str]:
        """The scores this set is judged by: pairwise when most reports are gold singletons
        (BCubed rewards leaving them alone), BCubed otherwise."""
        return PAIRS if singleton_share(self.gold) > 0.5 else BCUBED


def judge_name(keys: tuple[str, str, str]) -> str:
    return "pairs" if keys == PAIRS else "BCubed"


def read(name: str, keep: Callable[[dict], bool] = lambda row: True) -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]
    rows = [row for row in rows if keep(row)]
    return [row["text"] for row in rows], [row["label"] for row in rows]


def embed(name: str, texts: list[str], console: Console | None = None, embedder: Embedder | None = None) -> np.ndarray:
    """The vectors of ``texts`` (default: the pipeline's default embedder, the reference every
    method here shares), from the cache when that model embedded these exact texts before."""
    embedder = embedder or embedder_for(EmbeddingConfig())
    digest = hashlib.sha256(json.dumps([embedder.model_id, texts]).encode()).hexdigest()[:16]
    path = CACHE / f"{name}-{digest}.npy"
    if path.exists():
        return np.load(path)
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / ".gitignore").write_text("*\n")
    start = time.perf_counter()
    vectors = embedder.encode(texts)
    if console:
        console.print(f"embedded {len(texts):,} {name} texts in {time.perf_counter() - start:.0f} s")
    np.save(path, vectors)
    return vectors


def load(name: str, console: Console | None = None) -> Dataset:
    """One shared set: the whole file embedded (one cache entry per file, whatever is kept),
    then the rows :data:`CORPORA` keeps."""
    rows = [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines() if line.strip()]
    vectors = embed(name, [row["text"] for row in rows], console)
    kept = [i for i, row in enumerate(rows) if CORPORA[name](row)]
    services = [rows[i]["project"] for i in kept] if all("project" in rows[i] for i in kept) else None
    return Dataset(name, [rows[i]["text"] for i in kept], [rows[i]["label"] for i in kept], vectors[kept], services)


@dataclass(slots=True)
class Precomputed:
    """An embedder that hands back vectors computed before, row for row."""

    vectors: np.ndarray
    model_id: str = "precomputed"
    dimensions: int = 384

    def encode(self, texts: list[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        assert len(texts) == len(self.vectors)
        return self.vectors


#: A method: a set → labels, -1 = unclustered.
Method = Callable[[Dataset], np.ndarray]


def ours(settings: ClusteringConfig) -> Method:
    """The stateless ``cluster`` command: every text in one partition (no service)."""

    def run(data: Dataset) -> np.ndarray:
        inputs = pl.DataFrame(
            {"id": [str(i) for i in range(len(data.texts))], "text": data.texts, "service": None, "polarity": "problem"},
            schema={"id": pl.String, "text": pl.String, "service": pl.String, "polarity": pl.String},
        )
        clusters = cluster_inputs(inputs, Precomputed(data.vectors), settings).get_column("cluster_id")
        return clusters.fill_null(-1).to_numpy().astype(np.int64)

    return run


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two labellings group the items alike (ids may differ, -1 must match)."""
    if not np.array_equal(a < 0, b < 0):
        return False
    pairs = set(zip(a[a >= 0].tolist(), b[b >= 0].tolist(), strict=True))
    return len(pairs) == len(set(a[a >= 0].tolist())) == len(set(b[b >= 0].tolist()))


def bertopic(data: Dataset) -> np.ndarray:
    """BERTopic's default pipeline; its default UMAP, seeded (which makes UMAP single-threaded)."""
    from bertopic import BERTopic
    from umap import UMAP

    umap = UMAP(n_neighbors=15, n_components=5, min_dist=0.0, metric="cosine", random_state=42)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="n_jobs value 1 overridden")
        topics, _ = BERTopic(umap_model=umap).fit_transform(data.texts, embeddings=data.vectors)
    return np.asarray(topics, dtype=np.int64)


def kmeans(data: Dataset) -> np.ndarray:
    from sklearn.cluster import KMeans

    k = len(set(data.gold))
    return KMeans(n_clusters=k, n_init="auto", random_state=0).fit_predict(data.vectors).astype(np.int64)


#: Thresholds a linkage is cut at (cosine distance), every one scored: the best is picked with the answers.
CUTS = np.round(np.arange(0.05, 0.951, 0.025), 3)


def linkage_at_best_cut(method: str) -> Method:
    """Average or complete linkage on the cosine distance of the same vectors, cut at the single
    threshold that scores best on the set's own judging F1 — picked with the answers, so an
    upper bound for any one-threshold method, not a method a pipeline could run. A flat
    cluster of one is unclustered."""

    def run(data: Dataset) -> np.ndarray:
        from scipy.cluster.hierarchy import fcluster, linkage

        tree = linkage(data.vectors, method, metric="cosine")
        best, best_f1 = np.full(len(data.texts), -1, dtype=np.int64), -1.0
        for cut in CUTS:
            flat = fcluster(tree, cut, criterion="distance")
            ids, sizes = np.unique(flat, return_counts=True)
            labels = np.where(np.isin(flat, ids[sizes == 1]), -1, flat).astype(np.int64)
            f1 = scores(labels, data.gold)[data.judged_by[2]]
            if f1 > best_f1:
                best, best_f1 = labels, f1
        return best

    return run


def alone(data: Dataset) -> np.ndarray:
    return np.full(len(data.texts), -1, dtype=np.int64)


def one_cluster(data: Dataset) -> np.ndarray:
    return np.zeros(len(data.texts), dtype=np.int64)


def per_service(data: Dataset) -> np.ndarray:
    assert data.services is not None
    return np.unique(np.asarray(data.services), return_inverse=True)[1].astype(np.int64)


#: The version before this one's default, for before and after in one run.
PREVIOUS = ClusteringConfig(version="3", algorithm=3)
PICKED = "picked with the answers"
METHODS: dict[str, Method] = {
    "ours": ours(DEFAULT),
    "ours, strict": ours(STRICT),
    "ours, version 3": ours(PREVIOUS),
    "BERTopic": bertopic,
    "KMeans (true k)": kmeans,
    f"average linkage, best cut ({PICKED})": linkage_at_best_cut("average"),
    f"complete linkage, best cut ({PICKED})": linkage_at_best_cut("complete"),
}
BASELINES: dict[str, Method] = {
    f"{BASELINE}every report alone": alone,
    f"{BASELINE}one cluster": one_cluster,
    f"{BASELINE}one cluster per project": per_service,
}


def methods_for(data: Dataset) -> dict[str, Method]:
    """Every method and the baselines that apply (one per project only where the set has projects)."""
    baselines = {name: m for name, m in BASELINES.items() if m is not per_service or data.services is not None}
    return METHODS | baselines


def warm_up(data: Dataset, size: int = 4200) -> float:
    """Run every method once on a slice (above UMAP's 4,096-point switch to approximate
    neighbours): imports and numba compilation out of the timings."""
    start = time.perf_counter()
    part = subset(data, np.arange(size), "warm-up")
    for method in METHODS.values():
        method(part)
    return time.perf_counter() - start


Scores = dict[str, dict[str, float]]


def compare(data: Dataset) -> tuple[Scores, dict[str, np.ndarray]]:
    """Each method's scores and clustering seconds on one set, and its labels."""
    results, labels = {}, {}
    for name, method in methods_for(data).items():
        start = time.perf_counter()
        labels[name] = method(data)
        seconds = time.perf_counter() - start
        results[name] = scores(labels[name], data.gold) | {"seconds": seconds}
    return results, labels


def full_table(report: Report, data: Dataset, results: Scores) -> None:
    groups = sum(1 for n in np.unique(data.gold, return_counts=True)[1] if n >= 2)
    title = (f"{data.name}: {len(data.texts):,} texts, {len(set(data.gold)):,} gold groups "
             f"({groups:,} of ≥ 2; {singleton_share(data.gold):.0%} of texts alone), judged by "
             f"{judge_name(data.judged_by)}")
    columns = ["method", "BCubed P", "R", "F1", "pairs P", "R", "F1", f"groups found (of {groups:,})", "purity",
               "ARI", "V", "unclustered", "seconds"]
    rows = [[name, *(number(r[c]) for c in (*BCUBED, *PAIRS)), percent(r["groups found"]),
             number(r["group purity"]), number(r["ARI"]), number(r["V"]), percent(r["unclustered"]),
             f"{r['seconds']:.1f}"] for name, r in results.items()]
    report.table(title, columns, rows, TUNED_ON)


def subset(data: Dataset, rows: np.ndarray, name: str) -> Dataset:
    services = [data.services[i] for i in rows] if data.services else None
    return Dataset(name, [data.texts[i] for i in rows], [data.gold[i] for i in rows], data.vectors[rows], services)


def sparse_draws(data: Dataset, size: int) -> list[Dataset]:
    """Random draws of ``size`` texts, one per seed."""
    return [
        subset(data, np.random.default_rng(seed).choice(len(data.texts), size, replace=False), f"{data.name} {size:,}")
        for seed in SEEDS
    ]


def label_subset_draws(clinc: Dataset, hwu: Dataset) -> list[Dataset]:
    """Corpora made by label from the tuning sets: random halves of hwu64's intents, random
    thirds of clinc150's, and clinc150's banking and credit-card domains (close intents)."""
    def by_labels(data: Dataset, labels: set[str], name: str) -> Dataset:
        return subset(data, np.flatnonzero([g in labels for g in data.gold]), name)

    draws = []
    for data, share in ((hwu, 2), (clinc, 3)):
        labels = sorted(set(data.gold))
        for seed in (10, 11):
            picked = np.random.default_rng(seed).choice(labels, len(labels) // share, replace=False)
            draws.append(by_labels(data, set(picked.tolist()), f"{data.name}: {len(picked)} intents, seed {seed}"))
    draws.append(by_labels(clinc, BANKING, f"clinc150: banking + credit cards ({len(BANKING)} intents)"))
    return draws


def mean_scores(draws: list[Dataset]) -> Scores:
    """Each method's scores, averaged over ``draws`` (a score undefined on every draw stays NaN)."""
    runs: dict[str, list[dict[str, float]]] = {}
    for data in draws:
        for name, method in methods_for(data).items():
            runs.setdefault(name, []).append(scores(method(data), data.gold))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanmean of all-NaN: the precision of no pair
        return {name: {c: float(np.nanmean([r[c] for r in results])) for c in results[0]}
                for name, results in runs.items()}


@dataclass(frozen=True, slots=True)
class Verdicts:
    """Ours against the trivial baselines and BERTopic, on a set's judging scores."""

    keys: tuple[str, str, str]
    best_baseline: tuple[str, float]  # the trivial baseline with the highest judging F1
    beats_baselines: bool
    target: bool  # precision at least BERTopic's and F1 above it
    stretch: bool  # … and precision ≥ 0.85


def verdicts(results: Scores, keys: tuple[str, str, str]) -> Verdicts:
    p, _, f = keys
    mine, theirs = results["ours"], results["BERTopic"]
    baselines = {name.removeprefix(BASELINE): r[f] for name, r in results.items() if name.startswith(BASELINE)}
    best = max(baselines.items(), key=lambda item: item[1])
    target = mine[p] >= theirs[p] and mine[f] > theirs[f]
    return Verdicts(keys, best, mine[f] > best[1], target, target and mine[p] >= 0.85)


def draws_table(report: Report, title: str, groups: list[tuple[str, tuple[str, str, str], Scores]]) -> None:
    """Rows per group of draws and method, both scores; ours carries the verdicts on the draw's
    judging scores (against the best trivial baseline, and BERTopic)."""
    columns = ["draw", "judged by", "method", "BCubed P", "R", "F1", "pairs P", "R", "F1", "unclustered",
               "above baselines", "target", "stretch"]
    rows = []
    for label, keys, results in groups:
        v = verdicts(results, keys)
        for name, r in results.items():
            marks = [verdict(v.beats_baselines), verdict(v.target), verdict(v.stretch)] if name == "ours" else ["", "", ""]
            first = name == "ours"
            rows.append([label if first else "", judge_name(keys) if first else "", name,
                         *(number(r[c]) for c in (*BCUBED, *PAIRS)), percent(r["unclustered"]), *marks])
    report.table(title, columns, rows, TUNED_ON + " Target: on the judging scores, F1 above every trivial "
                 "baseline's, precision at least BERTopic's and F1 above it (stretch: precision ≥ 0.85 too).", left=3)


def targets_table(report: Report, full: list[tuple[str, tuple[str, str, str], Scores]]) -> None:
    """One row per full set: ours, BERTopic and the best trivial baseline on the judging scores."""
    columns = ["set", "judged by", "ours P / R / F1", "BERTopic P / R / F1", "best trivial baseline F1",
               "above baselines", "target", "stretch"]
    rows = []
    for label, keys, results in full:
        v = verdicts(results, keys)
        mine, theirs = results["ours"], results["BERTopic"]
        rows.append([label, judge_name(keys), " / ".join(number(mine[c]) for c in keys),
                     " / ".join(number(theirs[c]) for c in keys), f"{number(v.best_baseline[1])} ({v.best_baseline[0]})",
                     verdict(v.beats_baselines), verdict(v.target), verdict(v.stretch)])
    report.table("Targets on the full sets, on each set's judging scores", columns, rows,
                 TUNED_ON + " Target: F1 above every trivial baseline's, precision at least BERTopic's and F1 above "
                 "it (stretch: precision ≥ 0.85 too).")


@dataclass(slots=True)
class Stability:
    kept: float  # of the run-1 clustered points, share with the same id after run 2
    unchanged: float  # of all run-1 points, share with the same label (-1 → a cluster = changed)
    f1_incremental: float  # on the set's judging scores


def stability(data: Dataset, settings: ClusteringConfig = DEFAULT, seed: int = 0) -> Stability:
    """Cluster 80 % from scratch, then place the rest (and run 1's leftovers) as the pipeline does."""
    n = len(data.vectors)
    order = np.random.default_rng(seed).permutation(n)
    first, second = order[: int(0.8 * n)], order[int(0.8 * n) :]
    run1 = cluster(data.vectors[first], settings)
    clustered = run1 >= 0
    pending = np.concatenate([second, first[~clustered]])
    fresh = np.arange(len(pending)) < len(second)
    run2 = place(data.vectors[pending], data.vectors[first[clustered]], run1[clustered], settings, fresh=fresh)

    final = np.full(n, -1, dtype=np.int64)
    final[first] = run1
    offset = int(run1.max()) + 1
    final[pending] = np.where(
        run2.existing >= 0, run2.existing, np.where(run2.new >= 0, run2.new + offset, -1)
    )
    return Stability(
        kept=float(np.mean(final[first[clustered]] == run1[clustered])),
        unchanged=float(np.mean(final[first] == run1)),
        f1_incremental=scores(final, data.gold)[data.judged_by[2]],
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", type=Path, help="also write every table as Markdown to this file")
    parser.add_argument("--llm", help="also measure LLM-assisted clustering on this OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--model", default="gpt-4o-mini", help="the endpoint's model, with --llm")
    parser.add_argument("--key-env", default="OPENAI_API_KEY", help="environment variable holding the key, with --llm")
    args = parser.parse_args(argv)
    report = Report(Console(width=200))  # wide enough for the tables when the output goes to a file
    datasets = [load(name, report.console) for name in CORPORA]
    report.console.print(f"warm-up (imports, UMAP's numba compilation): {warm_up(datasets[0]):.0f} s")

    checks: list[tuple[bool, str]] = []  # (whether it is a full-set target, the verdict line)
    full: list[tuple[str, tuple[str, str, str], Scores]] = []
    stable: list[tuple[str, int, Stability, float]] = []
    for data in datasets:
        results, labels = compare(data)
        full_table(report, data, results)
        agree = same_partition(labels["ours"], cluster(data.vectors, DEFAULT))
        report.console.print(f"ours (cluster_inputs) gives the same partition as cluster(): {'yes' if agree else 'NO'}")
        keys = data.judged_by
        v = verdicts(results, keys)
        p, _, f = keys
        mine, theirs = results["ours"], results["BERTopic"]
        how = judge_name(keys)
        checks += [
            (True, f"{verdict(v.beats_baselines)} {data.name} ({how}): ours F1 {number(mine[f])} > best trivial "
                   f"baseline {number(v.best_baseline[1])} ({v.best_baseline[0]})"),
            (True, f"{verdict(v.target)} {data.name} ({how}): ours P {number(mine[p])} ≥ BERTopic {number(theirs[p])} "
                   f"and F1 {number(mine[f])} > BERTopic {number(theirs[f])}"),
            (False, f"{verdict(v.stretch)} {data.name} ({how}, stretch): ours P {number(mine[p])} ≥ 0.85, F1 above"),
        ]
        linked = max(r[f] for name, r in results.items() if PICKED in name)
        checks.append((keys == PAIRS, f"{verdict(mine[f] > linked)} {data.name} ({how}): ours F1 {number(mine[f])} > the "
                                      f"best single-threshold linkage's {number(linked)} ({PICKED})"))
        full.append((f"{data.name} {len(data.texts):,}", keys, results))
        stable.extend((data.name, seed, stability(data, seed=seed), mine[f]) for seed in SEEDS)
    targets_table(report, full)

    by_name = {data.name: data for data in datasets}
    sparse = []
    for name, sizes in SPARSE_SIZES.items():
        for size in sizes:
            draws = sparse_draws(by_name[name], size)
            sparse.append((f"{name} {size:,}", draws[0].judged_by, mean_scores(draws)))
    draws_table(report, f"Sparse: random draws of the tuning sets (mean of {len(SEEDS)})", sparse)
    subsets = [(data.name, data.judged_by, mean_scores([data]))
               for data in label_subset_draws(by_name["clinc150"], by_name["hwu64"])]
    draws_table(report, "Label-subset draws: corpora made by label from the tuning sets (not held out)", subsets)
    for label, keys, results in sparse + subsets:
        v = verdicts(results, keys)
        p, _, f = keys
        mine, theirs = results["ours"], results["BERTopic"]
        checks.append((False, f"{verdict(v.beats_baselines and v.target)} {label} ({judge_name(keys)}): ours P "
                              f"{number(mine[p])} / F1 {number(mine[f])} against BERTopic {number(theirs[p])} / "
                              f"{number(theirs[f])}, best trivial baseline F1 {number(v.best_baseline[1])}"))

    rows = []
    for name, seed, result, f1_all in stable:
        delta = result.f1_incremental - f1_all
        how = judge_name(by_name[name].judged_by)
        rows.append([name, how, str(seed), f"{result.kept:.1%}", f"{result.unchanged:.1%}",
                     number(result.f1_incremental), number(f1_all), f"{delta:+.3f}"])
        checks += [
            (True, f"{verdict(result.kept >= 0.99)} {name}, seed {seed}: {result.kept:.1%} of run-1 clustered points "
                   "keep their id ≥ 99 %"),
            (True, f"{verdict(abs(delta) <= 0.03)} {name}, seed {seed}: |ΔF1| ({how}) {abs(delta):.3f} ≤ 0.03"),
        ]
    report.table("Stability: 80 % from scratch, then 20 % (ours, three random splits)",
                 ["set", "F1 of", "seed", "kept", "unchanged", "F1 80+20", "F1 at once", "ΔF1"], rows, TUNED_ON, left=2)
    for _, line in checks:
        report.line(line)
    if args.markdown:
        report.write(args.markdown)
    if args.llm:  # ours next to ours + LLM (statements, judged pairs): benchmarks/cluster_llm.py
        import cluster_llm

        cluster_llm.main(["--llm", args.llm, "--model", args.model, "--key-env", args.key_env])
    if any(required and line.startswith("FAIL") for required, line in checks):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
