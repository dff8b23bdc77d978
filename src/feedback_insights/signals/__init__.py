"""The signals stage: RFC-026 §2.4 heuristic signals (sentiment, specificity, topics,
expectation gap, severity language) of every stored record's comment, computed without an LLM."""

from ..core.vocabulary import DOMAIN_LEXICON
from ._heuristics import (
    COMMENT_FIELDS,
    NO_SIGNALS,
    SOURCE,
    TONE_FIELDS,
    Signals,
    comment_fields,
    compute,
    expectation_gap,
    sentiment,
    severity_language,
    specificity,
    topics,
)
from ._stage import score_new_records

#: The heuristic signals of each stored report.
TABLES = frozenset({"record_signals"})

__all__ = [
    "TABLES",
    "COMMENT_FIELDS",
    "DOMAIN_LEXICON",
    "NO_SIGNALS",
    "SOURCE",
    "TONE_FIELDS",
    "Signals",
    "comment_fields",
    "compute",
    "expectation_gap",
    "score_new_records",
    "sentiment",
    "severity_language",
    "specificity",
    "topics",
]
