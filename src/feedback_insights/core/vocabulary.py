"""The canonical vocabulary every dialect maps onto, the near-miss normaliser, and how
agents' words are read.

Lanes and categories are the Agent Feedback Spec v1's; the tables that map the other dialects
onto them live in the dialect modules and are documented in the README. Receivers are told to
"accept near-miss values and normalise rather than reject", so :func:`near_miss` folds case,
separators and a table of common synonyms before giving up, and every dialect reads a
severity (:func:`severity_of`: a name or the spec's 1–5 scale) and a satisfaction score
(:func:`satisfaction_of`: a number or a numeric string) the same way.

The source tiers (:data:`SOURCE_TIERS`) group the canonical ``source`` by who reported; the
sentiment scorer (:func:`sentiment`) is here because both ingest (the lane derivation) and the
signals stage read tone, and ingest sits below the signals stage. So are the request phrases
(:func:`asks_for_change`): where a dialect leaves the lane to the words, a report that asks for
a change is a feature request ("Please add a CSV export option" reads positive, but it is demand,
not praise), and praise read from words alone (:func:`reads_as_praise`) must ask for nothing.
"""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

LANES = (
    "support_ticket",
    "bug_or_failure",
    "friction",
    "feature_request",
    "docs_feedback",
    "schema_feedback",
    "workflow_feedback",
    "positive_feedback",
)

CATEGORIES = (
    "missing_capability",
    "confusing_schema",
    "bad_tool_description",
    "incomplete_response",
    "incorrect_response",
    "unhelpful_error",
    "authentication_problem",
    "pagination_or_truncation",
    "rate_limit_or_timeout",
    "docs_mismatch",
    "wrong_tool_selected",
    "other",
)

SEVERITIES = ("blocking", "high", "medium", "low")

#: One outcome set for all dialects. AFP's task-level values and AFS's exit states are kept
#: apart (an AFP "blocked" is not silently an AFS "failure"); :data:`OUTCOME_CLASS` groups them
#: when a report needs one scale.
OUTCOMES = ("blocked", "degraded", "completed", "failure", "partial_success", "success")
OUTCOME_CLASS = {
    "blocked": "failed",
    "failure": "failed",
    "degraded": "impaired",
    "partial_success": "impaired",
    "completed": "ok",
    "success": "ok",
}

#: The four-tier signal model of the AFS, plus the tier for feedback a person wrote
#: (in-session complaints, RFC-026 thumbs).
SOURCES = ("agent_authored", "agent_solicited", "server_observed", "runtime_observed", "human_authored")

#: Who reported, coarser than ``source``: an **agent** wrote it (it chose to file, or filed when
#: a help call asked it to), a **runtime** observed it (the provider's server or the agent
#: runner detected it mechanically, by a heuristic ``metadata.heuristic`` names; nobody chose
#: to write it), or a **human** wrote it (in-session complaints, RFC-026 thumbs). Demand is
#: split by these and ``--source`` filters by them (or by one ``source`` value).
SOURCE_TIERS: dict[str, tuple[str, ...]] = {
    "agent": ("agent_authored", "agent_solicited"),
    "runtime": ("server_observed", "runtime_observed"),
    "human": ("human_authored",),
}
#: How a digest names the reporters of each tier ("Only reports from people").
TIER_REPORTERS = {"agent": "agents", "runtime": "runtimes", "human": "people"}


def sources_of(name: str) -> tuple[str, ...]:
    """The ``source`` values a ``--source`` value stands for: a tier's, or one source's own."""
    if name in SOURCE_TIERS:
        return SOURCE_TIERS[name]
    if name in SOURCES:
        return (name,)
    raise ValueError(f"--source must be one of: {', '.join([*SOURCE_TIERS, *SOURCES])} (got {name!r})")


_SEPARATORS = re.compile(r"[\s\-./_]+")

