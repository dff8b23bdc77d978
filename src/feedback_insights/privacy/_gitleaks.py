"""gitleaks' default rule set, applied to feedback text the way gitleaks applies it to a file.

gitleaks (MIT, ``gitleaks/``: the TOML as published, its licence and provenance) is the most
trusted public catalogue of secret formats: 222 rules, each a Go RE2 regex with keywords, an
optional secret group, an entropy threshold and allow-lists. We compile the regexes with RE2 as
well (same syntax, same linear-time guarantee) and keep gitleaks' semantics:

- a rule runs only when one of its keywords occurs in the text (case-insensitively); the
  engine's one-pass prefilter holds every rule's :attr:`Rule.hint`, which is its keywords — or,
  where a keyword is a common English substring ("ey", "s.", "sk", "api"), a pattern every
  match of the rule also contains, so prose does not wake the rule up;
- the secret is the rule's ``secretGroup``, else its first non-empty group, else the match;
- a find whose secret's Shannon entropy is not above the rule's ``entropy`` is dropped;
- so is one that the global allow-list or one of the rule's allow-lists allows: any of its
  ``regexes`` on the secret, the match or the line (``regexTarget``), a ``stopwords`` entry
  contained in the secret, all of them with ``condition = "AND"``. Feedback has no file path,
  so a ``paths`` condition never allows, and a rule's ``path`` scope is not required. The
  "line" an allow-list reads is the find's line, at most :data:`LINE_CONTEXT` bytes either side.

One change to the regexes themselves: gitleaks ends most tokens at a quote, a blank or ";", as
in code; feedback is prose, where ")", ",", "." and the like end them too (:data:`PROSE_ENDS`).

What RE2 cannot compile, or what is a path and no regex, is left out with the reason
(:attr:`RuleSet.left_out`; ``scripts/refresh_gitleaks.py`` prints them). Offsets are bytes of
the UTF-8 text, as in Go; the engine maps them back to characters.
"""

from __future__ import annotations

import functools
import math
import re
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import re2

#: The packaged copy (refreshed by ``scripts/refresh_gitleaks.py``).
RULES_RESOURCE = "gitleaks/gitleaks.toml"

# -- where a token ends ------------------------------------------------------------------------

#: What ends a token in a sentence: a closing bracket at once; ".", ",", ":", "!" and "?" when a
#: blank, a quote, a closing bracket or the end of the text follows ("….ico-<32>.png" goes on).
_CLOSERS = r")\]}>"
_MARKS = r"[.,:!?]+"
_QUOTE_BLANK = r"""[\x60'"\s;"""
#: How gitleaks' rules end (and in one rule start) a token, written for code: "(EAAM…)"
#: leaked. Each is replaced by the same with prose punctuation in the regex the scrubber runs.
PROSE_ENDS = {
    # 151 rules: a backtick, a quote, a blank, ";", an escaped newline or the end of the text.
    rf"""(?:{_QUOTE_BLANK}]|\\[nr]|$)""": rf"""(?:{_QUOTE_BLANK}{_CLOSERS}]|{_MARKS}(?:{_QUOTE_BLANK}{_CLOSERS}]|\\[nr]|$)|\\[nr]|$)""",
    # perplexity-api-key: the same, or a word boundary.
    rf"""(?:{_QUOTE_BLANK}]|\\[nr]|$|\b)""": (
        rf"""(?:{_QUOTE_BLANK}{_CLOSERS}]|{_MARKS}(?:{_QUOTE_BLANK}{_CLOSERS}]|\\[nr]|$)|\\[nr]|$|\b)"""
    ),
    # azure-ad-client-secret, where the token ends and where it starts ("[", "{" and "<" too).
    r"""(?:$|[\\'"\x60\s<),])""": rf"""(?:$|[\\'"\x60\s<,{_CLOSERS}]|{_MARKS}(?:$|[\\'"\x60\s<{_CLOSERS}]))""",
    r"""(?:^|[\\'"\x60\s>=:(,)])""": r"""(?:^|[\\'"\x60\s>=:(,)\[{<])""",
    # curl-auth-user: a blank or the end; now a quote or prose punctuation too.
    r"""(?:\s|\z)""": rf"""(?:\s|\z|[\x60'"{_CLOSERS}]|{_MARKS}(?:\s|\z|[\x60'"{_CLOSERS}]))""",
}


