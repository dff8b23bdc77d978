"""Charts for the digest as inline SVG (templates ``sparkline.svg.j2`` and ``bars.svg.j2``): no
JavaScript, no remote assets, readable in a browser and in an email client that shows SVG, and
scaled down on a phone (bar charts take the width they are given through their viewBox)."""

from __future__ import annotations

from functools import cache

import jinja2
from markupsafe import Markup

INK = "#1f2937"
MUTED = "#6b7280"
ACCENT = "#2563eb"
SPARKS = "▁▂▃▄▅▆▇█"


@cache
def _templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("feedback_insights.digest", "templates"), autoescape=True, undefined=jinja2.StrictUndefined
    )


def sparkline(values: list[int], label: str, width: int = 112, height: int = 28) -> Markup:
    """A line over ``values`` (oldest first) with the last point marked."""
    top = max(values) or 1
    step = width / max(len(values) - 1, 1)
    points = [(round(i * step, 1), round(height - 3 - (v / top) * (height - 6), 1)) for i, v in enumerate(values)]
    return Markup(_templates().get_template("sparkline.svg.j2").render(
        width=width, height=height, label=label, colour=ACCENT,
        points=" ".join(f"{x},{y}" for x, y in points), last=points[-1],
    ))


def bars(rows: list[tuple[str, int]], label: str, width: int = 560, bar_height: int = 18) -> Markup:
    """Horizontal bars, one per ``(name, value)``, the value printed at the end."""
    if not rows:
        return Markup("")
    top = max(value for _, value in rows) or 1
    name_width, gap = 170, 6
    room = width - name_width - 48
    shown = [
        {"name": name.replace("_", " "), "value": value, "y": i * (bar_height + gap), "length": round(max(2.0, room * value / top), 1)}
        for i, (name, value) in enumerate(rows)
    ]
    return Markup(_templates().get_template("bars.svg.j2").render(
        bars=shown, label=label, width=width, height=len(rows) * (bar_height + gap), bar_height=bar_height,
        name_width=name_width, ink=INK, muted=MUTED, colour=ACCENT,
    ))


def text_sparkline(values: list[int]) -> str:
    """The same line in block characters, for the Markdown digest."""
    top = max(values) or 1
    return "".join(SPARKS[round(v / top * (len(SPARKS) - 1))] for v in values)
