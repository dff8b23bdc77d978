"""gitleaks' own hand-written cases, and evidence in varied prose: how secrets are measured.

Shared by ``benchmarks/scrub.py`` (the table, ours beside detect-secrets, scrubadub and trivial
baselines) and ``tests/test_secret_rules.py`` (the same cases as tests), so both read the cases,
the prose and the definition of an ambiguous case from one place.

- **True positives** (``shared/data/gitleaks_cases.jsonl``, ``kind = tp`` with a ``secret``):
  written by gitleaks' authors next to each rule, not drawn from the regexes we run. A case is
  *removed* when its secret no longer occurs anywhere in the redacted text: bare, and in each of
  :data:`PROSE` (eleven sentences whose marks end the token: ``)``, ``,``, ``.``, ``]``, ``}``,
  ``>``, ``!``, ``?``, ``:``, quotes).
- **False positives** (``kind = fp``, non-empty): *kept* when the tool flags nothing at all in the
  text, so it is stored as written. A case is **ambiguous** (:func:`ambiguity`), and reported
  apart, when its text still holds something a scrubber must redact or that two sources label
  differently:

  1. *another rule's secret*: one of gitleaks' other default rules reports a secret in it (run
     here with gitleaks' own regexes, keywords, entropy and allow-lists; cloudflare's rules use
     each other's true positives as false positives), or it contains the secret of another
     rule's true positive;
  2. *false only for its path*: gitleaks allows it only in some files (feedback has no path);
  3. *personal data*: it holds an email address, which a scrubber of personal data redacts;
  4. *labelled a secret elsewhere*: it contains a value that ``pii_cases.jsonl`` labels as a
     secret (AWS's documented ``AKIAIOSFODNN7EXAMPLE``: noren and detect-secrets say secret,
     gitleaks says example).

- **Evidence in varied prose** (:func:`negatives`): SHAs, short SHAs, digests (``sha256:…``),
  image references, integrity strings, UUIDs, request ids, base64 payloads that decode to no
  secret, versions and URLs without credentials, each in :data:`NEGATIVE_PROSE` next to the name
  of every vendor gitleaks has rules for ("Calling sourcegraph failed with 9fceb02…"). Nothing
  may be flagged.
"""

from __future__ import annotations

import base64
import functools
import json
import random
import re
import string
import tomllib
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from feedback_insights.privacy import Rule, gitleaks_rules
from feedback_insights.privacy._gitleaks import family_of, packaged_rules_text

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CASES_PATH = SHARED / "gitleaks_cases.jsonl"
PII_PATH = SHARED / "pii_cases.jsonl"

#: A case's text in a sentence, each sentence ending the token with another mark.
PROSE = (
    "It failed ({}) twice.", "Tried {}, then gave up.", "The key was {}.", "See [{}] for it.", "Got {{{}}} back.",
    "Sent <{}> as told.", "It was {}!", "Was it {}?", "Key {}: refused.", 'Used "{}" as told.', "Used '{}' as told.",
)

Spans = Callable[[str], Iterable[tuple[int, int]]]


@dataclass(frozen=True)
class Case:
    id: str
    rule: str
    family: str
    kind: str
    text: str
    secret: str | None
    #: Why a false positive is ambiguous (None: unambiguous; always None for true positives).
    ambiguous: str | None = None

    @property
    def half(self) -> str:
        """A or B, fixed by the id (CRC-32): two halves to check that a method chosen looking at
        one also holds on the other."""
        return "AB"[zlib.crc32(self.id.encode()) % 2]


# -- the cases ---------------------------------------------------------------------------------


