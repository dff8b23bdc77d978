"""One week's digest, built and written (:func:`write_digest`, on the warehouse's turn), then
sent (:func:`send_digest`, off it): what the ``digest`` command and the weekly flow both do.

Sending is kept apart because it waits on other people's servers, and a retry of it comes
minutes later: neither may hold the warehouse, which the desk and the other flows need
meanwhile. And each channel is sent once, to each of its recipients: what it took is recorded
(``digest_sends``: the week, the channel, the sha256 of what it was sent, the recipient), so a
retry after the mail server refused sends the email, to the recipients it refused alone, and
does not post the same digest to the chat again.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Config
from ..core import now_utc
from ..core.vocabulary import sources_of
from ..warehouse import Warehouse, exclusive
from ._content import Digest, DigestError, Week, build, reports_in
from ._email import RecipientsRefused, message, recipients, send
from ._render import FORMATS, post, webhook_text, write

#: Takes the warehouse's turn (the lock other processes wait on) for a moment.
Turn = Callable[[], AbstractContextManager[object]]


@dataclass(slots=True)
class Written:
    """What :func:`write_digest` did."""

    week: Week
    paths: list[Path]
    #: The digest written, for :func:`send_digest`.
    digest: Digest
    #: The week's reports (0: the digest says the week was empty).
    reports: int
    #: The week in progress when it was written.
    current_week: Week
    #: The reports of the week in progress when the digest was of the last complete week by
    #: default and that week was empty: the operator is told how to ask for this one (else 0).
    current_week_reports: int = 0


@dataclass(slots=True)
class Sent:
    """What :func:`send_digest` did, by channel ("webhook", "email"; "email to a@example.com"
    when it was some of the email's recipients only)."""

    sent: list[str] = field(default_factory=list)
    #: Channels that already had this week's same digest, and were not sent it again.
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Channel:
    name: str
    #: The sha256 of what it is sent.
    content: str
    #: Who it goes to: the email's envelope addresses; ("",) for the webhook.
    recipients: tuple[str, ...]
    #: Sends it to some of ``recipients``.
    deliver: Callable[[list[str]], None]

    def label(self, recipients: list[str]) -> str:
        return self.name if len(recipients) == len(self.recipients) else f"{self.name} to {', '.join(recipients)}"


def chosen_week(week: str | None) -> Week:
    """``week`` parsed (default: the last complete week); a week that has not begun is an
    error, the one in progress is allowed (its digest says the figures are those so far)."""
    now = now_utc()
    try:
        chosen = Week.parse(week) if week else Week.before(now)
    except ValueError as exc:
        raise DigestError(str(exc)) from None
    if chosen.start > now:
        raise DigestError(f"--week: {chosen} has not begun; this week is {Week.of(now)} and the last complete one "
                          f"{Week.before(now)}")
    return chosen


def write_digest(
    config: Config,
    week: str | None = None,
    kinds: tuple[str, ...] | None = None,
    folder: Path | None = None,
    source: str | None = None,
    send: bool = True,
) -> Written:
    """Build and write one week's digest (default: the last complete week). It opens the
    warehouse: call it on the warehouse's turn, and :func:`send_digest` after that turn.

    With ``source`` (agent | runtime | human, or one ``source`` value) the digest counts those
    reports alone and is written beside the whole one (``digest-2026-W48-human.md``). With
    ``send`` (the digest is to be sent next), a missing webhook URL or SMTP password is one
    line of error before any work, not a digest written and then not sent."""
    chosen = chosen_week(week)
    if source:
        try:
            sources_of(source)  # a wrong --source is one line, before the warehouse is opened
        except ValueError as exc:
            raise DigestError(str(exc)) from None
    settings = config.digest
    if send and not source:
        settings.check_secrets()
    with Warehouse(config.warehouse.path) as warehouse:
        digest = build(warehouse, chosen, config.demand.half_life_days, source, settings.desk_url)
        current = Week.of(now_utc())
        waiting = reports_in(warehouse, current, source) if digest.empty and week is None and current != chosen else 0
    paths = write(digest, folder or settings.folder, kinds or FORMATS, source)
    return Written(chosen, paths, digest, digest.headline["reports"], current, waiting)


#: A digest file as :func:`write` names it: its week, its source (if one), its format.
_WRITTEN = re.compile(r"digest-([0-9]{4}-W[0-9]{2})(?:-([A-Za-z0-9_.-]+))?\.(html|md)")


def rewrite_digests(config: Config) -> list[Path]:
    """Write again every digest already in ``[digest] folder``, from what the warehouse holds
    now, and send none: after an erasure, no digest on disk keeps a word of an erased report
    (a digest quotes its clusters' representative reports). Copies already posted or mailed
    are other people's; a digest written with ``--out`` elsewhere is the user's own copy. Call
    it on the warehouse's turn."""
    folder = config.digest.folder
    found: dict[tuple[str, str | None], list[str]] = {}
    for path in sorted(folder.glob("digest-*")) if folder.is_dir() else ():
        if path.is_file() and (named := _WRITTEN.fullmatch(path.name)):
            week, source, kind = named.groups()
            found.setdefault((week, source), []).append(kind)
    paths: list[Path] = []
    for (week, source), kinds in found.items():
        try:
            paths += write_digest(config, week, tuple(kinds), folder, source, send=False).paths
        except DigestError:  # named like a digest, but not one of ours (a week to come, a source we have not)
            continue
    return paths


def send_digest(config: Config, digest: Digest, turn: Turn | None = None, resend: bool = False) -> Sent:
    """Post ``digest`` to the configured webhook and mail it to ``[digest.email]``'s recipients,
    each channel, and each recipient of the email, that has not had this week's same content yet
    (all of them with ``resend``).

    Call it off the warehouse's turn: ``turn`` takes it for the moments the record of what was
    sent is read and written (default: waiting as long as it takes). A one-source digest is not
    sent: the channels get the week's one digest of everyone's reports. One channel failing
    does not keep the other from being tried; the failures are raised together after, and what
    was sent is recorded, recipient by recipient (a relay may refuse one address and take the
    message for the others), so that a retry sends only what failed, to whom it failed."""
    if digest.source:
        return Sent()
    settings = config.digest
    settings.check_secrets()
    take_turn = turn or (lambda: exclusive(config.warehouse.path, "the digest"))
    channels: list[_Channel] = []
    webhook = settings.webhook()
    if webhook and settings.webhook_env:
        text = webhook_text(digest, settings.webhook_format)
        deliver = functools.partial(post, text, webhook, settings.webhook_env)
        channels.append(_Channel("webhook", _sha256(text), ("",), lambda _: deliver()))
    if settings.email:
        mail = message(digest, settings.email)
        plain = mail.get_body(("plain",))
        assert plain is not None  # message() always has one
        said = plain.get_content()  # what it says (its HTML also has today's date); to whom is per recipient
        channels.append(_Channel("email", _sha256(said), tuple(recipients(settings.email)),
                                 functools.partial(send, mail, settings.email)))
    done = Sent()
    if not channels:
        return done
    with take_turn(), Warehouse(config.warehouse.path) as warehouse:
        before = set() if resend else _sent_before(warehouse, digest.week)
    failures = []
    for channel in channels:
        pending = [r for r in channel.recipients if (channel.name, channel.content, r) not in before]
        if had := [r for r in channel.recipients if r not in pending]:
            done.skipped.append(channel.label(had))
        if not pending:
            continue
        try:
            channel.deliver(pending)
            took = pending
        except RecipientsRefused as exc:  # the relay took it for the others
            failures.append(str(exc))
            took = [r for r in pending if r not in exc.refused]
        except DigestError as exc:
            failures.append(str(exc))
            continue
        if took:
            with take_turn(), Warehouse(config.warehouse.path) as warehouse:
                _record(warehouse, digest.week, channel, took)
            done.sent.append(channel.label(took))
    if failures:
        sent = f"; sent by {', '.join(done.sent)}, which a retry does not send again" if done.sent else ""
        raise DigestError("; ".join(failures) + sent)
    return done


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _sent_before(warehouse: Warehouse, week: Week) -> set[tuple[str, str, str]]:
    """(channel, content sha256, recipient) of what everyone's digest of ``week`` was sent already."""
    rows = warehouse.con.execute(
        "SELECT channel, content_sha256, recipient FROM digest_sends WHERE week = ? AND source = ''", [str(week)]
    ).fetchall()
    return {(channel, content, recipient) for channel, content, recipient in rows}


def _record(warehouse: Warehouse, week: Week, channel: _Channel, took: list[str]) -> None:
    warehouse.con.executemany(
        """INSERT INTO digest_sends (week, source, channel, content_sha256, recipient, sent_at) VALUES (?, '', ?, ?, ?, ?)
           ON CONFLICT DO UPDATE SET sent_at = excluded.sent_at""",
        [[str(week), channel.name, channel.content, recipient, now_utc()] for recipient in took],
    )
