"""RFC-026 §2.4 heuristic signals of a feedback record, computed without an LLM.

RFC-026 lets a collector attach an ``nlp`` object (sentiment, specificity, topics,
expectation_gap, severity_language) to a report: a "lightweight heuristic analysis of comment
text". Most dialects carry none, so we compute the same five values for every record and store
:data:`SOURCE` beside them, so that a collector's ``nlp`` object (kept as provided under
``records.metadata.nlp``, never used for ranking: nobody knows how it was computed) and ours
are never confused.

**The comment** is what RFC-026 analyses: the reporter's own words about what happened, which
is not every text field of every dialect (:data:`COMMENT_FIELDS`). An RFC-026 message's
``goal`` is the person's question to the AI and its ``actual`` the AI's reply: the exchange
being rated, not what was said about it. An agent's report, by contrast, is its own words
throughout, ``expected`` and ``actual`` included (the Agent Feedback Spec's "what the agent
expected, what it got, what the gap cost"). A record with no comment has no signals: all five
are None (NULL in the warehouse), never a neutral 0.0 / "medium" that would read as a measurement.

Sentiment is VADER's compound score (Hutto & Gilbert 2014) with its lexicon *extended* for the
way agents write (:func:`feedback_insights.core.vocabulary.sentiment`, shared with the lane
derivation at ingest); ``benchmarks/signals.py`` checks that this does not cost accuracy on
VADER's human-rated tweets and reviews.

The signals describe the text, not the record: ``rating`` and ``lane`` are stored beside them,
so folding those in would count them twice and hide a thumbs-up that came with an angry comment.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core import TEXT_FIELDS
from ..core.vocabulary import HTTP_ERROR_STATUS, sentiment, sentiment_lexicon, sep2369_summary

#: Bumped whenever a signal changes meaning: rows computed by an older version are recomputed.
SOURCE = "feedback-insights/heuristics-v2"

#: Text fields written in the reporter's own voice: sentiment and severity read only these.
#: ``goal`` says what the reporter was doing, ``expected`` and ``actual`` what the system should
#: have done and did. They add topics, detail and the expectation gap, not tone.
TONE_FIELDS = tuple(name for name in TEXT_FIELDS if name not in ("goal", "expected", "actual"))

#: The text fields that are the comment, per dialect (read from each dialect module's mapping):
#:
#: - ``rfc026``: ``summary`` (the message's ``comment``). Its ``goal`` is ``context.user_query``
#:   and its ``actual`` ``context.ai_response_snippet``: what was rated, not the rating's words.
#: - ``session``: ``summary`` (the row's ``body``); the rated turn's text is kept in ``evidence``.
#: - ``sep2369``: ``summary``, when it is the item's ``observation`` (see :func:`comment_fields`).
#: - ``afp`` (``message``, ``goal``, ``expected``, ``suggestion``, ``workaround_description``),
#:   ``afs`` (``summary``, ``detail``, ``goal``, ``expected``, ``actual``, ``suggested_fix``) and
#:   any dialect not listed: every text field, all of them the reporting agent's own.
COMMENT_FIELDS: dict[str, tuple[str, ...]] = {
    "rfc026": ("summary",),
    "session": ("summary",),
    "sep2369": ("summary",),
}


def comment_fields(record: Mapping[str, Any]) -> tuple[str, ...]:
    """The text fields of ``record`` that are its comment (:data:`COMMENT_FIELDS`).

    A SEP-2369 item without an ``observation`` is summarised by its category, subcategory and
    tool so that it can still be embedded; that label is nobody's words, so such an item has
    no comment."""
    dialect = record.get("dialect")
    if dialect == "sep2369" and record.get("summary") == _sep2369_label(record):
        return ()
    return COMMENT_FIELDS.get(str(dialect), TEXT_FIELDS)


def _sep2369_label(record: Mapping[str, Any]) -> str | None:
    """The summary the SEP-2369 dialect makes for an item without an observation."""
    metadata = record.get("metadata")
    item = metadata.get("sep2369") if isinstance(metadata, Mapping) else None
    if not isinstance(item, Mapping) or not isinstance(item.get("category"), str):
        return None
    return sep2369_summary(item["category"], item.get("subcategory"), record.get("tool"))


# --- specificity --------------------------------------------------------------------------------

#: Kinds of concrete detail, most specific first (at one position the first kind that matches
#: wins, so ``/v2/orders?cursor=abc`` is one path, not a path plus an assignment), with weights.
DETAILS: dict[str, tuple[str, float]] = {
    "uuid": (r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b", 1.5),
    "url": (r"\bhttps?://\S+", 1.5),
    "payload": (r"\{[^{}\n]{0,300}\}", 1.5),
    "code": (r"`[^`\n]{1,200}`", 1.0),
    "quoted": (r"(?<!\w)(?:\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|“[^”\n]{1,200}”)(?!\w)", 1.0),
    "path": (r"(?<![\w/.])/[\w.{}:%-]+(?:/[\w.{}:%-]*)*(?:\?[^\s]*)?", 1.5),
    "status": (HTTP_ERROR_STATUS, 1.5),
    "method": (r"\b(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\b", 1.0),
    "file": (r"\b[\w-]+\.(?i:py|js|ts|tsx|json|ya?ml|toml|md|go|rs|java|rb|sql|csv|sh|log)\b", 1.0),
    "call": (r"\b[A-Za-z_]\w*\([^()\n]{0,80}\)", 1.0),
    "assignment": (r"\b[\w.\[\]-]+=[^\s,;]+", 1.0),
    "field_path": (r"\b[A-Za-z_]\w*(?:\[\w*\])?(?:\.[A-Za-z_]\w*(?:\[\w*\])?)+", 1.0),
    "header": (r"\b[A-Z][A-Za-z]*(?:-[A-Z][A-Za-z]*)+\b", 1.0),
    "snake_case": (r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b", 1.0),
    "camel_case": (r"\b[a-z]+(?:[A-Z][a-z0-9]*)+\b", 1.0),
    "hex_id": (r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", 1.0),
    "measure": (
        (
            r"\b\d+(?:[.,]\d+)*\s?(?i:ms|s|secs?|seconds?|min(?:ute)?s?|h|hours?|[kmg]i?b|bytes?|%"
            r"|chars?|characters|tokens?|calls?|requests?|records?|rows?|items?|pages?|results?"
            r"|retries|attempts?|times|x)(?!\w)"
        ),
        1.0,
    ),
    "number": (r"\b\d+(?:[.,]\d+)*\b", 0.5),
}
#: Every kind starts where no word character precedes; saying so first lets the engine skip
#: mid-word positions (2x faster).
_DETAIL = re.compile(
    r"(?<!\w)(?:" + "|".join(f"(?P<{kind}>{regex})" for kind, (regex, _) in DETAILS.items()) + ")"
)
_DETAIL_WEIGHT = {kind: weight for kind, (_, weight) in DETAILS.items()}

#: Texts shorter than this many words are scored as if they had this many, so a bare "500"
#: is not "precise".
MIN_WORDS = 4
#: Steepness of the saturation: a report with ~2 weighted details per sqrt(word) scores > 0.85.
DETAIL_RATE = 1.0


def specificity(text: str) -> float:
    """0.0 (vague) … 1.0 (precise): detail per sqrt(word), saturating.

    Detail is the weighted count of concrete things a maintainer can act on: paths, ids, HTTP
    statuses and methods, quoted errors, payloads, identifiers, numbers with units. Dividing by
    the square root of the length means a long report needs more detail than a short one to
    score the same, but a long *and* detailed report is not penalised for its length.
    ``1 - exp(-x)`` saturates, so ten more ids add little to an already precise report.
    """
    detail = sum(_DETAIL_WEIGHT[str(match.lastgroup)] for match in _DETAIL.finditer(text))
    words = max(len(text.split()), MIN_WORDS)
    return round(1.0 - math.exp(-DETAIL_RATE * detail / math.sqrt(words)), 4)


# --- topics -------------------------------------------------------------------------------------

#: English function words, then words every feedback report uses: none says what it is about.
#: (Evaluative ones such as "error", "problem" or "please" need no entry: the sentiment lexicon
#: scores them, which already rules them out.)
GENERIC_WORDS = frozenset(
    {
        "about", "above", "after", "again", "against", "all", "also", "and", "any", "are",
        "around", "because", "been", "before", "being", "below", "between", "both", "but", "can",
        "could", "did", "does", "doing", "done", "down", "during", "each", "even", "ever",
        "every", "few", "for", "from", "further", "had", "has", "have", "having", "her", "here",
        "hers", "him", "his", "how", "into", "its", "itself", "just", "let", "more", "most",
        "much", "must", "nor", "not", "now", "off", "once", "one", "only", "other", "our", "ours",
        "out", "over", "own", "same", "she", "should", "some", "such", "than", "that", "the",
        "their", "them", "then", "there", "these", "they", "this", "those", "through", "too",
        "two", "under", "until", "upon", "very", "was", "were", "what", "when", "where", "which",
        "while", "who", "whom", "why", "will", "with", "within", "without", "would", "you",
        "your", "yours", "yet", "via", "per", "etc", "still", "already", "exactly", "twice",
        "later", "anymore", "instead", "rather", "else", "able", "across", "actually", "almost",
        "always", "another", "anything", "anyway", "back", "cannot", "come", "comes", "came",
        "currently", "either", "enough", "everything", "first", "get", "gets", "getting", "got",
        "give", "given", "goes", "going", "gone", "however", "keep", "kept", "know", "last",
        "least", "less", "lot", "lots", "make", "makes", "made", "many", "may", "maybe", "might",
        "need", "needs", "never", "new", "next", "nothing", "often", "put", "really", "right",
        "said", "say", "says", "see", "seems", "seem", "shown", "show", "shows", "something",
        "sometimes", "soon", "take", "takes", "took", "tell", "tells", "thing", "things", "think",
        "try", "trying", "turn", "turns", "use", "uses", "using", "wants", "way", "ways", "went",
        "whether", "work", "working",
        # feedback vocabulary
        "agent", "agents", "api", "apis", "app", "call", "calls", "calling", "client", "data",
        "endpoint", "endpoints", "feedback", "http", "https", "www", "com", "input", "issue",
        "issues", "message", "messages", "method", "methods", "output", "parameter", "parameters",
        "param", "params", "request", "requests", "response", "responses", "result", "results",
        "return", "returning", "returns", "server", "service", "services", "task", "tasks",
        "time", "times", "tool", "tools", "user", "users",
    }
)

#: Problem areas that VADER's lexicon happens to score; they are still subjects, not verdicts.
TOPIC_NOUNS = frozenset({"security", "safety", "crash", "leak", "support", "alert", "warning"})

#: A word, hyphenated compounds whole ("cross-account", "rate-limit": RFC-026's own example
#: topics keep them so), with any apostrophe tail so that contractions ("doesn't") can be told
#: apart. Each part of a compound starts with a letter, so "page-2" is "page".
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z][A-Za-z0-9_]*)*(?:['’][A-Za-z]+)?")
_CAMEL = re.compile(r"[a-z][A-Z]")
_PATH_MARKS = frozenset("/?&")
#: Random ids (``req_8f2c1a``, ``sess_42``, ``01JAX3ZK``) and versions (``v2``) are not topics.
_ID_LIKE = re.compile(r"\d[a-z]|_\d+(?:_|$)|^v\d+$")
#: The scrubber's placeholders (``[REDACTED:api_key:1]``) name what was removed, not a subject.
_REDACTED = re.compile(r"\[REDACTED:[^\]]*\]")


def _topic_weight(token: str, preceding: str) -> int:
    """Names the text spells like code say most about what it concerns: a tool or field name
    (snake_case, camelCase) weighs 3, a path or query segment 2, a plain word 1."""
    if "_" in token or _CAMEL.search(token):
        return 3
    return 2 if preceding in _PATH_MARKS else 1


def topics(text: str, limit: int = 6) -> list[str]:
    """Up to ``limit`` lowercase domain keywords, most salient first.

    Salience is weight (see :func:`_topic_weight`) times frequency, ties broken by first
    appearance, so the order is deterministic. Skipped: contractions, function words and words
    every report uses (:data:`GENERIC_WORDS`), past tenses ("returned", "walked": what
    happened, not what about), values (``cursor=abc``), the scrubber's placeholders, and
    evaluative words, i.e. anything the sentiment lexicon scores ("great", "broken",
    "timeout": verdicts, not subjects) except the problem areas in :data:`TOPIC_NOUNS`.
    Possessives are folded, and a plural is merged into its singular when both occur.
    """
    lexicon = sentiment_lexicon()
    scores: dict[str, int] = {}
    for match in _WORD.finditer(_REDACTED.sub(" ", text)):
        token = match.group()
        word = token.lower().replace("’", "'").removesuffix("'s")
        if "'" in word or len(word) < 3 or word in GENERIC_WORDS or _ID_LIKE.search(word):
            continue
        if word in lexicon and word not in TOPIC_NOUNS:
            continue
        preceding = match.string[match.start() - 1] if match.start() else ""
        last = word.rpartition("-")[2]  # "rate-limited" is a participle like "limited"
        past_tense = last.isalpha() and last.endswith("ed") and not last.endswith("eed")
        if preceding == "=" or past_tense:
            continue
        scores[word] = scores.get(word, 0) + _topic_weight(token, preceding)
    for word in [w for w in scores if w.endswith("s") and w[:-1] in scores]:
        scores[word[:-1]] += scores.pop(word)
    first_seen = {word: index for index, word in enumerate(scores)}
    ranked = sorted(scores, key=lambda word: (-scores[word], first_seen[word]))
    return ranked[: max(limit, 0)]


# --- expectation gap ----------------------------------------------------------------------------

_CLAUSE = r"(?:[^.!?\n]|\.(?=\S)){1,160}?"  # within one sentence ("2.5" does not end it)
#: The ways agents say that what happened is not what should have happened.
EXPECTATION_GAP = re.compile(
    r"(?<!\w)(?:"  # every form starts a word: skip mid-word positions
    + "|".join(
        [
            # expected X but got Y / expected X, got Y / expecting X, received Y
            rf"(?<!\bas )\bexpect(?:ed|ing)\b{_CLAUSE}\b(?:but|got|received|returned|saw|yet)\b",
            # I expected / we were expecting, but not "as I expected", "what we expected"
            r"(?<!\bwhat )(?<!\bas )\b(?:i|we|it)\s+(?:had\s+|was\s+|were\s+)?expect(?:ed|ing)\b",
            r"\bexpected(?: behaviou?r| result| output)?\s*[:=]",
            r"\bthan expected\b",
            r"\bnot (?:what (?:i|we) expected|as (?:expected|documented|described))",
            rf"\bshould(?:n['’]?t)?\b{_CLAUSE}\b(?:but|yet|however|instead)\b",
            r"\bshould(?:n['’]?t)?(?: have|['’]ve)\b",
            r"\binstead of\b",
            r"\b(?:was|were|is|are|am)\s+supposed\s+to\b",
            rf"\b(?:returned|returns|gave|gives|got|gets|came back with)\b{_CLAUSE}\brather than\b",
            rf"\bgot\b{_CLAUSE}\bwhen\b{_CLAUSE}\b(?:expect\w*|should|asked|requested|wanted)\b",
            rf"\b(?:docs?|documentation|description|spec) (?:says?|said|claims?)\b{_CLAUSE}\bbut\b",
            r"\b(?:reality|actual(?:ly)?)\s*:",
        ]
    )
    + ")",
    re.IGNORECASE,
)


def expectation_gap(text: str, expected: str | None = None, actual: str | None = None) -> bool:
    """True when the text says "expected X but got Y" (in any of its forms), or the reporter
    filled in, in its own words, what it expected or what it got: the Agent Feedback Spec's
    ``expected`` / ``actual`` are that pattern as fields. Pass ``expected`` and ``actual`` only
    when they are the reporter's words (:func:`compute` does): an RFC-026 ``actual`` is the
    AI's reply that was rated, and says nothing about a gap."""
    if (expected and expected.strip()) or (actual and actual.strip()):
        return True
    return EXPECTATION_GAP.search(text) is not None


