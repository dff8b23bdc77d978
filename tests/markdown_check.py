"""What in a markdown body GitHub would act on: found by parsing, never by substring.

Two parsers look: markdown-it-py (GitHub flavour) for structure, so that nothing breaks out of
a quote or a cell; and cmark-gfm, GitHub's own renderer, whose HTML must hold only the tags a
drafted issue uses and only our own links. GitHub's post-rendering actions (mentions, issue
references, autolinks) are looked for in the rendered text with ASCII word boundaries, as
GitHub's Ruby filters use them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from html.parser import HTMLParser

import cmarkgfm
from cmarkgfm.cmark import Options
from markdown_it import MarkdownIt
from markdown_it.token import Token

#: Our own hidden markers: an issue's cluster, a demand update's cluster and accounts.
MARKER = re.compile(r"<!-- feedback-insights:(?:cluster=\d+|update=\d+:\d+) -->\n?")
#: The structure issue_body.md.j2 (a problem) and issue_request.md.j2 (a feature request) write
#: outside quotes (a bullet list under "Affected" too).
TEMPLATE_HEADINGS = ("What agents reported", "Demand", "Affected", "Representative reports", "Suggested by agents", "Evidence",
                     "What agents asked for", "What they suggested", "Why they asked", "The requests")
TEMPLATE_TABLES = 2
TEMPLATE = {"headings": TEMPLATE_HEADINGS, "tables": TEMPLATE_TABLES}
_ACTIONS = {
    "mention": re.compile(r"(?<![A-Za-z0-9_`])@[A-Za-z0-9_]"),
    "issue reference": re.compile(r"#\d|(?<![A-Za-z0-9])GH-\d", re.IGNORECASE),
    "autolink": re.compile(r"[A-Za-z0-9]://|www\.|mailto:|xmpp:", re.IGNORECASE),
}
_QUOTE_CONTENT = {"paragraph_open", "paragraph_close", "inline", "blockquote_close"}
#: Every tag a drafted issue renders to (raw HTML from a report would add others).
_TAGS = {"p", "br", "blockquote", "table", "thead", "tbody", "tr", "th", "td", "h2", "strong", "em", "ul", "li", "a"}


def parser() -> MarkdownIt:
    md = MarkdownIt("gfm-like")
    md.linkify.set({"fuzzy_link": False})  # GitHub links scheme:// and www. only, not bare domains
    md.linkify.add("//", None)  # nor protocol-relative //host
    return md


def _children(tokens: Iterable[Token]) -> Iterable[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _children(token.children)


def _heading_text(tokens: list[Token], at: int) -> str:
    return tokens[at + 1].content if at + 1 < len(tokens) else ""


def _structure(markdown: str, headings: Collection[str], tables: int) -> list[str]:
    found: list[str] = []
    tokens = parser().parse(markdown)
    depth = 0
    for at, token in enumerate(tokens):
        if token.type in ("blockquote_open", "blockquote_close"):
            depth += 1 if token.type == "blockquote_open" else -1
            if depth > 1:
                found.append("nested quote")
            continue
        if depth and token.type not in _QUOTE_CONTENT:
            found.append(f"{token.type} inside a quote")
        if token.type == "html_block" and not MARKER.fullmatch(token.content):
            found.append(f"html block {token.content[:40]!r}")
        if token.type in ("fence", "code_block"):
            found.append(token.type)
        if token.type == "heading_open" and _heading_text(tokens, at) not in headings:
            found.append(f"heading {_heading_text(tokens, at)!r}")
        if token.type in ("hr", "ordered_list_open") or (token.type == "bullet_list_open" and not headings):
            found.append(token.type)
    if [t.type for t in tokens].count("table_open") > tables:
        found.append("table")
    for token in _children(tokens):
        if token.type == "image":
            found.append(f"image {token.attrGet('src')}")
        elif token.type == "html_inline":
            found.append(f"inline html {token.content!r}")
    return found


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


def rendered_actions(
    markdown: str, allowed_link: Callable[[str], bool] = lambda href: False, extra_tags: Collection[str] = ()
) -> list[str]:
    """What cmark-gfm (GitHub's renderer; raw HTML let through so it shows) makes of it that
    is not plain text, our own links or the tags a drafted issue (plus ``extra_tags``) uses."""
    html = _Html()
    html.feed(cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE))
    found = [f"<{tag}> {attrs}" for tag, attrs in html.tags if tag not in _TAGS | set(extra_tags)]
    found += [f"link {attrs.get('href')}" for tag, attrs in html.tags if tag == "a" and not allowed_link(str(attrs.get("href")))]
    found += [f"comment {c!r}" for c in html.comments if not MARKER.fullmatch(f"<!--{c}-->")]
    for chunk in html.text:
        found.extend(f"{name} in {chunk[:60]!r}" for name, rx in _ACTIONS.items() if rx.search(chunk))
    return found


def active_elements(
    markdown: str,
    *,
    allowed_link: Callable[[str], bool] = lambda href: False,
    headings: Collection[str] = (),
    tables: int = 0,
) -> list[str]:
    """Everything GitHub would turn into an action or structure. ``allowed_link``: hrefs the
    body may carry (our own evidence links); ``headings`` and ``tables``: the structure our
    template writes outside quotes."""
    return _structure(markdown, headings, tables) + rendered_actions(markdown, allowed_link)