@functools.cache
def cases() -> tuple[Case, ...]:
    """Every case with a secret (true positives) and every non-empty false positive, each false
    positive with its :func:`ambiguity`."""
    raw = [json.loads(line) for line in CASES_PATH.read_text(encoding="utf-8").splitlines()]
    for c in raw:
        c["rule"] = c["rule"] or "testdata"  # gitleaks' test files: no rule may fire on them
    tps = [c for c in raw if c["kind"] == "tp" and c.get("secret")]
    out = [Case(c["id"], c["rule"], family_of(c["rule"]), "tp", c["text"], c["secret"]) for c in tps]
    pii_secrets = _pii_secrets()
    for c in raw:
        if c["kind"] == "fp" and c["text"].strip():
            case = Case(c["id"], c["rule"], family_of(c["rule"]), "fp", c["text"], None)
            out.append(replace(case, ambiguous=ambiguity(c, tps, pii_secrets)))
    return tuple(out)


def true_positives() -> list[Case]:
    return [c for c in cases() if c.kind == "tp"]


def false_positives(*, ambiguous: bool | None = None) -> list[Case]:
    """Non-empty false positives: all (None), the unambiguous (False) or the ambiguous (True)."""
    return [c for c in cases() if c.kind == "fp" and (ambiguous is None or (c.ambiguous is not None) == ambiguous)]


_EMAIL = re.compile(r"[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}")


def ambiguity(case: dict[str, object], tps: list[dict[str, object]], pii_secrets: frozenset[str]) -> str | None:
    """Why a false positive is not a clean test of "kept as written" (see the module), or None."""
    text, rule = str(case["text"]), str(case["rule"])
    if _other_rules_fire(text, rule) or any(t["rule"] != rule and str(t["secret"]) in text for t in tps):
        return "another rule's secret"
    if case.get("fp_only_because_of_path"):
        return "false only for its path"
    if _EMAIL.search(text):
        return "personal data (an email)"
    if any(value in text for value in pii_secrets):
        return "labelled a secret in pii_cases"
    return None


@functools.cache
def _pii_secrets() -> frozenset[str]:
    values = set()
    for line in PII_PATH.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for entity in row["entities"]:
            kind = str(entity["type"])
            if kind.startswith("sec_") or "secret" in kind or kind in ("aws_access_key", "basic_auth"):
                values.add(str(entity["value"]))
    return frozenset(values)


@functools.cache
def _original_rules() -> tuple[Rule, ...]:
    """gitleaks' rules with gitleaks' own regexes (the scrubber runs them with token ends widened
    to prose punctuation): what gitleaks itself reports."""
    raw = {r["id"]: r["regex"] for r in tomllib.loads(packaged_rules_text())["rules"] if "regex" in r}
    return tuple(replace(rule, pattern=raw[rule.id]) for rule in gitleaks_rules().rules)


def _other_rules_fire(text: str, own: str) -> bool:
    data, lowered = text.encode(), text.lower()
    allowlists = gitleaks_rules().allowlists
    for rule in _original_rules():
        if rule.id == own or rule.keywords and not any(k in lowered for k in rule.keywords):
            continue
        if next(iter(rule.finds(data, allowlists)), None) is not None:
            return True
    return False


# -- scoring any tool --------------------------------------------------------------------------


