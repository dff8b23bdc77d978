"""What a cluster is called: c-TF-IDF key terms, and its most representative member.

c-TF-IDF (as in BERTopic) treats each cluster's members as one document and weighs a term by
its frequency in the cluster times ``log(1 + A / f)``, where ``A`` is the mean number of words
per cluster and ``f`` the term's frequency over every cluster of the partition, so a label
names what sets a cluster apart from the rest, not what every report says.
"""

from __future__ import annotations

import numpy as np
import polars as pl

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


def key_terms(texts: pl.DataFrame, top: int = 5) -> dict[int, list[str]]:
    """``texts`` has ``cluster`` (int; null for records in no cluster, which still count as
    "the rest") and ``text``; returns each cluster's ``top`` terms, best first."""
    words = (
        texts.select(
            pl.col("cluster").fill_null(-1),
            pl.col("text").str.to_lowercase().str.extract_all(_WORD).alias("term"),
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
