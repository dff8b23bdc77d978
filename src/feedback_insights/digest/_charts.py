"""Charts for the digest: inline SVG in the HTML file (templates ``sparkline.svg.j2`` and
``bars.svg.j2``: no JavaScript, no remote assets, scaled down on a phone through their viewBox),
PNG images attached to the email (:class:`AttachedCharts`: mail clients drop inline SVG), block
characters in Markdown. A template draws through ``charts`` (:class:`InlineCharts` or
:class:`AttachedCharts`), so the file and the email share one layout."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

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


def _counted(rows: list[dict[str, Any]], label: str) -> tuple[list[tuple[str, int]], str]:
    """``(name, reports)`` pairs of a mix, and the chart's label with its figures in words."""
    pairs = [(str(row["name"]), int(row["reports"])) for row in rows]
    return pairs, f"{label}: " + ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in pairs)


class InlineCharts:
    """The charts of the HTML file: inline SVG."""

    def spark(self, values: list[int], label: str) -> Markup:
        return sparkline(values, label)

    def bars(self, rows: list[dict[str, Any]], label: str) -> Markup:
        """Bars of a mix (rows of ``name`` and ``reports``)."""
        return bars(*_counted(rows, label))


@dataclass(frozen=True, slots=True)
class Attachment:
    """A chart attached to the email: its Content-ID (without the angle brackets) and PNG."""

    cid: str
    png: bytes


class AttachedCharts:
    """The charts of the email: PNG images (:mod:`._png`) collected in :attr:`images`, each
    shown by an ``<img src="cid:…">`` whose ``alt`` says its figures (many clients hold images
    back until the reader allows them)."""

    def __init__(self) -> None:
        self.images: list[Attachment] = []

    def _img(self, png: bytes, label: str, width: int, height: int, style: str) -> Markup:
        cid = f"chart-{len(self.images) + 1}@feedback-insights.digest"
        self.images.append(Attachment(cid, png))
        return Markup(_templates().get_template("chart.img.j2").render(
            cid=cid, width=width, height=height, label=label, style=style))

    def spark(self, values: list[int], label: str) -> Markup:
        from ._png import sparkline_png

        return self._img(sparkline_png(values, ACCENT), label, 112, 28, "display:block;border:0")

    def bars(self, rows: list[dict[str, Any]], label: str) -> Markup:
        """Bars of a mix (rows of ``name`` and ``reports``)."""
        if not rows:
            return Markup("")
        from ._png import bars_png

        pairs, label = _counted(rows, label)
        return self._img(bars_png(pairs, INK, MUTED, ACCENT), label, 560, len(pairs) * 24,
                         "display:block;border:0;width:100%;max-width:560px;height:auto")