LANE_SYNONYMS = {
    "bug": "bug_or_failure",
    "failure": "bug_or_failure",
    "error": "bug_or_failure",
    "broken": "bug_or_failure",
    "support": "support_ticket",
    "ticket": "support_ticket",
    "feature": "feature_request",
    "request": "feature_request",
    "enhancement": "feature_request",
    "docs": "docs_feedback",
    "documentation": "docs_feedback",
    "doc": "docs_feedback",
    "schema": "schema_feedback",
    "workflow": "workflow_feedback",
    "flow": "workflow_feedback",
    "positive": "positive_feedback",
    "praise": "positive_feedback",
    "kudos": "positive_feedback",
    "ux": "friction",
    "usability": "friction",
}

CATEGORY_SYNONYMS = {
    "feature_request": "missing_capability",
    "feature": "missing_capability",
    "missing_feature": "missing_capability",
    "missing": "missing_capability",
    "schema": "confusing_schema",
    "confusing_parameters": "confusing_schema",
    # The MCP SEP-2369 six, as the Agent Feedback Spec maps them.
    "usability": "confusing_schema",
    "reliability": "unhelpful_error",
    "documentation": "docs_mismatch",
    "efficiency": "pagination_or_truncation",
    "interoperability": "other",
    "capability_gap": "missing_capability",
    "tool_description": "bad_tool_description",
    "bad_description": "bad_tool_description",
    "incomplete": "incomplete_response",
    "partial_response": "incomplete_response",
    "incorrect": "incorrect_response",
    "wrong_response": "incorrect_response",
    "bug": "incorrect_response",
    "wrong_result": "incorrect_response",
    "error_message": "unhelpful_error",
    "bad_error": "unhelpful_error",
    "unclear_error": "unhelpful_error",
    "auth": "authentication_problem",
    "authentication": "authentication_problem",
    "authorization": "authentication_problem",
    "permissions": "authentication_problem",
    "pagination": "pagination_or_truncation",
    "truncation": "pagination_or_truncation",
    "truncated": "pagination_or_truncation",
    "rate_limit": "rate_limit_or_timeout",
    "ratelimit": "rate_limit_or_timeout",
    "rate_limited": "rate_limit_or_timeout",
    "timeout": "rate_limit_or_timeout",
    "timeouts": "rate_limit_or_timeout",
    "performance": "rate_limit_or_timeout",
    "slow": "rate_limit_or_timeout",
    "latency": "rate_limit_or_timeout",
    "docs": "docs_mismatch",
    "docs_feedback": "docs_mismatch",
    "doc": "docs_mismatch",
    "wrong_tool": "wrong_tool_selected",
    "misc": "other",
    "unknown": "other",
}

SEVERITY_SYNONYMS = {
    "critical": "blocking",
    "blocker": "blocking",
    "fatal": "blocking",
    "urgent": "blocking",
    "major": "high",
    "severe": "high",
    "moderate": "medium",
    "normal": "medium",
    "med": "medium",
    "minor": "low",
    "trivial": "low",
    # The one integer scale the spec names (SEP-2369's), sent as text: "4" is high.
    "5": "blocking",
    "4": "high",
    "3": "medium",
    "2": "low",
    "1": "low",
}

#: The Agent Feedback Spec's table for SEP-2369's integer severity: 5 → blocking, 4 → high,
#: 3 → medium, 1–2 → low. Any dialect that sends a number means this scale.
SEVERITY_SCALE = {5: "blocking", 4: "high", 3: "medium", 2: "low", 1: "low"}

#: A satisfaction score sent as text: "4", " 4 ", "4.0" (the schemas' pattern says the same).
SCORE_TEXT = re.compile(r"^\s*([1-5])(?:\.0+)?\s*$")

AFS_OUTCOME_SYNONYMS = {
    "failed": "failure",
    "fail": "failure",
    "error": "failure",
    "blocked": "failure",
    "partial": "partial_success",
    "partially_succeeded": "partial_success",
    "degraded": "partial_success",
    "succeeded": "success",
    "ok": "success",
    "completed": "success",
    "done": "success",
}


