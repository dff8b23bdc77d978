"""In-session feedback read through the platform's own API, per owner: HTTP or MCP.

The platform serves ``agent_feedback`` rows owner-scoped (in-session-feedback-capture §§7–8):
``GET /v1/feedback?instance_id=&status=&limit=`` answers ``{"feedback": [row, …]}``, newest
first, for the owner whose bearer token it is (another owner's instance is 404, a token that is
no owner's 401), and the MCP tool ``list_feedback {instance_id?, status?, limit?}`` answers the
same rows. There is no cursor and no offset: a listing holds at most ``limit`` rows.

**Pages.** Each run lists each owner's rows: one listing, when it comes back shorter than the
limit (it is complete). A full one may have more behind it, so each status is listed alone, and
a full status again per instance, for every instance this source has ever stored a row of (the
``instances`` cursor, stored with the rows) and every instance the listing showed. The statuses
are listed twice: a row whose status moves while they are listed is missed by one pass, not by
both. Every row is read again each run, so a row whose status moved is found in its new status
and the warehouse follows it (the route has no ``updated_since``; an owner's rows are few).

**Deletions.** A row is forgotten only when it is gone from a complete listing: the run ends
with every id it read (:attr:`Batch.present`) only if every listing it needed was complete —
every owner answered, and every status of every known instance came back shorter than the
limit, or answered 404 to every owner (the instance is gone, or no configured owner may read
it: its rows are out of reach for good). A listing that was full, an owner refused (401, 403)
or a platform that failed leaves ``present`` unset: nothing is erased that run, and the run
says why. A row that answers 404 to write-back is gone too (``publish``'s write-back).

**Credentials.** Each owner's token is read from the environment variable ``token_env`` names,
never from the file. No error, log line or stored value holds a token: failures name the
variable. Retries of 429 and 5xx honour ``Retry-After``.

**Resumes.** Rows are stored batch by batch, each with its cursor in one transaction, and
every run reads everything again, so a run killed half-way loses nothing and doubles nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import Field

from ...config import DEFAULT_BATCH_SIZE, SourceConfig, Strict
from ...config import secret as env_secret
from .._raw import RawItem
from ._batch import Batch
from ._platform_api import FeedbackApi, NotFound, PlatformError, Refused

__all__ = ["FeedbackApi", "NotFound", "PlatformConfig", "PlatformError", "PlatformOwner", "PlatformSource", "Refused",
           "open_api", "owner_of", "owner_uri"]

#: The statuses a row can have (the seed's ``agent_feedback.status``), each listed on its own.
STATUSES = ("open", "triaged", "filed", "dismissed")
#: Cursor key: every instance this source has stored a row of (JSON list), so that a full
#: listing can be read again per instance and a stored row is never out of sight.
INSTANCES_KEY = "instances"


class PlatformOwner(Strict):
    """One owner whose feedback is read: the environment variable that holds their token."""

    token_env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="environment variable holding the owner's token")


class PlatformConfig(SourceConfig):
    """The in-session platform's feedback API (``/v1/feedback``, or MCP ``list_feedback``),
    read with each owner's token. Owner-private by default."""

    kind: Literal["platform"]
    url: str = Field(pattern=r"^https?://", description="base of /v1/feedback; with transport = mcp, the MCP endpoint")
    transport: Literal["http", "mcp"] = "http"
    dialect: str = "session"
    owners: list[PlatformOwner] = Field(min_length=1)
    private: bool = True
    page_size: int = Field(200, ge=1, le=1000, description="the limit each listing asks for")
    retries: int = Field(4, ge=0, le=10, description="retries of 429, 5xx and connection failures")
    write_back: bool = Field(True, description="mark rows filed, with issue_url, once their issue is filed")

    def token(self, owner: PlatformOwner) -> str:
        return env_secret(owner.token_env, f"source {self.name!r}", "an owner's platform token")

    def check_secrets(self) -> None:
        for owner in self.owners:
            self.token(owner)


def open_api(config: PlatformConfig, owner: PlatformOwner) -> FeedbackApi:
    """The owner's client on the source's transport."""
    token = config.token(owner)
    if config.transport == "mcp":
        from ._platform_mcp import McpFeedbackApi

        return McpFeedbackApi(config.url, token, owner.token_env, retries=config.retries)
    from ._platform_http import HttpFeedbackApi

    return HttpFeedbackApi(config.url, token, owner.token_env, retries=config.retries)


def owner_uri(config: PlatformConfig, owner: PlatformOwner) -> str:
    """Where an owner's rows came from, as records keep it: the listing and the owner's
    variable (not a secret), so write-back knows whose token may write a row."""
    return f"{config.url.rstrip('/')}/v1/feedback#owner={owner.token_env}"