# --- severity language --------------------------------------------------------------------------

_UNNEGATED = r"(?<!not )(?<!n't )(?<!non-)"
#: Words that make a report urgent whatever its tone: blocking, loss, security, outage, total
#: inability, breadth ("all requests").
HIGH_TERMS = re.compile(
    _UNNEGATED
    + r"\b(?:block(?:ing|er|ers|ed)|critical|urgent(?:ly)?|asap|emergency|outages?"
    r"|data loss|lost (?:all |the |my |our |their )?data|corrupt(?:s|ed|ion)?"
    r"|security|vulnerab\w+|breach\w*|exploit\w*|(?:prod|production) (?:is |was )?down"
    r"|(?:is|was|are|were|went) down|cannot|can not|unable to|unusable|nothing works"
    r"|all (?:requests|calls)|every (?:single )?(?:request|call)|showstopper|show-stopper"
    r"|catastroph\w+|severe(?:ly)?|sev ?[01]|p0)\b",
    re.IGNORECASE,
)
#: Emphasis that turns a complaint up: strong intensifiers (an exclamation run is checked apart).
INTENSIFIERS = re.compile(
    r"\b(?:completely|totally|entirely|utterly|absolutely|extremely|horribly|terribly)\b",
    re.IGNORECASE,
)
#: Wording that keeps a report mild.
LOW_TERMS = re.compile(
    r"\b(?:minor|small|nit(?:pick)?|slightly|a bit|a little|would be (?:nice|great|good|helpful)"
    r"|nice[- ]to[- ]have|suggestions?|cosmetic|typo|trivial|low priority|not (?:urgent|critical"
    r"|blocking|a big deal)|non-?blocking|no big deal|optional|polish)\b",
    re.IGNORECASE,
)
#: Sentiment at or below this is high severity by itself; at or above PRAISE it is low.
FRUSTRATED = -0.75
PRAISE = 0.5