def fold(value: str) -> str:
    """"Feature Request", "feature-request" and "FEATURE_REQUEST" all fold to feature_request."""
    return _SEPARATORS.sub("_", value.strip().lower()).strip("_")


def near_miss(value: object, allowed: tuple[str, ...], synonyms: dict[str, str]) -> str | None:
    """The allowed value ``value`` means, or None when it is not recognisable."""
    if not isinstance(value, str):
        return None
    folded = fold(value)
    for candidate in (folded, folded[:-1] if folded.endswith("s") else None):
        if candidate in allowed:
            return candidate
        if candidate in synonyms:
            return synonyms[candidate]
    return None


def _whole_number(value: object) -> int | None:
    """A JSON integer as a number: 4 and 4.0 are; True, 4.5 and "4" are not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def severity_of(value: object) -> str | None:
    """The canonical severity ``value`` means: a number on the spec's 1–5 scale
    (:data:`SEVERITY_SCALE`), or a name or numeric string folded by :func:`near_miss`
    ("CRITICAL", "Major", "4"). None when it is none of these."""
    number = _whole_number(value)
    if number is not None:
        return SEVERITY_SCALE.get(number)
    return near_miss(value, SEVERITIES, SEVERITY_SYNONYMS)


def satisfaction_of(value: object) -> int | None:
    """A satisfaction score 1–5 from a number or a numeric string ("4", "4.0"); None else."""
    number = _whole_number(value)
    if number is None and isinstance(value, str) and (found := SCORE_TEXT.match(value)):
        number = int(found.group(1))
    return number if number is not None and 1 <= number <= 5 else None


#: VADER's own cut-off (Hutto & Gilbert 2014): a compound at or below -0.05 is negative.
NEGATIVE_TONE = -0.05
#: How positive words must read, with nothing negative, negated or contrasted in them, to be praise
#: where the dialect's default is a complaint (an in-session row without a sentiment). Chosen on the
#: human-rated sentiment corpus (``../shared/data/sentiment.jsonl``), not on the sample: the lowest
#: of the cuts measured (0.05, 0.3, 0.5, 0.7) at which at most 1 in 20 negative texts reads as
#: praise (``benchmarks/lanes.py`` prints the table).
PRAISE_TONE = 0.5


def is_praise(category: str | None, outcome: str | None, satisfaction: int | None, text: str) -> bool:
    """Whether a report that names no lane is praise: the spec derives the lane "from
    category, outcome, and sentiment".

    Praise is a task that succeeded, with no friction category (none or ``other``), and a
    positive sentiment. The sentiment is the agent's own satisfaction score when it gave one
    (4 or 5): its verdict on the interaction, which a lexicon's reading of its words does not
    overrule. Without a score it is the tone of its words (summary and detail): praise unless
    they read negative (a success "after 3 retries and a 500" is friction, not praise). A report
    that also asks for something is a request (:func:`is_request`), which :func:`derive_lane`
    puts first.
    """
    if outcome != "success" or category not in (None, "other"):
        return False
    if satisfaction is not None:
        return satisfaction >= 4
    return sentiment(text) > NEGATIVE_TONE


def is_request(category: str | None, outcome: str | None, text: str, suggestion: object = None) -> bool:
    """Whether a report that names no lane is a feature request: it names no friction category
    (none or ``other``), its task did not fail, and it asks for a change, in its words
    (:func:`asks_for_change`: "Please add a CSV export option") or, on a task that went fine, in
    a suggestion field of its own (a fix proposed for a task that ended well is a suggestion).

    A failed task's "please add" is the remedy for a failure: that report is a bug, as before.
    """
    if category not in (None, "other") or OUTCOME_CLASS.get(outcome or "") == "failed":
        return False
    offered = isinstance(suggestion, str) and bool(suggestion.strip()) and OUTCOME_CLASS.get(outcome or "") == "ok"
    return offered or asks_for_change(text)


def sep2369_summary(category: str, subcategory: str | None, tool: str | None) -> str:
    """The summary of a SEP-2369 item that has no ``observation``: its category, subcategory
    and tool ("usability parameters (search_files)"). A label to embed and show, not words
    anyone wrote: the signals stage reads such a summary as no comment at all."""
    return " ".join(part for part in (category, subcategory, tool and f"({tool})") if part)


#: Lane of a report by its category when the dialect gives no lane. Categories whose lane
#: depends on how the task ended map to None here and are decided by :func:`derive_lane`.
_LANE_BY_CATEGORY = {
    "missing_capability": "feature_request",
    "docs_mismatch": "docs_feedback",
    "bad_tool_description": "docs_feedback",
    "confusing_schema": "schema_feedback",
    "wrong_tool_selected": "workflow_feedback",
    "incorrect_response": "bug_or_failure",
    "incomplete_response": "bug_or_failure",
}


def derive_lane(category: str | None, outcome: str | None, positive: bool = False, request: bool = False) -> str:
    """The AFS rule for a report that names no lane: from its category, outcome and sentiment.

    A request wins (a suggestion is demand, whatever its tone: ``request`` is the dialect's
    reading, :func:`is_request` for most); then praise; then the category's own lane; for the
    rest (errors, auth, pagination, rate limits, other) a task that failed is a bug, anything
    else is friction.
    """
    if request:
        return "feature_request"
    if positive:
        return "positive_feedback"
    lane = _LANE_BY_CATEGORY.get(category or "")
    if lane:
        return lane
    if outcome is not None and OUTCOME_CLASS.get(outcome) == "failed":
        return "bug_or_failure"
    return "friction"


def near_miss_pattern(allowed: tuple[str, ...], synonyms: dict[str, str]) -> str:
    """An ECMA-262 regex (as JSON Schema ``pattern`` wants) for exactly the strings
    :func:`near_miss` accepts: any case, any run of separators between words, a plural ``s``."""
    def word(folded: str) -> str:
        parts = ("".join(f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in part) for part in folded.split("_"))
        return r"[\s\-./_]+".join(parts)

    words = sorted(set(allowed) | set(synonyms), key=len, reverse=True)
    return r"^[\s\-./_]*(?:" + "|".join(word(w) for w in words) + r")[sS]?[\s\-./_]*$"


# --- how agents write: sentiment -----------------------------------------------------------------
#
# The tone of a report's words, read the same way wherever it is needed: by the signals stage
# (RFC-026 sentiment and severity language) and, at ingest, by the Agent Feedback Spec's lane
# derivation ("derived from category, outcome, and sentiment"). Ingest sits below the signals
# stage, so the scorer lives here, with the rest of the vocabulary agents write in.

#: Words VADER does not score, on VADER's scale (-4 … +4, its own words mostly ±0.5 … ±3).
#: Words common in general English get modest weights, so reviews and tweets keep their score.
#: Left out on purpose, because the human-rated texts of the benchmark use them neutrally or the
#: other way round: "predictable" (a predictable plot), "exactly" (exactly the problem),
#: "quickly", "worked" (worked all day).
DOMAIN_LEXICON: dict[str, float] = {
    # failure and friction
    "timeout": -1.5, "timeouts": -1.5, "crashed": -2.0, "crashes": -2.0, "crashing": -2.0,
    "truncated": -1.5, "truncates": -1.5, "truncation": -1.2, "silently": -1.0,
    "undocumented": -1.5, "unusable": -2.3, "unreliable": -1.8, "buggy": -2.0, "glitchy": -1.5,
    "flaky": -1.5, "laggy": -1.3, "bug": -1.0, "bugs": -1.0, "glitch": -1.2, "slow": -1.0,
    "inconsistent": -1.2, "ambiguous": -0.8, "opaque": -1.0, "cryptic": -1.2,
    "unhelpful": -1.8, "invalid": -0.8, "lacks": -1.0, "lacking": -1.2, "impossible": -1.3,
    "tedious": -1.6, "stale": -0.8, "workaround": -0.8, "workarounds": -0.8, "retry": -0.5,
    "retries": -0.5, "retried": -0.5, "retrying": -0.5, "throttled": -1.2,
    "hallucinated": -1.8, "hallucination": -1.8, "regression": -1.2, "deprecated": -0.5,
    "leaks": -1.4, "leaking": -1.4,
    # praise
    "works": 1.0, "reliable": 1.5, "reliably": 1.2, "fast": 1.0, "intuitive": 1.5,
    "seamless": 1.6, "seamlessly": 1.5, "smooth": 1.2, "smoothly": 1.2, "straightforward": 1.0,
    "actionable": 1.2, "precise": 1.0, "handy": 1.0, "well-documented": 1.5, "correct": 0.8,
    "correctly": 0.8,
    # multi-word cues, rewritten to one token each by _TONE_REWRITES
    "http_error": -1.0, "no_way_to": -1.5, "had_to": -1.0, "timed_out": -1.5,
    "not_working": -1.8, "no_error_message": -1.2, "nothing_happened": -1.0, "not_found": -0.8,
    "rate_limited": -1.0, "gave_up": -1.2, "out_of_memory": -1.5,
    "just_works": 1.8, "works_as_expected": 1.5, "exactly_right": 1.5, "first_try": 1.0,
    "spot_on": 2.0,
}

#: What each multi-word token stands for. VADER scores single tokens, so the phrase becomes one
#: token it can look up (and still negate). A token the lexicon does not score is neutral on
#: purpose: an "error message" or "error format" is a feature under discussion ("clear error
#: messages"), not a report that something failed.
PHRASES: dict[str, str] = {
    "error_term": r"validation errors?|errors?(?= (?:messages?|codes?|shapes?|formats?|handling))",
    "no_way_to": r"no way to",
    "had_to": r"had to",
    "timed_out": r"timed out",
    "not_working": r"(?:does|did|do|will|would)(?:n['’]?t| not) work|not working|stopped working",
    "no_error_message": r"(?:no|without an?) (?:useful |helpful )?error (?:message|detail|code)s?",
    "nothing_happened": r"nothing happened",
    "not_found": r"not found",
    "rate_limited": r"rate[- ]limited",
    "gave_up": r"(?:gave|give|giving) up",
    "out_of_memory": r"out of memory|oom[- ]?killed",
    "just_works": r"just works?",
    "works_as_expected": r"works? as (?:expected|documented|advertised)",
    "exactly_right": r"exactly (?:right|what (?:i|we) (?:needed|wanted))",
    "first_try": r"(?:on the |at the )?first (?:try|attempt)",
    "spot_on": r"spot on",
}

_STATUS = r"[45](?:\d\d|xx)"
_STATUS_LEADS = (
    r"returned|returns?|returning|responded with|got|gets|getting|throws|threw|raised"
    r"|(?:fails|failed|dies|died|errors|errored) with|with an?"
)
_COUNTED = (
    r"rows?|records?|items?|results?|entries|objects?|lines?|pages?|bytes?|chars?|characters"
    r"|tokens?|ms|seconds?|calls?|requests?|people|users?|times"
)
_STATUS_REASONS = (
    r"error|response|status|body|bad request|unauthori[sz]ed|forbidden|not found|method not"
    r"|conflict|gone|too many|unprocessable|internal|bad gateway|service unavailable|gateway time"
)
#: A 4xx/5xx number counts as an HTTP error status when HTTP wording surrounds it, not when it
#: counts something ("returned 500 rows").
HTTP_ERROR_STATUS = (
    "(?i:"
    + "|".join(
        [
            rf"\b(?:http(?:/[\d.]+)?|status(?: code)?|code|error)[\s:=]*{_STATUS}s?\b",  # HTTP 500
            rf"\b(?:{_STATUS_LEADS})\s+(?:an?\s+)?(?:bare\s+)?{_STATUS}s?\b(?!\s+(?:{_COUNTED})\b)",
            rf"\b{_STATUS}(?=\s+(?:{_STATUS_REASONS}))",  # 400 Bad Request, the 429 body
            r"\b[45](?:\d\ds|xx)\b",  # random 502s, 5xx
        ]
    )
    + ")"
)
_STATUS_CODE = re.compile(_STATUS + "s?")

#: One pass over the text before VADER sees it: each domain phrase becomes its lexicon token,
#: an HTTP error status becomes ``http_error`` (its surrounding words are kept), and literal
#: payloads (``{...}`` JSON, backticked code) are dropped: ``{"status":"ok"}`` is evidence,
#: not tone. The word-start guard lets the engine skip mid-word positions (3x faster).
_TONE_REWRITES = re.compile(
    r"(?P<payload>\{[^{}]*\}|`[^`]*`)|(?<!\w)(?=\w)(?:"
    + "|".join(
        [f"(?P<http_error>{HTTP_ERROR_STATUS})"]
        + [rf"(?P<{token}>(?:{phrase})(?!\w))" for token, phrase in PHRASES.items()]
    )
    + ")",
    re.IGNORECASE,
)


def _as_lexicon_tokens(match: re.Match[str]) -> str:
    """The replacement for one :data:`_TONE_REWRITES` match, padded so it stays a token."""
    kind = match.lastgroup
    if kind == "payload":
        return " "
    if kind == "http_error":
        return _STATUS_CODE.sub(" http_error ", match.group(), count=1)
    return f" {kind} "


@cache
def _analyzer() -> Any:
    """One VADER analyzer per process (reading its lexicon takes ~30 ms), extended once.
    Imported here, on first use, so that reading the vocabulary costs nothing."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    analyzer = SentimentIntensityAnalyzer()
    analyzer.lexicon.update(DOMAIN_LEXICON)
    return analyzer