def prose_ended(pattern: str) -> str:
    """``pattern`` with each token end of :data:`PROSE_ENDS` widened to prose punctuation."""
    for end, prose in PROSE_ENDS.items():
        pattern = pattern.replace(end, prose)
    return pattern


# -- families and placeholder kinds ------------------------------------------------------------

#: A rule's family is its vendor: the id up to the first "-", unless the id starts with one of
#: these (vendors whose name has a "-" or a digit; placeholder kinds are ``[a-z_]+``).
_FAMILY_PREFIXES = {
    "1password": "onepassword",
    "new-relic": "new_relic",
    "defined-networking": "defined_networking",
    "intra42": "intra",
    "microsoft-teams": "microsoft_teams",
    "private-key": "private_key",
    "cisco-meraki": "meraki",
    "hashicorp-tf": "terraform",
}
#: Families that are formats we already named: a find keeps the kind records already count.
_KIND_ALIASES = {
    "anthropic": "anthropic_key",
    "aws": "aws_access_key",
    "curl": "auth_header",
    "gcp": "google_api_key",
    "generic": "secret_value",
    "github": "github_token",
    "huggingface": "huggingface_token",
    "npm": "npm_token",
    "openai": "openai_key",
    "sendgrid": "sendgrid_key",
    "slack": "slack_token",
    "stripe": "stripe_key",
}
_KIND = re.compile(r"[a-z_]+")


def family_of(rule_id: str) -> str:
    """The vendor a rule is about ("gitlab-pat" → "gitlab"): how the benchmark groups rules."""
    for prefix, family in _FAMILY_PREFIXES.items():
        if rule_id == prefix or rule_id.startswith(prefix + "-"):
            return family
    return rule_id.split("-", 1)[0].replace(".", "_")


def kind_of(family: str) -> str:
    """The placeholder kind of a find (``[REDACTED:gitlab:1]``): the family, or the kind we
    already used for that vendor (``github_token``), so counts stay one type per vendor."""
    return _KIND_ALIASES.get(family, family)


# -- prefilter hints ---------------------------------------------------------------------------

#: Hints for rules whose keywords are common in prose. Each is a pattern that every match of the
#: rule's regex contains (the tests check it on samples of every rule, the refresh script too).
_SHARPER_HINTS = {
    "jwt": r"ey[a-zA-Z0-9]{17,}\.ey",
    "vault-service-token": r"hvs\.[\w-]{90}|s\.[A-Za-z0-9]{24}",
    "twilio-api-key": r"SK[0-9a-fA-F]{32}",
    "aws-access-token": r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}",
    "kubernetes-secret-yaml": r"(?i)kind:[ \t]*[\"']?secret",
    "octopus-deploy-api-key": r"API-[A-Z0-9]{26}",
    "facebook-access-token": r"\d{15}[|%]",
    "curl-auth-header": r"(?s)curl.*[ \t\n\r](?:-H|--header)",
    "curl-auth-user": r"(?s)curl.*[ \t\n\r](?:-u|--user)",
    "sendgrid-api-token": r"SG\.",
    "harness-api-key": r"(?:pat|sat)\.[a-zA-Z0-9_-]{22}\.",
    "authress-service-client-access-key": r"(?:sc|ext|scauth|authress)_(?i:[a-z0-9]{5,30})\.",
    # "jira" is in every other bug report: its names and an assignment, or its token's prefix.
    "atlassian-api-token": (
        r"(?i)(?:(?-i:ATLASSIAN|[Aa]tlassian)|(?-i:CONFLUENCE|[Cc]onfluence)|(?-i:JIRA|[Jj]ira))"
        r"""(?:[ \t\w.-]{0,20})[\s'"]{0,3}(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)|ATATT3"""
    ),
}
#: gitleaks' "semi-generic" rules are ``[\w.-]{0,50}?`` + names + this assignment + a value.
_ASSIGNMENT = r"""(?:[ \t\w.-]{0,20})[\s'"]{0,3}"""
_OPERATOR = r"""(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)"""
_LAZY_PREFIX = r"[\w.-]{0,50}?"


