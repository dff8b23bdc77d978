"""LLM-assisted clustering against ours alone, on the shared labelled corpora.

The same texts and cached MiniLM vectors as ``cluster_quality.py`` (its helpers, read-only), one
partition per corpus, as the pipeline's stage would see them in one run:

- **ours**: the default clustering of the texts' vectors;
- **ours + LLM** (``--llm URL --model NAME``): each text's problem statement from the model,
  embedded in front of the text (``embedded_text``), clustered the same way; then the borderline
  pairs (``GREY_BAND``, at most ``MAX_PAIRS``, closest first) put to the model, a yes merging
  them. Names do not change a partition and are not scored;
- **ours + oracle judge** (``--oracle``, no LLM needed): the borderline pairs decided by the gold
  labels (same majority label = same problem): the most the judging step can add at each band,
  which is how the band was chosen (``--bands`` lists the bands to compare).

BCubed with unclustered texts as clusters of their own (``metrics.py``). ``--draw N`` takes a
random N texts per corpus (seeded): a real endpoint costs a call per text, and the tests run the
script against the fake on a tiny draw.

Run by hand: ``python benchmarks/cluster_llm.py --oracle`` or
``OPENAI_API_KEY=… python benchmarks/cluster_llm.py --llm https://api.openai.com/v1 --model gpt-4o-mini --draw 1000``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_quality import DEFAULT, Dataset, embed, ours, read
from metrics import scores

from feedback_insights.clusters import (
    GREY_BAND,
    MAX_PAIRS,
    Assistant,
    Evidence,
    background,
    borderline_pairs,
    cluster_centroids,
    embedded_text,
    typical,
)
from feedback_insights.config import LLMConfig
from feedback_insights.llm import ChatClient

#: Whether two clusters (their members' row indices) are one problem.
Judge = Callable[[np.ndarray, np.ndarray], bool]
SETS = ("clinc150", "hwu64", "bug_duplicates")
#: Bands the oracle compares, each with at most MAX_PAIRS judged (one run of the stage) and uncapped.
BANDS = ((0.2, 0.3), (0.3, 0.4), (0.4, 0.5), (0.5, 0.7), GREY_BAND)


def load(name: str, console: Console, draw: int | None, seed: int) -> Dataset:
    keep = (lambda row: row["label"] != "oos") if name == "clinc150" else (lambda row: True)
    texts, gold = read(f"{name}.jsonl", keep=keep)
    if draw and draw < len(texts):
        rows = np.sort(np.random.default_rng(seed).choice(len(texts), draw, replace=False))
        texts, gold = [texts[i] for i in rows], [gold[i] for i in rows]
    return Dataset(name, texts, gold, embed(name, texts, console))


def judged(vectors: np.ndarray, labels: np.ndarray, judge: Judge, band: tuple[float, float] = GREY_BAND,
           limit: int | None = MAX_PAIRS) -> tuple[np.ndarray, int, int]:
    """``labels`` after the borderline pairs are judged (a yes merges the second into the first,
    a cluster merged away this round is not judged again, as in the stage); with the number of
    pairs judged and merged."""
    ids, centroids = cluster_centroids(vectors, labels, background(vectors))
    out, gone, asked, merged = labels.copy(), set(), 0, 0
    for i, j, _ in borderline_pairs(centroids, band, limit or len(ids) ** 2):
        a, b = int(ids[i]), int(ids[j])
        if {a, b} & gone:
            continue
        asked += 1
        if judge(np.flatnonzero(out == a), np.flatnonzero(out == b)):
            out[out == b] = a
            gone.add(b)
            merged += 1
    return out, asked, merged


def oracle(gold: list[str]) -> Judge:
    def same(a: np.ndarray, b: np.ndarray) -> bool:
        majority = [Counter(gold[k] for k in rows).most_common(1)[0][0] for rows in (a, b)]
        return majority[0] == majority[1]

    return same


def llm_judge(assistant: Assistant, texts: list[str], vectors: np.ndarray) -> Judge:
    def evidence(rows: np.ndarray) -> Evidence:
        return Evidence(len(rows), [texts[rows[k]] for k in typical(vectors[rows])])

    def same(a: np.ndarray, b: np.ndarray) -> bool:
        judgement = assistant.judge(None, evidence(a), evidence(b))
        return bool(judgement and judgement.same)

    return same


def with_llm(data: Dataset, assistant: Assistant, console: Console) -> tuple[np.ndarray, int, int]:
    """Ours + LLM: statements embedded with the texts, then the judged borderline pairs."""
    statements = assistant.statements(data.texts)
    texts = [embedded_text(s, t) for s, t in zip(statements, data.texts, strict=True)]
    vectors = embed(f"{data.name}-llm", texts, console)
    labels = ours(DEFAULT)(vectors, data.texts, len(set(data.gold)))
    return judged(vectors, labels, llm_judge(assistant, data.texts, vectors))


def row(table: Table, name: str, method: str, labels: np.ndarray, gold: list[str], note: str = "") -> None:
    s = scores(labels, gold)
    table.add_row(name, method, f"{s['P']:.3f}", f"{s['R']:.3f}", f"{s['F1']:.3f}", f"{s['unclustered']:.0%}", note)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", help="an OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--oracle", action="store_true", help="judge borderline pairs by the gold labels")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--draw", type=int, help="a random draw of this many texts per set")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.llm and not args.oracle:
        parser.error("give --llm URL (and --model), or --oracle")
    console = Console(width=150)
    table = Table(title="ours vs ours + LLM (BCubed)", show_edge=False, pad_edge=False)
    for column in ("set", "method", "P", "R", "F1", "unclustered", "pairs judged / merged"):
        table.add_column(column, justify="left" if column in ("set", "method") else "right")
    client = ChatClient(LLMConfig(base_url=args.llm, model=args.model, key_env=args.key_env)) if args.llm else None
    try:
        for name in args.sets.split(","):
            data = load(name, console, args.draw, args.seed)
            base = ours(DEFAULT)(data.vectors, data.texts, len(set(data.gold)))
            row(table, name, "ours", base, data.gold)
            if args.oracle:
                for band in BANDS:
                    for limit in (MAX_PAIRS, None):
                        labels, asked, merged = judged(data.vectors, base, oracle(data.gold), band, limit)
                        cap = f"≤ {limit} pairs" if limit else "all pairs"
                        row(table, name, f"+ oracle judge {band[0]:.1f}–{band[1]:.1f}, {cap}", labels, data.gold,
                            f"{asked} / {merged}")
            if client:
                assistant = Assistant(client, ["statements", "merges"])
                labels, asked, merged = with_llm(data, assistant, console)
                row(table, name, f"ours + LLM ({args.model})", labels, data.gold, f"{asked} / {merged}")
                console.print(assistant.line(), highlight=False)
    finally:
        if client:
            client.close()
    console.print(table)


if __name__ == "__main__":
    main()