def sentiment_lexicon() -> dict[str, float]:
    """Every word the sentiment scorer scores: VADER's lexicon and :data:`DOMAIN_LEXICON`."""
    lexicon: dict[str, float] = _analyzer().lexicon
    return lexicon


#: VADER rescans the whole text for every sentiment word, so its cost grows with the square of
#: the length (10,000 characters take ~0.2 s). Past ~500 words a report is quoting logs and
#: payloads, which carry no tone, so sentiment reads this much and stays under ~20 ms.
MAX_TONE_CHARS = 3000


def _scores(text: str) -> dict[str, float]:
    """VADER's scores (compound, and the shares of negative, neutral and positive words) on the
    domain-extended lexicon, after the rewrites."""
    scores: dict[str, float] = _analyzer().polarity_scores(_TONE_REWRITES.sub(_as_lexicon_tokens, text[:MAX_TONE_CHARS]))
    return scores


def sentiment(text: str) -> float:
    """-1.0 (frustrated) … 1.0 (positive): VADER's compound on the domain-extended lexicon."""
    return _scores(text)["compound"]


# --- how agents and people ask: requests ---------------------------------------------------------
#
# "Please add a CSV export option" reads positive to a lexicon ("please" is a kind word), so tone
# alone files a suggestion as praise. These are the phrasings that ask for a change; a report that
# uses one is demand (a feature request) where its dialect leaves the lane to its words.

