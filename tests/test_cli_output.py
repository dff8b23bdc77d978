"""The command line's output as people and scripts read it, run in this process through the
real entry point (``feedback_insights.cli.main``, its exit status caught): tables that fit 80
columns whatever the terminal, formats for scripts, ``clusters show`` in words, and one exit
status convention with one ``error:`` line over every command.

In this process, not a child: a child costs over a second to start, and test_cli shows a
child prints the same. Output is captured, so it is "not a terminal", as a pipe is."""

from __future__ import annotations

import csv
import io
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import typer
from rich.cells import cell_len

from feedback_insights.cli._clusters import LISTED
from feedback_insights.cli._tables import Column, layout
from feedback_insights.config import SAMPLE_HMAC_KEY
from feedback_insights.warehouse import Warehouse

from .conftest import drafted_copy, sample_copy, write_jsonl
from .test_dialects import AFS_SNAKE


def invoke(*args: str, env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    """``feedback-insights ARGS`` as its console script runs it: exit status, stdout, stderr.
    The root callback's Prefect setting is put back afterwards (a module may not change it)."""
    from click.testing import CliRunner

    from feedback_insights.cli import main

    with CliRunner().isolation(env={"PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": None, **(env or {})}) as (stdout, stderr, _):
        argv, sys.argv = sys.argv, ["feedback-insights", *args]
        try:
            main()
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        finally:
            sys.argv = argv
        return status, stdout.getvalue().decode(), stderr.getvalue().decode()


@pytest.fixture(scope="module")
def folder(clustered_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The drafted sample and a configuration naming it (no test here changes it)."""
    folder = tmp_path_factory.mktemp("cli-output")
    drafted_copy(clustered_sample, folder)
    (folder / "feedback-insights.toml").write_text(
        f'[warehouse]\npath = "{folder / "feedback.duckdb"}"\n[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n')
    return folder


def _config(folder: Path) -> str:
    return str(folder / "feedback-insights.toml")


def _json(folder: Path, *words: str) -> list[dict]:
    status, stdout, stderr = invoke(*words, "--json", "--config", _config(folder))
    assert status == 0, stderr
    return [orjson.loads(line) for line in stdout.splitlines()]


def _table(stdout: str, count: int) -> tuple[str, list[list[str]]]:
    """A table's header line and its first ``count`` rows, each row the lines it takes (a row
    starts where the first column has a value), as the layout prints them."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(("id  ", "report  ")))
    first = re.match(r"\s*\S+", lines[start])
    assert first is not None
    rows: list[list[str]] = []
    for line in lines[start + 1:]:
        if line[:first.end()].strip():
            if len(rows) == count:
                break  # the caption
            rows.append([line])
        else:
            rows[-1].append(line)
    return lines[start], rows


# -- tables -----------------------------------------------------------------------------------


def test_clusters_list_fits_80_columns_with_every_number_whole(folder: Path) -> None:
    listed = _json(folder, "clusters", "list", "-n", "0")
    status, stdout, stderr = invoke("clusters", "list", "-n", "0", "--config", _config(folder))
    assert status == 0 and stderr == ""
    assert max(cell_len(line) for line in stdout.splitlines()) <= 80, stdout
    header, rows = _table(stdout, len(listed))
    # Left out for the width in the documented order (kind, reports, score, service); the
    # label wraps, and the figures the trend is read against stay.
    assert header.split() == ["id", "label", "accounts", "a/r/h", "this/last", "trend"]
    assert "left out for the width: service, kind, reports, score" in " ".join(stdout.split())
    assert len(rows) == len(listed)
    label = slice(header.index("label"), header.index("accounts") - 2)
    for lines, row in zip(rows, listed, strict=True):
        first = re.split(r"\s{2,}", lines[0].strip())
        assert first[0] == str(row["cluster_id"]) and first[-1] == ("regression" if row["regression"] else row["trend"])
        figures = (str(row["accounts"]), f"{row['accounts_agent']}/{row['accounts_runtime']}/{row['accounts_human']}",
                   f"{row['accounts_this_week']}/{row['accounts_last_week']}")
        assert tuple(first[-4:-1]) == figures, lines  # every number whole, in its own column
        wrapped = " ".join(line[label].strip() for line in lines)
        assert wrapped.startswith(" ".join(row["label"].split())), (wrapped, row["label"])


def test_other_lists_fit_80_columns_and_keep_their_ids_whole(folder: Path) -> None:
    for words, key, ids in (
        (("drafts", "list"), "id", lambda r: str(r["id"])),
        (("quarantine", "list"), "id", lambda r: r["id"]),
        (("clusters", "list", "--unclustered", "-n", "0"), "report", lambda r: f"{r['collector']}:{r['id']}"),
    ):
        expected = [ids(r) for r in _json(folder, *words)]
        status, stdout, stderr = invoke(*words, "--config", _config(folder))
        assert status == 0 and stderr == "", words
        assert max(cell_len(line) for line in stdout.splitlines()) <= 80, (words, stdout)
        header, rows = _table(stdout, len(expected))
        assert header.split()[0] == key
        assert [lines[0].split()[0] for lines in rows] == expected, words


def test_piped_output_does_not_depend_on_the_terminal(folder: Path) -> None:
    """Rich took the width of the terminal the command started from (COLUMNS, or the size of
    stdin and stderr) even when stdout was a pipe."""
    for words in (("clusters", "list"), ("drafts", "list"), ("quarantine", "list")):
        plain = invoke(*words, "--config", _config(folder))
        for columns in ("40", "200"):
            assert invoke(*words, "--config", _config(folder), env={"COLUMNS": columns}) == plain, (words, columns)


def test_the_layout_wraps_the_label_drops_columns_in_order_and_shows_no_control_character() -> None:
    columns = (
        Column("id", lambda r: r["id"], number=True),
        Column("service", lambda r: r["service"], drop=2),
        Column("label", lambda r: r["label"], wraps=True),
        Column("accounts", lambda r: r["accounts"], number=True),
        Column("kind", lambda r: r["kind"], drop=1),
    )
    hostile = "\x1b[31mred\x1b[0m \u202egnp.exe\u202c line\nbreak\ttab 漢字漢字 " + "https://example.com/" + "x" * 90
    rows = [{"id": 123456, "service": "s" * 60, "label": hostile, "accounts": 98765, "kind": "problem"}]
    for width in (200, 80, 40):
        lines = layout(rows, columns, width, caption="a caption " * 12)
        assert max(cell_len(line) for line in lines) <= width, (width, lines)
        assert all(line.isprintable() for line in lines), lines
        assert "123456" in lines[1] and "98765" in lines[1]  # numbers whole, on the row's first line
        words = " ".join(" ".join(line.split()) for line in lines[1:])
        assert "red" in words and "漢字漢字" in words and "tab" in words
    assert layout(rows, columns, 200)[0].split() == ["id", "service", "label", "accounts", "kind"]
    assert layout(rows, columns, 80)[0].split() == ["id", "service", "label", "accounts"]  # kind goes first
    assert layout(rows, columns, 40)[0].split() == ["id", "label", "accounts"]
    assert "s" * 23 + "…" in layout(rows, columns, 200)[1]  # a text column is cut, never a number
    # Narrower than the columns that always stay: the numbers still whole, the label narrow.
    narrow = layout(rows, columns, 12)
    assert "123456" in narrow[1] and "98765" in narrow[1]


def test_tsv_csv_and_json_give_every_field_for_scripts(folder: Path) -> None:
    listed = _json(folder, "clusters", "list", "-n", "0")
    status, tsv, _ = invoke("clusters", "list", "-n", "0", "--format", "tsv", "--config", _config(folder))
    assert status == 0
    header, *lines = tsv.splitlines()
    assert header.split("\t") == list(LISTED) and len(lines) == len(listed)
    for line, row in zip(lines, listed, strict=True):
        cells = dict(zip(LISTED, line.split("\t"), strict=True))
        assert cells["cluster_id"] == str(row["cluster_id"]) and cells["label"] == row["label"]
        assert cells["score"] == str(row["score"]) and orjson.loads(cells["tools"]) == row["tools"]
        assert cells["draft_id"] == ("" if row["draft_id"] is None else str(row["draft_id"]))
    status, text, _ = invoke("clusters", "list", "-n", "0", "--format", "csv", "--config", _config(folder))
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert status == 0 and [r["label"] for r in parsed] == [r["label"] for r in listed]
    assert invoke("clusters", "list", "-n", "0", "--format", "json", "--config", _config(folder))[1] == "".join(
        orjson.dumps(r).decode() + "\n" for r in listed)
    for words in (("drafts", "list"), ("quarantine", "list"), ("clusters", "list", "--unclustered")):
        rows = _json(folder, *words)
        status, tsv, _ = invoke(*words, "--format", "tsv", "--config", _config(folder))
        assert status == 0 and tsv.splitlines()[0].split("\t") == list(rows[0]), words
        assert len(tsv.splitlines()) == len(rows) + 1 and "\x1b" not in tsv, words


def test_clusters_show_speaks_in_words_not_python(folder: Path, tmp_path: Path) -> None:
    top = _json(folder, "clusters", "list")[0]["cluster_id"]
    status, stdout, stderr = invoke("clusters", "show", str(top), "--config", _config(folder))
    assert status == 0, stderr
    figures = [line for line in stdout.splitlines() if re.match(r"^  [a-z_]+: ", line)]
    assert len(figures) > 20
    for line in figures:
        assert not re.search(r"[{}\[\]]|'|\bTrue\b|\bFalse\b|\bNone\b|\d\.\d{3}|\+00:00", line), line
    shown = dict(line.strip().split(": ", 1) for line in figures)
    assert re.fullmatch(r"-?\d+\.\d\d", shown["mean_sentiment"]) and re.fullmatch(r"\d+\.\d\d", shown["score"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", shown["first_seen"])
    assert re.fullmatch(r"([a-z_]+ \d+)(, [a-z_]+ \d+)*", shown["severities"]), shown["severities"]
    # A cluster whose every report was dismissed has no demand: said as such, not as [] or None.
    sample_copy(folder / "feedback.duckdb", tmp_path)
    with Warehouse(tmp_path / "feedback.duckdb") as wh:
        wh.con.execute("""UPDATE records SET status = 'dismissed' WHERE (collector, id) IN
                          (SELECT collector, id FROM cluster_members WHERE cluster_id = ?)""", [top])
    (tmp_path / "c.toml").write_text(f'[warehouse]\npath = "{tmp_path / "feedback.duckdb"}"\n'
                                     f'[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n')
    status, stdout, stderr = invoke("clusters", "show", str(top), "--config", str(tmp_path / "c.toml"))
    assert status == 0, stderr
    assert "  tools: none\n" in stdout and "  trend: —\n" in stdout and "  accounts: 0\n" in stdout
    assert not any(re.search(r"\[\]|\bNone\b", line) for line in stdout.splitlines()
               if re.match(r"^  [a-z_ ]+: ", line))


# -- exit status and error lines ----------------------------------------------------------------


def _commands() -> list[tuple[str, ...]]:
    from feedback_insights.cli import app

    def walk(group: typer.main.TyperGroup, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        for name, command in group.commands.items():
            if isinstance(command, typer.main.TyperGroup):
                yield from walk(command, (*path, name))
            else:
                yield (*path, name)

    root = typer.main.get_command(app)
    assert isinstance(root, typer.main.TyperGroup)
    return list(walk(root, ()))


@pytest.mark.parametrize("words", _commands(), ids=" ".join)
def test_every_command_answers_a_usage_error_in_one_error_line_with_status_2(words: tuple[str, ...]) -> None:
    status, stdout, stderr = invoke(*words, "--no-such-option")
    assert (status, stdout) == (2, ""), (status, stdout, stderr)
    assert stderr == f"error: no such option: --no-such-option (see feedback-insights {' '.join(words)} --help)\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("cli-inputs")
    write_jsonl(folder / "invalid.jsonl", [{"type": "nope", "goal": "g", "message": "m"}])
    # A wire dialect's records as a collector keeps them (the sample's afs.jsonl), not normalised.
    write_jsonl(folder / "afs.jsonl", [{"id": f"a{i}", "service": "svc", "feedback": AFS_SNAKE} for i in range(3)])
    (folder / "broken.jsonl").write_text('{"id": "x", "text": "fine"}\n{"id": "y"\n')
    (folder / "list.jsonl").write_text("[1, 2]\n")
    (folder / "full").mkdir()
    (folder / "full" / "x").write_text("")
    (folder / "empty").mkdir()
    return {p.name.removesuffix(".jsonl"): str(p) for p in folder.iterdir()} | {"out": str(folder / "out.jsonl"), "missing": str(folder / "no.jsonl")}


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


#: Each command's own errors beyond the usage error every command answers above: its words
#: ({name} a file of the ``files`` fixture, {config} the drafted sample's), the exit status and
#: how the one error line starts (None: no error line; validate's verdicts are its output).
#: 1: the command ran and says no (not found, refused, bad input data); 2: it could not run as
#: asked (a bad value, configuration, a busy port).
CASES: list[tuple[str, int, str | None]] = [
    ("validate --dialect xml {invalid}", 2, "error: --dialect must be one of: auto, afp, afs, session, rfc026"),
    ("validate {missing}", 2, "error: "),
    ("validate {invalid}", 1, None),
    ("normalise -i {invalid} -o {out}", 1, "error: "),
    ("scrub -i {list} -o {out}", 1, "error: "),
    ("forget --record nope --reason test --config {config}", 1, "error: no such record: nope"),
    ("forget --reason test --config {config}", 2, "error: give exactly one of --record and --account"),
    ("cluster -i {broken} -o {out}", 1, "error: "),
    ("cluster -i {afs} -o {out}", 1, "error: "),
    ("embed -i {afs} -o {out}", 1, "error: "),
    ("embed -i {missing} -o {out}", 2, "error: invalid value for '--input' / '-i'"),
    ("draft-preview -i {afs} --llm --config {config}", 2, "error: --llm needs an [llm] section"),
    ("draft-preview -i {list} --config {config}", 1, "error: "),
    ("digest --format pdf --config {config}", 2, "error: --format must be html or md (got 'pdf')"),
    ("desk --port 0 --config {config}", 2, "error: invalid value for '--port'"),
    ("quarantine list --format xml --config {config}", 2, "error: --format must be one of: table, tsv, csv, json"),
    ("quarantine replay nope --config {config}", 1, "error: no open quarantine entry with id nope"),
    ("records show nope --config {config}", 1, "error: no such record: nope"),
    ("clusters list --view topics --config {config}", 2, "error: --view must be one of: reports, goals"),
    ("clusters list --json --format csv --config {config}", 2, "error: --json is --format json"),
    ("clusters show 999 --config {config}", 1, "error: no cluster 999"),
    ("clusters show abc --config {config}", 2, "error: invalid value for 'cluster_id'"),
    ("clusters merge 999 20 --config {config}", 1, "error: no cluster 999"),
    ("clusters split 999 x --config {config}", 1, "error: no cluster 999"),
    ("clusters move nope --to 20 --config {config}", 1, "error: no record nope"),
    ("clusters unmerge 20 --config {config}", 1, "error: cluster 20 was not merged"),
    ("clusters ignore 999 --config {config}", 1, "error: no cluster 999"),
    ("clusters unignore 20 --config {config}", 1, "error: cluster 20 is not ignored"),
    ("clusters undo 999 --config {config}", 1, "error: no correction #999"),
    ("clusters history --format xml --config {config}", 2, "error: --format must be one of"),
    ("drafts list --status done --config {config}", 2, "error: --status must be one of: pending, approved"),
    ("drafts create 999 --config {config}", 1, "error: "),
    ("drafts show 999 --config {config}", 1, "error: no draft 999"),
    ("drafts approve 999 --config {config}", 1, "error: no draft 999"),
    ("drafts reject 999 --reason no --config {config}", 1, "error: no draft 999"),
    ("drafts reject 999 --config {config}", 2, "error: missing option '--reason' (see feedback-insights drafts reject"),
    ("drafts edit 999 --config {config}", 1, "error: no draft 999"),
    ("collector serve --port {busy_port} --config {config}", 2, "error: cannot listen on 127.0.0.1:{busy_port}: "),
    ("collector hash-key", 2, "error: missing argument 'key' (see feedback-insights collector hash-key --help)"),
    ("warehouse export {full} --config {config}", 2, "error: "),
    ("warehouse import {empty} --config {config}", 2, "error: "),
]
#: The commands with no error of their own that a test can give cheaply: the usage error above
#: is theirs (run and serve start Prefect; the stages run on whatever the configuration holds).
USAGE_ONLY = {"ingest", "signals", "draft", "publish", "run", "serve", "clusters update", "clusters rebuild"}


def test_every_command_is_in_the_table() -> None:
    """A new command must say which of its errors is which."""
    covered = {" ".join(w for w in case.split() if not w.startswith("-") and not w.startswith("{"))
               for case, *_ in CASES}
    named = {" ".join(words) for words in _commands()}
    assert {c for c in named if not any(case == c or case.startswith(c + " ") for case in covered)} == USAGE_ONLY


@pytest.mark.parametrize(("case", "status", "error"), CASES, ids=[case for case, *_ in CASES])
def test_each_error_has_its_status_and_one_error_line(
    case: str, status: int, error: str | None, folder: Path, files: dict[str, str], busy_port: int
) -> None:
    names = {**files, "config": _config(folder), "busy_port": str(busy_port)}
    found, stdout, stderr = invoke(*(word.format(**names) for word in case.split()))
    assert found == status, (found, stdout, stderr)
    if error is None:
        assert stderr == ""
        return
    assert stderr.startswith(error.format(**names)), stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr  # normalise adds its count of records
    if case.startswith("collector serve"):
        assert stdout == ""  # the address is announced once it is bound, never before


def test_records_show_prints_its_fields_and_signals_as_text_and_no_escape_sequence(folder: Path, tmp_path: Path) -> None:
    """A report's text went to the terminal as it was stored: rich passes escape sequences and
    bidirectional overrides on. Its signals were never printed."""
    sample_copy(folder / "feedback.duckdb", tmp_path)
    with Warehouse(tmp_path / "feedback.duckdb") as wh:
        (record,) = wh.con.execute("SELECT id FROM records ORDER BY id LIMIT 1").fetchone()
        wh.con.execute("UPDATE records SET summary = ? WHERE id = ?", ["\x1b[2Jwiped\x1b[0m \u202eevil\u202c\nline", record])
    (tmp_path / "c.toml").write_text(f'[warehouse]\npath = "{tmp_path / "feedback.duckdb"}"\n'
                                     f'[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n')
    status, stdout, stderr = invoke("records", "show", record, "--config", str(tmp_path / "c.toml"))
    assert status == 0, stderr
    assert all(line.isprintable() for line in stdout.splitlines()), stdout
    assert "  summary: [2Jwiped [0m evil line\n" in stdout  # the words stay, as text on one line
    assert re.search(r"^  received_at: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", stdout, re.MULTILINE)
    assert re.search(r"^  signals\.sentiment: -?\d+\.\d\d$", stdout, re.MULTILINE)