def _assignment_hint(regex: str) -> str | None:
    """For a semi-generic rule, its regex up to the assignment operator without the leading
    ``[\\w.-]{0,50}?``: "adafruit" + up to 20 word characters + "=". Every match contains
    one (a leading optional part and everything after a top-level cut only widen it), and prose
    that merely mentions the vendor does not."""
    at = regex.find(_OPERATOR)
    if at < 0 or _ASSIGNMENT not in regex[:at] or _top_level_alternation(regex):
        return None
    head, body = "", regex[: at + len(_OPERATOR)]
    if body.startswith("(?i)"):
        head, body = "(?i)", body[4:]
    while body.startswith(_LAZY_PREFIX):
        body = body[len(_LAZY_PREFIX) :]
    if body.startswith("(?i:" + _LAZY_PREFIX):
        body = "(?i:" + body[len("(?i:" + _LAZY_PREFIX) :]
    # A cut inside a group leaves it unclosed: then there is no such hint.
    return head + body if _balanced(body) else None


def _balanced(pattern: str) -> bool:
    """Whether every group of ``pattern`` is closed (escapes and classes skipped)."""
    depths = _depths(pattern)
    return depths is not None and depths[-1] == 0


def _top_level_alternation(pattern: str) -> bool:
    """Whether ``pattern`` is ``A|B`` at its top level (then a prefix of A is no hint for B)."""
    depths = _depths(pattern)
    return depths is None or any(c == "|" and d == 0 for c, d in zip(pattern, depths, strict=False))


def _depths(pattern: str) -> list[int] | None:
    """The group depth at each character of ``pattern`` (-1 inside an escape or a class, so
    their "|" and parentheses do not count), then the final depth; None if a group closes
    that never opened or a class never closes."""
    depths: list[int] = []
    depth, at, in_class = 0, 0, False
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            depths += [-1, -1]
            at += 2
            continue
        if in_class:
            depths.append(-1)
            in_class = char != "]"
        elif char == "[":
            depths.append(-1)
            in_class = True
            if pattern.startswith("[:", at + 1) or pattern.startswith("]", at + 1):
                depths.append(-1)
                at += 1  # "[]…]" and "[[:alnum:]]" open with a literal
        else:
            depth += char == "("
            depth -= char == ")"
            if depth < 0:
                return None
            depths.append(depth)
        at += 1
    return None if in_class else depths[: len(pattern)] + [depth]


def _keyword_hint(keywords: tuple[str, ...]) -> str:
    return "(?i)(?:" + "|".join(re2.escape(k) for k in keywords) + ")"


def hint_of(rule_id: str, regex: str, keywords: tuple[str, ...]) -> str:
    """The rule's prefilter pattern: its keywords, or a sharper pattern where they are common
    words. (Semi-generic rules also need :func:`assignment_gate`.)"""
    if rule_id in _SHARPER_HINTS:
        return _SHARPER_HINTS[rule_id]
    return _keyword_hint(keywords) if keywords else ""


def assignment_names(regex: str) -> str | None:
    """The names part of a semi-generic rule ("(?i:(?:adafruit))"), as a group with its own
    case flags, or None for any other rule."""
    hint = _assignment_hint(regex)
    if hint is None:
        return None
    names = hint[: hint.index(_ASSIGNMENT)]
    if names.startswith("(?i)"):
        names = "(?i:" + names[4:] + ")"
    elif names.startswith("(?i:"):
        names += ")"
    else:
        names = "(?:" + names + ")"
    return names if _balanced(names) else None


