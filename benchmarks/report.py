"""Benchmark tables printed to the console and, on request, written as Markdown for the README.

The README's quality tables are pasted from runs; writing the same rows as Markdown as they
are printed means nothing is retyped (and mistyped) between the run and the README.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

#: Verdict words coloured on the console, plain in Markdown.
_COLOURS = {"PASS": "[green]PASS[/]", "FAIL": "[red]FAIL[/]"}


def number(value: float, digits: int = 3) -> str:
    """A score, or an em dash where it is undefined (NaN: e.g. the precision of no pair at all)."""
    return "—" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def percent(value: float) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.0%}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


@dataclass(slots=True)
class Report:
    """Every table of one run: each printed at once, all kept as Markdown."""

    console: Console
    markdown: list[str] = field(default_factory=list)

    def table(self, title: str, columns: list[str], rows: list[list[str]], note: str = "",
              left: int = 1) -> None:
        """One table; its first ``left`` columns are text (left-aligned), the rest figures."""
        out = Table(title=title, show_edge=False, pad_edge=False, caption=note or None, caption_justify="left")
        for i, column in enumerate(columns):
            out.add_column(column, justify="left" if i < left else "right")
        for row in rows:
            out.add_row(*(_COLOURS.get(cell, cell) for cell in row))
        self.console.print(out)
        self.markdown += [f"**{title}**", "", "| " + " | ".join(columns) + " |",
                          "|" + "---|" * len(columns)]
        self.markdown += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
        self.markdown += ["", note, ""] if note else [""]

    def line(self, text: str) -> None:
        self.console.print(" ".join(_COLOURS.get(word, word) for word in text.split(" ")), highlight=False)
        self.markdown += [text, ""]

    def write(self, path: Path) -> None:
        path.write_text("\n".join(self.markdown) + "\n")
