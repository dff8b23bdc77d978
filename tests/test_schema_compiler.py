"""The schema compiler agrees with jsonschema, reports exact paths, and refuses what it can't do."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedback_insights.core import Problem, SchemaSet, compile_schema, is_date_time

from .conftest import REPO

SCHEMAS = SchemaSet(REPO / "schemas")
NAMES = ["afs.schema.json", "sep2369.schema.json", "session.schema.json", "rfc026.schema.json",
         "envelope.schema.json", "canonical_record.schema.json"]

FORMATS = jsonschema.FormatChecker(formats=())
FORMATS.checks("date-time")(lambda v: not isinstance(v, str) or is_date_time(v))

scalars = (st.none() | st.booleans() | st.integers(-10, 700) | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=6) | st.sampled_from(["2026-11-02T10:00:00Z", "2026-13-02T10:00:00Z", "FEEDBACK",
                                                   "thumbs_up", "usability", "chat", "2.0", "feedback/submit"]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)


def keys_of(schema: dict[str, Any]) -> list[str]:
    return sorted(schema.get("properties", {})) + ["unknown_field"]


@st.composite
def instances(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    keys = keys_of(schema)
    chosen = draw(st.lists(st.sampled_from(keys), max_size=len(keys), unique=True))
    obj: dict[str, Any] = {}
    for key in chosen:
        sub = schema["properties"].get(key, {})
        if sub.get("type") == "array" and "items" in sub and "properties" in sub["items"]:
            obj[key] = draw(st.lists(instances(sub["items"]), max_size=2))
        elif "properties" in sub:
            obj[key] = draw(instances(sub))
        else:
            obj[key] = draw(json_values)
    return obj


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_verdicts_agree_with_jsonschema(name: str, data: st.DataObject) -> None:
    schema = SCHEMAS.raw(name)
    instance = data.draw(instances(schema))
    reference = jsonschema.Draft202012Validator(schema, format_checker=FORMATS)
    ours = SCHEMAS.check(name, instance)
    assert (not ours) == reference.is_valid(instance), (ours, [e.message for e in reference.iter_errors(instance)])


def test_missing_and_extra_properties_are_reported_at_their_own_path() -> None:
    validate = compile_schema({
        "type": "object", "required": ["a"], "additionalProperties": False,
        "properties": {"a": {"type": "string"},
                       "b": {"type": "array", "items": {"type": "object", "required": ["c"], "properties": {"c": {"type": "integer"}}}}},
    })
    out: list[Problem] = []
    validate({"b": [{"c": 1}, {"c": 1.5}, {}], "z": 1}, "", out)
    assert out == [
        Problem("a", "is required"),
        Problem("b.1.c", "must be an integer"),
        Problem("b.2.c", "is required"),
        Problem("z", "is not a recognised field"),
    ]


def test_messages_match_the_afp_sdk() -> None:
    schema = json.loads((REPO / "schemas" / "afp" / "feedback.schema.json").read_text())
    validate = compile_schema(schema)
    out: list[Problem] = []
    validate({"type": "bug", "goal": "", "message": "m" * 4001, "evidence": {"status_code": True}}, "", out)
    assert [str(p) for p in out] == [
        "goal: must not be empty",
        "message: must be at most 4000 characters",
        "evidence.status_code: must be an integer",
    ]


@pytest.mark.parametrize("keyword", [{"oneOf": []}, {"patternProperties": {}}, {"if": {}}])
def test_unsupported_keywords_fail_loudly(keyword: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="not supported"):
        compile_schema({"type": "object", **keyword})


@pytest.mark.parametrize(
    ("value", "ok"),
    [("2026-09-28T10:04:11Z", True), ("2026-09-28T10:04:11.123+02:00", True), ("2026-02-30T10:04:11Z", False),
     ("2026-09-28T10:04:11", False), ("yesterday", False)],
)
def test_date_time(value: str, ok: bool) -> None:
    assert is_date_time(value) is ok