def assignment_gate(rules: tuple[Rule, ...]) -> str | None:
    """One pattern for all semi-generic rules: any of their names, up to 20 word characters and
    an assignment ("adafruit_key ="). Each such rule also needs its own keyword; one shared
    pattern keeps the prefilter's automaton small (a hundred copies of the assignment part
    would multiply its states), and prose that mentions "the API, which…" rarely passes."""
    names = [r.names for r in rules if r.names is not None]
    return "(?:" + "|".join(names) + ")" + _ASSIGNMENT + _OPERATOR if names else None


# -- allow-lists -------------------------------------------------------------------------------


def _alternation(patterns: list[str]) -> Any | None:
    """One RE2 pattern that matches where any of ``patterns`` does (each in its own group, so
    inline flags stay scoped); None for an empty list."""
    if not patterns:
        return None
    return re2.compile("|".join(f"(?:{p})" for p in patterns))


@dataclass(frozen=True, slots=True)
class Allowlist:
    """One gitleaks allow-list. ``paths`` only records that it names paths: feedback has none,
    so that condition is never met (and an "AND" list with paths never allows)."""

    target: Literal["secret", "match", "line"]
    all_of: bool
    regexes: Any | None
    stopwords: Any | None
    paths: bool

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Allowlist:
        target = raw.get("regexTarget", "secret")
        if target not in ("secret", "match", "line"):
            raise ValueError(f"unknown regexTarget {target!r}")
        words = [re2.escape(w.lower()) for w in raw.get("stopwords", [])]
        return cls(
            target,
            str(raw.get("condition", "OR")).upper() == "AND",
            _alternation(list(raw.get("regexes", []))),
            _alternation(words),
            bool(raw.get("paths") or raw.get("commits")),
        )

    def allows(self, secret: bytes, match: bytes, line: bytes) -> bool:
        checks: list[bool] = []
        if self.paths:
            checks.append(False)
        if self.regexes is not None:
            target = secret if self.target == "secret" else match if self.target == "match" else line
            checks.append(self.regexes.search(target) is not None)
        if self.stopwords is not None:
            checks.append(self.stopwords.search(secret.lower()) is not None)
        if not checks:
            return False
        return all(checks) if self.all_of else any(checks)


def shannon_entropy(data: bytes) -> float:
    """gitleaks' ``shannonEntropy``: over the characters, divided by the length in bytes."""
    if not data:
        return 0.0
    counts = Counter(data.decode("utf-8", errors="replace"))
    total = len(data)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


# -- rules -------------------------------------------------------------------------------------


@functools.cache
def compiled(pattern: str) -> Any:
    """A rule's RE2 regex, compiled the first time a text needs it: a process (each ingest
    worker) pays only for the rules its texts wake up. The packaged rules all compile: the
    refresh script and the tests compile every one (``parse_rules(…, compile_all=True)``)."""
    return re2.compile(pattern)


@functools.cache
def compiled_without_groups(pattern: str) -> Any:
    """The same regex with every group non-capturing: RE2 then finds matches with its DFA
    alone, where groups need its slower NFA. Most texts a rule runs on hold no match; the
    groups are read only on the few that do."""
    options = re2.Options()
    options.never_capture = True
    return re2.compile(pattern, options)


