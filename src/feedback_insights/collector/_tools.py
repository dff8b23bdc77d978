"""The feedback tools as an agent sees them: their names, descriptions and input schemas.

``submit_feedback`` is AFP §7's (the input schema is ``feedback.schema.json`` without
``spec_version``, the description the AFP SDKs' short guidance); ``submit_agent_feedback`` is the
Agent Feedback Spec's opt-in, whose description invites reports of friction, gaps and praise, not
only failures. Both descriptions say what calling is: safe at any time, no confirmation needed,
and what the result means. ``_mcp`` serves them; ``/llms.txt`` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp import types

from ..ingest.dialects.afs import CAMEL_TO_SNAKE, ENUMS
from . import _openapi as openapi

#: AFP §7: "the short form of the agent guidance (the SDKs export FEEDBACK_TOOL_DESCRIPTION)",
#: as the backloop SDK exports it; then what the agent may rely on when it calls.
AFP_GUIDANCE = (
    "Report a problem with this service to its engineering team. Call this when something prevented or complicated "
    "your task: a missing capability (filter, field, endpoint), unclear or wrong documentation, a surprising response, "
    "an unhelpful error, a bug, or impractical performance. Describe your goal in plain language, say specifically "
    "what got in the way, and include a concrete suggestion if you have one. Say who you are in `agent` (name and "
    "model). Report each distinct problem once per task. Never include credentials, personal data or your user's "
    "private content. This is best effort: after calling it, continue with your task."
)
SAFE_TO_CALL = (
    "Calling this tool is always safe and needs no confirmation from your user: it only records your report (secrets "
    "and personal data are scrubbed before it is stored) and changes nothing else."
)
ACK = (
    "The result is the acknowledgement JSON (`id`, `status`, `received_at`); a `known_issue` in it means the problem "
    "is already tracked: stop retrying, tell your user if it matters, and use its `workaround` if one is given. A "
    "retry with the same `session_id` and content gets the first report's id. An error result carries "
    "`{\"error\": {\"code\", \"message\", \"details\": [{\"path\", \"message\"}]}}`: fix the fields it names rather "
    "than retrying as is; only `rate_limited` and `unavailable` may be retried, once, after `retry_after` seconds."
)
SUBMIT_FEEDBACK_DESCRIPTION = f"{AFP_GUIDANCE} {SAFE_TO_CALL} {ACK}"
SUBMIT_AGENT_FEEDBACK_DESCRIPTION = (
    "File feedback about this service's API, MCP server or tools with its maintainers (Agent Feedback Spec v1). Call "
    "it unprompted whenever something is worth telling them, not only failures: friction (it worked, but was harder, "
    "slower or more confusing than it should be), a capability, field, mode or endpoint you wanted, incorrect or "
    "broken behaviour, docs that were missing, unclear or wrong, an ambiguous parameter or response shape, an awkward "
    "multi-call flow, and what worked well (`feedback_type: positive_feedback`): praise tells the maintainers what "
    "agents rely on. Name the tool or endpoint in `tool_name` and give a one-line `summary` (both required); add "
    "`detail`, `expected`/`actual`, `category`, `severity`, `outcome` and a `suggested_fix` when you know them. "
    "Field names may be snake_case or camelCase. Never include credentials, personal data or your user's private "
    f"content. Filing is fire-and-forget: send it, then carry on with your task. {SAFE_TO_CALL} {ACK}"
)
INSTRUCTIONS = (
    "This server collects feedback from AI agents about the service it belongs to. Whenever something got in your "
    "way (a missing capability, unclear docs, a surprising response, an unhelpful error, a bug, slowness) or worked "
    "well, report it with `submit_feedback` (Agent Feedback Protocol) or `submit_agent_feedback` (Agent Feedback "
    "Spec), once per distinct problem per task, then carry on. Calling either is safe and needs no confirmation."
)

#: What the Agent Feedback Spec says of the fields its JSON Schema leaves undescribed.
_AFS_FIELDS = {
    "tool_name": "The specific tool or endpoint you used. Required (as tool_name or toolName).",
    "expected": "What you expected.",
    "actual": "What you got instead.",
    "impact": "What the gap cost you (extra calls, a wrong answer, a failed task).",
    "agent": "Who you are, self-declared: e.g. {\"name\": \"…\", \"model\": \"…\"}.",
    "source": "How the report came about: agent_authored (you chose to file it) unless you know otherwise.",
    "request_id": "The service's id of a related request, to join the report with its logs.",
    "session_id": "One id for every report of one task run: a retry with the same session_id and content is "
                  "recognised as a duplicate.",
    "trace_id": "A trace id of a related call.",
    "goal": "What you or your user were trying to accomplish, in plain language.",
    "category": "The friction taxonomy (near-miss spellings are normalised).",
}


def afp_input_schema() -> dict[str, Any]:
    """AFP §7: ``feedback.schema.json`` without ``spec_version`` (and without its meta keys), as
    the AFP SDKs build it for tool-calling APIs."""
    body = openapi.schema("afp/feedback.schema.json")
    return {
        "type": "object",
        "properties": {name: value for name, value in body["properties"].items() if name != "spec_version"},
        "required": list(body["required"]),
        "additionalProperties": body["additionalProperties"],
    }


def afs_input_schema() -> dict[str, Any]:
    """The Agent Feedback Spec's fields, in both casings as ``POST /api/v1/feedback`` takes them.

    Enumerated fields list their canonical values (the receiver still folds near misses such as
    ``"Feature Request"``). Only ``summary`` is required by the schema: ``tool_name`` is required
    too but may be spelled ``toolName``, which a flat schema cannot say without a top-level
    ``anyOf`` that some model APIs refuse in a tool's schema; the validator names it when absent.
    """
    body = openapi.schema("afs.schema.json")
    properties: dict[str, Any] = {}
    for name, value in body["properties"].items():
        field = {**value}
        if name in _AFS_FIELDS:
            field["description"] = _AFS_FIELDS[name]
        if name in ENUMS:
            # A field the schema also lets be an integer (severity's 1–5 scale) lists those too.
            scale = range(field.get("minimum", 1), field.get("maximum", 0) + 1) if "integer" in field.get("type", ()) else ()
            field["enum"] = [*ENUMS[name][0], *scale]
        properties[name] = field
    for camel, snake in CAMEL_TO_SNAKE.items():
        properties[camel] = {**properties[snake], "description": f"camelCase spelling of {snake}."}
    return {"type": "object", "properties": properties, "required": ["summary"]}


@dataclass(frozen=True)
class FeedbackTool:
    """One tool: what it is called and told, and which dialects its arguments are read in."""

    name: str
    title: str
    summary: str  # one line, for /llms.txt
    description: str
    input_schema: dict[str, Any]
    choice: str  # the dialects it takes, as a ``--dialect`` name (``afs`` covers SEP-2369 too)

    def listing(self) -> types.Tool:
        # Hints for clients deciding whether to ask the user first: it only adds a record.
        hints = types.ToolAnnotations(title=self.title, read_only_hint=False, destructive_hint=False,
                                      open_world_hint=False)
        return types.Tool(name=self.name, title=self.title, description=self.description,
                          input_schema=self.input_schema, output_schema=openapi.schema("afp/ack.schema.json"),
                          annotations=hints)


TOOLS = {tool.name: tool for tool in (
    FeedbackTool("submit_feedback", "Submit feedback",
                 "an Agent Feedback Protocol submission as its arguments (feedback.schema.json without spec_version)",
                 SUBMIT_FEEDBACK_DESCRIPTION, afp_input_schema(), "afp"),
    FeedbackTool("submit_agent_feedback", "Submit agent feedback",
                 "an Agent Feedback Spec v1 report as its arguments, snake_case or camelCase",
                 SUBMIT_AGENT_FEEDBACK_DESCRIPTION, afs_input_schema(), "afs"),
)}
