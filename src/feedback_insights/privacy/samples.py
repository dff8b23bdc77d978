"""Fake secrets generated from a rule's own regex: how the tests, ``benchmarks/scrub.py`` and
``scripts/refresh_gitleaks.py`` measure recall on every gitleaks rule, including rules added by
a refresh that nobody has written an example for.

The generator walks the regex's parse tree (Python's own parser, after rewriting the few Go RE2
spellings it lacks) and draws each character at random from what the pattern allows there, so a
secret's entropy is as high as its alphabet permits. Optional parts are left out and counted
repeats kept short. A candidate is kept only if gitleaks itself would report it: the compiled
rule finds exactly one secret in it, above the entropy threshold and allowed by no allow-list.
The regex is the one the scrubber runs (gitleaks' own, its token ends widened to prose
punctuation: :data:`~._gitleaks.PROSE_ENDS`), so these samples check the scrubber against itself;
they are no measurement of what it misses in the wild. A token's end mark is not drawn: each
sample is also placed in prose (:data:`PROSE`), where ")", ",", "." or a quote ends it.
Not used by the scrubber itself.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from ._gitleaks import PROSE_ENDS, Rule, RuleSet

# Python's own regex parser: private modules since 3.11 (their old names, sre_*, warn).
_sre: Any = import_module("re._constants")
_sre_parse: Any = import_module("re._parser")

_PRINTABLE = [chr(c) for c in range(0x20, 0x7F)]
_POSIX = {"[:alnum:]": "a-zA-Z0-9", "[:alpha:]": "a-zA-Z", "[:digit:]": "0-9", "[:upper:]": "A-Z",
          "[:lower:]": "a-z", "[:xdigit:]": "0-9A-Fa-f", "[:punct:]": r"!-/:-@\[-`{-~", "[:space:]": r"\s"}
#: How much longer than its minimum a counted repeat may be drawn.
_SLACK = 6


def _python_syntax(go_regex: str) -> str:
    """The Go RE2 regex in a form Python's parser reads. Case flags are dropped: the generator
    writes letters as the pattern spells them, which the case-insensitive original matches too."""
    text = re.sub(r"\(\?-?i\)", "", go_regex)
    text = re.sub(r"\(\?-?i:", "(?:", text)
    for posix, chars in _POSIX.items():
        text = text.replace(posix, chars)
    return text.replace(r"\z", r"\Z")


def _class_chars(items: list[tuple[Any, Any]]) -> list[str]:
    """The printable characters a ``[...]`` (or ``\\w``, ``\\d`` …) admits."""
    negate = any(op is _sre.NEGATE for op, _ in items)
    allowed: set[str] = set()
    for op, arg in items:
        if op is _sre.LITERAL:
            allowed.add(chr(arg))
        elif op is _sre.RANGE:
            allowed.update(chr(c) for c in range(arg[0], arg[1] + 1) if 0x20 <= c < 0x7F)
        elif op is _sre.CATEGORY:
            allowed.update(_category(arg))
    chars = [c for c in _PRINTABLE if (c in allowed) != negate]
    if not negate and not chars and ("\n" in allowed or " " in allowed):
        chars = ["\n"]
    return chars


def _category(category: Any) -> set[str]:
    table: dict[Any, Callable[[str], bool]] = {
        _sre.CATEGORY_DIGIT: str.isdigit,
        _sre.CATEGORY_NOT_DIGIT: lambda c: not c.isdigit(),
        _sre.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
        _sre.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
        _sre.CATEGORY_SPACE: lambda c: c == " ",
        _sre.CATEGORY_NOT_SPACE: lambda c: c != " ",
    }
    test = table.get(category)
    return {c for c in _PRINTABLE if test(c)} if test else set()


@dataclass
class _Writer:
    rng: random.Random
    out: list[str]

    def pattern(self, items: Any) -> None:
        for op, arg in items:
            self.item(op, arg)

    def item(self, op: Any, arg: Any) -> None:
        if op is _sre.LITERAL:
            self.out.append(chr(arg))
        elif op is _sre.NOT_LITERAL:
            self.out.append(self.rng.choice([c for c in string.ascii_letters if ord(c) != arg]))
        elif op is _sre.ANY:
            self.out.append(self.rng.choice(string.ascii_letters + string.digits + " "))
        elif op is _sre.IN:
            self.out.append(self.rng.choice(_class_chars(arg) or ["x"]))
        elif op is _sre.BRANCH:
            self.pattern(self.rng.choice(arg[1]))
        elif op is _sre.SUBPATTERN:
            self.pattern(arg[-1])
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
            self.repeat(*arg)
        elif op is getattr(_sre, "ATOMIC_GROUP", None):
            self.pattern(arg)
        # AT (^ $ \b \A \Z) writes nothing: the context around the sample provides it.

    def repeat(self, low: int, high: Any, items: Any) -> None:
        if low == 0 and self.rng.random() < 0.8:
            return
        top = low + _SLACK if high is _sre.MAXREPEAT else min(high, low + _SLACK)
        for _ in range(self.rng.randint(max(low, 1) if low else 1, max(top, 1))):
            self.pattern(items)


def from_regex(go_regex: str, rng: random.Random) -> str:
    """One string the regex (Go RE2 syntax) is meant to match, drawn at random."""
    writer = _Writer(rng, [])
    writer.pattern(_sre_parse.parse(_python_syntax(go_regex)))
    return "".join(writer.out)


#: Where a sample is placed: in a sentence as an agent would write it, or alone.
CONTEXTS = ("Tried again with {} and it failed (req_8f2c1a9b).", "Tried again with {}", "{}")
#: The same token in prose, ended by each mark a sentence puts after a pasted token.
PROSE = ("It failed ({}) twice.", "Tried {}, then gave up.", "The key was {}.", 'Used "{}" as told.', "Used '{}' as told.")


@dataclass(frozen=True, slots=True)
class Sample:
    """A text holding one fake secret, and where the secret is (character offsets);
    ``token`` is where the drawn token (the secret and what its rule needs around it) is."""

    rule: str
    text: str
    start: int
    end: int
    token: tuple[int, int]

    @property
    def secret(self) -> str:
        return self.text[self.start : self.end]

    def in_prose(self, template: str) -> Sample:
        """The same token placed where ``template`` has "{}" (the secret's offsets moved along)."""
        token = self.text[self.token[0] : self.token[1]]
        at = template.index("{}")
        shift = at - self.token[0]
        text = template[:at] + token + template[at + 2 :]
        end = min(self.end, self.token[1])  # a secret never reaches past its token
        return Sample(self.rule, text, self.start + shift, end + shift, (at, at + len(token)))


def _reported(rule: Rule, rules: RuleSet, text: str) -> tuple[int, int] | None:
    """The one secret gitleaks would report for ``rule`` in ``text`` (character offsets):
    gitleaks runs a rule only on a text that holds one of its keywords."""
    lowered = text.lower()
    if rule.keywords and not any(k in lowered for k in rule.keywords):
        return None
    data = text.encode()
    spans = list(rule.finds(data, rules.allowlists))
    if len(spans) != 1:
        return None
    start, end = spans[0]
    return len(data[:start].decode()), len(data[:end].decode())


def _without_end(pattern: str) -> str:
    """The regex without the token end it closes with (:data:`~._gitleaks.PROSE_ENDS`), if any."""
    for prose in PROSE_ENDS.values():
        if pattern.endswith(prose):
            return pattern[: -len(prose)]
    return pattern


def rule_sample(rule: Rule, rules: RuleSet, rng: random.Random, tries: int = 400) -> Sample | None:
    """A text in which gitleaks reports exactly one secret for ``rule``, or None if none of
    ``tries`` candidates qualifies."""
    # The end mark is left to the text around the token (the end of the text, a space, prose).
    drawn = _without_end(rule.pattern)
    for attempt in range(tries):
        candidate = from_regex(drawn, rng)
        if rule.keywords and not any(k in candidate.lower() for k in rule.keywords):
            # A token that does not spell its keyword ("airtable" for a "pat…" token) is
            # reported only where the keyword is near: so write it, as a person would.
            candidate = f"{rng.choice(rule.keywords)} {candidate}"
        context = CONTEXTS[attempt % len(CONTEXTS)]
        text = context.format(candidate)
        span = _reported(rule, rules, text)
        if span is not None:
            at = context.index("{}")
            return Sample(rule.id, text, *span, (at, at + len(candidate)))
    return None


def rule_samples(rules: RuleSet, per_rule: int, seed: int = 7) -> Iterator[tuple[Rule, list[Sample]]]:
    """``per_rule`` samples of every rule (fewer where the generator gives up), seeded per rule
    so a refresh that adds rules does not change the others' samples."""
    for rule in rules.rules:
        rng = random.Random(f"{seed}:{rule.id}")
        found = [s for s in (rule_sample(rule, rules, rng) for _ in range(per_rule)) if s is not None]
        yield rule, found
