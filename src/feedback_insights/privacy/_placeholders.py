"""Secret-shaped text that holds no secret: placeholders, references, masks, published examples
and digests. Every secret find, ours or gitleaks', passes :meth:`NoSecret.holds_none` before it
is redacted.

A rule's regex knows a token's shape, not whether someone filled it in. gitleaks answers that
per rule (entropy thresholds, allow-lists); our own rules had no such answer, so documentation
that says ``ghp_xxxx…``, ``SUMO_ACCESS_KEY=${…}`` or Firebase's published example keys lost its
evidence. The checks are methods, each about the value, never about one case:

- the regexes of gitleaks' **global allow-list** (``$VAR``, ``${VAR}``, ``{{ … }}``, ``%VAR%``,
  one letter repeated, ``true``/``false``/``null``, system paths), which gitleaks applies to every
  one of its rules, now apply to ours as well. Its stop-words do not: a stop-word drops any value
  that merely contains it, and the alphabet is one — 14 values the PII corpus labels secret
  (``sk-proj-abcdefghijklmnopqrstuvwxyz…``) contain it;
- **published examples**: a value that one of gitleaks' rules allow-lists *literally* (a regex
  without metacharacters: Firebase's documented keys) is public, whichever rule found it. Pattern
  allow-lists (``.+EXAMPLE$``) stay with the rule they were written for: they are anchored on
  that rule's secret group, which our spans do not share;
- **low entropy**: 16 characters or more whose Shannon entropy (per character) is below
  :data:`PLACEHOLDER_ENTROPY` bits — a run of one character with a prefix (``AKIAXXXX…``,
  ``glc_1111…``). The lowest secret of that length in gitleaks' true positives, the PII corpus
  and the planted samples has 2.6;
- **references**: a value that opens an interpolation (``${…``, ``$(…``, a backtick, ``{{``)
  or is wholly a variable's name (``$API_KEY``, ``{SumoAccessKey}``, ``<your key>``, ``%KEY%``);
- **masks**: three or more ``*``, ``#`` or ``•``, or six ``x``, inside the value or right after
  it, or a bracketed "redacted" — what a dashboard, documentation or a careful agent leaves of a
  key (``sha256~XXXXXXXXXX_PUT_YOUR_TOKEN_HERE…``, ``xoxp-5723…-####``);
- **names that hold no secret**: a generic "name = value" find (``secret_value``) whose name
  gitleaks' own generic rule allow-lists (``csrf-token``, ``key_id``, ``api_version``,
  ``public_token``): our generic rules read names as that rule does;
- **digests**: lower-case hex of a digest's length (MD5, SHA-1, SHA-256, SHA-512) that nothing
  names as a secret (``commit 9fceb02…``, ``logged 9fceb02…``), or that a digest's name names
  (``sha256:…``, ``md5=…``). A key in hex comes after an assignment or a secret's name
  (``sourcegraph: 6d2F…``, ``api_key = …``, ``Bearer …``, ``--token …``), and stays a secret.

All checks read the value and at most a few dozen characters around it: linear in the find.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from ._gitleaks import Allowlist

#: Below this many bits per character a value of :data:`_ENTROPY_MIN_LENGTH` or more is one
#: character repeated with a few others: a placeholder. The highest placeholder among gitleaks'
#: false positives has 1.6; the lowest secret of that length anywhere in the data, 2.6.
PLACEHOLDER_ENTROPY = 2.0
_ENTROPY_MIN_LENGTH = 16

_OPENS_REFERENCE = re.compile(r"\$\{|\$\(|`|\{\{")
#: A variable's name is in one case ("$API_KEY", "$db_pass"); "$ecretP4ss" is a password.
_IS_REFERENCE = re.compile(r"\$(?:[A-Z_][A-Z0-9_]*|[a-z_][a-z0-9_]*)|%[A-Za-z_]\w*%|\{[A-Za-z_][\w.]*\}|<[^<>\n]{1,64}>")
_MASK = re.compile(r"[*#\u2022]{3}|(?i:x{6}|[\[<(]redacted[\]>)])")
_DIGEST_LENGTHS = frozenset({32, 40, 64, 128})
_LOWER_HEX = re.compile(r"[0-9a-f]+")
#: What names a digest before its value: ``sha256:``, ``md5=``, ``"sha1": "``, ``digest ``.
_DIGEST_NAME = re.compile(
    r"(?i)\b(?:md5|sha-?(?:1|224|256|384|512)|blake2[bs]?|digest|checksum|hash|integrity|etag|commit|sha)"
    r"""["']?[ \t]*[=:]?[ \t]*["']?$"""
)
#: What names a value as a secret right before it: an assignment (gitleaks' operators "=", ":",
#: "=>", ",", "||"), or a secret's name or an auth scheme ("Bearer ", "--token ", "key is ").
_NAMED = re.compile(
    r"""(?i)(?:[=:>,]|\|\||\b(?:bearer|basic|token|key|secret|passw(?:or)?d|pwd|auth\w*|credentials?|apikey)"""
    r"""(?:[ \t]+(?:is|was))?)[ \t"'\x60=]{0,5}$"""  # then, as gitleaks allows, up to 5 blanks, quotes, "="
)
_BEFORE = 40
#: The name of a "name = value" right before the value (gitleaks' operators, or " is ").
_NAME_BEFORE = re.compile(r"""[\w.-]{1,40}["']?[ \t]*(?:[=:>,]|=>|:=|[ \t]is)[ \t]*["'\x60]?$""")


