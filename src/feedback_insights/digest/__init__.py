"""The weekly digest for product managers: one ISO week in DuckDB SQL (:func:`build`), rendered
as self-contained HTML with inline SVG charts and as neutralised Markdown (:func:`render`)."""

from ._charts import bars, sparkline, text_sparkline
from ._content import SPARK_WEEKS, TOP, Digest, DigestError, Week, build
from ._render import FORMATS, chat_text, post, render, write
from ._write import write_digest

__all__ = [
    "FORMATS",
    "SPARK_WEEKS",
    "TOP",
    "Digest",
    "DigestError",
    "Week",
    "bars",
    "build",
    "chat_text",
    "post",
    "render",
    "sparkline",
    "text_sparkline",
    "write",
    "write_digest",
]
