"""Find secrets and personal data in feedback text and replace them with typed placeholders.

Agents paste whatever they were holding: bearer tokens, API keys, connection strings, a user's
email. None of it may reach the warehouse, an embedding, a prompt or an issue. At the same time
the evidence must survive: UUID trace ids, ``req_…`` request ids, ``fb_…`` record ids, commit
SHAs, timestamps, paths, status codes, versions and counts are what make a report actionable —
and a record's own identity (its id, session id, timestamps…) is not text at all.

Two rule sets apply: ours (:mod:`._rules`: personal data, URL credentials, query parameters,
headers, cookies and the vendor formats we named first) and gitleaks' 221 secret rules
(:mod:`._gitleaks`). One RE2 automaton over every rule's hint (ours) and keywords (gitleaks')
tells, in a single linear pass, which rules can match a text, so clean text skips every rule.
The same pass says whether the text hides characters that render as nothing or percent-escapes,
full-width characters or HTML entities, or base64 runs; then the rules also run on the text
without them, decoded, normalised (:mod:`._views`, :mod:`._decoded`). A secret find that holds
no secret — a placeholder, a reference to a variable, a mask, a published example, a digest
(:mod:`._placeholders`) — is dropped, and overlapping finds are resolved earliest and longest
first. Every step is linear in the text: a hostile megabyte costs what a clean one does, give
or take its finds.

A :class:`Redactor` scrubs one record: the same value gets the same placeholder
(``[REDACTED:email:1]``) everywhere in the record, values under keys that name a secret are
replaced whole, identity fields are kept (or pseudonymised when they carry a secret), and the
counts by type are kept for the digest. Scrubbing is idempotent: placeholders match no rule. It
never recurses deeper than :data:`~feedback_insights.core.MAX_DEPTH` levels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import re2

from ..core import MAX_DEPTH, jsontext
from ._decoded import NORMALISE, NORMALISE_HINT, base64_finds, may_hold_base64, normalised
from ._gitleaks import Allowlist, RuleSet, gitleaks_rules
from ._placeholders import NoSecret
from ._rules import (
    DETECTORS,
    DIGIT_SHAPED_KINDS,
    ENVELOPE_CONTAINERS,
    EVIDENCE,
    IDENTITY_KEYS,
    NOT_SECRET_NAMES,
    PERSONAL_KINDS,
    PLACEHOLDER,
    PLAIN_TOKEN,
    Finding,
    high_entropy,
    is_account_key,
    is_secret_key,
)
from ._views import INVISIBLE, INVISIBLE_HINT, PERCENT, PERCENT_HINT, View, percent_decoded, without_invisible

#: The prefilter's memory: enough for its DFA to stay built on any text (the default 8 MiB
#: thrashes on a few hundred patterns). RE2 never abandons a set match for being slow (it
#: resets its cache instead), and the tests check a hint at the end of 2 MB of noise is seen.
_SET_MEMORY = 64 << 20
#: How many views may nest (invisible characters removed, then percent-escapes decoded twice:
#: ``%253D``; base64 of an entity-encoded text): none is longer than the text it reads, but a
#: crafted one must not recurse without bound.
_MAX_VIEWS = 3


@dataclass(frozen=True, slots=True)
class _Hits:
    """What the prefilter found in a text: the rules that may match, by set."""

    detectors: Sequence[int]
    rules: Sequence[int]
    invisible: bool
    percent: bool
    normalise: bool
    base64: bool


def _set_of(patterns: list[str]) -> re2.Set:
    options = re2.Options()
    options.max_mem = _SET_MEMORY
    hints = re2.Set.SearchSet(options)
    for index, pattern in enumerate(patterns):
        if hints.Add(pattern) != index:
            raise AssertionError(f"prefilter pattern {index} is not valid RE2: {pattern!r}")
    hints.Compile()
    return hints


class _Prefilter:
    """One RE2 automaton over every hint: a single linear pass over a text says which rules can
    match it, so a clean text costs one scan instead of one regex per rule.

    Its patterns, in order: our rules' hints; the hints of gitleaks' rules other than the
    semi-generic ones; whether there are invisible characters; percent-escapes; full-width
    characters or HTML entities; and one gate
    for the hundred semi-generic rules ("<vendor name> … = …"). Only a text that passes the
    gate is scanned again, by a second automaton over those rules' keywords: their names are
    common words ("api", "key", "token", "access"), and prose mentions them all the time."""

    def __init__(self, gitleaks: RuleSet) -> None:
        rules = gitleaks.rules
        self.plain = [i for i, r in enumerate(rules) if r.names is None]
        self.gated = [i for i, r in enumerate(rules) if r.names is not None]
        self.first_rule = len(DETECTORS)
        self.invisible = self.first_rule + len(self.plain)
        self.percent = self.invisible + 1
        self.normalise = self.percent + 1
        self.gate = self.normalise + 1
        hints = [*(d.hint for d in DETECTORS), *(rules[i].hint for i in self.plain)]
        self.set = _set_of([*hints, INVISIBLE_HINT, PERCENT_HINT, NORMALISE_HINT, gitleaks.gate or "$^"])
        self.gated_set = _set_of([rules[i].hint or "" for i in self.gated]) if self.gated else None
        self.every_detector = range(len(DETECTORS))
        self.every_rule = range(len(rules))

    def hits(self, matched: list[int], data: bytes, base64: bool) -> _Hits:
        """The rules of the patterns that ``matched`` in ``data`` (``base64``: whether it may
        hold a base64 run, a question the set does not answer)."""
        matched.sort()
        first, invisible, percent = self.first_rule, self.invisible, self.percent
        rules = [self.plain[i - first] for i in matched if first <= i < invisible]
        if matched and matched[-1] == self.gate and self.gated_set is not None:
            gated = self.gated_set.Match(data)
            if gated:
                rules = sorted([*rules, *(self.gated[i] for i in gated)])
        return _Hits([i for i in matched if i < first], rules, invisible in matched, percent in matched,
                     self.normalise in matched, base64)

    def everything(self, text: str, data: bytes) -> _Hits:
        """Every rule, as if each hint had matched (the tests compare this with :meth:`hits`)."""
        return _Hits(self.every_detector, self.every_rule, bool(INVISIBLE.search(text)), bool(PERCENT.search(text)),
                     bool(NORMALISE.search(text)), may_hold_base64(data))


_GITLEAKS = gitleaks_rules()
_PREFILTER = _Prefilter(_GITLEAKS)
#: The set's own match (a list, empty for no match), without the wrapper's type checks: it
#: runs once for every string of every record.
_MATCH = getattr(_PREFILTER.set, "_set", _PREFILTER.set).Match
_FIRST_RULE = _PREFILTER.first_rule
#: gitleaks' global allow-lists, and ours: a generic "name = value" find whose name is a
#: pagination cursor or a correlation id (``page_token=…``, ``session_id: …``) is evidence.
_ALLOWLISTS = (
    *_GITLEAKS.allowlists,
    Allowlist("match", False, re2.compile(rf"(?i)(?:{NOT_SECRET_NAMES})[\"']?\s*[=:]"), None, False),
)
#: What holds no secret however secret it looks (:mod:`._placeholders`).
_NO_SECRET = NoSecret(_GITLEAKS.allowlists, _GITLEAKS.examples, _GITLEAKS.generic_names)


def find(text: str, *, prefilter: bool = True) -> list[Finding]:
    """Every secret and personal datum in ``text``, without overlaps, in order.

    The prefilter only skips rules whose hint proves they cannot match; the tests turn it off
    to check that it never changes a result."""
    size = len(text)
    if size < 6:
        return []
    if size < 20 and PLAIN_TOKEN.fullmatch(text) or size < 40 and EVIDENCE.fullmatch(text):
        return []
    if not prefilter:
        return _find(text, False, 0)
    # The hot path, inlined: most texts end at the first ``return []`` below.
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate (JSON allows "\ud800"): keep it, as bytes
        data = text.encode("utf-8", "surrogatepass")
    matched = _MATCH(data)
    base64 = may_hold_base64(data)
    if not matched and not base64:
        return []
    return _matched(text, data, matched, base64, 0)


def _find(text: str, prefilter: bool, views: int) -> list[Finding]:
    """:func:`find` without the shortcuts, for views and for the tests' run without prefilter."""
    try:
        data = text.encode()
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass")
    if not prefilter:
        return _found(text, data, _PREFILTER.everything(text, data), False, views)
    matched = _MATCH(data)
    base64 = may_hold_base64(data)
    return _matched(text, data, matched, base64, views) if matched or base64 else []