@dataclass(frozen=True)
class NoSecret:
    """The checks, with gitleaks' global allow-lists and its published example values."""

    #: gitleaks' global allow-lists; only their regexes are read.
    allowlists: tuple[Allowlist, ...]
    examples: frozenset[str]
    #: generic-api-key's allow-lists on the whole match (names).
    generic_names: tuple[Allowlist, ...]
    _examples: re.Pattern[str] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        alternation = "|".join(re.escape(e) for e in sorted(self.examples, key=len, reverse=True))
        object.__setattr__(self, "_examples", re.compile(alternation) if alternation else None)

    def holds_none(self, text: str, kind: str, start: int, end: int) -> bool:
        """Whether ``text[start:end]``, found by a secret rule as ``kind``, holds no secret."""
        value = text[start:end]
        encoded = value.encode("utf-8", "surrogatepass")
        if kind == "secret_value" and self._allowed_name(text, start, encoded):
            return True
        if any(a.regexes is not None and a.regexes.search(encoded) for a in self.allowlists):
            return True
        if self._examples is not None and self._examples.search(value):
            return True
        if len(value) >= _ENTROPY_MIN_LENGTH and _low_entropy(value):
            return True
        if _OPENS_REFERENCE.match(value) or _IS_REFERENCE.fullmatch(value):
            return True
        if _MASK.search(value) or _MASK.match(text, end, end + 3):
            return True
        return _is_digest(text, start, value)

    def _allowed_name(self, text: str, start: int, value: bytes) -> bool:
        """The name before a generic value, with the value, as gitleaks' generic rule's match."""
        named = _NAME_BEFORE.search(text, max(0, start - _BEFORE), start)
        if named is None:
            return False
        match = text[named.start() : start].encode("utf-8", "surrogatepass") + value
        return any(a.regexes is not None and a.regexes.search(match) for a in self.generic_names)


def _low_entropy(value: str) -> bool:
    """Shannon entropy per character below :data:`PLACEHOLDER_ENTROPY` (gitleaks divides by
    bytes, which would make a full-width ``ｓｋ＿ｌｉｖｅ＿…`` look like a placeholder). Below 2
    bits one character makes up more than a quarter of the value: most values stop there."""
    counts = Counter(value).values()
    total = len(value)
    if max(counts) * 4 <= total:
        return False
    return -sum(n / total * math.log2(n / total) for n in counts) < PLACEHOLDER_ENTROPY


def _is_digest(text: str, start: int, value: str) -> bool:
    if len(value) not in _DIGEST_LENGTHS or not _LOWER_HEX.fullmatch(value):
        return False
    before = text[max(0, start - _BEFORE) : start]
    return bool(_DIGEST_NAME.search(before)) or not _NAMED.search(before)
