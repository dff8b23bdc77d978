"""Readings of a text that undo an encoding a secret hides behind, for the engine's rules.

- Full-width forms (U+FF01–FF5E: "ｓｋ＿ｌｉｖｅ＿…") and mathematical letters and digits
  (U+1D400–1D7FF) read as ASCII to a person and to most systems they are pasted into; an HTML
  entity ("&#115;k_live_…", "&quot;api_key&quot;") reads as the character it names. The
  normalised view (:func:`normalised`: NFKC of those characters, ``html.unescape`` of each
  entity) is a :class:`~._views.View`, so a find in it maps back to the original characters,
  which are replaced whole.
- A base64 run whose bytes are text (a JSON config, ``key=value`` pairs) hides whatever the
  text says: :func:`base64_finds` decodes each run and, when the rules find a secret or a
  personal datum in what it says, the whole run is one find.

Both are linear: the view is built in one pass and is never longer than the text; a run is
decoded only when it is 24 to 65,536 characters long (18 bytes are the least a name and a
value take; a longer blob is a file, not a pasted value) and scanned only when its bytes are
UTF-8 text without control characters, so ids, SHAs and binary blobs cost one decode each. The
engine nests views at most three deep, and each decoded text is shorter than its run.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
from collections.abc import Callable

import re2

from ._rules import Finding
from ._views import View

#: Characters NFKC reads as one ASCII letter, digit or punctuation mark each.
_FOLDED = "\uff01-\uff5e\U0001d400-\U0001d7ff"
#: An HTML entity: numeric (";" optional, as browsers read it) or named (with its ";").
_ENTITY = r"&(?:#[0-9]{1,7};?|#[xX][0-9a-fA-F]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};)"
NORMALISE = re.compile(f"{_ENTITY}|[{_FOLDED}]++")
#: The same for the RE2 prefilter: every text :data:`NORMALISE` matches also matches it.
NORMALISE_HINT = r"&#[0-9xX]|&[A-Za-z][A-Za-z0-9]{1,31};|[\x{ff01}-\x{ff5e}\x{1d400}-\x{1d7ff}]"

#: A run of the standard or URL-safe base64 alphabet with its padding, in the UTF-8 text: RE2
#: finds the leftmost, longest, so each match is a whole run (three times as fast as Python's
#: engine, which tries a run at every position).
_MIN_RUN, _MAX_RUN = 24, 65_536
_RUN = re2.compile(f"[A-Za-z0-9+/_-]{{{_MIN_RUN},}}={{0,2}}".encode())


def _probe(pattern: str) -> Callable[[bytes], list[int]]:
    """Whether a text (UTF-8) may hold such a run: an automaton of its own, not one more hint in
    the engine's prefilter, whose states a counted repeat would multiply (3-5x slower). A set
    of one pattern answers without reporting where, and its own ``Match`` skips the wrapper's
    checks (as the engine's prefilter does): it runs on every string of every record."""
    probe = re2.Set.SearchSet(re2.Options())
    probe.Add(pattern)
    probe.Compile()
    match: Callable[[bytes], list[int]] = getattr(probe, "_set", probe).Match
    return match


_BASE64_PROBE = _probe(f"[A-Za-z0-9+/_-]{{{_MIN_RUN}}}")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_URL_SAFE = bytes.maketrans(b"-_", b"+/")


def normalised(text: str) -> View:
    """``text`` with full-width and mathematical characters folded and HTML entities decoded."""
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    last = 0
    for match in NORMALISE.finditer(text):
        start, end = match.span()
        parts.append(text[last:start])
        starts.extend(range(last, start))
        ends.extend(range(last + 1, start + 1))
        token = match.group()
        read = unicodedata.normalize("NFKC", html.unescape(token) if token[0] == "&" else token)
        parts.append(read)
        if len(read) == end - start:  # a run of folded characters: one for one
            starts.extend(range(start, end))
            ends.extend(range(start + 1, end + 1))
        else:  # an entity: each character it names comes from all of it
            starts.extend([start] * len(read))
            ends.extend([end] * len(read))
        last = end
    parts.append(text[last:])
    starts.extend(range(last, len(text)))
    ends.extend(range(last + 1, len(text) + 1))
    return View("".join(parts), starts, ends)


def may_hold_base64(data: bytes) -> bool:
    """Whether the UTF-8 text ``data`` may hold a run :func:`base64_finds` decodes."""
    return len(data) >= _MIN_RUN and bool(_BASE64_PROBE(data))


def decoded_text(run: bytes) -> str | None:
    """What a base64 run says, if its bytes are text; None for binary, for a run of both
    alphabets, and for one of a length no encoder writes."""
    body = run.rstrip(b"=")
    url_safe = b"-" in body or b"_" in body
    if url_safe and (b"+" in body or b"/" in body) or len(body) % 4 == 1 or len(body) > _MAX_RUN:
        return None
    if url_safe:
        body = body.translate(_URL_SAFE)
    try:
        text = base64.b64decode(body + b"=" * (-len(body) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return None if _CONTROL.search(text) else text


def base64_finds(text: str, data: bytes, scan: Callable[[str], list[Finding]]) -> list[Finding]:
    """One find per base64 run of ``text`` (``data``: its UTF-8) in whose decoded text
    ``scan`` finds anything: the whole run, under the kind of the first thing found in it."""
    found = []
    ascii_only = len(data) == len(text)
    byte = character = 0  # the character offset of a byte offset, counted on run by run
    for match in _RUN.finditer(data):
        decoded = decoded_text(match.group())
        inside = scan(decoded) if decoded is not None else None
        if not inside:
            continue
        start, end = match.span()
        if not ascii_only:  # a run is ASCII: only what precedes it can be longer in bytes
            character += len(data[byte:start].decode("utf-8", "surrogatepass"))
            byte, start, end = start, character, character + end - start
        found.append(Finding(inside[0].kind, start, end))
    return found