def _matched(text: str, data: bytes, matched: list[int], base64: bool, views: int) -> list[Finding]:
    """The finds of the rules whose hints matched (``matched``: pattern indices; ``base64``:
    the text may hold a base64 run)."""
    if not matched or max(matched) < _FIRST_RULE:  # the common case with a hit: only our rules
        found: list[Finding] = []
        for index in sorted(matched):
            DETECTORS[index].find(text, found)
        if base64 and views < _MAX_VIEWS:
            found += base64_finds(text, data, lambda decoded: _find(decoded, True, views + 1))
        return _without_overlaps(found, text) if found else []
    return _found(text, data, _PREFILTER.hits(matched, data, base64), True, views)


def _found(text: str, data: bytes, hits: _Hits, prefilter: bool, views: int) -> list[Finding]:
    """The finds of the rules the prefilter let through, in ``text`` and its views."""
    if hits.invisible and views < _MAX_VIEWS:
        # The text as it reads: the view replaces it (nothing is found only with them).
        view = without_invisible(text)
        return _mapped(view, _find(view.text, prefilter, views + 1))
    found: list[Finding] = []
    for index in hits.detectors:
        DETECTORS[index].find(text, found)
    if hits.rules:
        _gitleaks_finds(text, data, hits.rules, found)
    if views < _MAX_VIEWS:
        if hits.percent:
            view = percent_decoded(text)
            found += _mapped(view, _find(view.text, prefilter, views + 1))
        if hits.normalise:
            view = normalised(text)
            found += _mapped(view, _find(view.text, prefilter, views + 1))
        if hits.base64:
            found += base64_finds(text, data, lambda decoded: _find(decoded, prefilter, views + 1))
    return _without_overlaps(found, text) if found else []


