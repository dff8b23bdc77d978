"""Find secrets and personal data in feedback text and replace them with typed placeholders.

Agents paste whatever they were holding: bearer tokens, API keys, connection strings, a user's
email. None of it may reach the warehouse, an embedding, a prompt or an issue. At the same time
the evidence must survive: UUID trace ids, ``req_…`` request ids, ``fb_…`` record ids, commit
SHAs, timestamps, paths, status codes, versions and counts are what make a report actionable.

The rules are :mod:`._rules`. One automaton over all their hints tells, in a single linear pass,
which rules can match a text, so clean text skips every rule. Overlapping finds are resolved
earliest and longest first. A :class:`Redactor` scrubs one record: the same value gets the same
placeholder (``[REDACTED:email:1]``) everywhere in the record, values under keys that name a
secret are replaced whole, and the counts by type are kept for the digest. Scrubbing is
idempotent: placeholders match no rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import re2

from ._rules import DETECTORS, EVIDENCE, PLACEHOLDER, PLAIN_TOKEN, Finding, is_account_key, is_secret_key


def _hint_set() -> re2.Set:
    """One RE2 automaton over every rule's hint: a single linear pass over a text says which
    rules can match it, so a clean text costs one scan instead of one regex per rule."""
    hints = re2.Set.SearchSet()
    for index, detector in enumerate(DETECTORS):
        if hints.Add(detector.hint) != index:
            raise AssertionError(f"hint of {detector.kind} is not valid RE2")
    hints.Compile()
    return hints


_HINTS = _hint_set()

def find(text: str, *, prefilter: bool = True) -> list[Finding]:
    """Every secret and personal datum in ``text``, without overlaps, in order.

    The prefilter only skips rules whose hint proves they cannot match; the tests turn it off
    to check that it never changes a result."""
    if len(text) < 6:
        return []
    if len(text) < 20 and PLAIN_TOKEN.fullmatch(text) or len(text) < 40 and EVIDENCE.fullmatch(text):
        return []
    hits = _HINTS.Match(text) if prefilter else range(len(DETECTORS))
    if not hits:
        return []
    found: list[Finding] = []
    for index in sorted(hits):
        DETECTORS[index].find(text, found)
    if not found:
        return []
    found.sort(key=lambda f: (f.start, f.start - f.end))
    kept: list[Finding] = []
    for finding in found:
        if kept and finding.start < kept[-1].end:
            continue
        kept.append(finding)
    return kept


@dataclass
class Redactor:
    """Scrubs the strings of one record. ``pseudonymise`` turns an account id into its
    pseudonym (values under :data:`ACCOUNT_KEYS` keep identity, not content)."""

    pseudonymise: Callable[[str], str] | None = None
    #: Whether an account id was replaced by its pseudonym.
    pseudonymised: bool = False
    _placeholders: dict[tuple[str, str], str] = field(default_factory=dict)
    _numbers: Counter[str] = field(default_factory=Counter)
    _done: dict[str, str] = field(default_factory=dict)

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
        """Distinct values redacted in this record, by type (earlier placeholders included)."""
        return {kind: n for kind, n in sorted(self._numbers.items()) if n}

    def text(self, text: str) -> str:
        # A record repeats its texts (the canonical fields are copies of the original's):
        # scan each distinct string once.
        done = self._done.get(text)
        if done is not None:
            return done
        scrubbed = self._scrub(text)
        self._done[text] = scrubbed
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
        under a key that names a secret is redacted whole."""
        secret = secret or (key is not None and is_secret_key(key))
        kind = type(value)
        if kind is str:
            if secret and value and not PLACEHOLDER.fullmatch(value):
                return self.placeholder("secret", value)
            if key is not None and value and self.pseudonymise is not None and is_account_key(key):
                self.pseudonymised = True
                return self.pseudonymise(value)
            if value[:1] in "{[" and value[-1:] in "}]":
                return self._json_text(value, key, secret)
            return self.text(value)
        if kind is dict:
            # Keys are text too ({"jane@example.com": …}); only the values under them can be secret.
            return {self.text(k): self.value(v, k, secret) for k, v in value.items()}
        if kind is list:
            return [self.value(v, key, secret) for v in value]
        if kind is int or kind is float:
            return self._number(value, secret)
        return value

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

    def _json_text(self, value: str, key: str | None, secret: bool) -> Any:
        """JSON kept as text (an SQL ``context`` column) is scrubbed as the structure it is,
        then written back as text, so a key in it still names a secret."""
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return self.text(value)
        scrubbed = self.value(parsed, key, secret)
        return value if scrubbed == parsed else orjson.dumps(scrubbed).decode()

    def _continue_numbering(self, text: str) -> None:
        """Text scrubbed before keeps its placeholders; new ones must not reuse their numbers."""
        for match in PLACEHOLDER.finditer(text):
            if match.group(2):
                self._numbers[match.group(1)] = max(self._numbers[match.group(1)], int(match.group(2)))


def scrub_text(text: str) -> tuple[str, dict[str, int]]:
    redactor = Redactor()
    return redactor.text(text), redactor.counts


def scrub_json(value: Any) -> tuple[Any, dict[str, int]]:
    """Every string inside ``value`` scrubbed (the ``scrub`` command's unit of work)."""
    redactor = Redactor()
    return redactor.value(value), redactor.counts
