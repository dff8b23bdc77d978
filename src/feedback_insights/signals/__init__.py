"""The signals stage: RFC-026 §2.4 heuristic signals (sentiment, specificity, topics,
expectation gap, severity language) for every stored record, computed without an LLM."""

from ._heuristics import (
    DOMAIN_LEXICON,
    SOURCE,
    TONE_FIELDS,
    Signals,
    compute,
    expectation_gap,
    sentiment,
    severity_language,
    specificity,
    topics,
)
from ._stage import score_new_records

__all__ = [
    "DOMAIN_LEXICON",
    "SOURCE",
    "TONE_FIELDS",
    "Signals",
    "compute",
    "expectation_gap",
    "score_new_records",
    "sentiment",
    "severity_language",
    "specificity",
    "topics",
]
