"""What a cluster is called: a name made of a phrase, c-TF-IDF key terms, and its most
representative member.

c-TF-IDF (as in BERTopic) treats each cluster's members as one document and weighs a term by
its frequency in the cluster times ``log(1 + A / f)``, where ``A`` is the mean number of words
per cluster and ``f`` the term's frequency over every cluster of the partition, so the key
terms say what sets a cluster apart from the rest, not what every report says. They are the
cluster's fingerprint (known_issue entries match on them), not its name: "agents · give ·
names" does not read as a problem.

The name, without an LLM, is a phrase (the KeyBERT idea, with the embedder the reports already
use, no new model). Candidates are the word n-grams of the members' own text, 1–4 words within
one clause, not starting or ending with a stop word — without a tagger, the chunks between stop
words, which in reports are mostly noun phrases ("cursor pagination", "retry after header").
Of each length, the :data:`PER_LENGTH` that most members use (ties: those holding most of the
cluster's key terms) are embedded — cached in ``embeddings`` by text hash, like report texts —
and ranked by cosine similarity to the cluster's centroid, with maximal marginal relevance
(MMR) against what the name already says (the tool or endpoint), so the symptom does not just
repeat the tool; a phrase that contains the tool's name is left out. The name is "tool or
endpoint: symptom" — the tool when at least half the members name it — at most
:data:`NAME_CHARS` characters, cut at a word boundary, no trailing period.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from ._embedding import PLACEHOLDER

#: Words that say nothing about a problem, plus the scrubber's placeholders.
STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can cannot could did do does doing down during each else
    even ever every few for from further get got had has have having he her here hers him his how
    i if in into is it its itself just let me more most my no nor not now of off on once only or
    other our ours out over own same she should so some such than that the their theirs them then
    there these they this those through to too under until up us very was we were what when where
    which while who whom why will with would you your yours redacted instead still way one two
    use used using via per tried trying try""".split()
)

_WORD = r"[a-z][a-z0-9_]{2,}"
#: A scrubber placeholder in lower-cased text ("[redacted:us ssn:1]"): what was removed, not what was said.
_PLACEHOLDER = PLACEHOLDER.lower()


def key_terms(texts: pl.DataFrame, top: int = 5) -> dict[int, list[str]]:
    """``texts`` has ``cluster`` (int; null for records in no cluster, which still count as
    "the rest") and ``text``; returns each cluster's ``top`` terms, best first."""
    words = (
        texts.select(
            pl.col("cluster").fill_null(-1),
            pl.col("text").str.to_lowercase().str.replace_all(_PLACEHOLDER, " ").str.extract_all(_WORD).alias("term"),
        )
        .explode("term")
        .drop_nulls("term")
        .filter(~pl.col("term").is_in(list(STOP_WORDS)))
    )
    if words.is_empty():
        return {}
    tf = words.group_by("cluster", "term").len("tf")
    mean_words = tf.group_by("cluster").agg(pl.col("tf").sum()).get_column("tf").mean()
    weighted = (
        tf.with_columns(pl.col("tf").sum().over("term").alias("f"))
        .with_columns((pl.col("tf") * (1 + mean_words / pl.col("f")).log()).alias("w"))
        .filter(pl.col("cluster") >= 0)
        .sort(["cluster", "w", "term"], descending=[False, True, False])
        .group_by("cluster", maintain_order=True)
        .agg(pl.col("term").head(top))
    )
    return dict(zip(weighted.get_column("cluster").to_list(), weighted.get_column("term").to_list(), strict=True))


def medoid(vectors: np.ndarray) -> int:
    """Index of the member closest on average to all the others (unit vectors: the one most
    aligned with their sum)."""
    return int(np.argmax(vectors @ vectors.sum(axis=0)))


#: The longest cluster name, in characters.
NAME_CHARS = 80
#: Candidates embedded per cluster and per phrase length (1–4 words): the most shared ones.
PER_LENGTH = 6
#: MMR's weight of relevance (similarity to the centroid) against redundancy.
MMR_RELEVANCE = 0.85

#: What ends a clause in lower-cased text (a scrubber placeholder too), and what a word is (Rust regex syntax, for Polars).
_CLAUSE = r"[.!?;:,()\[\]{}\"“”`=]+(?:\s|$)|\n|" + _PLACEHOLDER + r"|[()\[\]{}\"“”`=]"
_TOKEN = r"[a-z0-9][a-z0-9_'/.-]*[a-z0-9]|[a-z]"


def candidate_phrases(texts: pl.DataFrame, terms: dict[int, list[str]] | None = None,
                      per_length: int = PER_LENGTH) -> pl.DataFrame:
    """``texts`` has ``cluster`` and ``text`` (one row per member); returns ``cluster``,
    ``phrase``, ``members`` (how many members use it): of each length, the ``per_length``
    n-grams most members use, and among as many, those holding most of the cluster's key
    ``terms`` (what sets it apart from the rest of its partition)."""
    words = (
        texts.select("cluster", "text").with_row_index("member")
        .filter(pl.col("cluster").is_not_null() & (pl.col("text").str.len_chars() > 0))
        .select("cluster", "member", pl.col("text").str.to_lowercase().str.replace_all(_CLAUSE, "\x00")
                .str.split("\x00").alias("clause"))
        .explode("clause")
        .with_row_index("clause_id")
        .select("cluster", "member", "clause_id", pl.col("clause").str.extract_all(_TOKEN).alias("word"))
        .explode("word")
        .drop_nulls("word")
        .with_columns(pl.col("word").is_in(_STOP_LIST).alias("stop"))
    )
    grams = pl.concat([_grams(words, length) for length in range(1, 5)])
    if grams.is_empty():
        return pl.DataFrame(schema={"cluster": pl.Int64, "phrase": pl.String, "members": pl.UInt32})
    key = pl.DataFrame({"cluster": list((terms or {}).keys()), "terms": list((terms or {}).values())},
                       schema={"cluster": pl.Int64, "terms": pl.List(pl.String)})
    return (
        grams.group_by("cluster", "length", "phrase").agg(pl.col("member").n_unique().alias("members"))
        .join(key, on="cluster", how="left")
        .with_columns(
            pl.col("phrase").str.split(" ").list.set_intersection(pl.col("terms").fill_null([])).list.len().alias("hits")
        )
        .sort(["cluster", "length", "members", "hits", "phrase"], descending=[False, False, True, True, False])
        .group_by("cluster", "length", maintain_order=True).head(per_length)
        .select("cluster", "phrase", "members")
    )