def owner_of(config: PlatformConfig, source_uri: str | None) -> PlatformOwner | None:
    """The configured owner a record's ``source_uri`` names (:func:`owner_uri`), if any."""
    return next((o for o in config.owners if source_uri == owner_uri(config, o)), None)


@dataclass(slots=True)
class _Reading:
    """What one run has read: every id, the instances seen, and why the listing is not
    complete (empty: it is)."""

    ids: set[str] = field(default_factory=set)
    instances: set[str] = field(default_factory=set)
    gaps: list[str] = field(default_factory=list)
    #: Instances some owner could read, and those every owner so far answered 404 to.
    readable: set[str] = field(default_factory=set)


class PlatformSource:
    kind = "platform"
    config_model = PlatformConfig

    def __init__(self, config: PlatformConfig, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.name = config.name
        self.dialect = config.dialect
        self.service = config.service
        self.prevalidated = False
        self.config = config
        self.limit = config.page_size

    def batches(self, cursors: dict[str, str]) -> Iterator[Batch]:
        known = set(orjson.loads(cursors[INSTANCES_KEY])) if INSTANCES_KEY in cursors else set()
        reading = _Reading(instances=set(known))
        failures: list[str] = []
        for owner in self.config.owners:
            try:
                api = open_api(self.config, owner)
            except ValueError as exc:  # the variable is not set: the message names it
                failures.append(str(exc))
                reading.gaps.append(f"owner ${owner.token_env} was not read")
                continue
            try:
                yield from self._owner(api, owner, known, reading)
            except PlatformError as exc:
                failures.append(str(exc))
                reading.gaps.append(f"owner ${owner.token_env} was not read whole")
            finally:
                api.close()
        # Instances no owner could read are gone (or out of every owner's reach): their rows
        # are not among the ids, which is right when the rest is complete; the cursor keeps
        # them until a complete listing has forgotten their rows.
        complete = not reading.gaps
        instances = reading.readable if complete else reading.instances
        yield Batch([], self._uri(), {INSTANCES_KEY: _listed(instances)}, present=sorted(reading.ids) if complete else None)
        if failures or reading.gaps:
            why = "; ".join([*failures, *reading.gaps])
            raise PlatformError(f"{why}; nothing was forgotten this run")  # the runner names the source

    def _owner(self, api: FeedbackApi, owner: PlatformOwner, known: set[str], reading: _Reading) -> Iterator[Batch]:
        uri = owner_uri(self.config, owner)
        rows = api.list(None, None, self.limit)
        yield from self._rows(rows, uri, reading)
        if len(rows) < self.limit:
            return  # every row of the owner's, in one answer
        # Full: there may be more behind it. Each status alone, and a full one per instance (the
        # known ones too). Twice: a row whose status moves while the statuses are being listed
        # is missed by the first pass and found by the second, so it is not taken for deleted.
        for _ in range(2):
            for status in STATUSES:
                yield from self._status(api, owner, status, known, uri, reading)

    def _status(self, api: FeedbackApi, owner: PlatformOwner, status: str, known: set[str], uri: str,
                reading: _Reading) -> Iterator[Batch]:
        rows = api.list(status, None, self.limit)
        yield from self._rows(rows, uri, reading)
        if len(rows) < self.limit:
            return
        for instance in sorted(known | {str(r["instance_id"]) for r in rows if r.get("instance_id")}):
            try:
                narrower = api.list(status, instance, self.limit)
            except NotFound:
                continue  # not this owner's (or gone): another owner may read it
            reading.readable.add(instance)
            yield from self._rows(narrower, uri, reading)
            if len(narrower) >= self.limit:
                gap = (f"owner ${owner.token_env}: instance {instance} has {self.limit} or more {status} rows "
                       "(the listing's limit), so older ones cannot be listed")
                if gap not in reading.gaps:
                    reading.gaps.append(gap)

    def _rows(self, rows: list[dict[str, Any]], uri: str, reading: _Reading) -> Iterator[Batch]:
        fresh = [row for row in rows if isinstance(row, dict) and str(row.get("id")) not in reading.ids]
        if not fresh:
            return
        for row in fresh:
            reading.ids.add(str(row.get("id")))
            if row.get("instance_id"):
                reading.instances.add(str(row["instance_id"]))
                reading.readable.add(str(row["instance_id"]))
        items = [RawItem({k: v for k, v in row.items() if v is not None}, f"agent_feedback.id={row.get('id')}")
                 for row in fresh]
        yield Batch(items, uri, {INSTANCES_KEY: _listed(reading.instances)})

    def _uri(self) -> str:
        return f"{self.config.url.rstrip('/')}/v1/feedback"


def _listed(instances: set[str]) -> str:
    return orjson.dumps(sorted(instances)).decode()
