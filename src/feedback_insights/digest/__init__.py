"""The weekly digest for product managers: one ISO week in DuckDB SQL (:func:`build`), rendered
as self-contained HTML with inline SVG charts and as neutralised Markdown (:func:`render`),
posted to a chat webhook as Slack mrkdwn or Markdown (:func:`webhook_text`) and mailed as a
multipart email with PNG charts (:func:`message`, :func:`send`): :func:`write_digest` on the
warehouse's turn, then :func:`send_digest` off it, each channel once per week and content."""

from ._charts import AttachedCharts, InlineCharts, bars, sparkline, text_sparkline
from ._content import SPARK_WEEKS, TOP, Digest, DigestError, Week, build, reports_in, safe_url, status, theme_name
from ._email import email_digest, message, send
from ._render import FORMATS, WEBHOOK_FORMATS, many, post, render, render_email, webhook_text, write
from ._write import Sent, Written, chosen_week, rewrite_digests, send_digest, write_digest

#: Each digest sent, per week, channel and recipient: sent once.
TABLES = frozenset({"digest_sends"})

__all__ = [
    "TABLES",
    "FORMATS",
    "SPARK_WEEKS",
    "TOP",
    "WEBHOOK_FORMATS",
    "AttachedCharts",
    "Digest",
    "DigestError",
    "InlineCharts",
    "Sent",
    "Week",
    "Written",
    "bars",
    "build",
    "chosen_week",
    "email_digest",
    "many",
    "message",
    "post",
    "render",
    "render_email",
    "reports_in",
    "rewrite_digests",
    "safe_url",
    "send",
    "send_digest",
    "sparkline",
    "status",
    "text_sparkline",
    "theme_name",
    "webhook_text",
    "write",
    "write_digest",
]
