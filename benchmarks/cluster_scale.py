"""Clustering cost against partition size: seconds, peak memory and the fitted growth exponent.

The vectors are real: the cached all-MiniLM-L6-v2 embeddings of the shared corpora
(clinc150 without "oos", hwu64, bug_duplicates: 18,139 texts, ``benchmarks/.cache``, made by
``cluster_quality.py``), repeated with small noise so that problems keep their shape: copy
``j`` of text ``i`` is ``unit(v_i + σ·ε)``, ε standard normal in 384 dimensions and
σ = √((1/0.95² − 1)/384), so a copy's cosine to its original is 0.95 (two copies: 0.90). All
of them form one partition, clustered from scratch by :func:`feedback_insights.clusters.cluster`
with the default settings — the worst case: the pipeline clusters per service and polarity.

1. **Scale** (``--sizes``, default 50,000 100,000 200,000 400,000): per size, in a child
   process of its own (so peak RSS is that size's), the seconds of one clustering and the
   child's peak RSS (``resource.getrusage``, vectors included); then the growth exponent, the
   least-squares slope of log seconds on log n. Targets (issue 20): 200,000 in ≤ 300 s and an
   exponent ≤ 1.3.
2. **Crossover** (``--crossover 5000 10000 20000 50000``): the same vectors clustered with
   exact neighbours and with the approximate index (``approximate_from`` above and below the
   size), seconds of each, BCubed F1 of each against the gold labels and of the approximate
   labels against the exact ones: where the index pays, which is how
   ``ClusteringConfig.approximate_from`` was chosen.
3. **Corpora** (``--corpora``): clinc150, hwu64 and bug_duplicates as they are, BCubed F1
   against their gold labels with the default settings and with the index forced
   (``approximate_from=2``), and the change (issue 20: at most 0.005 at the default threshold).

Run by hand: ``python benchmarks/cluster_scale.py [--sizes N ...] [--crossover N ...] [--corpora]``.
The 400,000 run takes a while on 2 cores; ``--sizes 50000 100000 200000`` leaves it out.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_quality import embed, read
from metrics import bcubed

from feedback_insights.clusters import cluster
from feedback_insights.config import ClusteringConfig

CORPORA = (
    ("clinc150", lambda row: row["label"] != "oos"),
    ("hwu64", lambda row: True),
    ("bug_duplicates", lambda row: True),
)
COPY_COSINE = 0.95
TARGET_SECONDS, TARGET_AT, TARGET_EXPONENT = 300.0, 200_000, 1.3
F1_BOUND = 0.005
EXACT = 10**9  # an approximate_from no partition reaches


def corpus(name: str) -> tuple[np.ndarray, list[str]]:
    keep = dict(CORPORA)[name]
    texts, gold = read(f"{name}.jsonl", keep=keep)
    return embed(name, texts), gold


def copies(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` noisy copies of the shared corpora's vectors, round-robin, and their gold labels."""
    parts = [corpus(name) for name, _ in CORPORA]
    base = np.vstack([vectors for vectors, _ in parts]).astype(np.float32)
    gold = np.array([f"{name}:{label}" for (name, _), (_, labels) in zip(CORPORA, parts, strict=True) for label in labels])
    rows = np.arange(n) % len(base)
    sigma = np.sqrt((1 / COPY_COSINE**2 - 1) / base.shape[1])
    noisy = base[rows] + sigma * np.random.default_rng(seed).standard_normal((n, base.shape[1]), dtype=np.float32)
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32), gold[rows]


def child(n: int, approximate_from: int | None) -> dict:
    """One clustering of ``n`` copies, in this process: seconds, peak RSS, and the labels' file."""
    vectors, _ = copies(n)
    settings = ClusteringConfig() if approximate_from is None else ClusteringConfig(approximate_from=approximate_from)
    start = time.perf_counter()
    labels = cluster(vectors, settings)
    seconds = time.perf_counter() - start
    out = Path(__file__).resolve().parent / ".cache" / f"scale-{n}-{approximate_from}.npy"
    np.save(out, labels)
    return {
        "n": n, "seconds": seconds, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "clusters": int(labels.max()) + 1, "unclustered": float(np.mean(labels < 0)), "labels": str(out),
    }


