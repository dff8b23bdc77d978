"""Lanes from words (issue 29): where reading a report's words decides praise or a request.

1. The cut for praise from words alone, where a dialect's default is a complaint (an in-session
   row without a sentiment: :func:`feedback_insights.core.vocabulary.reads_as_praise`). Measured
   on VADER's human-rated ground truth (``../shared/data/sentiment.jsonl``, label positive ≥ 0.5,
   negative ≤ -0.5), not on the sample: praise precision and recall, and the shares of negative
   and neutral texts read as praise, for VADER's own cut (0.05) and stricter ones, with and without
   "nothing negative" (no negative word, nothing negated, no "but"). Chosen: the lowest cut at
   which at most 1 in 20 negative texts reads as praise. Trivial baselines beside: never praise
   (the rule before issue 29), always praise.
2. The same rules on the sample's in-session rows without a sentiment (``data/sample``, synthetic;
   ``truth.jsonl`` labels each row praise or problem): praise found, complaints read as praise.
3. How often the request phrases (:func:`~feedback_insights.core.vocabulary.asks_for_change`)
   fire: on the sample's praise (should be never: praise that asks nothing is praise), its problem
   reports, the suggestion fields agents wrote (``suggestion``, ``suggested_fix``: suggestions by
   definition, most phrased as fixes, "Return the field name"), and on three shared corpora that
   are not feedback (reviews and tweets; CLINC150 and HWU64 are commands to an assistant, so
   "please add …" there is a request too). The phrases come from the seeds' words and plain
   English; nothing was fitted to these counts.
4. Where every valid unit of the sample lands after ingest, by dialect: the reports view's
   partition (problem, request, praise) against the truth's polarity.

Run by hand: ``python benchmarks/lanes.py``.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from feedback_insights.clusters._stage import POLARITY_BY_LANE
from feedback_insights.core.vocabulary import _negation, _scores, asks_for_change, reads_as_praise
from feedback_insights.ingest import dialects, process, read_items
from feedback_insights.ingest.dialects import Origin

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
SAMPLE = REPO / "data" / "sample"
SAMPLE_FILES = ("afp_records.jsonl", "afp_submissions.jsonl", "afs.jsonl", "sep2369.jsonl", "rfc026.json")
CUTS = (0.05, 0.3, 0.5, 0.7)

Rule = Callable[[str], bool]


def _rule(cut: float, clean: bool) -> Rule:
    def praise(text: str) -> bool:
        scores = _scores(text)
        calm = scores["neg"] == 0 and _negation().search(text) is None
        return scores["compound"] >= cut and (calm or not clean)

    return praise


def rules() -> dict[str, Rule]:
    """The rules measured, named as the tables show them; "ours" is the one the pipeline uses."""
    found: dict[str, Rule] = {"never praise (before)": lambda _: False, "always praise": lambda _: True}
    for cut in CUTS:
        found[f"compound ≥ {cut}"] = _rule(cut, clean=False)
        found[f"compound ≥ {cut}, nothing negative"] = _rule(cut, clean=True)
    found["ours (reads_as_praise)"] = reads_as_praise
    return found


def _units() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each valid sample record with its truth unit (the file dialects and the session table)."""
    truth = [json.loads(line) for line in (SAMPLE / "truth.jsonl").read_text().splitlines()]
    by_line: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for unit in truth:
        if not unit["invalid"]:
            by_line.setdefault((unit["file"], unit["line"]), []).append(unit)
    for name in SAMPLE_FILES:
        for item in read_items(SAMPLE / name):
            kind, number = item.position.split()
            line = int(number) + (kind == "index")
            records = process([item], collector="bench", source_uri=name, received_at="2026-11-30T00:00:00Z").records
            yield from zip(records, by_line.get((name, line), []), strict=False)
    session = {u["record_id"]: u for u in truth if u["file"] == "session.sqlite" and not u["invalid"]}
    con = sqlite3.connect(SAMPLE / "session.sqlite")
    con.row_factory = sqlite3.Row
    origin = Origin("bench", "2026-11-30T00:00:00Z", service="pags-console")
    for row in con.execute("SELECT * FROM agent_feedback"):
        obj = {k: row[k] for k in row.keys() if row[k] is not None}
        if obj["id"] in session and not dialects.session.validate(obj):
            yield dialects.session.normalise(obj, origin)[0], session[obj["id"]]