@dataclass(frozen=True, slots=True)
class Rule:
    """One gitleaks rule. ``whole_match``: the regex's groups only mark parts of the token
    (jwt-base64 names each JWT header it knows), so the whole match is redacted while the
    entropy is computed on gitleaks' secret."""

    id: str
    description: str
    family: str
    kind: str
    keywords: tuple[str, ...]
    hint: str
    #: For a semi-generic rule, its names part (see :func:`assignment_gate`).
    names: str | None
    pattern: str
    secret_group: int
    whole_match: bool
    entropy: float
    allowlists: tuple[Allowlist, ...]

    @property
    def regex(self) -> Any:
        return compiled(self.pattern)

    def _secret_span(self, match: Any, groups: int) -> tuple[int, int] | None:
        if self.secret_group:
            span = match.span(self.secret_group)
            return span if span[0] >= 0 else None
        for group in range(1, groups + 1):
            start, end = match.span(group)
            if end > start >= 0:
                return start, end
        return match.span()

    def finds(self, data: bytes, global_allowlists: tuple[Allowlist, ...]) -> Iterator[tuple[int, int]]:
        """(start, end) in bytes of every secret gitleaks would report in ``data``."""
        regex = self.regex
        groups = regex.groups
        for found in compiled_without_groups(self.pattern).finditer(data):
            # The same leftmost-first match, now with its groups (anchored where it starts).
            match = regex.match(data, found.start()) if groups else found
            if match is None or match.span() != found.span():  # never, but never guess
                match = regex.search(data, found.start())
                if match is None:
                    continue
            span = self._secret_span(match, groups)
            if span is None or span[1] <= span[0]:
                continue
            secret = data[span[0] : span[1]]
            if self.entropy and shannon_entropy(secret) <= self.entropy:
                continue
            whole = match.group(0)
            start, end = match.span()
            line = data[_line_start(data, start) : _line_end(data, end)]
            if any(a.allows(secret, whole, line) for a in global_allowlists):
                continue
            if any(a.allows(secret, whole, line) for a in self.allowlists):
                continue
            yield (start, end) if self.whole_match else span


#: How much of a find's line an allow-list sees on either side of it. gitleaks reads lines of
#: source files; a megabyte on one line, read whole for each of its thousands of finds, took
#: minutes. The line-target allow-lists (generic-api-key's) look at a few dozen characters.
LINE_CONTEXT = 4096


def _line_start(data: bytes, start: int) -> int:
    floor = max(0, start - LINE_CONTEXT)
    return max(floor, data.rfind(b"\n", floor, start) + 1)


def _line_end(data: bytes, end: int) -> int:
    ceiling = end + LINE_CONTEXT
    at = data.find(b"\n", end, ceiling)
    return min(len(data), ceiling) if at < 0 else at


#: Rule keys we apply; a rule with any other key (a newer gitleaks feature) is left out.
_KNOWN_KEYS = frozenset({"id", "description", "regex", "secretGroup", "entropy", "keywords", "allowlists", "path", "tags"})


@dataclass(frozen=True)
class RuleSet:
    """The compiled rules, the global allow-lists, and what was left out or changed, by rule."""

    rules: tuple[Rule, ...]
    allowlists: tuple[Allowlist, ...]
    #: (rule id, why it is not applied).
    left_out: tuple[tuple[str, str], ...]
    #: (rule id, how it is applied differently from gitleaks on a file).
    notes: tuple[tuple[str, str], ...]
    total: int
    #: Values some rule's allow-list names literally (Firebase's published keys): public
    #: whichever rule finds them (:mod:`._placeholders`).
    examples: frozenset[str] = frozenset()
    #: generic-api-key's allow-lists on the whole match: names that hold no secret
    #: ("csrf-token", "key_id", "api_version"), for every generic "name = value" find.
    generic_names: tuple[Allowlist, ...] = ()

    @property
    def gate(self) -> str | None:
        return assignment_gate(self.rules)

    @property
    def families(self) -> dict[str, list[Rule]]:
        grouped: dict[str, list[Rule]] = {}
        for rule in self.rules:
            grouped.setdefault(rule.family, []).append(rule)
        return grouped