def severity_language(text: str) -> str:
    """"low", "medium" or "high": how intense the wording is (see :func:`_severity`)."""
    return _severity(text, sentiment(text))


def _severity(text: str, feeling: float) -> str:
    """High: an urgent term, very negative sentiment, or a complaint turned up by intensifiers
    or exclamation marks ("!!", or three or more). Low: praise, or mild wording. Medium
    otherwise. Intensifiers and "!" only count in complaints, so "absolutely love it!!" is
    praise, not an emergency."""
    emphatic = "!!" in text or text.count("!") >= 3 or INTENSIFIERS.search(text) is not None
    if feeling <= FRUSTRATED or HIGH_TERMS.search(text) or (feeling < 0 and emphatic):
        return "high"
    if feeling >= PRAISE or LOW_TERMS.search(text):
        return "low"
    return "medium"


# --- one record ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Signals:
    """The five RFC-026 §2.4 values for one record, each None when the record has no comment
    (or, for sentiment and severity, no words in its own voice: :data:`TONE_FIELDS`).
    ``topics`` is a tuple so the whole value is immutable and hashable; :meth:`as_dict` gives
    the JSON shape, with :data:`SOURCE`."""

    sentiment: float | None
    specificity: float | None
    topics: tuple[str, ...] | None
    expectation_gap: bool | None
    severity_language: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "sentiment": self.sentiment,
            "specificity": self.specificity,
            "topics": None if self.topics is None else list(self.topics),
            "expectation_gap": self.expectation_gap,
            "severity_language": self.severity_language,
            "source": SOURCE,
        }


