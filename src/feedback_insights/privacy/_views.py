"""Other readings of a text in which a secret is easier to see, mapped back to the original.

A token split by zero-width characters (``sk_live_\u200bABC…``) reads as a token to a person
and to any system it is pasted into, but no rule matches it; a URL inside another URL's query
string hides ``?token=`` as ``%3Ftoken%3D``. The engine runs its rules on these views as well and
maps each find back to the characters of the original, which are then replaced whole (the
invisible characters and the escapes inside a find go with it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Characters that render as nothing: zero-width spaces and joiners, the word joiner and
#: invisible operators, the soft hyphen, bidirectional controls, the BOM, the Mongolian vowel
#: separator, and Unicode tag characters (which can smuggle a whole ASCII text invisibly).
INVISIBLE_CLASS = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f"
)
INVISIBLE = re.compile(f"[{INVISIBLE_CLASS}]+")
#: The same class for the RE2 prefilter (RE2 spells code points \\x{…}).
INVISIBLE_HINT = "[" + "".join(
    f"\\x{{{ord(c):x}}}" if c != "-" else "-" for c in INVISIBLE_CLASS
) + "]"
#: A percent-escape of an ASCII character (``%3D``): what the decoded view decodes.
PERCENT = re.compile(r"%([0-7][0-9A-Fa-f])")
PERCENT_HINT = r"%[0-7][0-9A-Fa-f]"


@dataclass(frozen=True, slots=True)
class View:
    """``text`` read differently; character ``i`` of it comes from ``starts[i]:ends[i]`` of the
    original."""

    text: str
    starts: list[int]
    ends: list[int]

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original that the view's ``start:end`` was read from."""
        return self.starts[start], self.ends[end - 1]


def without_invisible(text: str) -> View:
    """``text`` with every invisible character removed."""
    parts: list[str] = []
    starts: list[int] = []
    last = 0
    for match in INVISIBLE.finditer(text):
        parts.append(text[last : match.start()])
        starts.extend(range(last, match.start()))
        last = match.end()
    parts.append(text[last:])
    starts.extend(range(last, len(text)))
    return View("".join(parts), starts, [i + 1 for i in starts])


def percent_decoded(text: str) -> View:
    """``text`` with every ASCII percent-escape decoded (``%3Ftoken%3D`` → ``?token=``). Other
    escapes stay as they are: secrets are ASCII, and half a UTF-8 sequence is not text."""
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    last = 0
    for match in PERCENT.finditer(text):
        parts.append(text[last : match.start()])
        starts.extend(range(last, match.start()))
        ends.extend(range(last + 1, match.start() + 1))
        parts.append(chr(int(match.group(1), 16)))
        starts.append(match.start())
        ends.append(match.end())
        last = match.end()
    parts.append(text[last:])
    starts.extend(range(last, len(text)))
    ends.extend(range(last + 1, len(text) + 1))
    return View("".join(parts), starts, ends)
