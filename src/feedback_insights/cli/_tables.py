"""Lists as people and scripts read them: the one rule every list command follows
(``clusters list``, ``drafts list``, ``quarantine list``, ``clusters list --unclustered``).

``--format table`` (the default) is laid out in the width: a terminal's, or 80 columns for
anything else (a pipe, a file, a CI log), whatever terminal the command was started from, so
that piped output is the same everywhere. Numbers and ids are never wrapped or cut; the one
text column (a label, a title) wraps; when the columns still do not fit, the least needed are
left out, in the order each command documents (:attr:`Column.drop`), and the caption names
them. ``--format tsv|csv|json`` are for scripts: every field of ``--json``, in its order,
whatever the width (tsv: no tab or line break inside a cell; nested values as compact JSON).

Report text is hostile: control and format characters (escape sequences, bidirectional
overrides, line breaks) never reach the terminal from a table or a TSV cell.
"""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.cells import cell_len, chop_cells

from ._app import UserError, out

FORMATS = ("table", "tsv", "csv", "json")
#: The width of a table printed anywhere but a terminal.
PIPE_WIDTH = 80
#: Columns of a table are this far apart.
GAP = "  "
#: Columns are left out until the wrapping column has this many cells (when there are columns
#: left to leave out: it never has fewer than :data:`MIN_LINE`).
MIN_WRAP = 30
MIN_LINE = 10
#: A text column that does not wrap (a service, a status) is cut past this many cells.
MAX_TEXT = 24

FormatOption = Annotated[str | None, typer.Option(
    "--format", help="table (laid out in the width; 80 columns when not a terminal) | tsv | csv | json: "
                     "every field, for scripts.")]


@dataclass(frozen=True)
class Column:
    """One column of a table: its header and how a row's cell reads. ``number``: right-aligned,
    never wrapped or cut; ``whole``: an id, never wrapped or cut; ``wraps``: the column that
    takes the room left and wraps (one per table); any other is cut past :data:`MAX_TEXT`.
    ``drop``: 0 for a column always shown, else the order in which columns are left out when
    the width is short (1 first)."""

    header: str
    cell: Callable[[Mapping[str, Any]], object]
    number: bool = False
    whole: bool = False
    wraps: bool = False
    drop: int = 0


def chosen_format(format: str | None, as_json: bool) -> str:
    """The format asked for: ``--json`` is ``--format json``."""
    if format is not None and format not in FORMATS:
        raise UserError(f"--format must be one of: {', '.join(FORMATS)} (got {format!r})")
    if as_json and format not in (None, "json"):
        raise UserError(f"--json is --format json: give one of them (got --json and --format {format})")
    return "json" if as_json else format or "table"


def emit(rows: Sequence[Mapping[str, Any]], fields: Sequence[str], columns: Sequence[Column], format: str,
         title: str | None = None, caption: str | None = None) -> None:
    """Print ``rows`` in ``format``: for scripts, ``fields`` of each row in their order; as a
    table, ``columns``, under ``title`` and above ``caption``."""
    if format == "json":
        import orjson

        for row in rows:
            out.file.write(orjson.dumps({name: row[name] for name in fields}, default=str).decode() + "\n")
    elif format in ("tsv", "csv"):
        out.file.write(delimited(rows, fields, format))
    else:
        lines = layout(rows, columns, table_width(), title, caption)
        out.file.write("".join(line + "\n" for line in lines))
    out.file.flush()


def table_width() -> int:
    """A terminal's width, or :data:`PIPE_WIDTH` for output that is not a terminal (rich would
    take the width of whatever terminal started the command, even when stdout is a pipe)."""
    return out.width if out.is_terminal else PIPE_WIDTH


def delimited(rows: Iterable[Mapping[str, Any]], fields: Sequence[str], format: str) -> str:
    """TSV or CSV, header first: null is empty, lists and objects compact JSON, times ISO 8601."""
    buffer = io.StringIO()
    if format == "csv":
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(fields)
        writer.writerows([_scalar(row[name], "csv") for name in fields] for row in rows)
    else:
        buffer.write("\t".join(fields) + "\n")
        for row in rows:
            buffer.write("\t".join(_scalar(row[name], "tsv") for name in fields) + "\n")
    return buffer.getvalue()


