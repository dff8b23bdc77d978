"""Untrusted text made inert for a GitHub issue: shown, never acted on.

Feedback is written by LLMs and may have been steered by whatever they read. Everything that
came from a report (and everything an LLM wrote after reading reports) passes through here
before it reaches an issue, so that it can only ever be *text*:

* markdown that would change structure is backslash-escaped: emphasis, links and images
  (``[``, ``!``), raw HTML and comments (``<``), tables (``|``), code spans and fences of any
  length (`````, ``~``), math (``$``), and block starts at the beginning of a line (headings,
  quotes, lists, setext underlines, thematic breaks, indented code);
* what GitHub turns into actions *after* rendering is broken with a zero-width space, written
  as the visible entity ``&#8203;``: @mentions (users, teams, e-mail addresses), issue
  references (``#12``, ``GH-12``, ``org/repo#12``; a closing keyword without a reference closes
  nothing) and autolinks (``scheme://``, ``www.``, ``mailto:``).

Escaping cannot be undone by the text: a backslash in the input is itself escaped first, and
an entity in the input is escaped (``\\&``) so it cannot spell an ``@`` or a ``#``.

Shown, never stated as fact: every quote is attributed to who said it (:func:`attribution`),
by the report's canonical ``source``, in issue bodies, update comments, LLM prompts and the
digest alike, so that an owner's complaint is never presented as an agent's, nor either as
established.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

ZWSP = "&#8203;"
#: Every character CommonMark lets a backslash escape that has a meaning somewhere.
_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>&!|~$#])")
#: GitHub's post-rendering actions: mentions, references, autolinks (broken after escaping).
_MENTION = re.compile(r"@(?=\S)")
# No \b before GH- or www: GitHub's (Ruby, ASCII) boundaries differ from Python's (Unicode),
# so "éGH-1" or "_www.x" would slip through a boundary test. Breaking a few more is harmless.
_REFERENCE = re.compile(r"(\\#|GH-)(?=\d)", re.IGNORECASE)
_SCHEME = re.compile(r"(?<=[A-Za-z0-9])(?=://)")
_WWW = re.compile(r"(www)(?=\.)", re.IGNORECASE)
_PROTOCOL = re.compile(r"(mailto|xmpp|tel)(?=:)", re.IGNORECASE)
#: Block starts a line may not open with (after its indentation is dropped).
_LINE_START = re.compile(r"^(?:([-+=])|(\d{1,9})([.)]))")
#: Control characters; format characters (direction overrides, zero-width ones, Unicode tags
#: that can smuggle hidden text to the next LLM that reads the issue) are dropped too.
_CONTROLS = re.compile("[\u0000-\u0008\u000b-\u001f\u007f-\u009f]")
_ZWJ = "\u200d"  # kept: emoji sequences need it


def clean(text: str) -> str:
    """Normalised (NFC), without control or invisible format characters; tabs become spaces."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROLS.sub("", text.replace("\t", "    "))
    return "".join(c for c in text if c == _ZWJ or unicodedata.category(c) != "Cf")


def _break_actions(escaped: str) -> str:
    escaped = _MENTION.sub("@" + ZWSP, escaped)
    escaped = _REFERENCE.sub(lambda m: m.group(1) + ZWSP, escaped)
    escaped = _SCHEME.sub(ZWSP, escaped)
    escaped = _WWW.sub(lambda m: m.group(1) + ZWSP, escaped)
    return _PROTOCOL.sub(lambda m: m.group(1) + ZWSP, escaped)


def _escape_line(line: str) -> str:
    line = _INLINE_SPECIAL.sub(r"\\\1", line.strip())
    start = _LINE_START.match(line)
    if start:
        line = "\\" + line if start.group(1) else f"{start.group(2)}\\{line[len(start.group(2)):]}"
    return _break_actions(line)


def inline(text: object, limit: int | None = None) -> str:
    """One line of inert markdown (newlines become spaces), for table cells and sentences."""
    flat = " ".join(clean(str(text)).split())
    return _escape_line(truncate(flat, limit))


def block(text: object, limit: int | None = None) -> str:
    """Inert markdown paragraphs; blank lines separate paragraphs, single newlines are kept as
    hard line breaks so an agent's layout (steps, logs) still reads."""
    text = truncate(clean(str(text)).strip(), limit)
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    return "\n\n".join(
        "\\\n".join(_escape_line(line) for line in p.split("\n") if line.strip()) for p in paragraphs
    )


def quote(text: object, limit: int | None = None) -> str:
    """:func:`block` as a blockquote: every line, blank ones included, stays inside the quote."""
    return "\n".join(f"> {line}" if line else ">" for line in block(text, limit).split("\n"))


def title(text: object, limit: int = 120) -> str:
    """An issue title: one line, plain text (titles are not markdown), actions broken with a
    literal zero-width space."""
    flat = " ".join(clean(str(text)).split())
    flat = _MENTION.sub("@\u200b", flat)
    flat = re.sub(r"(#|GH-)(?=\d)", lambda m: m.group(1) + "\u200b", flat, flags=re.IGNORECASE)
    flat = _SCHEME.sub("\u200b", flat)
    return truncate(_WWW.sub(lambda m: m.group(1) + "\u200b", flat), limit)


def truncate(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


# -- attribution -------------------------------------------------------------------------------

_AGENT_SOURCES = frozenset({"agent_authored", "agent_solicited"})
_OBSERVERS = {"runtime_observed": "The runtime", "server_observed": "The server"}
#: Dialects whose rating is a thumb (stored as 1 or 5), not a point on a 1–5 scale.
_THUMBS = frozenset({"session", "rfc026"})


def reporter(report: Mapping[str, Any]) -> str:
    """Who a report is from, as a sentence starts: "An agent", "The owner" (an in-session row is
    the instance owner's own), "A user", "The runtime", "The server", or "A report" when the
    source is unknown."""
    source = report.get("source")
    if source in _AGENT_SOURCES:
        return "An agent"
    if source in _OBSERVERS:
        return _OBSERVERS[source]
    if source == "human_authored":
        return "The owner" if report.get("dialect") == "session" else "A user"
    return "A report"


def _rated(report: Mapping[str, Any]) -> str:
    rating = int(report["rating"])
    if report.get("dialect") in _THUMBS:
        return "👍" if rating >= 4 else "👎"
    return f"{rating} of 5"


def attribution(report: Mapping[str, Any], wrote: bool = True) -> str:
    """What precedes a report's quoted words: "An agent reported", "The owner reported", "A
    user rated it 👎 and wrote" (a person's rating with a comment; ``wrote=False`` when there is
    none), "The runtime observed", or "A report said" when the source is unknown. Reads the
    canonical ``source``, ``dialect`` and ``rating``; an agent's satisfaction score is not a
    person's rating and is not mentioned."""
    who = reporter(report)
    source = report.get("source")
    if source in _OBSERVERS:
        return f"{who} observed"
    if source == "human_authored" and report.get("rating") is not None:
        return f"{who} rated it {_rated(report)}" + (" and wrote" if wrote else "")
    return "A report said" if who == "A report" else f"{who} reported"


def reporters(sources: Iterable[str | None]) -> str:
    """Who reported a cluster, for "… from N accounts reported": "Agents", "People" or "Agents
    and people". Runtime and server observations count with the agents whose calls they saw."""
    kinds = {"people" if source == "human_authored" else "agents" for source in sources if source}
    if kinds == {"people"}:
        return "People"
    return "Agents and people" if "people" in kinds else "Agents"
