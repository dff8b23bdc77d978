"""The rule table of the scrubber: what a secret or a personal datum looks like.

Each :class:`Detector` is one rule, most specific first: an RE2 "hint" (every text the rule can
match also matches it), a regex, and where the format has one a checksum (Luhn for cards,
mod-97 for IBANs, the SSA's rules for SSNs, a real parse for IPv6, a base64 decode for a bare
``user:password``). gitleaks' rule set (:mod:`._gitleaks`) covers the vendor formats; these
rules cover what it does not: personal data, URL credentials, query parameters, headers and
cookies, secret-named values, private key bodies without their BEGIN line, and the vendor
formats we named first (kept: their kinds are in every stored record's counts). Key rules say
which JSON keys hold a secret whatever the value, which hold an account (pseudonymised, not
redacted), and which are a record's identity (kept). The engine that applies them is
:mod:`._engine`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

PLACEHOLDER = re.compile(r"\[REDACTED:([a-z_]+)(?::(\d+))?\]")


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Detector:
    """One rule. ``kind`` names what it finds; ``hint`` is an RE2 pattern that every text this
    rule can match also matches (the engine's prefilter); ``group`` is the part of the match that is
    secret (0 = all of it); ``valid`` sees the whole match, so it can check a checksum or the
    words around it, and may return True/False or the (start, end) of the part that is a find
    (a phone number without the count that followed it)."""

    kind: str
    hint: str
    pattern: re.Pattern[str]
    group: int | str = 0
    valid: Callable[[re.Match[str]], bool | tuple[int, int] | None] | None = None
    #: Where a match can start: ``pattern`` is then tried only there. For rules that begin
    #: with a long case-insensitive alternation, which Python's engine tries at every position.
    starts: Callable[[str], list[int]] | None = None

    def matches(self, text: str) -> Iterator[re.Match[str]]:
        if self.starts is None:
            yield from self.pattern.finditer(text)
            return
        end = 0
        for start in self.starts(text):
            if start < end:
                continue
            match = self.pattern.match(text, start)
            if match:
                end = match.end()
                yield match

    def find(self, text: str, out: list[Finding]) -> None:
        for match in self.matches(text):
            start, end = match.span(self.group)
            if start < 0 or end <= start or text.startswith("[REDACTED:", start):
                continue
            verdict = True if self.valid is None else self.valid(match)
            if isinstance(verdict, tuple):
                start, end = verdict
            if verdict:
                out.append(Finding(self.kind, start, end))


# -- checksums and shape tests ---------------------------------------------------------------


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _digits(value: str) -> str:
    return "".join(ch for ch in value if ch.isdigit())


def card_ok(match: re.Match[str]) -> bool:
    """A payment card: 12-19 digits, not a network-less leading 7-9, and the Luhn check.
    A 13-digit number starting with 1 is a millisecond timestamp, not a card; one digit repeated
    ("000000000000000000", which passes Luhn) is a placeholder."""
    digits = _digits(match.group(0))
    if not 12 <= len(digits) <= 19 or digits[0] in "789" or len(set(digits)) == 1:
        return False
    if len(digits) == 13 and digits[0] == "1":
        return False
    return luhn_ok(digits)


def iban_ok(match: re.Match[str]) -> bool:
    compact = match.group(0).replace(" ", "").upper()
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


def ssn_ok(match: re.Match[str]) -> bool:
    area, group, serial = match.group(0).split("-")
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


_NOT_PERSONAL_IPS = frozenset({"127.0.0.1", "0.0.0.0", "::1", "::"})
_VERSION_BEFORE = re.compile(r"(?:version|release|sdk|v)\s*$", re.IGNORECASE)


def ipv4_ok(match: re.Match[str]) -> bool:
    """An address, unless it is loopback/unspecified (evidence, not personal) or a version."""
    if match.group(0) in _NOT_PERSONAL_IPS:
        return False
    return not _VERSION_BEFORE.search(match.string[max(0, match.start() - 10) : match.start()])


def ipv6_ok(match: re.Match[str]) -> bool:
    value = match.group(0)
    if value in _NOT_PERSONAL_IPS or value.count(":") < 2 or not any(c.isalpha() for c in value) and "::" not in value:
        # "10:04:11" is a time; a real address has hex letters or a "::".
        return False
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


_DATE_LIKE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}")
_PHONE_NOUNS = "phone|mobile|cell|tel|telephone|fax|desk|office|sms|whatsapp|registered"
#: "calling" is not one: in API feedback it is an API call ("Calling github failed with 20231902").
_PHONE_VERBS = "call|text|contact|reach|dial|ring|answering"
# A noun labels the number ("Mobile: 99 577450", "my registered 668 5702"); a verb may stand a few
# words off ("call me on 9472 7916"). "office is at 17031 2202" is a street address.
_PHONE_WORD_BEFORE = re.compile(
    rf"(?:(?:{_PHONE_NOUNS})\b\W{{0,4}}(?:\w+\W{{1,3}})?|(?P<verb>{_PHONE_VERBS})\b\W{{1,4}}(?:\w+\W{{1,3}}){{0,3}})$",
    re.IGNORECASE,
)
#: "call" in API feedback is mostly the noun ("the call failed, took 1350748 µs"), and so are
#: "the text", "each contact": a verb after one of these is no phone word.
_DETERMINER_BEFORE = re.compile(r"\b(?:api|the|a|an|this|that|each|every|first|second|last|one)\s+$", re.IGNORECASE)


def _phone_word_before(before: str) -> bool:
    """A phone word ends ``before`` (the 40 characters before a number): a noun, or a verb that
    is not a noun after a determiner (the next candidate is tried when one is)."""
    start = 0
    while (match := _PHONE_WORD_BEFORE.search(before, start)) is not None:
        if not match.group("verb") or not _DETERMINER_BEFORE.search(before, 0, match.start("verb")):
            return True
        start = match.start() + 1
    return False


_PHONE_WORD_AFTER = re.compile(rf"^\W{{0,3}}(?:{_PHONE_NOUNS}|{_PHONE_VERBS}|home|work)\b", re.IGNORECASE)
_NANP = re.compile(r"(?:\+?1[\s.-]?)?\(?[2-9]\d{2}\)?[\s.-]?[2-9]\d{2}[\s.-]?\d{4}")


def phone_span(match: re.Match[str]) -> tuple[int, int] | None:
    """The longest leading run of the match's digit groups that is a phone number: the
    pattern also swallows numbers that follow one ("+44 20 7946 0958 2 500")."""
    value = match.group(0)
    for group in reversed(list(re.finditer(r"\d+", value))):
        if phone_ok(value[: group.end()], match.string, match.start()):
            return match.start(), match.start() + group.end()
    return None


def phone_ok(value: str, text: str, start: int) -> bool:
    """Digit groups shaped like a phone number, 7-15 digits, not a date. A plain or
    two-group number ("370 3911") is as likely a street number, count or id, so it also needs
    a phone word just before it ("Mobile: 99 577450") unless it is a North American number
    ("(415) 555-0132", "4155550132")."""
    digits = _digits(re.split(r"x|ext", value)[0])
    if not 7 <= len(digits) <= 15 or _DATE_LIKE.search(value):
        return False
    if _NANP.fullmatch(value):
        return True  # ten bare digits too: a phone number left in is a leak, a redacted id is not
    if value.isdigit() and len(value) > 10:
        return False  # a bare long number is an id or a timestamp
    strong = value[0] in "+(" or "." in value or value.count("-") >= 2 or len(re.findall(r"\d+", value)) >= 3
    if strong and not (value.count("-") == 2 and " " not in value):
        return True
    before = text[max(0, start - 40) : start]
    after = text[start + len(value) : start + len(value) + 12]
    return _phone_word_before(before) or bool(_PHONE_WORD_AFTER.search(after))


# A word is lower case, Capitalised, a short acronym or a short code ("SHA256"); a random
# token changes case mid-word ("QTRCKgdIEeGM…").
# Atomic groups: a word, once matched, is never re-split (no exponential backtracking).
_WORD = r"(?>[a-z]{1,20}|[A-Z][a-z]{1,19}|[A-Z]{1,10}|[A-Z0-9]{1,6})"
_WORDS = re.compile(rf"{_WORD}(?:[_ .-]{_WORD})*+:?")
_PASSWORD_KEY = re.compile(r"pass(?:word|wd|phrase)?|pwd", re.IGNORECASE)


def high_entropy(value: str) -> bool:
    """A value long and mixed enough to be a credential, not a word or a small number."""
    if len(value) < 8 or value.isdigit() and len(value) < 12:
        return False
    return len(set(value)) >= 6


def looks_like_words(value: str) -> bool:
    """ "expired_after_refresh", "HMAC-SHA256", "metadata:", "var.db_password" — prose or a
    reference to a variable, not a credential."""
    return bool(_WORDS.fullmatch(value))


_PATH = re.compile(r"(?:/[\w.~{}-]{1,32})+/?(?:\?\S*)?")


def _has_base64_segment(value: str) -> bool:
    return any(
        len(part) >= 16 and any(c.isupper() for c in part) and any(c.islower() for c in part)
        and any(c.isdigit() for c in part)
        for part in value.split("/")
    )


def _word_start(match: re.Match[str]) -> bool:
    """The match does not begin in the middle of a word ("mytoken: …" is not "token: …")."""
    start = match.start()
    return start == 0 or not match.string[start - 1].isalnum()


def _value_ok(match: re.Match[str]) -> bool:
    """A credential after a secret-named key, unless the key is a cursor or a correlation id."""
    if not _word_start(match):
        return False
    key_start = match.start()
    text = match.string
    while key_start > 0 and (text[key_start - 1].isalnum() or text[key_start - 1] in "_-"):
        key_start -= 1
    key = text[key_start : match.start("v")].lower()
    value = match.group("v")
    before_value = text[match.start("v") - 1]
    quoted, attached = before_value in "\"'", before_value in "=:"
    # "token: /auth?token=abc" names a path, not a credential; a base64 secret may also start
    # with "/" and contain more, but has a long segment mixing cases and digits.
    if (_PATH.fullmatch(value) and not _has_base64_segment(value)) or value.startswith("http") or _NOT_SECRET.match(key):
        return False
    # After "password" even a short value is one ("password is hunter2"), and a quoted or
    # attached one ("password=Swordfish") may be plain letters; "password is required" is prose.
    if _PASSWORD_KEY.search(key):
        return len(value) >= 4 and (quoted or attached or not looks_like_words(value))
    return not looks_like_words(value) and high_entropy(value)


def _cookie_ok(match: re.Match[str]) -> bool:
    """A cookie header carries a session when one of its values is long and mixed enough;
    "token1=abc123; theme=dark" carries nothing worth hiding."""
    pairs = (pair.partition("=")[2].strip() for pair in match.group("v").split(";"))
    return any(high_entropy(value) for value in pairs)


def _auth_ok(match: re.Match[str]) -> bool:
    """A credential after an auth scheme, on its line; "token property" is prose."""
    value = match.group("v")
    return _word_start(match) and high_entropy(value) and not looks_like_words(value)


_PORT_THEN_PATH = re.compile(r"\d{1,5}(?:[/?#]|$)")


def _url_credentials_ok(match: re.Match[str]) -> bool:
    """``scheme://user:password@host``, the user possibly empty (``redis://:pw@host``) and the
    password possibly holding "/"; but ``https://host:8080/path/@me`` is a port and a path."""
    password = match.group("v").partition(":")[2]
    return not _PORT_THEN_PATH.match(password)


_QUERY_PASSWORD_NAMES = frozenset({"pass", "pw"})


def _query_ok(match: re.Match[str]) -> bool:
    """``?pass=…``/``&pw=…`` hold a password whatever it looks like; ``?key=…`` holds a key when
    the value is long and mixed (``?key=name`` is a sort key)."""
    value = match.group("v")
    if match.group("k").lower() in _QUERY_PASSWORD_NAMES:
        return len(value) >= 3
    return not looks_like_words(value) and high_entropy(value)


#: Base64 of printable ASCII, quad by quad: each 4 characters encode 3 bytes in 0x21-0x7E,
#: which fixes the first three characters' ranges ("dXNl" for "use"). English words rarely
#: fit two quads in a row ("Download" fails at "D").
_B64_C0, _B64_C1, _B64_C2 = "[I-Za-f]", "[C-HS-Xi-ny-z0-3]", "[ABEFIJMNQRUVYZcdghklopstwx014589]"
_B64_QUAD = rf"{_B64_C0}{_B64_C1}{_B64_C2}[A-Za-z0-9+/]"
_B64_TAIL = rf"{_B64_C0}(?:{_B64_C1}[AEIMQUYcgkosw048]=?|[AQgw](?:==)?)"
_B64_TEXT = rf"(?<![\w+/=-])(?:{_B64_QUAD}){{2,}}+(?:{_B64_TAIL})?+(?![\w+/=-])"
#: A quad (or the 2-byte tail) holding ":" (0x3A) as its first, second or third byte.
_B64_COLON = (
    rf"O[i-n]{_B64_C2}[A-Za-z0-9+/]|{_B64_C0}[DTjz][op][A-Za-z0-9+/]|{_B64_C0}{_B64_C1}[AEIMQUYcgkosw048]6"
)
_B64_COLON_TAIL = rf"O[i-n][AEIMQUYcgkosw048]|{_B64_C0}[DTjz][o]"
#: The rule's hint: two quads in a row, one of them holding the ":".
_B64_HINT = rf"(?:{_B64_QUAD})(?:{_B64_COLON}|{_B64_COLON_TAIL})|(?:{_B64_COLON})(?:{_B64_QUAD}|{_B64_TAIL})"
_B64_USER = re.compile(r"[A-Za-z0-9._@+-]{1,64}")
#: Decoded cursors ("offset:100", "page:2") have a colon too; they are evidence.
_CURSOR_WORDS = frozenset({"offset", "cursor", "page", "after", "before", "start", "index", "limit", "next", "prev", "id", "v"})


def _basic_blob_ok(match: re.Match[str]) -> bool:
    """A bare base64 ``user:password`` (what an ``Authorization: Basic`` header carries, pasted
    without the header): it decodes to printable ASCII, a plausible user name, ":", a password."""
    value = match.group(0)
    if len(value) % 4 == 1:
        return False
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    if not 3 <= len(raw) <= 256 or any(b < 0x21 or b > 0x7E for b in raw):
        return False
    user, colon, password = raw.decode("ascii").partition(":")
    return bool(colon and password and _B64_USER.fullmatch(user) and user.lower() not in _CURSOR_WORDS)


_PEM_END = r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_LINE = re.compile(r"[ \t]*[A-Za-z0-9+/=]{4,}[ \t]*\r?|[ \t]*(?:Proc-Type|DEK-Info|Comment):.*|[ \t]*\r?")
_PEM_TAIL = re.compile(r"[A-Za-z0-9+/=]{16,}[ \t]*$")
#: Key material: a run of base64 as long as a quarter of a PEM line. "BEGIN PRIVATE KEY …
#: anything … END" (documentation's shape of a key) holds none.
_KEY_MATERIAL = re.compile(r"[A-Za-z0-9+/]{16}")


def _private_key_ok(match: re.Match[str]) -> bool:
    return bool(_KEY_MATERIAL.search(match.group(0)))


#: Key bodies are at most a few dozen lines; the walk back stops here in any case.
_PEM_MAX_LINES = 512


def _pem_body_span(match: re.Match[str]) -> tuple[int, int] | None:
    """A private key whose BEGIN line was not pasted: the END line and the base64 lines above
    it, walking back line by line (linear, unlike a regex anchored on the END line). None when
    no body line with key material precedes the END line: then there is nothing secret."""
    text, start = match.string, match.start()
    line_start = text.rfind("\n", 0, start) + 1
    tail = _PEM_TAIL.search(text, line_start, start)
    begin = tail.start() if tail else start
    if text[line_start:start].strip() and not tail:
        return None
    for _ in range(_PEM_MAX_LINES):
        if line_start == 0:
            break
        previous = text.rfind("\n", 0, line_start - 1) + 1
        line = text[previous : line_start - 1]
        if line.lstrip().startswith("-----BEGIN"):
            begin = previous
            break
        if not _PEM_LINE.fullmatch(line):
            break
        if line.strip():
            begin = previous
        line_start = previous
    if begin == start or not _KEY_MATERIAL.search(text, begin, start):
        return None
    return begin, match.end()


#: How the base64 of a DER private key begins: a SEQUENCE then the INTEGER version 0 or 1
#: (PKCS#1 RSA, PKCS#8, SEC1 EC, Ed25519/X25519 PKCS#8), or OpenSSH's "openssh-key-v1".
#: Public keys and certificates start differently ("MIIBIjAN…", "MIIDXTCC…").
_DER_KEY = r"MII[A-Za-z0-9+/]{2}[AQgw]IBA|MIG[A-Za-z0-9+/]AgE[AB]|MHcCAQEE|MC4CAQAw|b3BlbnNzaC1rZXktdjE"
_PEM_BODY = (
    rf"(?<![A-Za-z0-9+/])(?:{_DER_KEY})[A-Za-z0-9+/]{{40,}}+={{0,2}}+"
    # Further lines: a full-width one (16+), or a short last one that is the whole line.
    r"(?:[ \t]*\r?\n[ \t]*(?:[A-Za-z0-9+/]{16,}+={0,2}+|[A-Za-z0-9+/]{4,}+={0,2}+(?=[ \t]*(?:\r?\n|$))))*+"
    rf"(?:\s*{_PEM_END})?"
)

# A JWT split across lines or by " . ": the dots may have blanks or a line break around them,
# and a segment may wrap onto the next line (only whole lines: "Thanks" after it stays).
_JWT_DOT = r"[ \t]*(?:\r?\n)?[ \t]*\.[ \t]*(?:\r?\n)?[ \t]*"
_JWT_SEGMENT = r"[\w-]{8,}+(?:\r?\n[\w-]++(?=[ \t]*(?:[\r\n.]|$)))*+"
_JWT_SIGNATURE = r"[\w-]*+(?:\r?\n[\w-]{8,}+(?=[ \t]*(?:\r?\n|$)))*+"
_JWT = (
    rf"\beyJ{_JWT_SEGMENT}{_JWT_DOT}(?:eyJ{_JWT_SEGMENT}{_JWT_DOT}{_JWT_SIGNATURE}"
    rf"|[\w-]{{8,}}+{_JWT_DOT}[\w-]{{6,}}+)(?![ \t]*\.[\w-])"
)


# -- the rules, most specific first ------------------------------------------------------------

_I = re.IGNORECASE
_SECRET_WORDS = (
    r"api[_-]?key|apikey|x-api-key|api-key|access[_-]?key(?:[_-]?id)?|secret[_-]?access[_-]?key|secret[_-]?key"
    r"|client[_-]?secret|secret|private[_-]?key|access[_-]?token|refresh[_-]?token|id[_-]?token|auth[_-]?token"
    r"|x-auth-token|session[_-]?token|bearer[_-]?token|token|password|passwd|pwd|passphrase|credentials?"
    r"|subscription[_ -]?key|signing[_-]?key|authorization|auth|set-cookie|cookie"
    r"|jsessionid|phpsessid|sessionid|sess|session|sig|signature"
)
#: Cursors and ids whose names contain a secret word but whose values are evidence.
NOT_SECRET_NAMES = r"(?:next_?)?page_?token|next_?token|continuation_?token|pagination_?token|session_?id|token_?count"
_NOT_SECRET = re.compile(rf"(?:{NOT_SECRET_NAMES})\b", _I)
# Anchored on the secret word, not on the start of the key: "STRIPE_SECRET_KEY=…" matches from
# "SECRET_KEY", and _value_ok reads the whole key back.
#: A value after "name=": quoted, it may hold spaces; bare, it ends at a blank, a control
#: character (environ's NULs), a separator, or an "&" that starts the next parameter ("&next=");
#: any other "&" is part of it ("password=abc&def123"). Trailing "=" is base64 padding, but
#: "KEY=" followed by more is the next key, not this key's value.
_VALUE = (
    r"(?P<v>(?<=\")[^\"\n]{1,200}(?=\")|(?<=')[^'\n]{1,200}(?=')"
    r"|(?:[^\s\x00-\x1f\"'&,;<>)=]|&(?![\w.-]{1,64}=))++(?:={1,3}(?!\w))?+)(?!=)"
)
#: A value is on its key's line: "GITHUB_API_KEY=" then a newline is an empty key, not the next
#: line's text as its value.
_KEY_VALUE = re.compile(rf"(?:{_SECRET_WORDS})[\"']?[ \t]*(?:[=:]|[ \t]+is[ \t]+)[ \t]*[\"']?{_VALUE}", _I)

#: How every secret word begins: where a "key: value" match can start.
_SECRET_WORD_STEMS = (
    "api", "x-", "access", "secret", "client", "private", "refresh", "id", "auth", "session", "bearer", "token",
    "pass", "pwd", "cred", "subscription", "signing", "set-", "cookie", "jsession", "phpsess", "sess", "sig",
)


def _secret_word_starts(text: str) -> list[int]:
    """Positions, in order, where a secret word may start: a stem at the start of a word or of
    a ``_``/``-`` segment. ``str.find`` scans in C, far faster than the regex would."""
    lowered = text.lower()
    if len(lowered) != len(text):  # lower-casing changed offsets (rare): try everywhere
        return list(range(len(text)))
    found = set()
    for stem in _SECRET_WORD_STEMS:
        at = lowered.find(stem)
        while at != -1:
            if at == 0 or not lowered[at - 1].isalnum():
                found.add(at)
            at = lowered.find(stem, at + 1)
    return sorted(found)


#: Environment variables whose name says they hold a secret: upper case, ending in a secret word
#: as its own "_" part ("HMAC_KEY", "DB_PASS", "KEY") or fused to the name ("PGPASSWORD").
_ENV_WORDS = r"KEY|PASS|PASSWORD|PASSWD|PASSPHRASE|PWD|SECRET|TOKEN|CREDENTIALS?|AUTH"
_ENV_SECRET_NAME = re.compile(rf"(?:[A-Z0-9_]*_)?(?:{_ENV_WORDS})|[A-Z0-9_]*(?:PASSWORD|PASSWD|PASSPHRASE|PWD|SECRET|TOKEN)")
_ENV_PASSWORD_NAME = re.compile(r".*(?:PASS|PASSWORD|PASSWD|PASSPHRASE|PWD)")
#: The name is bounded and possessive, tried only where a word starts: linear on any text.
_ENV_ASSIGNMENT = re.compile(rf"(?<![\w.$-])(?P<n>[A-Z][A-Z0-9_]{{0,63}}+)[ \t]*=[ \t]*[\"']?{_VALUE}")
#: What a value that refers to another stands for, not a secret: $VAR, ${VAR}, %VAR%, <your key>.
_REFERENCE = re.compile(r"[$%<*]")


def _env_ok(match: re.Match[str]) -> bool:
    """``NAME=value`` where the name says secret (not a cursor: ``NEXT_PAGE_TOKEN``). After a
    password's name any value of 4 or more is one; after a key's or a token's, a value that
    does not read as words ("SORT_KEY=created_at" names a column)."""
    name, value = match.group("n"), match.group("v")
    if not _ENV_SECRET_NAME.fullmatch(name) or _NOT_SECRET.search(name) or _REFERENCE.match(value):
        return False
    if _ENV_PASSWORD_NAME.fullmatch(name):
        return len(value) >= 4
    return not looks_like_words(value) and high_entropy(value)


_PRIVATE_KEY = r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
_WEBHOOK = r"https://(?:hooks\.slack\.com/services|discord(?:app)?\.com/api/webhooks|outlook\.office\.com/webhook)/[^\s\"'<>]+"


def _vendor(kind: str, hint: str, pattern: str) -> Detector:
    return Detector(kind, hint, re.compile(pattern))


_PHONE = (
    r"(?<![\w.+/-])(?=[+(]?(?:[ \t.()+-]{0,3}\d){7})(?:\+\d{1,3}[ \t.-]?)?(?:\(0?\d{1,4}\)[ \t.-]?)?(?:\(0\) ?)?"
    # Not followed by more of a token: "-4567" (a longer number), "-f989-" (a UUID's next group).
    r"\d{1,15}+(?:[ \t.-]\d{1,8}+){0,5}+(?:\s?(?:x|ext\.?)\s?\d{1,5})?(?![\w/]|-\d|-[0-9A-Fa-f]{4}-)"
)

DETECTORS: tuple[Detector, ...] = (
    Detector("private_key", "-----BEGIN", re.compile(_PRIVATE_KEY), 0, _private_key_ok),
    Detector("private_key", "-----END", re.compile(_PEM_END), 0, _pem_body_span),
    _vendor("private_key", _DER_KEY, _PEM_BODY),
    # A JWS has exactly three segments (a fourth makes it something else); an unsigned ("alg":
    # "none") token still carries its claims, so the signature may be empty.
    _vendor("jwt", r"eyJ[\w-]{8}", _JWT),
    _vendor("anthropic_key", "sk-ant-", r"\bsk-ant-[a-z0-9]+-[A-Za-z0-9_-]{20,}"),
    _vendor("openai_key", "sk-[A-Za-z0-9_-]{20}", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    _vendor("github_token", "gh[pousr]_|github_pat_", r"\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{40,}"),
    _vendor("aws_access_key", "(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    _vendor("stripe_key", "_(?:live|test)_", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"),
    # Webhook signing secrets: whoever holds one can forge Stripe's events.
    _vendor("stripe_key", "whsec_", r"\bwhsec_[A-Za-z0-9+/=]{20,}"),
    # xoxe-: Slack's refresh tokens; xoxe.xoxp-: its configuration tokens. Every Slack token
    # has a number after its prefix (a team, a user, a version): "xoxb-xoxb-my-bot-token" and
    # "…-xoxo-indieweb-1.jpg" are none.
    _vendor(
        "slack_token",
        r"xox[abposre][-.]|xapp-",
        r"\bxox[abposre]-\d+-[A-Za-z0-9-]{10,}|\bxoxe\.xox[bp]-\d+-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}",
    ),
    _vendor("webhook_url", "hooks\\.slack\\.com|/api/webhooks|office\\.com/webhook", _WEBHOOK),
    # Fixed-length formats end where the format does: a longer token is something else.
    _vendor("google_api_key", "AIza", r"\bAIza[0-9A-Za-z_-]{35}(?![\w-])"),
    _vendor("google_oauth_token", "ya29\\.", r"\bya29\.[0-9A-Za-z_-]{20,}"),
    _vendor("sendgrid_key", "SG\\.", r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    _vendor("npm_token", "npm_", r"\bnpm_[A-Za-z0-9]{36}\b"),
    _vendor("huggingface_token", "hf_", r"\bhf_[A-Za-z0-9]{34}\b"),
    Detector(
        "auth_header",
        r"(?i)(?:bearer|basic|digest|token)\s+[a-z0-9._~+/=-]{8}",
        re.compile(r"(?:bearer|basic|digest|token)[ \t]+(?P<v>[a-z0-9._~+/=-]{8,})", _I),
        "v",
        _auth_ok,
    ),
    Detector(
        "cookie",
        r"(?i)cookie\s*:",
        re.compile(r"\b(?:set-)?cookie\s*:\s*(?P<v>[^\s=;]+=[^\r\n]+)", _I),
        "v",
        _cookie_ok,
    ),
    Detector(
        "url_credentials",
        r"://[^\s:/@]*:[^\s@]+@",
        re.compile(r"\b[a-z][a-z0-9+.-]*://(?P<v>[^\s:/@]*+:[^\s@]++)@", _I),
        "v",
        _url_credentials_ok,
    ),
    Detector(
        "secret_value",
        r"(?i)[?&;](?:pass|pw|key)=",
        re.compile(r"(?<=[?&;])(?P<k>pass|pw|key)=(?P<v>[^&#\s\"'<>]{1,400})", _I),
        "v",
        _query_ok,
    ),
    Detector("credentials", _B64_HINT, re.compile(_B64_TEXT), 0, _basic_blob_ok),
    Detector(
        "secret_value",
        r"(?i)(?:key|token|secret|pass|pwd|auth|cred|sess|sig|cookie)[\w-]*[\"']?\s*(?:[=:]|\sis\s)",
        _KEY_VALUE,
        "v",
        _value_ok,
        _secret_word_starts,
    ),
    Detector(
        "secret_value",
        rf"(?:{_ENV_WORDS})[ \t]*=",
        _ENV_ASSIGNMENT,
        "v",
        _env_ok,
    ),
    Detector(
        "email",
        # A character before the "@", a label and a dot after it (not "@mentions").
        r"[^\s@]@[^\s@.]+\.",
        # Starts only at the start of a token, and never backtracks into a label: linear time.
        re.compile(r"(?<![\w.%+-])[\w.%+-]++@(?:(?:[\w-]++\.)+[^\W\d_]{2,}\b|(?:\d{1,3}\.){3}\d{1,3}\b)"),
    ),
    Detector(
        "iban",
        r"(?i)[a-z]{2}\d{2} ?[a-z0-9]{4} ?[a-z0-9]{4}",
        re.compile(r"\b[a-z]{2}\d{2}(?: ?[a-z0-9]{4}){2,7}(?: ?[a-z0-9]{1,3})?\b", _I),
        0,
        iban_ok,
    ),
    Detector("us_ssn", r"\d{3}-\d{2}-\d{4}", re.compile(r"(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-])"), 0, ssn_ok),
    Detector(
        "credit_card",
        r"\d{4}[ .-]?\d{4}",
        re.compile(r"(?<![\w.-])(?:\d{4}[ .-]\d{4}[ .-]\d{4}[ .-]\d{1,7}|\d{4}[ -]\d{6}[ -]\d{5}|\d{12,19})(?![\w])"),
        0,
        card_ok,
    ),
    Detector(
        "ip_address",
        r"\d\.\d{1,3}\.\d{1,3}\.\d",
        re.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w.-])"),
        0,
        ipv4_ok,
    ),
    Detector(
        "ip_address",
        r"[0-9A-Fa-f]*:[0-9A-Fa-f]*:",
        re.compile(r"(?<![\w:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:\.\d{1,3}){0,3}(?![\w:])"),
        0,
        ipv6_ok,
    ),
    # The hint is the pattern's own lookahead: seven digits, each at most 3 separators apart.
    Detector("phone", r"\d(?:[ \t.()+-]{0,3}\d){6}", re.compile(_PHONE), 0, phone_span),
)


#: Keys whose value is a secret whatever it looks like ("password": "hunter2"). Narrower than
#: the text rule: a key called "session" or "signature" in structured data is usually evidence.
_SECRET_KEY = re.compile(rf"^(?!(?:{NOT_SECRET_NAMES})$)(?:[\w-]*[_-])?(?:{_SECRET_WORDS})$", _I)
_EVIDENCE_KEYS = frozenset({"session", "sess", "sig", "signature", "sessionid"})
#: Keys holding a customer's account id: pseudonymised, not redacted, so counts stay exact.
ACCOUNT_KEYS = frozenset({"account", "account_id", "accountid", "user_id", "userid", "pseudonym_id"})
#: Keys that name a person wherever they sit (``metadata.reporter``, ``evidence.request.owner_id``,
#: ``accountName``): a word for someone who files, owns or uses (or any ``account…``), alone or
#: with ``id``/``name``/``email``/``login``/``handle``/``ref``; separators and case are free. A
#: string under one is that person's pseudonym, not text. ``author`` is left out: in-session rows
#: use it for a role (``user``/``agent``), and ``user_agent`` or ``user_query`` name no one.
_PERSON_KEY = re.compile(
    r"(?:reporter|submitter|user|owner|customer|member|account\w*)(?:[_-]?(?:id|name|email|login|handle|ref))?",
    re.ASCII,
)

#: Envelope and identity fields, in every spelling the dialects use (AFP/AFS envelopes, AFS
#: camelCase, SEP-2369's generatedAt, RFC-026's app_id/timestamp, in-session rows' ts and
#: instance_id): a record's identity, never text to scrub. A numeric id that passes the Luhn
#: check or looks like a phone number is still the id, and rewriting it would make every later
#: record with another such id look "already stored".
IDENTITY_KEYS = frozenset({
    "id", "collector", "service", "app_id", "content_hash", "contentHash",
    "request_id", "requestId", "session_id", "sessionId", "trace_id", "traceId",
    "message_id", "messageId", "instance_id", "instanceId",
    "received_at", "receivedAt", "generatedAt", "timestamp", "ts",
})
#: The containers between a record's root and its envelope fields: an identity key counts only
#: on a path through these (and list items), so ``feedback.session_id`` and
#: ``params.items.0.id`` are identities while ``metadata.id`` or ``context.user.id`` are
#: metadata, scrubbed like any other text. ``original`` is the record as received, inside a
#: canonical record.
ENVELOPE_CONTAINERS = frozenset({"feedback", "params", "items", "original"})
#: Kinds of personal data; every other kind is a secret.
PERSONAL_KINDS = frozenset({"email", "phone", "credit_card", "iban", "us_ssn", "ip_address"})
#: Kinds an identifier may look like by accident: digits in the shape of a card, a phone
#: number, an SSN or an address. An identity value with only these finds is kept as it is.
DIGIT_SHAPED_KINDS = frozenset({"phone", "credit_card", "us_ssn", "ip_address"})


def is_secret_kind(kind: str) -> bool:
    """Whether a placeholder kind is a secret (not personal data, not an identifier)."""
    return kind not in PERSONAL_KINDS and kind != "identifier"


#: A short id, enum or path with fewer than seven digits: too short for any credential, no
#: "@", ":", "." or "=" for the rest. Most strings in a record are like this.
PLAIN_TOKEN = re.compile(r"[A-Za-z_/-]*(?:\d[A-Za-z_/-]*){0,6}")
#: A whole string that is a timestamp or a UUID is evidence: no rule may touch it.
EVIDENCE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


@functools.lru_cache(maxsize=4096)
def is_account_key(key: str) -> bool:
    """Whether the string under ``key`` is an account or a person (pseudonymised):
    :data:`ACCOUNT_KEYS`, or a key :data:`_PERSON_KEY` reads as naming someone."""
    folded = key.lower()
    return folded in ACCOUNT_KEYS or bool(_PERSON_KEY.fullmatch(folded))


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    folded = key.lower()
    return folded not in _EVIDENCE_KEYS and bool(_SECRET_KEY.match(folded))
