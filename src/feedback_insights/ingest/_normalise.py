"""Raw items in, canonical records and quarantine entries out: detect, validate, normalise,
scrub.

Pure functions over one batch, so the CLI's ``validate``/``normalise`` and ``ingest`` share
every rule. Nothing here touches storage.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any

from ..core import DEFAULT_MAX_BYTES, MAX_DEPTH, CanonicalRecord, Problem, depth_problem, jsontext
from ..privacy import Redactor
from . import dialects
from ._declared import people_fields, pseudonymise_account, pseudonymise_fields, service_problem, service_problems
from ._raw import PENDING, UNPARSED, RawItem
from .dialects import Origin


@dataclass(slots=True)
class Checked:
    """The verdict on one raw item: its dialect (CLI name) and its problems."""

    item: RawItem
    dialect: str | None
    module: str | None
    problems: list[Problem]


@dataclass(slots=True)
class Quarantined:
    """One received report that failed: kept (scrubbed) with every problem, where it came from
    and how many identical reports preceded it in that delivery."""

    collector: str
    source_uri: str
    position: str
    raw: str
    dialect: str | None
    problems: list[Problem]
    occurrence: int = 0

    @property
    def id(self) -> str:
        """Stable for the same report at the same place: a re-read delivery updates its entry,
        while identical reports received apart get an entry each."""
        key = f"{self.collector}\0{self.source_uri}\0{self.position}\0{self.raw}"
        return "q_" + hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]


@dataclass(slots=True)
class Processed:
    records: list[CanonicalRecord] = field(default_factory=list)
    content_hashes: list[str] = field(default_factory=list)
    #: The exact text each record arrived as, when the source had one: stored as ``original``.
    raw_texts: list[str | None] = field(default_factory=list)
    quarantined: list[Quarantined] = field(default_factory=list)


def check(item: RawItem, choice: str = "auto", max_bytes: int = DEFAULT_MAX_BYTES) -> Checked:
    """The item's dialect and every problem with it. Nesting is checked before anything walks
    the report (validators and the scrubber recurse): a report nested too deep has that one
    problem and no dialect to normalise it with. A service that is not a name (``SERVICE_FIELDS``)
    is a problem at its own path, in every dialect."""
    item.parse()
    if item.obj is UNPARSED:
        return Checked(item, None, None, [Problem("", item.parse_error or "not valid JSON")])
    module = dialects.detect(item.obj, choice)  # looks at the top level only
    too_deep = None if item.shallow else depth_problem(item.obj)
    if too_deep is not None:
        return Checked(item, dialects.choice_name(module) if module else None, None, [too_deep])
    if module is None:
        return Checked(item, None, None, dialects.undetected(item.obj))
    dialect = dialects.dialect(module)
    problems = dialect.validate(item.obj, max_bytes=max_bytes, size=item.size)
    problems += service_problems(item.obj, dialect, problems)
    return Checked(item, dialects.choice_name(module), module, problems)


def content_hash(payload: Any) -> str:
    """Identity of what the agent wrote, independent of key order and envelope."""
    return hashlib.sha256(jsontext.dumps(payload, sort_keys=True)).hexdigest()


def process(
    items: Iterable[RawItem],
    *,
    collector: str,
    source_uri: str,
    received_at: str,
    choice: str = "auto",
    service: str | None = None,
    service_by_tool: Mapping[str, str] | None = None,
    require_service: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    pseudonymise: Callable[[str], str] | None = None,
    prevalidated: bool = False,
) -> Processed:
    """With ``pseudonymise`` (storage always passes one; it must keep a pseudonym as it is, as
    :class:`~feedback_insights.privacy.Pseudonymiser` does) every record and quarantined text is
    scrubbed and accounts and people are pseudonymised before anything leaves this function
    (see :mod:`._declared`).
    ``prevalidated``: the items come from our collector, which validated them before it
    scrubbed them (placeholders can make a text longer than its limit); only the dialect is
    detected again.

    A record whose report names no service gets the service of the first ``service_by_tool``
    glob its tool matches, else ``service``. With ``require_service`` (storage) a report that
    still has none is quarantined, saying which source setting to add: stored, it would form
    clusters of its own that no correction could merge into its service's. A service that is
    not a name is quarantined wherever it came from."""
    out = Processed()
    for item in items:
        checked = check(item, choice, max_bytes)
        if prevalidated and checked.module is not None:
            checked.problems = []
        if checked.problems or checked.module is None:
            out.quarantined.append(_quarantined(item, checked, collector, source_uri, pseudonymise))
            continue
        dialect = dialects.dialect(checked.module)
        obj, redactions = item.obj, None
        if pseudonymise is not None:
            # Pseudonymise the people the dialect declares, scrub the report as received and
            # normalise what is left: every canonical field is derived from it, so one pass
            # covers them and the kept original alike.
            redactor = Redactor(pseudonymise)
            obj = redactor.value(pseudonymise_fields(obj, people_fields(dialect), pseudonymise))
            redactions = redactor.counts
        # The hash of what is kept, so a report reaching us twice by different paths (a file,
        # a quarantine replay, a collector) has one identity.
        digest = content_hash(dialects.payload(checked.module, obj))
        origin = Origin(collector, received_at, digest, item.occurrence)
        try:
            records = dialect.normalise(obj, origin)
            for record in records:
                record["received_at"] = utc_timestamp(record["received_at"])
                record["redactions"] = redactions  # type: ignore[typeddict-unknown-key]
                record["service"] = record.get("service") or service_of(record.get("tool"), service, service_by_tool)
                if pseudonymise is not None:
                    pseudonymise_account(record, pseudonymise)
        except (ValueError, KeyError, TypeError, OverflowError, OSError) as exc:
            checked.problems = [Problem("", f"could not be normalised: {type(exc).__name__}: {exc}")]
            out.quarantined.append(_quarantined(item, checked, collector, source_uri, pseudonymise))
            continue
        if not_a_name := next(filter(None, map(service_problem, records)), None):
            checked.problems = [not_a_name]
            out.quarantined.append(_quarantined(item, checked, collector, source_uri, pseudonymise))
            continue
        if require_service and any(record["service"] is None for record in records):
            checked.problems = [_no_service(collector, records)]
            out.quarantined.append(_quarantined(item, checked, collector, source_uri, pseudonymise))
            continue
        out.records.extend(records)
        out.content_hashes.extend([digest] * len(records))
        # Scrubbed records keep their scrubbed original, never the text as it came in.
        out.raw_texts.extend([item.text if pseudonymise is None else None] * len(records))
    return out


def service_of(tool: str | None, service: str | None, by_tool: Mapping[str, str] | None) -> str | None:
    """The service of a report that names none: the first glob of ``by_tool`` (in its order,
    case-sensitive, ``*`` matching ``/`` too) that its tool or endpoint matches, else
    ``service``."""
    if tool is not None and by_tool:
        for pattern, named in by_tool.items():
            if fnmatchcase(tool, pattern):
                return named
    return service


def _no_service(collector: str, records: list[CanonicalRecord]) -> Problem:
    tools = sorted({str(r["tool"])[:80] for r in records if r["service"] is None and r.get("tool") is not None})
    matched = f"its tool {', '.join(map(repr, tools))} matches no service_by_tool pattern" if tools else "it names no tool"
    return Problem(
        "",
        f"names no service and {matched}: set service (or service_by_tool) for source {collector!r}, "
        "then run quarantine replay",
    )


_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z")


def utc_timestamp(value: str) -> str:
    """RFC 3339 in any accepted spelling ("t"/"z", offsets) as one UTC form the warehouse reads."""
    if _UTC.fullmatch(value):
        return value
    moment = datetime.fromisoformat(value.upper())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _quarantined(
    item: RawItem, checked: Checked, collector: str, source_uri: str, pseudonymise: Callable[[str], str] | None
) -> Quarantined:
    """The entry for a failed item. For storage (``pseudonymise`` given) its text and every
    problem are scrubbed, and the people its dialect declares pseudonymised: a validator's path
    names the keys a report used, and keys can be secrets too."""
    if pseudonymise is None:
        return Quarantined(collector, source_uri, item.position, _raw_text(item), checked.dialect, checked.problems,
                           item.occurrence)
    redactor = Redactor(pseudonymise)
    problems = [Problem(redactor.text(p.path), redactor.text(p.message)) for p in checked.problems]
    people = people_fields(dialects.dialect(checked.module)) if checked.module else ()
    return Quarantined(collector, source_uri, item.position, _scrubbed_raw(item, redactor, people, pseudonymise),
                       checked.dialect, problems, item.occurrence)


def _scrubbed_raw(item: RawItem, redactor: Redactor, people: tuple[str, ...], pseudonymise: Callable[[str], str]) -> str:
    """The quarantined text, scrubbed and its people pseudonymised; exactly as received when
    there was nothing to change. A report nested too deep to walk is scrubbed as the text it is."""
    if item.obj is UNPARSED or item.obj is PENDING or depth_problem(item.obj) is not None:
        return redactor.text(_raw_text(item))
    report = pseudonymise_fields(item.obj, people, pseudonymise)
    scrubbed = redactor.value(report)
    return jsontext.dumps(scrubbed).decode() if redactor.changed or report is not item.obj else item.raw_text()


def _raw_text(item: RawItem) -> str:
    try:
        return item.raw_text()
    except ValueError:  # no text was received, and the value is too deep to write as JSON
        return f"[not kept: a value nested deeper than {MAX_DEPTH} levels, with no text to keep]"