def _mapped(view: View, found: list[Finding]) -> list[Finding]:
    return [Finding(f.kind, *view.original(f.start, f.end)) for f in found]


def _gitleaks_finds(text: str, data: bytes, indices: Sequence[int], found: list[Finding]) -> None:
    """gitleaks' finds (in bytes) as character offsets. A rule runs only when one of its
    keywords is in the lower-cased text, as in gitleaks: the prefilter may have matched a
    sharper hint, or a case folding that lower-casing does not share."""
    rules, allowlists = _GITLEAKS.rules, _ALLOWLISTS
    ascii_only = len(data) == len(text)
    lowered = text.lower()
    for index in indices:
        rule = rules[index]
        if rule.keywords and not any(keyword in lowered for keyword in rule.keywords):
            continue
        characters = None if ascii_only else _Characters(data)
        for start, end in rule.finds(data, allowlists):
            if characters is not None:
                start, end = characters(start), characters(end)
            found.append(Finding(rule.kind, start, end))


class _Characters:
    """Character offsets of byte offsets of one UTF-8 text (RE2 reports bytes). A rule's finds
    come in order, so each offset is counted on from the last: decoding the whole prefix for
    every find made a megabyte with thousands of finds take minutes."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.byte = self.character = 0

    def __call__(self, offset: int) -> int:
        if offset < self.byte:
            self.byte = self.character = 0
        try:
            self.character += len(self.data[self.byte : offset].decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:  # an offset inside a character: count what is whole
            self.character = len(self.data[:offset].decode("utf-8", "ignore"))
        self.byte = offset
        return self.character


def _without_overlaps(found: list[Finding], text: str) -> list[Finding]:
    """Secret finds that hold no secret dropped (:mod:`._placeholders`); then earliest first,
    the longest of those starting together; a find inside a kept one goes. Ours come before
    gitleaks' in ``found``, so on a tie our kind is kept. Nothing may touch a placeholder
    ("[REDACTED:url_credentials:1]" names a secret word): scrubbing twice changes nothing."""
    holds_none = _NO_SECRET.holds_none
    found = [f for f in found if f.kind in PERSONAL_KINDS or not holds_none(text, f.kind, f.start, f.end)]
    found.sort(key=lambda f: (f.start, f.start - f.end))
    placeholders = [m.span() for m in PLACEHOLDER.finditer(text)] if "[REDACTED:" in text else []
    kept: list[Finding] = []
    at = 0  # both lists are in order: the first placeholder not wholly before this find
    for finding in found:
        if kept and finding.start < kept[-1].end:
            continue
        while at < len(placeholders) and placeholders[at][1] <= finding.start:
            at += 1
        if at < len(placeholders) and placeholders[at][0] < finding.end:
            continue
        kept.append(finding)
    return kept


# -- JSON of any depth -------------------------------------------------------------------------


class _Chunk(str):
    """JSON text already written (a bracket, a key), on the stack of :func:`json_of`."""


def json_of(value: Any) -> str:
    """JSON text of ``value`` however deeply it nests: an explicit stack, never the call stack
    (``jsontext.dumps`` stops at a few hundred levels)."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if type(node) is _Chunk:
            out.append(node)
        elif isinstance(node, dict):
            stack.append(_Chunk("}"))
            items = list(node.items())
            for i in range(len(items) - 1, -1, -1):
                stack.append(items[i][1])
                stack.append(_Chunk(("," if i else "") + _scalar(str(items[i][0])) + ":"))
            stack.append(_Chunk("{"))
        elif isinstance(node, list | tuple):
            stack.append(_Chunk("]"))
            for i in range(len(node) - 1, -1, -1):
                stack.append(node[i])
                if i:
                    stack.append(_Chunk(","))
            stack.append(_Chunk("["))
        else:
            out.append(_scalar(node))
    return "".join(out)


