"""Compile a JSON Schema into Python source: a fast validator that reports exact field paths.

``jsonschema`` interprets a schema on every call and reports a missing or extra property at
its parent's path; the AFP conformance cases want the property's own path, and ingestion wants
tens of thousands of records a second. So each schema is turned once into straight-line Python
(one ``if`` per rule, the path string built only when a rule fails) and ``exec``-ed.

Covered keywords — the ones the AFP schemas and our own dialect schemas use: ``$ref`` (to a
sibling file), ``type`` (one or a list), ``const``, ``enum``, ``minLength``, ``maxLength``,
``pattern``, ``format: date-time``, ``minimum``, ``maximum``, ``properties``, ``required``,
``additionalProperties`` (false or a schema), ``items``, ``minItems``, ``maxItems``.
Anything else raises at compile time rather than being silently ignored. Messages match the
AFP's own SDK so that errors read the same whichever side reports them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from ._problems import Problem, join_path
from ._resources import schemas_dir

Validator = Callable[[Any, str, list[Problem]], None]

_ANNOTATIONS = {"$schema", "$id", "$comment", "title", "description", "examples", "default"}
_SUPPORTED = _ANNOTATIONS | {
    "$ref", "type", "const", "enum", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "properties", "required", "additionalProperties", "items",
    "minItems", "maxItems",
}
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)


def is_date_time(value: str) -> bool:
    """RFC 3339 date-time with a real calendar date and an explicit offset."""
    if not _RFC3339.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return False
    return True


def is_integer(value: Any) -> bool:
    """JSON Schema's integer: 400 and 400.0 are integers; 400.5 and True are not."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def same(a: Any, b: Any) -> bool:
    """JSON equality: ``True`` never equals ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


#: Source of a test that ``{v}`` has a JSON type.
_TYPE_TESTS = {
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "string": "isinstance({v}, str)",
    "boolean": "isinstance({v}, bool)",
    "integer": "_is_integer({v})",
    "number": "_is_number({v})",
    "null": "{v} is None",
}


def _num(n: float) -> str:
    return str(int(n)) if isinstance(n, float) and n.is_integer() else str(n)


class SchemaSet:
    """Schemas loaded from one folder, compiled on first use; ``$ref`` names a sibling file."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._raw: dict[str, dict[str, Any]] = {}
        self._compiled: dict[str, Validator] = {}

    def raw(self, name: str) -> dict[str, Any]:
        if name not in self._raw:
            self._raw[name] = json.loads((self.folder / name).read_text(encoding="utf-8"))
        return self._raw[name]

    def validator(self, name: str) -> Validator:
        if name not in self._compiled:
            # A forwarding stub first, so that a schema referring to itself terminates.
            self._compiled[name] = lambda v, p, out: self._compiled[name](v, p, out)
            self._compiled[name] = compile_schema(self.raw(name), self)
        return self._compiled[name]

    def check(self, name: str, value: Any) -> list[Problem]:
        problems: list[Problem] = []
        self.validator(name)(value, "", problems)
        return problems


@cache
def shared_schemas() -> SchemaSet:
    """The project's ``schemas/`` folder, compiled once for every module that uses it."""
    return SchemaSet(schemas_dir())


