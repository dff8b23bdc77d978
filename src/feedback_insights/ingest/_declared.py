"""What a dialect declares about its reports' fields: where the people are, where the service is.

The scrubber pseudonymises a string under a key that names an account or a person
(:func:`feedback_insights.privacy.is_account_key`: ``account``, ``user_id``, ``reporter`` …),
but a dialect may keep its account under a name of its own (a plugin's ``customer_ref``). So
every dialect says, as paths into the report as received:

- ``ACCOUNT_FIELDS``: where the account its records' ``account`` is read from sits;
- ``IDENTITY_FIELDS``: other fields that name a person (an assignee, a watcher);
- ``SERVICE_FIELDS``: where the service its records' ``service`` is read from sits.

A path is dotted like a problem's path (``who.customer_ref``); in the two people lists ``*``
stands for every item of a list (``watchers.*``). People are pseudonymised before the report is
scrubbed, so a pseudonym is always of the account itself, never of the placeholder the scrubber
would have put in its place (two accounts that are emails stay two accounts). After
normalising, the record's ``account`` is pseudonymised once more, whatever dialect made it: the
guarantee for a dialect that read it from a field it did not declare (the pseudonymiser keeps a
pseudonym as it is, so for every other record this changes nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import SERVICE_RULE, is_service_name
from ..core import CanonicalRecord, Problem

Pseudonymise = Callable[[str], str]
_PERSON = (str, int, float)  # a bool is an int, but names no one


def people_fields(dialect: Any) -> tuple[str, ...]:
    """The paths of every field of ``dialect``'s reports that names a person."""
    return (*getattr(dialect, "ACCOUNT_FIELDS", ()), *getattr(dialect, "IDENTITY_FIELDS", ()))


def pseudonymise_fields(report: Any, paths: tuple[str, ...], pseudonymise: Pseudonymise) -> Any:
    """``report`` with the value at each of ``paths`` replaced by its pseudonym. What was
    received is never changed: the objects on a changed path are copies, and a report with
    nothing to replace is returned as it is."""
    for path in paths:
        report = _replaced(report, path.split("."), pseudonymise)
    return report


def _replaced(value: Any, steps: list[str], pseudonymise: Pseudonymise) -> Any:
    if not steps:
        return pseudonymise(str(value)) if type(value) in _PERSON and value != "" else value
    step, rest = steps[0], steps[1:]
    if step == "*" and isinstance(value, list):
        items = [_replaced(item, rest, pseudonymise) for item in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    if isinstance(value, dict) and step in value:
        inner = _replaced(value[step], rest, pseudonymise)
        return value if inner is value[step] else {**value, step: inner}
    return value


def pseudonymise_account(record: CanonicalRecord, pseudonymise: Pseudonymise) -> None:
    """The record's ``account`` as a pseudonym, whichever field its dialect read it from."""
    account = record["account"]
    if type(account) in _PERSON and account != "":
        record["account"] = pseudonymise(str(account))


def service_problems(report: Any, dialect: Any, known: list[Problem]) -> list[Problem]:
    """A problem for each of the dialect's service fields that holds something other than a
    service name, at the field's own path (unless ``known`` already has one there: a schema's
    length limit says it first)."""
    taken = {problem.path for problem in known}
    return [
        Problem(path, SERVICE_RULE)
        for path in getattr(dialect, "SERVICE_FIELDS", ())
        if path not in taken and (value := _at(report, path)) is not None and not is_service_name(value)
    ]


def service_problem(record: CanonicalRecord) -> Problem | None:
    """The canonical record's service, checked once it is made (the report's, or its source's):
    the guarantee for a dialect that reads it from a field it did not declare."""
    service = record["service"]
    return None if service is None or is_service_name(service) else Problem("service", SERVICE_RULE)


def _at(report: Any, path: str) -> Any:
    """The value at ``path`` in ``report``; None when it is not there."""
    value = report
    for step in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value
