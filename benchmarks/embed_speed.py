"""The embedding backends side by side: speed, sameness of vectors, and what int8 costs in quality.

1. Speed, on the same texts in the same process (2,000 of each shared corpus): the torch path
   (``SentenceTransformer.encode``), ONNX Runtime fp32 (the default) and ONNX Runtime int8, in
   texts per second, and each ONNX backend's cosine to the torch vectors (lowest and mean).
2. Quality: every text of clinc150, hwu64 and bug_duplicates embedded by each backend and
   clustered with the default settings; BCubed F1 per backend, and int8's change against fp32.
   int8 becomes the default only if that change is at most 0.005 on every corpus (issue 20).

Vectors are cached in ``benchmarks/.cache`` per backend and corpus. Run by hand:
``python benchmarks/embed_speed.py [--sample 2000]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_quality import embed, read
from metrics import bcubed

from feedback_insights.clusters import Embedder, MiniLMEmbedder, OnnxMiniLMEmbedder, cluster
from feedback_insights.config import EmbeddingConfig

CORPORA = {"clinc150": lambda row: row["label"] != "oos", "hwu64": lambda row: True, "bug_duplicates": lambda row: True}
#: Largest change of BCubed F1 int8 may make on any corpus to become the default.
INT8_BOUND = 0.005


def backends() -> dict[str, Embedder]:
    return {"torch": MiniLMEmbedder(), "onnx fp32": OnnxMiniLMEmbedder(),
            "onnx int8": OnnxMiniLMEmbedder(EmbeddingConfig(precision="int8"))}


def speed(console: Console, embedders: dict[str, Embedder], sample: int) -> None:
    table = Table("corpus", "texts", *(f"{name} texts/s" for name in embedders), "fp32 ×", "int8 ×",
                  "fp32 cosine min / mean", "int8 cosine min / mean", title=f"Speed on {sample:,} texts per corpus")
    for corpus, keep in CORPORA.items():
        texts = read(f"{corpus}.jsonl", keep)[0]
        texts = [texts[i] for i in np.random.default_rng(0).choice(len(texts), min(sample, len(texts)), replace=False)]
        for embedder in embedders.values():
            embedder.encode(texts[:64])  # loaded (and exported) outside the timing
        rates, found = {}, {}
        for name, embedder in embedders.items():
            start = time.perf_counter()
            found[name] = embedder.encode(texts)
            rates[name] = len(texts) / (time.perf_counter() - start)
        cosines = {name: (found[name] * found["torch"]).sum(axis=1) for name in ("onnx fp32", "onnx int8")}
        table.add_row(corpus, f"{len(texts):,}", *(f"{rates[name]:.0f}" for name in embedders),
                      f"{rates['onnx fp32'] / rates['torch']:.2f}", f"{rates['onnx int8'] / rates['torch']:.2f}",
                      *(f"{c.min():.5f} / {c.mean():.5f}" for c in cosines.values()))
    console.print(table)


def quality(console: Console, embedders: dict[str, Embedder]) -> bool:
    table = Table("corpus", *(f"{name} F1" for name in embedders), "int8 − fp32", f"|Δ| ≤ {INT8_BOUND}",
                  title="BCubed F1, default clustering, per backend")
    adopt = True
    for corpus, keep in CORPORA.items():
        texts, gold = read(f"{corpus}.jsonl", keep)
        f1 = {name: bcubed(list(cluster(embed(corpus, texts, embedder=e))), gold)[2] for name, e in embedders.items()}
        delta = f1["onnx int8"] - f1["onnx fp32"]
        adopt &= abs(delta) <= INT8_BOUND
        table.add_row(corpus, *(f"{f1[name]:.3f}" for name in embedders), f"{delta:+.3f}",
                      "yes" if abs(delta) <= INT8_BOUND else "no")
    console.print(table)
    console.print(f"int8 {'meets' if adopt else 'does not meet'} the bound on every corpus: "
                  f"{'it could be the default' if adopt else 'fp32 stays the default'}")
    return adopt


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=2000, help="texts per corpus for the speed table")
    args = parser.parse_args(argv)
    console = Console(width=160)
    embedders = backends()
    speed(console, embedders, args.sample)
    quality(console, embedders)


if __name__ == "__main__":
    main()