def redacted(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with every span replaced (overlapping spans merged), as a redactor would."""
    out, last = [], 0
    for start, end in sorted(spans):
        if end <= last:
            continue
        start = max(start, last)
        out.append(text[last:start] + "█")
        last = end
    return "".join(out) + text[last:]


def removed(spans: Spans, case: Case) -> tuple[bool, list[str]]:
    """(the secret is gone from the bare text, the sentences of :data:`PROSE` it survives in)."""
    assert case.secret is not None
    bare = case.secret not in redacted(case.text, spans(case.text))
    survives = []
    for template in PROSE:
        text = template.format(case.text.strip())
        if case.secret in redacted(text, spans(text)):
            survives.append(template)
    return bare, survives


def kept(spans: Spans, text: str) -> bool:
    return next(iter(spans(text)), None) is None


# -- evidence in varied prose ------------------------------------------------------------------


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _short_sha(rng: random.Random, n: int) -> str:
    """A short SHA with a hex letter in it: one of ten digits alone is a North American phone
    number's shape, which the scrubber redacts on purpose (a phone left in is a leak)."""
    while (sha := _hex(rng, n)).isdigit():
        pass
    return sha


def _b62(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


#: Evidence an agent pastes, by kind; each value is fresh, none is a secret.
NEGATIVE_KINDS: dict[str, Callable[[random.Random], str]] = {
    "sha1": lambda r: _hex(r, 40),
    "short_sha": lambda r: _short_sha(r, r.choice([7, 8, 10, 12])),
    "sha256": lambda r: _hex(r, 64),
    "digest": lambda r: r.choice([f"sha256:{_hex(r, 64)}", f"sha1:{_hex(r, 40)}", f"md5:{_hex(r, 32)}", f"sha512={_hex(r, 128)}"]),
    "image_reference": lambda r: f"ghcr.io/acme/api@sha256:{_hex(r, 64)}",
    "integrity": lambda r: "sha512-" + _b64(r.randbytes(64)),
    "uuid": _uuid,
    "uuid_upper_case": lambda r: _uuid(r).upper(),
    "request_id": lambda r: r.choice([f"req_{_b62(r, 14)}", f"req-{_hex(r, 16)}", f"X-Request-Id: {_uuid(r)}",
                                      f"trace {_hex(r, 32)}", f"evt_{_b62(r, 24)}", f"ch_{_b62(r, 24)}"]),
    "base64_json": lambda r: _b64(json.dumps({"event": r.choice(["push", "deploy", "export"]), "count": r.randint(1, 999),
                                              "page": r.randint(1, 9), "ok": r.random() < 0.5}).encode()),
    "base64_text": lambda r: _b64(r.choice(["the export failed after 30 seconds", "retry later, the queue is full",
                                            "status=degraded region=eu-west-1", "hello from the agent"]).encode()),
    "version": lambda r: r.choice([f"v{r.randint(0, 9)}.{r.randint(0, 30)}.{r.randint(0, 99)}",
                                   f"{r.randint(0, 9)}.{r.randint(0, 30)}.{r.randint(0, 99)}-rc.{r.randint(1, 9)}+build.{r.randint(1, 999)}",
                                   f"sdk-python/{r.randint(1, 4)}.{r.randint(0, 20)}.{r.randint(0, 9)}"]),
    "url": lambda r: r.choice([f"https://api.example.com/v1/charges?limit={r.randint(1, 100)}&starting_after=ch_{_b62(r, 14)}",
                               f"https://github.com/acme/api/pull/{r.randint(1, 9999)}",
                               f"https://status.example.com/incidents/{_hex(r, 12)}",
                               f"https://example.com/docs/{r.choice(['auth', 'tokens', 'keys'])}#rotate",
                               f"https://console.example.com/projects/{r.randint(1000, 99999)}/logs?since=2026-10-01T00:00:00Z"]),
}
#: Sentences with a vendor's name near the evidence (none names the value as a secret).
NEGATIVE_PROSE = (
    "Calling {vendor} failed with {value} (retried twice).",
    "{vendor} support asked for {value}, so I sent it.",
    "In the {vendor} dashboard the deploy shows {value}; nothing else changed.",
    "The {vendor} SDK logged `{value}` right before the 502.",
    "After upgrading the {vendor} client the reference was {value}.",
    "I opened {value} in {vendor} and the page was blank!",
)


def vendors() -> list[str]:
    """A name for every family of gitleaks' rules ("new relic", "sourcegraph", "github")."""
    return sorted(family.replace("_", " ") for family in gitleaks_rules().families)


@functools.cache
def negatives() -> tuple[tuple[str, str], ...]:
    """(kind, text): every kind in every sentence next to every vendor, values fresh per text."""
    out = []
    for kind, make in NEGATIVE_KINDS.items():
        rng = random.Random(kind)
        for vendor in vendors():
            out += [(kind, template.format(vendor=vendor, value=make(rng))) for template in NEGATIVE_PROSE]
    return tuple(out)