def _scalar(value: Any) -> str:
    return jsontext.dumps(value).decode("utf-8", "surrogatepass")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether objects and arrays nest more than ``limit`` levels in ``value`` (iterative)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


# -- one record --------------------------------------------------------------------------------

#: Identity values: a text, or a number (an id, a millisecond timestamp).
_SCALARS = (str, int, float)


#: Short strings known to hold nothing to redact (find() is a pure function of the text), shared
#: by every Redactor of the process; emptied when full.
_CLEAN: set[str] = set()
_CLEAN_SIZE = 100_000
_CLEAN_LENGTH = 200


@dataclass
class Redactor:
    """Scrubs the strings of one record. ``pseudonymise`` turns an account id into its
    pseudonym (values under :data:`ACCOUNT_KEYS` keep identity, not content); when it also has
    an ``identifier`` method (a :class:`Pseudonymiser` has), an identity field that carries a
    secret or an email gets that stable pseudonym (``idh_…``), else ``[REDACTED:identifier:N]``.
    """

    pseudonymise: Callable[[str], str] | None = None
    #: Whether an account id was replaced by its pseudonym.
    pseudonymised: bool = False
    _placeholders: dict[tuple[str, str], str] = field(default_factory=dict)
    _numbers: Counter[str] = field(default_factory=Counter)
    _done: dict[str, str] = field(default_factory=dict)
    #: Identity values replaced because they carried a secret: value → replacement.
    _identities: dict[str, str] = field(default_factory=dict)

    def placeholder(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self._placeholders:
            self._numbers[kind] += 1
            self._placeholders[key] = f"[REDACTED:{kind}:{self._numbers[kind]}]"
        return self._placeholders[key]

    @property
    def changed(self) -> bool:
        return self.pseudonymised or any(self._numbers.values())

    @property
    def counts(self) -> dict[str, int]:
        """Distinct values redacted in this record, by type (earlier placeholders included);
        ``identifier``: identity fields replaced because they carried a secret or an email."""
        return {kind: n for kind, n in sorted(self._numbers.items()) if n}

    @property
    def identifiers(self) -> int:
        """How many distinct identity values of this record carried a secret or an email and
        were replaced (so a run summary can say so); also ``counts["identifier"]``."""
        return len(self._identities)

    def text(self, text: str) -> str:
        # Keys, enum values and short ids repeat across every record, and most are clean: a
        # string found clean once (no placeholder in it to renumber) is not scanned again.
        if text in _CLEAN:
            return text
        # A record repeats its texts (the canonical fields are copies of the original's):
        # scan each distinct string once.
        done = self._done.get(text)
        if done is not None:
            return done
        scrubbed = self._scrub(text)
        self._done[text] = scrubbed
        if scrubbed is text and len(text) <= _CLEAN_LENGTH and "[REDACTED:" not in text:
            if len(_CLEAN) >= _CLEAN_SIZE:
                _CLEAN.clear()
            _CLEAN.add(text)
        return scrubbed

    def _scrub(self, text: str) -> str:
        if "[REDACTED:" in text:
            self._continue_numbering(text)
        findings = find(text)
        if not findings:
            return text
        parts, last = [], 0
        for f in findings:
            parts.append(text[last : f.start])
            parts.append(self.placeholder(f.kind, text[f.start : f.end]))
            last = f.end
        parts.append(text[last:])
        return "".join(parts)

    def value(self, value: Any, key: str | None = None, secret: bool = False) -> Any:
        """``value`` with every string inside scrubbed; keys and structure kept. Everything
        under a key that names a secret is redacted whole. ``value`` itself is a record's root:
        its envelope fields (:data:`IDENTITY_KEYS` on a path through
        :data:`ENVELOPE_CONTAINERS`) are its identity and kept."""
        if key is None:
            return self._envelope(value, None, secret, 1)
        return self._walk(value, key, secret, 1)

    def _walk(self, value: Any, key: str | None, secret: bool, depth: int) -> Any:
        """``value`` (at level ``depth``; the root is 1) off the record's envelope."""
        secret = secret or (key is not None and is_secret_key(key))
        kind = type(value)
        if kind is str:
            return self._string(value, key, secret, depth, False)
        if kind is dict:
            if depth > MAX_DEPTH:
                return self._too_deep(value, secret)
            # Keys are text too ({"jane@example.com": …}); only the values under them can be secret.
            return {self.text(k): self._walk(v, k, secret, depth + 1) for k, v in value.items()}
        if kind is list:
            if depth > MAX_DEPTH:
                return self._too_deep(value, secret)
            return [self._walk(v, key, secret, depth + 1) for v in value]
        if kind is int or kind is float:
            return self._number(value, secret)
        return value

    def _envelope(self, value: Any, key: str | None, secret: bool, depth: int) -> Any:
        """``value`` on the record's envelope: the root, and what is under ``feedback``,
        ``params``, ``items`` … (:data:`ENVELOPE_CONTAINERS`) and list items on the way. Its
        :data:`IDENTITY_KEYS` are identity; everything else is walked as usual."""
        kind = type(value)
        if kind is list and depth <= MAX_DEPTH:
            return [self._envelope(v, key, secret, depth + 1) for v in value]
        if kind is not dict or depth > MAX_DEPTH:
            if kind is str and not (secret or key is not None and is_secret_key(key)):
                return self._string(value, key, False, depth, True)  # JSON text here is envelope too
            return self._walk(value, key, secret, depth)
        secret = secret or (key is not None and is_secret_key(key))
        out = {}
        for k, v in value.items():
            if k in IDENTITY_KEYS and not secret and type(v) in _SCALARS:
                out[self.text(k)] = self._identity(v) if type(v) is str else v
            elif k in ENVELOPE_CONTAINERS:
                out[self.text(k)] = self._envelope(v, k, secret, depth + 1)
            else:
                out[self.text(k)] = self._walk(v, k, secret, depth + 1)
        return out

    def _string(self, value: str, key: str | None, secret: bool, depth: int, envelope: bool) -> str:
        if secret and value and not PLACEHOLDER.fullmatch(value):
            return self.placeholder("secret", value)
        if key is not None and value and self.pseudonymise is not None and is_account_key(key):
            self.pseudonymised = True
            return self.pseudonymise(value)
        if value[:1] in "{[" and value[-1:] in "}]":
            return self._json_text(value, key, secret, depth, envelope)
        return self.text(value)

    def _identity(self, value: str) -> str:
        """An identity field as it is, unless it carries a secret or an email: then a stable
        keyed pseudonym, so the record keeps one identity and nothing secret is stored. Digits
        shaped like a card or a phone number are what ids look like, and so is a secret word
        beside a short part ("gl:nuget-config-password:tp:001" names a rule and a case)."""
        replaced = self._identities.get(value)
        if replaced is not None:
            return replaced
        if "[REDACTED:" in value:
            self._continue_numbering(value)
        for finding in find(value):
            if finding.kind in DIGIT_SHAPED_KINDS:
                continue
            if finding.kind == "secret_value" and not high_entropy(value[finding.start : finding.end]):
                continue
            break
        else:
            return value
        identify = getattr(self.pseudonymise, "identifier", None)
        if identify is None:
            replaced = self.placeholder("identifier", value)
        else:
            replaced = identify(value)
            self._numbers["identifier"] += 1
        self._identities[value] = replaced
        return replaced

    def _number(self, value: float, secret: bool) -> Any:
        """A number under a secret key is a secret ({"pin": 1234}); a long integer may be a
        card or a phone number ({"card": 4111111111111111}) and is judged as text."""
        if secret:
            return self.placeholder("secret", str(value))
        if isinstance(value, int) and abs(value) >= 10**6:
            text = str(value)
            scrubbed = self.text(text)
            return value if scrubbed == text else scrubbed
        return value

    def _json_text(self, value: str, key: str | None, secret: bool, depth: int, envelope: bool) -> Any:
        """JSON kept as text (an SQL ``context`` column) is scrubbed as the structure it is,
        then written back as text, so a key in it still names a secret. Text that nests too
        deeply for that (or for the parser) is scrubbed as text."""
        try:
            parsed = orjson.loads(value)
        except ValueError:
            return self.text(value)
        if _deeper_than(parsed, MAX_DEPTH - depth + 1):
            return self.text(value)
        walk = self._envelope if envelope else self._walk
        scrubbed = walk(parsed, key, secret, depth)
        return value if scrubbed == parsed else jsontext.dumps(scrubbed).decode("utf-8", "surrogatepass")

    def _too_deep(self, value: Any, secret: bool) -> str:
        """A subtree below :data:`MAX_DEPTH` levels (callers reject such reports before
        scrubbing; the scrubber must be bounded anyway) is kept as its scrubbed JSON text."""
        text = json_of(value)
        return self.placeholder("secret", text) if secret else self.text(text)

    def _continue_numbering(self, text: str) -> None:
        """Text scrubbed before keeps its placeholders; new ones must not reuse their numbers."""
        for match in PLACEHOLDER.finditer(text):
            if match.group(2):
                self._numbers[match.group(1)] = max(self._numbers[match.group(1)], int(match.group(2)))


def scrub_text(text: str) -> tuple[str, dict[str, int]]:
    redactor = Redactor()
    return redactor.text(text), redactor.counts


def scrub_json(value: Any, pseudonymise: Callable[[str], str] | None = None) -> tuple[Any, dict[str, int]]:
    """Every string inside ``value`` scrubbed (the ``scrub`` command's unit of work), accounts
    and identifiers that carry a secret pseudonymised by ``pseudonymise`` (a
    :class:`Pseudonymiser`) as ingest does. Without one, such an identifier becomes
    ``[REDACTED:identifier:N]``: only a key gives it a stable identity."""
    redactor = Redactor(pseudonymise)
    return redactor.value(value), redactor.counts