_STOP_LIST = sorted(STOP_WORDS)


def _grams(words: pl.DataFrame, length: int) -> pl.DataFrame:
    """The ``length``-word n-grams of ``words`` (one row per word, in order, ``clause_id``
    telling clauses apart) that stay within one clause, neither start nor end with a stop word
    and hold a word of three letters or more. Shifts of the whole column, not per clause: a
    window that crosses into the next clause is dropped by its ``clause_id``."""
    last = -(length - 1)
    return words.select(
        pl.col("cluster").cast(pl.Int64), "member", pl.lit(length, pl.Int64).alias("length"),
        pl.concat_str([pl.col("word").shift(-i) for i in range(length)], separator=" ").alias("phrase"),
        ((pl.col("clause_id").shift(last) == pl.col("clause_id")) & ~pl.col("stop") & ~pl.col("stop").shift(last))
        .alias("keep"),
    ).filter(pl.col("keep") & pl.col("phrase").str.contains("[a-z]{3}")).drop("keep")


def mmr(centroid: np.ndarray, phrases: np.ndarray, said: np.ndarray, top: int = 1,
        relevance: float = MMR_RELEVANCE) -> list[int]:
    """Indices of ``top`` phrase vectors chosen by maximal marginal relevance: each the most
    similar to ``centroid`` less its similarity to what is already said (``said``, rows of
    vectors, then the phrases chosen before it)."""
    chosen: list[int] = []
    relevant = phrases @ centroid
    redundant = (phrases @ said.T).max(axis=1) if len(said) else np.zeros(len(phrases))
    for _ in range(min(top, len(phrases))):
        score = relevance * relevant - (1 - relevance) * redundant
        score[chosen] = -np.inf
        best = int(np.argmax(score))
        chosen.append(best)
        redundant = np.maximum(redundant, phrases @ phrases[best])
    return chosen


def name(tool: str | None, phrase: str | None) -> str | None:
    """ "tool: phrase", at most :data:`NAME_CHARS` characters, cut at a word boundary, no
    trailing period; None when there is neither."""
    text = ": ".join(p for p in (tool, phrase) if p)
    if len(text) > NAME_CHARS:
        cut = text[: NAME_CHARS + 1].rsplit(" ", 1)[0]
        text = cut if len(cut) > len(tool or "") + 2 else text[:NAME_CHARS]
    return text.rstrip(" .:,;") or None


def phrase_names(
    phrases: pl.DataFrame,
    centroids: dict[int, np.ndarray],
    tools: dict[int, str | None],
    vectors_of: Callable[[list[str]], np.ndarray] | None,
) -> dict[int, str]:
    """Each cluster's name from its :func:`candidate_phrases`, ranked against its centroid
    (unit vector) with :func:`mmr` after its tool; ``vectors_of`` embeds phrases (unit rows).
    Without it (no vector space to rank in) the phrase most members share, longest first."""
    out: dict[int, str] = {}
    if phrases.is_empty():
        return {c: n for c, t in tools.items() if (n := name(t, None))}
    ranked = phrases.sort(["cluster", "members", "phrase"], descending=[False, True, False])
    if vectors_of is None or not centroids:
        for cluster, group in ranked.group_by("cluster", maintain_order=True):
            tool = tools.get(int(cluster[0]))
            shared = group.filter(pl.col("phrase").is_in(_besides(group.get_column("phrase").to_list(), tool)))
            longest = shared.filter(pl.col("members") == pl.col("members").max())
            best = longest.sort(pl.col("phrase").str.len_chars(), descending=True).item(0, "phrase")
            out[int(cluster[0])] = name(tool, best) or best
        return out
    texts = ranked.get_column("phrase").unique(maintain_order=True).to_list()
    tool_texts = sorted({t.replace("_", " ") for t in tools.values() if t})
    vectors = vectors_of(texts + tool_texts)
    index = {t: i for i, t in enumerate(texts)}
    tool_index = {t: len(texts) + i for i, t in enumerate(tool_texts)}
    for cluster, group in ranked.group_by("cluster", maintain_order=True):
        cid = int(cluster[0])
        tool = tools.get(cid)
        own = _besides(group.get_column("phrase").to_list(), tool)
        said = vectors[[tool_index[tool.replace("_", " ")]]] if tool else vectors[:0]
        if cid in centroids:
            best = own[mmr(centroids[cid], vectors[[index[p] for p in own]], said)[0]]
        else:
            best = own[0]
        out[cid] = name(tool, best) or best
    return out


def _besides(phrases: list[str], tool: str | None) -> list[str]:
    """The phrases that do not restate ``tool`` (the name's prefix already says it); all of
    them when every one does."""
    if not tool:
        return phrases
    said = tool.lower().replace("_", " ").strip("/ ")
    rest = [p for p in phrases if said not in p and p not in said]
    return rest or phrases