def compile_schema(schema: Mapping[str, Any], refs: SchemaSet | None = None) -> Validator:
    """A function ``(value, path, out)`` that appends a Problem per broken rule to ``out``."""
    writer = _Writer(refs)
    writer.line("def validate(v0, path, out):")
    writer.node(schema, "v0", "path", 1)
    writer.line("    return None")
    namespace = writer.namespace
    exec(compile("\n".join(writer.lines), "<schema>", "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace["validate"]


class _Writer:
    """Emits the source of one validator. Values live in ``v<n>`` variables; a path is a
    Python expression that is evaluated only when a rule fails."""

    def __init__(self, refs: SchemaSet | None) -> None:
        self.refs = refs
        self.lines: list[str] = []
        self.counter = 0
        self.namespace: dict[str, Any] = {
            "Problem": Problem, "_j": join_path, "_is_integer": is_integer, "_is_number": is_number,
            "_same": same, "_is_date_time": is_date_time, "_MISSING": object(),
        }

    def line(self, text: str, depth: int = 0) -> None:
        self.lines.append("    " * depth + text)

    def const(self, value: Any) -> str:
        """A name bound to ``value`` in the generated module."""
        self.counter += 1
        name = f"_c{self.counter}"
        self.namespace[name] = value
        return name

    def var(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def fail(self, path: str, message: str, depth: int) -> None:
        self.line(f"out.append(Problem({path}, {self.const(message)}))", depth)

    def node(self, schema: Mapping[str, Any], v: str, path: str, depth: int) -> None:
        unknown = set(schema) - _SUPPORTED
        if unknown:
            raise ValueError(f"schema keywords not supported: {sorted(unknown)}")
        if "$ref" in schema:
            if self.refs is None:
                raise ValueError(f"$ref {schema['$ref']!r} needs a SchemaSet")
            ref = self.refs.validator(schema["$ref"])
            self.line(f"{self.const(ref)}({v}, {path}, out)", depth)
            return
        if "type" in schema:
            names = [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
            test = " or ".join(_TYPE_TESTS[n].format(v=v) for n in names)
            self.line(f"if not ({test}):", depth)
            if len(names) == 1:
                article = "an" if names[0][0] in "aeiou" else "a"
                self.fail(path, f"must be {article} {names[0]}", depth + 1)
            else:
                self.fail(path, "must be one of the types: " + ", ".join(names), depth + 1)
            self.line("else:", depth)
            depth += 1
        self.line("pass", depth)
        self._const_enum(schema, v, path, depth)
        self._string(schema, v, path, depth)
        self._number(schema, v, path, depth)
        self._object(schema, v, path, depth)
        self._array(schema, v, path, depth)

    def _const_enum(self, schema: Mapping[str, Any], v: str, path: str, depth: int) -> None:
        if "const" in schema:
            self.line(f"if not _same({v}, {self.const(schema['const'])}):", depth)
            self.fail(path, "must be " + json.dumps(schema["const"], ensure_ascii=False), depth + 1)
        if "enum" in schema:
            options = list(schema["enum"])
            strings = self.const(frozenset(o for o in options if isinstance(o, str)))
            others = self.const(options)
            self.line(
                f"if not ((isinstance({v}, str) and {v} in {strings}) or any(_same({v}, o) for o in {others})):",
                depth,
            )
            self.fail(path, "must be one of: " + ", ".join(map(str, options)), depth + 1)

    def _string(self, schema: Mapping[str, Any], v: str, path: str, depth: int) -> None:
        lo, hi = schema.get("minLength"), schema.get("maxLength")
        pattern, date_time = schema.get("pattern"), schema.get("format") == "date-time"
        if lo is None and hi is None and pattern is None and not date_time:
            return
        self.line(f"if isinstance({v}, str):", depth)
        if lo is not None:
            self.line(f"if len({v}) < {int(lo)}:", depth + 1)
            self.fail(path, "must not be empty" if lo == 1 else f"must be at least {lo} characters", depth + 2)
        if hi is not None:
            self.line(f"if len({v}) > {int(hi)}:", depth + 1)
            self.fail(path, f"must be at most {hi} characters", depth + 2)
        if pattern is not None:
            self.line(f"if not {self.const(re.compile(pattern))}.search({v}):", depth + 1)
            self.fail(path, f"must match {pattern}", depth + 2)
        if date_time:
            self.line(f"if not _is_date_time({v}):", depth + 1)
            self.fail(path, "must be an RFC 3339 date-time", depth + 2)
        self.line("pass", depth + 1)

    def _number(self, schema: Mapping[str, Any], v: str, path: str, depth: int) -> None:
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if lo is None and hi is None:
            return
        self.line(f"if _is_number({v}):", depth)
        if lo is not None:
            self.line(f"if {v} < {lo!r}:", depth + 1)
            self.fail(path, f"must be >= {_num(lo)}", depth + 2)
        if hi is not None:
            self.line(f"if {v} > {hi!r}:", depth + 1)
            self.fail(path, f"must be <= {_num(hi)}", depth + 2)
        self.line("pass", depth + 1)

    def _object(self, schema: Mapping[str, Any], v: str, path: str, depth: int) -> None:
        if not {"properties", "required", "additionalProperties"} & set(schema):
            return
        properties: Mapping[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties", True)
        self.line(f"if isinstance({v}, dict):", depth)
        depth += 1
        self.line("pass", depth)
        for key in schema.get("required", ()):
            self.line(f"if {key!r} not in {v}:", depth)
            self.fail(f"_j({path}, {key!r})", "is required", depth + 1)
        for key, child in properties.items():
            value = self.var()
            self.line(f"{value} = {v}.get({key!r}, _MISSING)", depth)
            self.line(f"if {value} is not _MISSING:", depth)
            self.node(child, value, f"_j({path}, {key!r})", depth + 1)
        if extra is True:
            return
        known = self.const(frozenset(properties))
        key, value = self.var(), self.var()
        self.line(f"if not {v}.keys() <= {known}:", depth)
        self.line(f"for {key}, {value} in {v}.items():", depth + 1)
        self.line(f"if {key} not in {known}:", depth + 2)
        if extra is False:
            self.fail(f"_j({path}, {key})", "is not a recognised field", depth + 3)
        else:
            self.node(extra, value, f"_j({path}, {key})", depth + 3)

    def _array(self, schema: Mapping[str, Any], v: str, path: str, depth: int) -> None:
        if not {"items", "minItems", "maxItems"} & set(schema):
            return
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        self.line(f"if isinstance({v}, list):", depth)
        depth += 1
        self.line("pass", depth)
        if lo is not None:
            self.line(f"if len({v}) < {int(lo)}:", depth)
            self.fail(path, f"must have at least {lo} items", depth + 1)
        if hi is not None:
            self.line(f"if len({v}) > {int(hi)}:", depth)
            self.fail(path, f"must have at most {hi} items", depth + 1)
        if "items" in schema:
            index, item = self.var(), self.var()
            self.line(f"for {index}, {item} in enumerate({v}):", depth)
            self.node(schema["items"], item, f"_j({path}, {index})", depth + 1)