def _shared(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SHARED / name).read_text().splitlines()]


def praise_cut(console: Console) -> None:
    rows = _shared("sentiment.jsonl")
    counts = Counter(r["label"] for r in rows)
    table = Table(title="Praise from words alone: sentiment.jsonl (human-rated; the cut is chosen here)")
    for column in ("rule", "praise precision", "recall", "negative read as praise", "neutral read as praise"):
        table.add_column(column, justify="left" if column == "rule" else "right")
    for name, rule in rules().items():
        said = Counter(r["label"] for r in rows if rule(r["text"]))
        precision = said["positive"] / sum(said.values()) if said else float("nan")
        table.add_row(name, f"{precision:.3f}", f"{said['positive'] / counts['positive']:.3f}",
                      f"{said['negative'] / counts['negative']:.3f}", f"{said['neutral'] / counts['neutral']:.3f}")
    console.print(table)


def praise_on_sample(console: Console, units: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    rows = [(r["summary"], u["polarity"]) for r, u in units
            if r["dialect"] == "session" and r["original"].get("sentiment") is None]
    praise = sum(p == "praise" for _, p in rows)
    table = Table(title=f"The same rules on the sample's in-session rows without a sentiment ({praise} praise, "
                        f"{len(rows) - praise} complaints; synthetic, not chosen on)")
    for column in ("rule", "praise found", "complaints read as praise"):
        table.add_column(column, justify="left" if column == "rule" else "right")
    for name, rule in rules().items():
        said = Counter(p for text, p in rows if rule(text))
        table.add_row(name, f"{said['praise']} of {praise}", f"{said['problem']} of {len(rows) - praise}")
    console.print(table)


def request_phrases(console: Console, units: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    def words(record: dict[str, Any]) -> str:
        return "\n".join(record[f] for f in ("summary", "detail") if record[f])

    sets = {
        "sample praise (summary, detail)": [words(r) for r, u in units if u["polarity"] == "praise"],
        "sample problem reports (summary, detail)": [words(r) for r, u in units if u["polarity"] == "problem"],
        "sample suggestion fields": sorted({r["suggestion"] for r, _ in units if r["suggestion"]}),
        "sentiment.jsonl (reviews, tweets)": [r["text"] for r in _shared("sentiment.jsonl")],
        "clinc150.jsonl (commands)": [r["text"] for r in _shared("clinc150.jsonl")],
        "hwu64.jsonl (commands)": [r["text"] for r in _shared("hwu64.jsonl")],
    }
    table = Table(title="Request phrases (asks_for_change): how often they fire")
    for column in ("texts", "count", "asks", "share"):
        table.add_column(column, justify="left" if column == "texts" else "right")
    for name, texts in sets.items():
        asks = sum(map(asks_for_change, texts))
        table.add_row(name, f"{len(texts):,}", f"{asks:,}", f"{asks / max(1, len(texts)):.1%}")
    console.print(table)


def partitions(console: Console, units: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    found = Counter((r["dialect"], u["polarity"], POLARITY_BY_LANE.get(r["lane"], "problem")) for r, u in units)
    table = Table(title="The sample's valid units by dialect: the truth's polarity → the reports view's partition")
    for column in ("dialect", "truth", "→ problem", "→ request", "→ praise"):
        table.add_column(column, justify="left" if column in ("dialect", "truth") else "right")
    for dialect in sorted({d for d, _, _ in found}):
        for truth in ("problem", "praise"):
            table.add_row(dialect, truth, *(str(found[dialect, truth, p]) for p in ("problem", "request", "praise")))
    console.print(table)


def main() -> None:
    console = Console(width=140)
    units = list(_units())
    praise_cut(console)
    praise_on_sample(console, units)
    request_phrases(console, units)
    partitions(console, units)


if __name__ == "__main__":
    main()