#: Verbs that ask for a capability ("add", "support", …), after "please", "could you", "should".
_WANT = r"add|support|include|expose|allow|provide|offer|implement|introduce|enable|extend|accept|return|make|let"
#: What a capability is called when a report says it wants one, or that there is none.
_THING = r"option|way|setting|flag|param(?:eter)?|endpoint|filter|field|mode|toggle|feature|tool|method|variant"
#: Verbs that start a sentence as an imperative suggestion ("Add a hiring_role filter."), the
#: ones that are not also the nouns a report starts with ("Document upload …", "Accept header …").
_IMPERATIVE = r"add|expose|allow|provide|offer|implement|introduce|include|enable|extend|consider|make|let(?!['’]s| me| us know)|support(?! (?:for|is|was|has|of|team)\b)"
#: The phrasings of a request (case-insensitive, on the report's own words with each run of
#: whitespace made one space).
REQUEST_PHRASES = re.compile(
    "|".join(
        [
            rf"\bplease,? (?:{_WANT}|consider|document)\b",
            r"\b(?:would|'d|’d) (?:be )?(?:really |very |so |super )?(?:nice|great|good|helpful|useful|handy|awesome|better|ideal|lovely|cool) (?:if|to)\b",
            r"\bwould (?:really |greatly )?help (?:if|to)\b",
            r"\b(?:i|we)(?:['’]d| would) (?:really )?(?:love|like|prefer|appreciate) (?:to (?:see|have|get|be able)|an?\b|the (?:option|ability)|support|it if|if)",
            r"\b(?:i|we) wish\b",
            rf"\b(?:could|can|would|will) (?:you|they|we) (?:please )?(?:{_WANT}|consider)\b",
            rf"\bshould (?:also )?(?:support|accept|allow|offer|expose|provide|include|have an? (?:{_THING}))\b",
            r"\b(?:feature|enhancement) request\b|\bnice[ -]to[ -]have\b",
            rf"\bwould be an? (?:nice|great|welcome|useful|good) (?:addition|improvement|{_THING})\b",
            rf"\b(?:add|adding|need|needs|needed|want|wants|wanted|missing) (?:support for|an? (?:{_THING})s? (?:to|for)\b)",
            rf"\bno (?:{_THING})s? (?:to|for)\b",
            rf"(?:^|[.!?;:] )(?:{_IMPERATIVE}) (?=\S)",
        ]
    ),
    re.IGNORECASE,
)


