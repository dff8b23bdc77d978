"""One week's digest, built, written and posted: what the ``digest`` command and the weekly
flow both do."""

from __future__ import annotations

from pathlib import Path

from ..config import Config
from ..core import now_utc
from ..core.vocabulary import sources_of
from ..warehouse import Warehouse
from ._content import DigestError, Week, build
from ._render import FORMATS, post, render, write


def write_digest(
    config: Config,
    week: str | None = None,
    kinds: tuple[str, ...] | None = None,
    folder: Path | None = None,
    source: str | None = None,
) -> list[Path]:
    """Build and write one week's digest (default: the last complete week); POST the Markdown
    to the configured webhook. Returns the files written.

    With ``source`` (agent | runtime | human, or one ``source`` value) the digest counts those
    reports alone and is written beside the whole one (``digest-2026-W48-human.md``), not
    posted: the channel gets the week's one digest of everyone's reports."""
    try:
        chosen = Week.parse(week) if week else Week.before(now_utc())
        if source:
            sources_of(source)  # a wrong --source is one line, before the warehouse is opened
    except ValueError as exc:
        raise DigestError(str(exc)) from None
    with Warehouse(config.warehouse.path) as warehouse:
        digest = build(warehouse, chosen, config.demand.half_life_days, source)
    target = folder or config.digest.folder
    if source:
        return write(digest, target, kinds or FORMATS, source)  # never in place of the whole digest
    paths = write(digest, target, kinds or FORMATS)
    webhook = config.digest.webhook()
    if webhook and config.digest.webhook_env:
        post(render(digest, "md"), webhook, config.digest.webhook_env)
    return paths
