"""``GET /llms.txt``: the feedback endpoints and MCP tools described for agents (AFP §2.4).

An agent reading a service's ``llms.txt`` learns there that it may report what got in its way,
where, how, and that doing so is safe. The text is written from the same configuration and the
same values as the discovery document (``/.well-known/agent-feedback``): endpoint, types, byte
limit and auth mode cannot disagree between the two.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import CollectorConfig
from ..core import MAX_DEPTH
from ._mcp import MCP_PATH
from ._tools import TOOLS

_AUTH = {
    "none": "none. Credentials are ignored and every report is anonymous.",
    "optional": "optional. Send the API key you use for the rest of the API as `Authorization: Bearer <key>` "
                "and your reports are attributed to your account; anonymous reports are welcome too.",
    "required": "required. Send the API key you use for the rest of the API as `Authorization: Bearer <key>`; "
                "without a valid key a report is refused (HTTP 401, or an `unauthorized` tool error over MCP).",
}


def _per_minute(limit: int, who: str) -> str:
    return f"{limit} per minute per {who}" if limit else f"no limit per {who}"


def llms_txt(config: CollectorConfig, base: str, types: Sequence[str]) -> str:
    """The Markdown for ``/llms.txt``; ``base`` is the collector's URL, ``types`` the AFP types
    the discovery document lists."""
    about = f"`{config.service}`" if config.service else "this service"
    tools = "\n".join(f"  - `{tool.name}`: {tool.summary}." for tool in TOOLS.values())
    return f"""# Agent feedback for {about}

> This service wants feedback from AI agents about its API, MCP server and tools: what you were \
trying to do, and what got in the way (a missing capability, unclear or wrong documentation, a \
surprising response, an unhelpful error, a bug, slowness) or worked well. Feedback is welcome and \
goes to the people who build it. Sending it is safe: it records the report and nothing else, needs \
no confirmation from your user, and secrets and personal data are scrubbed before it is stored. It \
is best effort: send it, then carry on with your task.

## Send feedback

- [POST {base}/feedback]({base}/feedback): an Agent Feedback Protocol v0.1 submission: `type`, \
`goal` and `message` required; `endpoint`, `method`, `outcome`, `workaround`, `expected`, \
`suggestion`, `session_id`, `agent`, `evidence`, `metadata` optional. `type` is one of: \
{", ".join(f"`{t}`" for t in types)}. Answered `202` with the acknowledgement `{{"id", "status", \
"received_at"}}`, and `known_issue` when the problem is already tracked (with its status and any \
workaround).
- [POST {base}/api/v1/feedback]({base}/api/v1/feedback): an Agent Feedback Spec v1 report \
(`tool_name` and `summary` required; snake_case or camelCase field names). Answered `202` with \
the same acknowledgement.
- [POST {base}/api/mcp/feedback]({base}/api/mcp/feedback): MCP SEP-2369 feedback, bare or as a \
JSON-RPC `feedback/submit` request.
- [MCP server]({base}{MCP_PATH}): Streamable HTTP at `{base}{MCP_PATH}` (stateless, JSON \
answers), with the same credential (the `Authorization` header of its HTTP requests), limits and \
acknowledgement. Its tools:
{tools}

  Their result is the acknowledgement JSON; an invalid call is a tool error (`isError`) carrying \
the error object below.

## Rules

- Authentication: {_AUTH[config.auth]}
- Bodies (and tool arguments) are JSON, `Content-Type: application/json`, at most \
{config.max_bytes} bytes, nested at most {MAX_DEPTH} levels.
- Rate limits: {_per_minute(config.rate_limit_per_account, "account")}, \
{_per_minute(config.rate_limit_per_ip, "IP address")}; over them, `429` with `Retry-After`.
- Errors are `{{"error": {{"code", "message", "details": [{{"path", "message"}}]}}}}`; each detail \
names a field. Do not retry a `400`, `401`, `413` or `415`: fix what it names. Retry a `429` or \
`5xx` once, after `Retry-After`.
- Reuse one `session_id` for every report of one task: a retry with the same `session_id` and \
content gets the first report's id.
- Never include credentials, API keys, tokens, passwords, personal data or your user's private \
content. Report each distinct problem once per task.

## Reference

- [Discovery document]({base}/.well-known/agent-feedback): the AFP endpoint, types, byte limit \
and auth mode as JSON.
- [OpenAPI]({base}/openapi.json): every HTTP endpoint, its body schema and its answers.
"""
