"""Untrusted text made inert for Slack's ``mrkdwn`` (the webhook's default format).

Slack reads no backslash escapes: a Markdown-escaped digest shows its backslashes. What it does
read is ``<…>``: ``<!channel>``, ``<!here>``, ``<@U123>`` ping people, ``<https://x|text>`` is
a link whose text hides where it goes. So, as Slack documents, only ``&``, ``<`` and ``>`` are
escaped (as ``&amp;``, ``&lt;``, ``&gt;``), and the rest of what could act is broken with a
zero-width space (Slack decodes no numeric entity, so it is the character itself): a bare
``@here`` or ``@someone``, and what Slack would turn into a link by itself (``scheme://``,
``www.``, ``example.com``). Emphasis characters (``*``, ``_``, ``~``, backticks) cannot be
escaped in mrkdwn; in a quote they can at most restyle the quote, never act.
"""

from __future__ import annotations

import re

from ..drafts import neutralise

#: The character itself, not :data:`neutralise.ZWSP` (an HTML entity, for GitHub): Slack decodes none.
ZWSP = "\u200b"
_MENTION = re.compile(r"@(?=\S)")
_SCHEME = re.compile(r"(?<=[A-Za-z0-9])(?=://)")
_WWW = re.compile(r"(www)(?=\.)", re.IGNORECASE)
#: A dot between letters or digits and a letter: where Slack sees a domain name ("evil.com").
_DOMAIN_DOT = re.compile(r"(?<=[A-Za-z0-9])\.(?=[A-Za-z])")


class Mrkdwn(str):
    """Text that is mrkdwn on purpose (made here or by a template filter); printed as is."""


def escape(text: str) -> str:
    """``&``, ``<`` and ``>`` as Slack wants them, nothing else."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def inline(text: object, limit: int | None = None) -> str:
    """One line of inert mrkdwn: flattened, ``&<>`` escaped, mentions and links broken."""
    flat = neutralise.truncate(" ".join(neutralise.clean(str(text)).split()), limit)
    flat = _MENTION.sub("@" + ZWSP, escape(flat))
    flat = _SCHEME.sub(ZWSP, flat)
    flat = _WWW.sub(lambda m: m.group(1) + ZWSP, flat)
    return _DOMAIN_DOT.sub("." + ZWSP, flat)


def link(url: str, text: str) -> Mrkdwn:
    """``<url|text>`` for one of our own URLs (an issue, the desk); ``text`` is made inert."""
    return Mrkdwn(f"<{escape(url)}|{inline(text).replace('|', '¦')}>")