def asks_for_change(text: str) -> bool:
    """Whether the words ask for a change (:data:`REQUEST_PHRASES`): "please add", "it would be
    nice if", "could you support", "no option to", an imperative "Add …" opening a sentence."""
    return REQUEST_PHRASES.search(" ".join(text[:MAX_TONE_CHARS].split())) is not None


@cache
def _negation() -> re.Pattern[str]:
    """VADER's own negations ("not", "never", "without", "isn't" …) with "no", and the words
    that turn a sentence round ("but", "though", "however", "except")."""
    from vaderSentiment.vaderSentiment import NEGATE

    words = sorted({*NEGATE, "no", "but", "though", "although", "however", "except"}, key=len, reverse=True)
    return re.compile(r"(?<![\w'’])(?:" + "|".join(map(re.escape, words)) + r")(?![\w'’])|n['’]t\b", re.IGNORECASE)


def reads_as_praise(text: str) -> bool:
    """Whether words alone are praise where the default is a complaint: clearly positive
    (:data:`PRAISE_TONE`), with no negative word, nothing negated or turned round by a "but",
    and asking for nothing. "Nice, the issue it filed had everything the dev needed" is;
    "Claims success without calling any tool" (a word of success, negated) is not."""
    scores = _scores(text)
    return (
        scores["compound"] >= PRAISE_TONE
        and scores["neg"] == 0
        and _negation().search(text[:MAX_TONE_CHARS]) is None
        and not asks_for_change(text)
    )


def reads_as_complaint(text: str) -> bool:
    """Whether the words report something wrong: a negative tone, a negative word, or something
    negated or turned round ("it doesn't", "no marker", "…, but")."""
    scores = _scores(text)
    return scores["compound"] <= NEGATIVE_TONE or scores["neg"] > 0 or _negation().search(text[:MAX_TONE_CHARS]) is not None
