"""Sentiment quality and speed: our domain-extended VADER against plain VADER.

1. VADER's own human-rated ground truth (``../shared/data/sentiment.jsonl``: tweets, Amazon
   review snippets, movie review snippets; each scored -4 … +4 by 20+ raters). Per domain and
   overall: Pearson r of :func:`feedback_insights.signals.sentiment` and of plain VADER's
   compound with the human score. Target: ours ≥ plain VADER on every domain, i.e. extending
   the lexicon for agent feedback costs nothing on general English.
2. The agent feedback in ``data/sample`` (synthetic, written by ``data/sample/generate.py``;
   ``truth.jsonl`` labels each report praise or problem): AUC, the chance that a random
   praise report scores above a random problem report. This is what the extension is for.
3. Throughput of ``sentiment()`` and plain VADER over the ground-truth texts, and of
   ``compute()`` over the sample records.
4. What the signals say about demand, on real bug reports (``../shared/data/bug_duplicates.jsonl``:
   Hadoop Jira and SeaMonkey Bugzilla, duplicate links as ground truth): the share of reports
   that someone else filed again (in a duplicate group), by expectation gap and by high
   severity language. These ratios are the measurement behind the ranking's 1.5 factors
   (``clusters/_demand.py``).

Run by hand: ``python benchmarks/signals.py``.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from feedback_insights.ingest import process, read_items
from feedback_insights.signals import (
    TONE_FIELDS,
    comment_fields,
    compute,
    expectation_gap,
    sentiment,
    severity_language,
)

REPO = Path(__file__).resolve().parents[1]
GROUND_TRUTH = REPO.parent / "shared" / "data" / "sentiment.jsonl"
BUG_DUPLICATES = REPO.parent / "shared" / "data" / "bug_duplicates.jsonl"
SAMPLE = REPO / "data" / "sample"
#: The sample files the file reader takes (session.sqlite is a SQL source, left out).
SAMPLE_FILES = (
    "afp_records.jsonl",
    "afp_submissions.jsonl",
    "afs.jsonl",
    "sep2369.jsonl",
    "rfc026.json",
)

In = TypeVar("In")
Out = TypeVar("Out")


def plain_vader() -> Callable[[str], float]:
    analyzer = SentimentIntensityAnalyzer()
    return lambda text: analyzer.polarity_scores(text)["compound"]


def timed(
    function: Callable[[In], Out], inputs: list[In], runs: int = 3
) -> tuple[list[Out], float]:
    """The outputs, and inputs handled per second in the fastest of ``runs`` passes (the first
    pass also warms caches, so ours and plain VADER are timed alike)."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        outputs = [function(value) for value in inputs]
        best = min(best, time.perf_counter() - start)
    return outputs, len(inputs) / best


def auc(positives: list[float], negatives: list[float]) -> float:
    """P(a random positive scores above a random negative), ties counting half."""
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def sample_records() -> Iterator[tuple[dict[str, Any], str]]:
    """Each valid sample record with its truth polarity ("praise" or "problem")."""
    truth: dict[tuple[str, int], list[str]] = defaultdict(list)
    for line in (SAMPLE / "truth.jsonl").read_text().splitlines():
        unit = json.loads(line)
        if not unit["invalid"]:
            truth[unit["file"], unit["line"]].append(unit["polarity"])
    for name in SAMPLE_FILES:
        for item in read_items(SAMPLE / name):
            kind, number = item.position.split()
            line = int(number) + (kind == "index")  # truth numbers array items from 1
            records = process(
                [item], collector="bench", source_uri=name, received_at="2026-11-30T00:00:00Z"
            ).records
            yield from zip(records, truth[name, line], strict=True)


def tone_text(record: dict[str, Any]) -> str:
    """The words sentiment reads: the comment's fields in the reporter's own voice."""
    fields = comment_fields(record)
    return "\n".join(record[name] for name in TONE_FIELDS if name in fields and record[name])


def demand_signals(console: Console) -> None:
    """Share of bug reports that others filed again, by the two signals the ranking weighs."""
    groups: dict[tuple[bool, bool], list[bool]] = defaultdict(list)
    for line in BUG_DUPLICATES.read_text().splitlines():
        row = json.loads(line)
        key = (expectation_gap(row["text"]), severity_language(row["text"]) == "high")
        groups[key].append(row["in_dup_cluster"])
    base = statistics.mean(groups[False, False])
    table = Table(title="Bug reports someone else filed again (bug_duplicates), by signal")
    for column in ("expectation gap", "high severity language", "reports", "in a duplicate group", "vs neither"):
        table.add_column(column, justify="left" if column.startswith(("expectation", "high")) else "right")
    for gap, high in ((False, False), (True, False), (False, True), (True, True)):
        dups = groups[gap, high]
        share = statistics.mean(dups)
        table.add_row(str(gap), str(high), f"{len(dups):,}", f"{sum(dups)} ({share:.1%})", f"×{share / base:.2f}")
    console.print(table)


def main() -> None:
    console = Console()
    rows = [json.loads(line) for line in GROUND_TRUTH.read_text().splitlines()]
    texts = [row["text"] for row in rows]
    ours, ours_rate = timed(sentiment, texts)
    plain, plain_rate = timed(plain_vader(), texts)

    by_domain: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        by_domain[row["domain"]].append(index)
    by_domain["overall"] = list(range(len(rows)))

    table = Table(title="Sentiment vs human ratings (VADER ground truth): Pearson r")
    for column in ("domain", "n", "r ours", "r plain VADER", "ours - VADER"):
        table.add_column(column, justify="left" if column == "domain" else "right")
    for domain, indices in by_domain.items():
        human = [rows[i]["score"] for i in indices]
        r_ours = statistics.correlation(human, [ours[i] for i in indices])
        r_plain = statistics.correlation(human, [plain[i] for i in indices])
        style = "green" if r_ours >= r_plain else "red"
        table.add_row(
            domain,
            f"{len(indices):,}",
            f"{r_ours:.4f}",
            f"{r_plain:.4f}",
            f"[{style}]{r_ours - r_plain:+.4f}",
        )
    console.print(table)

    everything = list(sample_records())
    # A record with no words of its own (a bare thumbs-down) has no sentiment to rank.
    labelled = [(record, polarity) for record, polarity in everything if tone_text(record)]
    tone_texts = [tone_text(record) for record, _ in labelled]
    sample = Table(title="Agent feedback sample (synthetic): praise vs problem")
    for column in ("scorer", "praise", "problems", "AUC"):
        sample.add_column(column, justify="left" if column == "scorer" else "right")
    for scorer, score in (("ours", sentiment), ("plain VADER", plain_vader())):
        scored = [
            (score(text), polarity)
            for text, (_, polarity) in zip(tone_texts, labelled, strict=True)
        ]
        praise = [value for value, polarity in scored if polarity == "praise"]
        problems = [value for value, polarity in scored if polarity == "problem"]
        sample.add_row(scorer, str(len(praise)), str(len(problems)), f"{auc(praise, problems):.3f}")
    console.print(sample)

    records = [record for record, _ in everything] * 10
    _, compute_rate = timed(compute, records)
    console.print(
        f"sentiment(): {ours_rate:,.0f} texts/s · plain VADER: {plain_rate:,.0f} texts/s · "
        f"compute(): {compute_rate:,.0f} records/s"
    )
    demand_signals(console)


if __name__ == "__main__":
    main()
