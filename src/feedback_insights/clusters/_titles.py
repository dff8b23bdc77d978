"""What a cluster is called, and so what its issue is titled: one of its own reports' summaries.

A report's summary is often a good issue title already: agents write "get_record rejects an
array of ids" or "429 responses served without Retry-After". A name stitched from shared n-grams
reads as a fragment cut mid-phrase ("files description reads like"), so the name is the summary
that best represents the cluster, trimmed, after the tool or endpoint it is about.

**Candidates.** Each member's summary (its goal, for goal themes): its sentences while they fit,
markup left out, a clause holding a scrubber placeholder dropped, put in the form below.

**Which one.** The one that best represents the cluster *as its accounts see it*, by two
cosines to the cluster's account-balanced centroid: each account's reports averaged into one
unit vector, the accounts averaged, reports without an account one voice together (they cannot
be told apart). So twenty copies from one account, or two anonymous copies of one report, cannot
out-vote three other accounts. The score is (cosine of the report that wrote it + cosine of the
title's own vector) × the share of the title's content words that two voices or more use — a
title in the words many accounts use, not one report's particulars (an event id, a duration).
Only the :data:`SHORTLIST` best by their reports' cosine have their own vector embedded (cached
by text hash), so naming costs a few embeddings per cluster, not one per report; without an
embedder, the report's cosine alone. Ties go to the candidate more accounts wrote. Measured in
``benchmarks/titles.py``.

**Form.** "thing: symptom", at most :data:`NAME_CHARS` characters. The thing is the tool or
endpoint at least half the members name (none: the summary alone; the issue is filed on the
service's repository, and "service: …" would only spend characters). A summary that starts with it becomes "thing: rest";
one that names it elsewhere is kept as written; any other gets it as a prefix. A summary too
long for what is left is cut at its last clause boundary that fits, else at a word, with "…".
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import polars as pl

from ._embedding import PLACEHOLDER
from ._labels import STOP_WORDS

#: The longest cluster name (and issue title), in characters.
NAME_CHARS = 80
#: A candidate shorter than this (in words with letters) says too little to be a title.
MIN_WORDS = 2
#: Candidates per cluster whose own vector is weighed (embedded, cached): the best by their reports.
SHORTLIST = 8

_MARKUP = re.compile(r"<[^>]{0,200}>")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|\n")
_PLACEHOLDER = re.compile(PLACEHOLDER)
#: Where a long summary may be cut: after a clause, or before a dash.
_CLAUSE_BREAK = re.compile(r"[;,:](?=\s)|\s(?=[—–-]\s)")
#: An aside in parentheses, left out of a summary too long to keep whole.
_ASIDE = re.compile(r"\s*\([^()]{0,200}\)")
_WORDS = re.compile(r"[A-Za-z]{2,}")
_TRAILING = " .,;:—–-"


def first_sentence(text: str | None, limit: int = NAME_CHARS) -> str | None:
    """The title-sized part of a summary: its sentences without markup while they fit in
    ``limit`` (the first one always), cut before the first clause that holds a scrubber
    placeholder; None when too little is left."""
    if not text:
        return None
    sentences = _SENTENCE_END.split(_MARKUP.sub(" ", text).strip())
    kept = sentences[0]
    for sentence in sentences[1:]:
        if len(kept) + 1 + len(sentence) > limit:
            break
        kept = f"{kept} {sentence}"
    hidden = _PLACEHOLDER.search(kept)
    if hidden:
        kept = _before_clause(kept, hidden.start())
    kept = " ".join(kept.split()).rstrip(_TRAILING)
    return kept if _words(kept) >= MIN_WORDS else None


def _words(text: str) -> int:
    return len(_WORDS.findall(text))


def _before_clause(text: str, position: int) -> str:
    """``text`` up to the start of the clause that holds ``position``."""
    breaks = [m.start() for m in _CLAUSE_BREAK.finditer(text, 0, position)]
    return text[: breaks[-1]] if breaks else ""


def fit(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: whole; else without its parentheses; else cut
    at its last clause boundary that fits (keeping more than :data:`MIN_WORDS` words), or at a word
    with "…"."""
    if len(text) <= limit:
        return text
    text = " ".join(_ASIDE.sub("", text).split())
    if len(text) <= limit:
        return text
    breaks = [m.start() for m in _CLAUSE_BREAK.finditer(text, 0, limit + 1) if _words(text[: m.start()]) > MIN_WORDS]
    if breaks:
        return text[: breaks[-1]].rstrip(_TRAILING)
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(_TRAILING)
    return (cut if len(cut) > limit // 2 else text[: limit - 1]) + "…"


def titled(thing: str | None, summary: str, limit: int = NAME_CHARS) -> str:
    """"thing: symptom" from a summary, at most ``limit`` characters (see the module docstring)."""
    if not thing:
        return fit(summary, limit)
    bare = summary.replace("`", "")
    lowered, name = bare.lower(), thing.lower()
    if lowered.startswith(name) and bare[len(name): len(name) + 1] in (":", " ", ""):
        rest = bare[len(name):].lstrip(" :")
        return f"{thing}: {fit(rest, limit - len(thing) - 2)}" if rest else fit(thing, limit)
    if re.search(rf"(?<![\w/]){re.escape(name)}(?![\w/])", lowered):
        return fit(summary, limit)
    return f"{thing}: {fit(summary, limit - len(thing) - 2)}"


def balanced_centroid(vectors: np.ndarray, voices: list[str | None]) -> np.ndarray:
    """The unit mean of each voice's unit mean (``voices``: one account per row of unit
    ``vectors``; None, an anonymous report, is one voice with the other anonymous ones)."""
    keys = np.array(["" if v is None else f"a:{v}" for v in voices])
    total = np.zeros(vectors.shape[1], dtype=np.float64)
    for key in np.unique(keys):
        mean = vectors[keys == key].sum(axis=0)
        total += mean / max(float(np.linalg.norm(mean)), 1e-12)
    return (total / max(float(np.linalg.norm(total)), 1e-12)).astype(np.float32)


def candidates(members: pl.DataFrame, things: dict[int, str | None]) -> pl.DataFrame:
    """``members`` has ``cluster``, ``account`` and ``summary`` (one row per member); returns
    ``cluster``, ``title`` (:func:`titled` of its :func:`first_sentence`), ``accounts``
    (distinct voices that wrote it) and ``rows`` (the members that did)."""
    return (
        members.with_row_index("row").select(
            "cluster", "row",
            pl.col("account").fill_null(""),
            pl.col("summary").map_elements(first_sentence, return_dtype=pl.String).alias("candidate"),
        )
        .drop_nulls("candidate")
        .with_columns(pl.struct("cluster", "candidate").map_elements(
            lambda r: titled(things.get(r["cluster"]), r["candidate"]), return_dtype=pl.String).alias("title"))
        .group_by("cluster", "title")
        .agg(pl.col("account").n_unique().alias("accounts"), pl.col("row"))
        .sort("cluster", "accounts", "title", descending=[False, True, False])
    )


def choose_titles(
    members: pl.DataFrame,
    vectors: np.ndarray,
    things: dict[int, str | None],
    vectors_of: Callable[[list[str]], np.ndarray] | None,
) -> dict[int, str]:
    """Each cluster's name: ``members`` (``cluster``, ``account``, ``summary``, one row per
    member) with their unit ``vectors`` (same order), the ``things`` clusters are about, and
    ``vectors_of`` embedding titles in the same space (None: judged by their reports alone).
    Only each cluster's :data:`SHORTLIST` best by their reports are embedded."""
    found = candidates(members, things)
    if found.is_empty():
        return {}
    clusters = members.get_column("cluster").to_numpy()
    accounts = members.get_column("account").to_list()
    shortlists: dict[int, tuple[list[str], np.ndarray, np.ndarray, np.ndarray]] = {}
    for (cluster,), group in found.group_by("cluster", maintain_order=True):
        rows = np.flatnonzero(clusters == cluster)
        centre = balanced_centroid(vectors[rows], [accounts[r] for r in rows])
        options = group.get_column("title").to_list()
        by_report = np.array([max(float(vectors[r] @ centre) for r in rs) for rs in group.get_column("row").to_list()])
        shared = _shared_words(members.filter(pl.col("cluster") == cluster))
        support = np.array([_support(t, shared) for t in options])
        best = np.argsort(-(by_report * support), kind="stable")[:SHORTLIST]  # stable: ties to more accounts
        shortlists[int(cluster)] = ([options[b] for b in best], by_report[best], support[best], centre)
    texts = sorted({t for options, *_ in shortlists.values() for t in options})
    embedded = dict(zip(texts, vectors_of(texts), strict=True)) if vectors_of is not None else None
    out: dict[int, str] = {}
    for cluster, (options, by_report, support, centre) in shortlists.items():
        by_title = np.array([embedded[t] @ centre for t in options]) if embedded is not None else 0.0
        out[cluster] = options[int(np.argmax((by_report + by_title) * support))]
    return out


def acceptable(name: str | None, thing: str | None) -> bool:
    """Whether a name (an LLM's) passes the checks ours pass: one line of at most
    :data:`NAME_CHARS` characters, no scrubber placeholder, naming the tool or endpoint when the
    cluster has one and :data:`MIN_WORDS` words or more besides."""
    if not name or len(name) > NAME_CHARS or "\n" in name or _PLACEHOLDER.search(name):
        return False
    said = name.lower().replace(thing.lower(), " ") if thing else name
    return _words(said) >= MIN_WORDS and (thing is None or thing.lower() in name.lower())


_TOKEN = re.compile(r"[a-z0-9][a-z0-9_'/.-]*[a-z0-9]|[a-z0-9]")


def _shared_words(members: pl.DataFrame) -> set[str]:
    """The words at least two voices of ``members`` (``account``, ``summary``) use."""
    voices: dict[str, set[str]] = {}
    for account, summary in members.select("account", "summary").iter_rows():
        voices.setdefault(account or "", set()).update(_TOKEN.findall((summary or "").lower()))
    counts: dict[str, int] = {}
    for words in voices.values():
        for w in words:
            counts[w] = counts.get(w, 0) + 1
    return {w for w, n in counts.items() if n >= 2}


def _support(title: str, shared: set[str]) -> float:
    """The share of ``title``'s content words that two voices or more use: a title in the
    words many accounts use, not one report's particulars (an event id, a duration)."""
    words = [w for w in _TOKEN.findall(title.lower()) if w not in STOP_WORDS]
    return sum(w in shared for w in words) / len(words) if words else 0.0
