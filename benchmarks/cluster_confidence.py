"""Does a cluster's confidence say how pure it is? Purity by confidence band on every corpus.

Each shared corpus (clinc150 without "oos", hwu64, bug_duplicates) is clustered with the
default settings (``cluster``, the same partition the pipeline makes of one service) on the
vectors ``cluster_quality.py`` caches (the pipeline's default embedder; embedded here on first
use). Each cluster gets
the confidence the pipeline stores (``clusters/_confidence.py``: the vectors centred on their
background as the algorithm centres them, every other vector an outsider) and its purity
against the gold labels (the share of its members in its most common gold group; "impure" =
below 1). Printed per corpus: clusters, impure share, mean purity and members by confidence
band and for needs-review against the rest, and the rank correlation with purity of the
confidence and of each of its three parts alone.

A confidence worth the name ranks purer clusters higher on every corpus; thresholds chosen for
one corpus that invert on another would be tuning. Run by hand: ``python benchmarks/cluster_confidence.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl
from rich.console import Console
from rich.table import Table
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_quality import CORPORA, load

from feedback_insights.clusters import RULE, background, cluster, confidence, unit

#: Upper ends of the bands (each includes its upper end, so 0.5 — where a perfect pair lands — is
#: in the needs-review band).
BANDS = (0.0, 0.25, 0.5, 0.75, 1.0)


def scored(vectors: np.ndarray, gold: list[str]) -> pl.DataFrame:
    """One row per cluster: confidence, needs_review, size, purity."""
    labels = cluster(vectors)
    centred = unit(unit(vectors) - background(vectors))
    conf = confidence(centred, labels)
    members = pl.DataFrame({"cluster": labels, "gold": gold}).filter(pl.col("cluster") >= 0)
    purity = members.group_by("cluster", "gold").len().group_by("cluster").agg(
        (pl.col("len").max() / pl.col("len").sum()).alias("purity")
    )
    return conf.join(purity, on="cluster")


def summary(rows: pl.DataFrame) -> list[str]:
    if rows.is_empty():
        return ["0", "—", "—", "—"]
    return [f"{rows.height}", f"{(rows['purity'] < 1).mean():.0%}", f"{rows['purity'].mean():.3f}", f"{rows['size'].mean():.1f}"]


def main() -> None:
    console = Console()
    console.print(f"rule: {RULE}")
    for name in CORPORA:
        data = load(name, console)
        rows = scored(data.vectors, data.gold)
        table = Table(title=f"{name}: {rows.height} clusters", show_edge=False, pad_edge=False)
        for column in ("confidence", "clusters", "impure", "mean purity", "mean size"):
            table.add_column(column, justify="left" if column == "confidence" else "right")
        for low, high in zip(BANDS[:-1], BANDS[1:], strict=True):
            band = rows.filter(((pl.col("confidence") > low) | (low == 0)) & (pl.col("confidence") <= high + 1e-9))
            table.add_row(f"{low:.2f}–{high:.2f}", *summary(band))
        table.add_row("needs review", *summary(rows.filter("needs_review")))
        table.add_row("the rest", *summary(rows.filter(~pl.col("needs_review"))))
        console.print(table)
        rho = {c: spearmanr(rows[c], rows["purity"]).statistic for c in ("confidence", "separation", "cohesion", "size")}
        console.print(f"{name}: Spearman ρ with purity: " + ", ".join(f"{c} {r:+.3f}" for c, r in rho.items()))


if __name__ == "__main__":
    main()