#: What a record without a comment has.
NO_SIGNALS = Signals(None, None, None, None, None)


def _joined(record: Mapping[str, Any], fields: tuple[str, ...]) -> str:
    """The non-blank text fields, one per line (a "within one sentence" regex never spans two)."""
    values = (record.get(name) for name in fields)
    return "\n".join(value for value in values if isinstance(value, str) and value.strip())


def _own(record: Mapping[str, Any], name: str, fields: tuple[str, ...]) -> str | None:
    value = record.get(name)
    return value if name in fields and isinstance(value, str) else None


def compute(record: Mapping[str, Any]) -> Signals:
    """All five signals of a canonical record's comment (:func:`comment_fields`), VADER run once.

    The comment's every field feeds specificity, topics and the expectation gap (which also
    counts the reporter's own ``expected`` or ``actual``); only its :data:`TONE_FIELDS` feed
    sentiment and severity. No comment, no signals (:data:`NO_SIGNALS`).
    """
    fields = comment_fields(record)
    comment = _joined(record, fields)
    if not comment:
        return NO_SIGNALS
    tone = _joined(record, tuple(name for name in fields if name in TONE_FIELDS))
    feeling = sentiment(tone) if tone else None
    return Signals(
        sentiment=feeling,
        specificity=specificity(comment),
        topics=tuple(topics(comment)),
        expectation_gap=expectation_gap(comment, _own(record, "expected", fields), _own(record, "actual", fields)),
        severity_language=None if feeling is None else _severity(tone, feeling),
    )
