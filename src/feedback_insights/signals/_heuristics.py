"""RFC-026 §2.4 heuristic signals of a feedback record, computed without an LLM.

RFC-026 lets a collector attach an ``nlp`` object (sentiment, specificity, topics,
expectation_gap, severity_language) to a report. Most dialects carry none, so we compute the
same five values for every record, from its text alone, and store :data:`SOURCE` beside them so
that a collector's ``nlp`` object and ours are never confused.

Sentiment is VADER's compound score (Hutto & Gilbert 2014) with its lexicon *extended* for the
way agents write: technical, terse, rarely emotional. Plain VADER reads "returned 500",
"silently truncated" or "had to page through 40 calls" as neutral. We add the words and phrases
agents use for failure, friction and praise to VADER's own lexicon (never changing a word VADER
already scores), so VADER's negation, booster and "but" rules apply to them too: "not helpful"
and "no timeout" still flip. ``benchmarks/signals.py`` checks that this does not cost accuracy
on VADER's human-rated tweets and reviews.

The signals describe the text, not the record: ``rating`` and ``lane`` are stored beside them,
so folding those in would count them twice and hide a thumbs-up that came with an angry comment.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from ..core import TEXT_FIELDS

SOURCE = "feedback-insights/heuristics-v1"

#: Text fields written in the reporter's own voice: sentiment and severity read only these.
#: ``goal`` says what the agent was doing, ``expected`` and ``actual`` what the system should
#: have done and did (RFC-026 and in-session ``actual`` quote the assistant's reply verbatim:
#: "Yes, it looks good to merge"). They add topics, detail and the expectation gap, not tone.
TONE_FIELDS = tuple(name for name in TEXT_FIELDS if name not in ("goal", "expected", "actual"))


# --- sentiment ---------------------------------------------------------------------------------

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
def _analyzer() -> SentimentIntensityAnalyzer:
    """One VADER analyzer per process (reading its lexicon takes ~30 ms), extended once."""
    analyzer = SentimentIntensityAnalyzer()
    analyzer.lexicon.update(DOMAIN_LEXICON)
    return analyzer


#: VADER rescans the whole text for every sentiment word, so its cost grows with the square of
#: the length (10,000 characters take ~0.2 s). Past ~500 words a report is quoting logs and
#: payloads, which carry no tone, so sentiment reads this much and stays under ~20 ms.
MAX_TONE_CHARS = 3000


def sentiment(text: str) -> float:
    """-1.0 (frustrated) … 1.0 (positive): VADER's compound on the domain-extended lexicon."""
    rewritten = _TONE_REWRITES.sub(_as_lexicon_tokens, text[:MAX_TONE_CHARS])
    return _analyzer().polarity_scores(rewritten)["compound"]


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

#: A word, with any apostrophe tail so that contractions ("doesn't") can be told apart.
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:['’][A-Za-z]+)?")
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
    lexicon = _analyzer().lexicon
    scores: dict[str, int] = {}
    for match in _WORD.finditer(_REDACTED.sub(" ", text)):
        token = match.group()
        word = token.lower().replace("’", "'").removesuffix("'s")
        if "'" in word or len(word) < 3 or word in GENERIC_WORDS or _ID_LIKE.search(word):
            continue
        if word in lexicon and word not in TOPIC_NOUNS:
            continue
        preceding = match.string[match.start() - 1] if match.start() else ""
        past_tense = token.isalpha() and word.endswith("ed") and not word.endswith("eed")
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
    """True when the text says "expected X but got Y" (in any of its forms), or the report
    fills in what it expected or what actually happened."""
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
    """The five RFC-026 §2.4 values for one record. ``topics`` is a tuple so the whole value
    is immutable and hashable; :meth:`as_dict` gives the JSON shape, with :data:`SOURCE`."""

    sentiment: float
    specificity: float
    topics: tuple[str, ...]
    expectation_gap: bool
    severity_language: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "sentiment": self.sentiment,
            "specificity": self.specificity,
            "topics": list(self.topics),
            "expectation_gap": self.expectation_gap,
            "severity_language": self.severity_language,
            "source": SOURCE,
        }


def _joined(record: Mapping[str, Any], fields: tuple[str, ...]) -> str:
    """The non-blank text fields, one per line (a "within one sentence" regex never spans two)."""
    values = (record.get(name) for name in fields)
    return "\n".join(value for value in values if isinstance(value, str) and value.strip())


def compute(record: Mapping[str, Any]) -> Signals:
    """All five signals of a canonical record, with VADER run once.

    Every text field feeds specificity, topics and the expectation gap (which also counts a
    filled-in ``expected`` or ``actual``); only :data:`TONE_FIELDS` feed sentiment and severity.
    """
    all_text = _joined(record, TEXT_FIELDS)
    tone_text = _joined(record, TONE_FIELDS)
    feeling = sentiment(tone_text)
    expected, actual = record.get("expected"), record.get("actual")
    return Signals(
        sentiment=feeling,
        specificity=specificity(all_text),
        topics=tuple(topics(all_text)),
        expectation_gap=expectation_gap(
            all_text,
            expected if isinstance(expected, str) else None,
            actual if isinstance(actual, str) else None,
        ),
        severity_language=_severity(tone_text, feeling),
    )
