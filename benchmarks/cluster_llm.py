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
  which is how the band was chosen (:data:`BANDS` are the bands compared).

BCubed and pairwise scores, unclustered texts counted as singletons (``metrics.py``), beside the
trivial baselines (every text alone; one cluster): a set whose texts are mostly gold singletons
(bug_duplicates) is judged by its pairwise scores, where doing nothing scores 0, not by BCubed,
where it scores 0.984. The defaults, the band and the pair cap were chosen on these same
corpora (``cluster_quality.py`` says on what): nothing here is held out. ``--draw N`` takes a
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_quality import CORPORA, DEFAULT, Dataset, alone, embed, judge_name, load, one_cluster, ours, read
from metrics import scores
from report import Report, number, percent

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


def drawn(name: str, console: Console, draw: int | None, seed: int) -> Dataset:
    """The set (its cached vectors), or a seeded random draw of ``draw`` of its texts, embedded
    alone (the tests run a tiny draw on a machine with no cache)."""
    if not draw:
        return load(name, console)
    texts, gold = read(f"{name}.jsonl", keep=CORPORA[name])
    if draw < len(texts):
        rows = np.sort(np.random.default_rng(seed).choice(len(texts), draw, replace=False))
        texts, gold = [texts[i] for i in rows], [gold[i] for i in rows]
    return Dataset(name, texts, gold, embed(name, texts, console))


def judged(vectors: np.ndarray, labels: np.ndarray, judge: Judge, band: tuple[float, float] = GREY_BAND,
           limit: int | None = MAX_PAIRS) -> tuple[np.ndarray, int, int]:
    """``labels`` after the borderline pairs are judged, as the stage's ``ClusterAssist._merges``
    judges one partition in a first run (every cluster touched): centroids on vectors centred on
    the clustered reports' background, pairs closest first, each shown as its cluster was
    before the round (the larger absorbs the smaller, ties to the lower id; a cluster absorbed
    this round is not judged again). With the number of pairs judged and merged."""
    ids, centroids = cluster_centroids(vectors, labels, background(vectors[labels >= 0]))
    sizes = dict(zip(*np.unique(labels[labels >= 0], return_counts=True), strict=True))
    out, gone, asked, merged = labels.copy(), set(), 0, 0
    for i, j, _ in borderline_pairs(centroids, band, limit or len(ids) ** 2):
        a, b = int(ids[i]), int(ids[j])
        if {a, b} & gone:
            continue
        into, other = (a, b) if (sizes[a], -a) >= (sizes[b], -b) else (b, a)
        asked += 1
        if judge(np.flatnonzero(labels == into), np.flatnonzero(labels == other)):
            out[out == other] = into
            gone.add(other)
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
    labels = ours(DEFAULT)(Dataset(data.name, data.texts, data.gold, vectors))
    return judged(vectors, labels, llm_judge(assistant, data.texts, vectors))


def row(data: Dataset, method: str, labels: np.ndarray, note: str = "") -> list[str]:
    s = scores(labels, data.gold)
    return [data.name, method, *(number(s[c]) for c in ("P", "R", "F1", "pair P", "pair R", "pair F1")),
            percent(s["unclustered"]), note, judge_name(data.judged_by)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", help="an OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--oracle", action="store_true", help="judge borderline pairs by the gold labels")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--draw", type=int, help="a random draw of this many texts per set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown to this file")
    args = parser.parse_args(argv)
    if not args.llm and not args.oracle:
        parser.error("give --llm URL (and --model), or --oracle")
    report = Report(Console(width=170))
    rows: list[list[str]] = []
    client = ChatClient(LLMConfig(base_url=args.llm, model=args.model, key_env=args.key_env)) if args.llm else None
    try:
        for name in args.sets.split(","):
            data = drawn(name, report.console, args.draw, args.seed)
            base = ours(DEFAULT)(data)
            rows.append(row(data, "ours", base))
            rows += [row(data, "baseline: every report alone", alone(data)),
                     row(data, "baseline: one cluster", one_cluster(data))]
            if args.oracle:
                for band in BANDS:
                    for limit in (MAX_PAIRS, None):
                        labels, asked, merged = judged(data.vectors, base, oracle(data.gold), band, limit)
                        cap = f"≤ {limit} pairs" if limit else "all pairs"
                        rows.append(row(data, f"+ oracle judge {band[0]:.1f}–{band[1]:.1f}, {cap}", labels,
                                        f"{asked} / {merged}"))
            if client:
                assistant = Assistant(client, ["statements", "merges"])
                labels, asked, merged = with_llm(data, assistant, report.console)
                rows.append(row(data, f"ours + LLM ({args.model})", labels, f"{asked} / {merged}"))
                report.console.print(assistant.line(), highlight=False)
    finally:
        if client:
            client.close()
    draw = f"a random {args.draw:,} texts of each set (seed {args.seed})" if args.draw else "the full sets"
    report.table(f"ours vs ours + LLM on {draw}: BCubed P / R / F1, then pairwise",
                 ["set", "method", "P", "R", "F1", "pairs P", "R", "F1", "unclustered", "pairs judged / merged",
                  "judged by"], rows,
                 "The clustering defaults, the band and the pair cap were chosen on these corpora: none is held "
                 "out. Unclustered texts count as singletons (BCubed: a cluster of one; pairs: in no pair). "
                 f"Bands are cosines between centroids; the stage's band is {GREY_BAND[0]}–{GREY_BAND[1]}, "
                 f"at most {MAX_PAIRS} pairs per partition and run.", left=2)
    if args.markdown:
        report.write(args.markdown)

if __name__ == "__main__":
    main()
