"""The OpenAPI descriptions of the collector's bodies and answers, built from the JSON Schemas in
``schemas/`` so that the document, the validators and the tests share one source."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from ..core import MAX_DEPTH, schemas_dir
from ..core.vocabulary import near_miss_pattern

ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["path", "message"],
                        "properties": {"path": {"type": "string"}, "message": {"type": "string"}},
                    },
                },
            },
        }
    },
}
_ERRORS = {
    400: "Invalid body: AFP error shape, details[].path names each field",
    401: "Missing or unknown key",
    404: "No such resource (or, for a record, not one this key may delete)",
    409: ("A record id already stored with other content: both content hashes named, nothing of the batch stored; "
          "or (an agent's report) one erased at its owner's request, code erased, not stored again"),
    413: "Body over the size limit",
    415: "Content-Type is not application/json or application/*+json",
    429: "Rate limited (failed authentications count too); Retry-After says when to try again",
    503: "Could not store the report; retry once after Retry-After",
}


@cache
def schema(name: str) -> dict[str, Any]:
    """A schema file as an inline OpenAPI 3.1 schema (no $id; the one $ref resolved)."""
    document = json.loads((schemas_dir() / name).read_text(encoding="utf-8"))
    return _inline(document, name.rsplit("/", 1)[0] if "/" in name else "")


def _inline(node: Any, folder: str) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            return schema(f"{folder}/{node['$ref']}" if folder else node["$ref"])
        return {k: _inline(v, folder) for k, v in node.items() if k not in ("$schema", "$id")}
    if isinstance(node, list):
        return [_inline(v, folder) for v in node]
    return node


def afs_body() -> dict[str, Any]:
    """The Agent Feedback Spec body with its enumerated fields spelled out: the receiver takes
    near-miss values, so the document says which strings those are."""
    from ..ingest.dialects.afs import ENUMS

    body = schema("afs.schema.json")
    properties = {**body["properties"]}
    for name, (allowed, synonyms) in ENUMS.items():
        properties[name] = {**properties[name], "pattern": near_miss_pattern(allowed, synonyms)}
    return {**body, "properties": properties}


def json_body(body_schema: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """``openapi_extra=`` for a route that reads a JSON body of at most ``max_bytes``: the limit
    counts bytes, which no JSON Schema keyword can say, so it is stated in words and in
    ``x-max-bytes``."""
    return {"requestBody": {
        "required": True,
        "description": f"JSON (application/json or application/*+json), at most {max_bytes} bytes "
                       f"(413 over), objects and arrays nested at most {MAX_DEPTH} levels (400 deeper).",
        "x-max-bytes": max_bytes,
        "content": {"application/json": {"schema": body_schema}},
    }}


def answers(ok: Mapping[int, tuple[str, dict[str, Any] | None]], errors: tuple[int, ...],
            max_bytes: int | None = None) -> dict[int | str, Any]:
    """``responses=`` for a route: its successes and the errors it can return (``max_bytes``:
    its body limit, for the 413's description)."""
    responses: dict[int | str, Any] = {}
    for status, (description, body) in ok.items():
        responses[status] = {"description": description}
        if body is not None:
            responses[status]["content"] = {"application/json": {"schema": body}}
    for status in errors:
        description = _ERRORS[status]
        if status == 413 and max_bytes is not None:
            description = f"Body over {max_bytes} bytes"
        responses[status] = {"description": description, "content": {"application/json": {"schema": ERROR}}}
    return responses


DISCOVERY = {
    "type": "object",
    "required": ["spec_version", "endpoint", "types", "max_bytes", "auth"],
    "properties": {
        "spec_version": {"type": "string"},
        "endpoint": {"type": "string"},
        "types": {"type": "array", "items": {"type": "string"}},
        "max_bytes": {"type": "integer"},
        "auth": {"enum": ["none", "optional", "required"]},
    },
}
RECORD_RESULTS: dict[str, Any] = {
    "type": "object",
    "required": ["results"],
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["status"],
                "properties": {
                    "id": {"type": ["string", "null"]},
                    "status": {"enum": ["accepted", "duplicate", "rejected"]},
                    "error": ERROR["properties"]["error"],
                    "known_issue": {"type": "object"},
                },
            },
        }
    },
}
JSONRPC_ERROR = {
    "type": "object",
    "required": ["jsonrpc", "error"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer", "null"]},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {"type": "object"}},
        },
    },
}
JSONRPC_RESULT = {
    "type": "object",
    "required": ["jsonrpc", "result"],
    "properties": {"jsonrpc": {"const": "2.0"}, "id": {}, "result": {"type": "object"}},
}
