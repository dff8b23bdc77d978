"""When the Prefect flows run and where their shards run."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from ._base import Strict

#: Texts per embedding shard, when a flow runs the shards as tasks.
DEFAULT_SHARD_SIZE = 2000

#: The five cron fields: their names, ranges, and the names a field may use for its values.
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_CRON_FIELDS: tuple[tuple[str, int, int, tuple[str, ...], int], ...] = (
    ("minute", 0, 59, (), 0),
    ("hour", 0, 23, (), 0),
    ("day of the month", 1, 31, (), 0),
    ("month", 1, 12, _MONTHS, 1),
    ("day of the week", 0, 7, _DAYS, 0),
)
_ITEM = re.compile(r"^(?:(\*|\?)|([0-9a-z]+)(?:-([0-9a-z]+))?)(?:/([0-9]+))?$")


def _cron_value(text: str, low: int, high: int, names: tuple[str, ...], first: int, what: str) -> int:
    if text in names:
        return names.index(text) + first
    if not text.isdigit():
        raise ValueError(f"{what} {text!r} is not a number" + (f" or a name ({', '.join(names)})" if names else ""))
    if not low <= int(text) <= high:
        raise ValueError(f"{what} {text} is out of range ({low}–{high})")
    return int(text)


def _check_cron_field(field: str, what: str, low: int, high: int, names: tuple[str, ...], first: int) -> None:
    for item in field.split(","):
        if what == "day of the month" and item in ("L", "l"):
            continue  # the month's last day
        if what == "day of the week" and (nth := re.fullmatch(r"([0-9a-z]+)(#[1-5]|l)", item)):
            _cron_value(nth.group(1), low, high, names, first, what)  # the nth or the last such weekday
            continue
        found = _ITEM.match(item)
        if not found:
            raise ValueError(f"{what} {item!r} is not a value, a range (1-5), a step (*/15) or a list (1,15)")
        star, start, end, step = found.groups()
        if step is not None and int(step) == 0:
            raise ValueError(f"{what} {item!r} steps by 0")
        if star:
            continue
        begin = _cron_value(start, low, high, names, first, what)
        if end is not None and _cron_value(end, low, high, names, first, what) < begin:
            raise ValueError(f"{what} range {item!r} ends before it starts")


def check_cron(value: str) -> str:
    """``value`` as a five-field cron schedule, or a ValueError saying which field is wrong and
    why (Prefect would only refuse it when ``serve`` creates the deployments). The syntax is
    croniter's, as Prefect reads it: values, names (jan, mon), ranges, steps, lists, ``?``, and
    ``L`` / ``5#2`` / ``5L`` for the last day, the second Friday, the last Friday."""
    fields = value.lower().split()
    if len(fields) != 5:
        raise ValueError(f"{value!r} is not a cron schedule: it has {len(fields)} fields, a cron schedule has 5 "
                         "(minute hour day-of-month month day-of-week, e.g. \"*/15 * * * *\")")
    for field, (what, low, high, names, first) in zip(fields, _CRON_FIELDS, strict=True):
        try:
            _check_cron_field(field, what, low, high, names, first)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a cron schedule: {exc}") from None
    return value


def _schedule(value: object) -> object:
    """A cron string, or seconds between runs; anything else names what it should be."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"{value!r} is not a schedule: write a cron string (\"*/15 * * * *\") or seconds between runs (900)")
    if isinstance(value, int) and value < 1:
        raise ValueError(f"{value} seconds between runs: the least is 1")
    return check_cron(value) if isinstance(value, str) else value


#: A schedule: a cron string, or seconds between runs.
Schedule = Annotated[str | int, BeforeValidator(_schedule)]
#: A Dask scheduler's address as Dask writes it: protocol, host (a name, an IPv4 address, or an
#: IPv6 one in brackets) and port.
_DASK_ADDRESS = re.compile(r"^(tcp|tls|ws|wss|ucx)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")


class FlowsConfig(Strict):
    """When the Prefect flows run (declared here once: ``serve`` and ``prefect.yaml`` use these)
    and where their shards run."""

    ingest: Schedule = "*/15 * * * *"
    insights: Schedule = "0 * * * *"
    publish: Schedule = "30 * * * *"
    weekly_digest: Schedule = "0 8 * * 1"
    timezone: str = Field("UTC", description="time zone of the cron schedules, e.g. Europe/Berlin")
    task_runner: Literal["local", "dask"] = Field("local", description="where embedding and clustering shards run")
    dask_address: str | None = Field(None, description="an existing Dask scheduler (tcp://host:8786); unset: a LocalCluster")
    dask_workers: int = Field(2, ge=1, le=256, description="LocalCluster workers when no address is set")
    shard_size: int = Field(DEFAULT_SHARD_SIZE, ge=100, description="texts per embedding shard")

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as Europe/Berlin)") from None
        return value

    @field_validator("dask_address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        """Checked here, not when the insights flow first reaches for it: Dask takes a bad
        address for a scheduler that is slow to answer, and the run fails after its timeout
        with a page of tracebacks."""
        if value is None:
            return None
        found = _DASK_ADDRESS.match(value)
        if not found:
            raise ValueError(f"{value!r} is not a Dask scheduler address: write protocol://host:port, "
                             "e.g. tcp://scheduler.internal:8786")
        if not 1 <= int(found.group(3)) <= 65535:
            raise ValueError(f"{value!r}: port {found.group(3)} is out of range (1–65535)")
        return value

    @model_validator(mode="after")
    def _address_needs_dask(self) -> FlowsConfig:
        if self.dask_address is not None and self.task_runner != "dask":
            raise ValueError(f"dask_address is set, but task_runner is {self.task_runner!r}, which does not use it: "
                             "set task_runner = \"dask\", or remove dask_address")
        return self