def run_child(n: int, approximate_from: int | None = None) -> dict:
    spec = json.dumps({"n": n, "approximate_from": approximate_from})
    done = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def exponent(sizes: list[int], seconds: list[float]) -> float:
    """The slope of log seconds on log n (least squares)."""
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0]) if len(sizes) > 1 else float("nan")


def scale(sizes: list[int], console: Console) -> bool:
    table = Table("reports", "seconds", "peak RSS MB", "clusters", "unclustered", "F1 vs gold",
                  title="One partition clustered from scratch (default settings)")
    runs = []
    for n in sizes:
        run = run_child(n)
        runs.append(run)
        _, gold = copies(n)
        f1 = bcubed(np.load(run["labels"]), gold)[2]
        table.add_row(f"{n:,}", f"{run['seconds']:.1f}", f"{run['rss_mb']:,.0f}", f"{run['clusters']:,}",
                      f"{run['unclustered']:.1%}", f"{f1:.3f}")
        console.print(f"{n:,}: {run['seconds']:.1f} s", style="dim")
    console.print(table)
    slope = exponent([r["n"] for r in runs], [r["seconds"] for r in runs])
    at = {r["n"]: r["seconds"] for r in runs}
    ok = slope <= TARGET_EXPONENT and at.get(TARGET_AT, 0.0) <= TARGET_SECONDS
    console.print(f"growth exponent (log-log least squares): {slope:.2f}  (target ≤ {TARGET_EXPONENT})")
    if TARGET_AT in at:
        console.print(f"{TARGET_AT:,} reports: {at[TARGET_AT]:.0f} s  (target ≤ {TARGET_SECONDS:.0f} s)")
    console.print("PASS" if ok else "FAIL", style="green" if ok else "red")
    return ok


def crossover(sizes: list[int], console: Console) -> None:
    table = Table("reports", "exact s", "approximate s", "approximate ÷ exact", "F1 vs gold, exact", "approximate",
                  "F1 approximate vs exact", title="Exact neighbours against the approximate index, same vectors")
    for n in sizes:
        exact, approximate = run_child(n, EXACT), run_child(n, 2)
        exact_labels, approximate_labels = np.load(exact["labels"]), np.load(approximate["labels"])
        _, gold = copies(n)
        table.add_row(f"{n:,}", f"{exact['seconds']:.1f}", f"{approximate['seconds']:.1f}",
                      f"{approximate['seconds'] / exact['seconds']:.2f}", f"{bcubed(exact_labels, gold)[2]:.4f}",
                      f"{bcubed(approximate_labels, gold)[2]:.4f}", f"{bcubed(approximate_labels, exact_labels)[2]:.4f}")
        console.print(f"{n:,}: exact {exact['seconds']:.1f} s, approximate {approximate['seconds']:.1f} s", style="dim")
    console.print(table)


def corpora(console: Console) -> bool:
    default = ClusteringConfig()
    table = Table("corpus", "texts", "F1 exact", "F1 index forced", "Δ", "F1 at default threshold", "Δ",
                  f"|Δ| ≤ {F1_BOUND}", title=f"Labels on the shared corpora (default approximate_from = {default.approximate_from:,})")
    ok = True
    for name, _ in CORPORA:
        vectors, gold = corpus(name)
        exact = bcubed(cluster(vectors, ClusteringConfig(approximate_from=EXACT)), gold)[2]
        forced = bcubed(cluster(vectors, ClusteringConfig(approximate_from=2)), gold)[2]
        at_default = bcubed(cluster(vectors, default), gold)[2]
        passed = abs(at_default - exact) <= F1_BOUND
        ok &= passed
        table.add_row(name, f"{len(vectors):,}", f"{exact:.4f}", f"{forced:.4f}", f"{forced - exact:+.4f}",
                      f"{at_default:.4f}", f"{at_default - exact:+.4f}", "PASS" if passed else "FAIL")
    console.print(table)
    return ok


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[50_000, 100_000, 200_000, 400_000])
    parser.add_argument("--crossover", type=int, nargs="*", default=[], help="sizes to time exact against approximate")
    parser.add_argument("--corpora", action="store_true", help="the F1 change on the shared corpora")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(child(spec["n"], spec["approximate_from"])))
        return
    console = Console(width=130)
    ok = True
    if args.crossover:
        crossover(args.crossover, console)
    if args.corpora:
        ok &= corpora(console)
    if args.sizes:
        ok &= scale(args.sizes, console)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