def _scalar(value: object, format: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        import orjson

        text = orjson.dumps(value, default=str).decode()
    elif hasattr(value, "isoformat"):
        text = value.isoformat()
    else:
        text = str(value)
    return _printable(text, keep_newlines=format == "csv")


def _printable(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every control or format character (escape sequences, bidirectional
    overrides, tabs and line breaks unless kept) made a space."""
    if text.isprintable():
        return text
    kept = "\n" if keep_newlines else ""
    return "".join(c if c in kept or unicodedata.category(c)[0] != "C" else " " for c in text)


def cell(value: object) -> str:
    """A table cell's text: one printable line (``—`` for nothing)."""
    if value is None or value == "":
        return "—"
    return " ".join(_printable(str(value)).split())


def layout(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], width: int, title: str | None = None,
           caption: str | None = None) -> list[str]:
    """The table's lines, none wider than ``width`` unless the columns that are never left
    out need more: numbers whole, the wrapping column wrapped, columns left out in their
    ``drop`` order until the rest fits (the caption then names them)."""
    cells = [[cell(column.cell(row)) for column in columns] for row in rows]
    natural = [max([cell_len(column.header), *(cell_len(r[i]) for r in cells)]) for i, column in enumerate(columns)]
    fixed = [n if c.number or c.whole or c.wraps else min(n, MAX_TEXT) for n, c in zip(natural, columns, strict=True)]
    shown = list(range(len(columns)))

    def needed() -> int:
        return sum(min(fixed[i], MIN_WRAP) if columns[i].wraps else fixed[i] for i in shown) + len(GAP) * (len(shown) - 1)

    for i in sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: columns[i].drop):
        if needed() <= width:
            break
        shown.remove(i)
    left = width - sum(fixed[i] for i in shown if not columns[i].wraps) - len(GAP) * (len(shown) - 1)
    widths = {i: max(min(fixed[i], left), min(fixed[i], MIN_LINE)) if columns[i].wraps else fixed[i] for i in shown}
    lines = wrap(title, width) if title else []
    lines.append(_line([columns[i].header for i in shown], [columns[i] for i in shown], [widths[i] for i in shown]))
    for row in cells:
        parts = [wrap(row[i], widths[i]) if columns[i].wraps else [_cut(row[i], widths[i])] for i in shown]
        for depth in range(max(len(p) for p in parts)):
            lines.append(_line([p[depth] if depth < len(p) else "" for p in parts], [columns[i] for i in shown],
                               [widths[i] for i in shown]))
    dropped = [columns[i].header for i in range(len(columns)) if i not in shown]
    notes = [caption] if caption else []
    if dropped:
        notes.append(f"left out for the width: {', '.join(dropped)} (--format tsv has every field)")
    for note in notes:
        lines += wrap(note, width)
    return lines


def _line(texts: Sequence[str], columns: Sequence[Column], widths: Sequence[int]) -> str:
    padded = [" " * (w - cell_len(t)) + t if c.number else t + " " * (w - cell_len(t))
              for t, c, w in zip(texts, columns, widths, strict=True)]
    return GAP.join(padded).rstrip()


def _cut(text: str, width: int) -> str:
    if cell_len(text) <= width:
        return text
    return chop_cells(text, width - 1)[0] + "…"


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, at spaces; a word longer than the line
    (a URL, a path) is cut in pieces."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and cell_len(line) + 1 + cell_len(word) <= width:
            line += " " + word
            continue
        if line:
            lines.append(line)
        pieces = chop_cells(word, width) if cell_len(word) > width else [word]
        lines += pieces[:-1]
        line = pieces[-1]
    return [*lines, line] if line or not lines else lines


def fields_text(value: object, seconds: bool = False) -> str:
    """A figure as ``clusters show`` and ``records show`` print it: counts as numbers, a ratio
    to two places, a time to the minute in UTC (to the second with ``seconds``: a record's own
    times), lists and counts by kind as words (never a Python repr)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, dict):
        return ", ".join(f"{cell(k)} {fields_text(v)}" for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value) or "none"
    if isinstance(value, datetime):
        shown = value.astimezone(UTC) if value.tzinfo else value
        return f"{shown:%Y-%m-%d %H:%M:%S} UTC" if seconds else f"{shown:%Y-%m-%d %H:%M} UTC"
    return cell(value)