def _compile_rule(raw: dict[str, Any], compile_all: bool) -> Rule:
    """Raises ValueError with the reason when the rule cannot be applied."""
    rule_id = str(raw["id"])
    unknown = set(raw) - _KNOWN_KEYS
    if unknown:
        raise ValueError(f"uses {', '.join(sorted(unknown))}, which this engine does not implement")
    if "regex" not in raw:
        raise ValueError("a path rule without a regex: it finds files by name, and feedback has no file")
    pattern = prose_ended(str(raw["regex"]))
    group = int(raw.get("secretGroup", 0))
    if compile_all:
        try:
            regex = compiled(pattern)
        except re2.error as exc:
            raise ValueError(f"RE2 cannot compile its regex: {exc}") from None
        if group > regex.groups:
            raise ValueError(f"secretGroup {group} but the regex has {regex.groups} groups")
    family = family_of(rule_id)
    kind = kind_of(family)
    if not _KIND.fullmatch(kind):
        raise ValueError(f"its family {family!r} is no placeholder kind ([a-z_]+): add it to _FAMILY_PREFIXES")
    keywords = tuple(str(k).lower() for k in raw.get("keywords", []))
    return Rule(
        id=rule_id,
        description=str(raw.get("description", "")),
        family=family,
        kind=kind,
        keywords=keywords,
        hint=hint_of(rule_id, pattern, keywords),
        names=None if rule_id in _SHARPER_HINTS else assignment_names(pattern),
        pattern=pattern,
        secret_group=group,
        # Only named groups (and no secretGroup): they mark the token's parts, not a secret.
        whole_match=not group and "(?P<" in pattern and not _UNNAMED_GROUP.search(pattern),
        entropy=float(raw.get("entropy", 0.0)),
        allowlists=tuple(Allowlist.parse(a) for a in raw.get("allowlists", [])),
    )


#: An unnamed capturing group: "(" not escaped and not followed by "?".
_UNNAMED_GROUP = re.compile(r"(?<!\\)\((?!\?)")


def parse_rules(text: str, *, compile_all: bool = True) -> RuleSet:
    """The rule set of a gitleaks TOML configuration. ``compile_all``: compile every regex now
    and leave out, with the reason, what RE2 cannot compile (the refresh script, the tests);
    otherwise each compiles when first needed."""
    config = tomllib.loads(text)
    global_lists = [config["allowlist"]] if "allowlist" in config else []
    global_lists += config.get("allowlists", [])
    rules: list[Rule] = []
    left_out: list[tuple[str, str]] = []
    notes: list[tuple[str, str]] = []
    raw_rules = config.get("rules", [])
    for raw in raw_rules:
        try:
            rules.append(_compile_rule(raw, compile_all))
        except ValueError as exc:
            left_out.append((str(raw.get("id", "?")), str(exc)))
            continue
        if "path" in raw:
            notes.append((rules[-1].id, f"scoped to files matching {raw['path']!r}: applied to all feedback text"))
    every_list = [*global_lists, *(a for raw in raw_rules for a in raw.get("allowlists", []))]
    generic: dict[str, Any] = next((raw for raw in raw_rules if raw.get("id") == "generic-api-key"), {})
    names = tuple(Allowlist.parse(a) for a in generic.get("allowlists", []) if a.get("regexTarget") == "match")
    return RuleSet(tuple(rules), tuple(Allowlist.parse(a) for a in global_lists), tuple(left_out), tuple(notes),
                   len(raw_rules), published_examples(every_list), names)


#: What makes an allow-list regex a pattern rather than one literal value.
_METACHARACTERS = re.compile(r"[.^$*+?{}\[\]\\|()]")


#: A stop-word as long as a key, with digits and letters, is a value gitleaks names
#: ("6fe4476e…", a UUID); the others are words ("about", the alphabet).
_NAMED_VALUE = re.compile(r"(?=.*\d)(?=.*[A-Za-z]).{16,}")


def published_examples(allowlists: list[dict[str, Any]]) -> frozenset[str]:
    """The values gitleaks' allow-lists name one by one: regexes on the secret without a
    metacharacter (Firebase's documented keys) and stop-words that are values."""
    literals = {
        regex
        for allowlist in allowlists
        if allowlist.get("regexTarget", "secret") == "secret"
        for regex in allowlist.get("regexes", [])
        if len(regex) >= 8 and not _METACHARACTERS.search(regex)
    }
    literals.update(w for allowlist in allowlists for w in allowlist.get("stopwords", []) if _NAMED_VALUE.fullmatch(w))
    return frozenset(literals)


def packaged_rules_text() -> str:
    return resources.files(__package__).joinpath(RULES_RESOURCE).read_text(encoding="utf-8")


@functools.cache
def gitleaks_rules() -> RuleSet:
    """The packaged rule set, parsed once per process (each regex compiles on first use)."""
    return parse_rules(packaged_rules_text(), compile_all=False)
