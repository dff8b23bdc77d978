"""A quiet, predictable command line, run as a user runs it (a child process, output to a pipe):
``run`` says what it did once, ``--help`` shows what its text says, ``drafts show`` is readable
and never turns report text into emoji, and ``publish --dry-run`` says what ``publish`` does.

The ``--help`` pages are rendered in this process (``render_help``: the app's own command,
through click's runner, at a pipe's width): fifty child processes took over a minute and a half,
and ``test_cli`` shows a child's page is the same text. ``--verbose`` is checked on test_cli's
``run``, which shows Prefect's logs where this module's run hides them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from rich.cells import cell_len

from feedback_insights.cli import app
from feedback_insights.config import SAMPLE_HMAC_KEY
from feedback_insights.drafts import edit_form, neutralise

from .conftest import render_help, run_cli
from .github_fake import running_github
from .test_cli_output import _table

STAGES = ("ingest", "signals", "clusters", "goal themes", "drafts", "publish", "digest", "warehouse")


def _child_env() -> dict[str, str]:
    """The user's environment as a fresh shell has it: no Prefect settings a test session made,
    no terminal width."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k not in ("COLUMNS", "LINES")}


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``feedback-insights run`` on the embedded default, once, in a folder whose path alone is
    longer than a terminal line (so that a line cut at 80 columns would show)."""
    folder = tmp_path_factory.mktemp("quiet-run") / ("a-folder-with-a-long-name-" * 3) / "and-another-one-below-it"
    folder.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "feedback_insights", "run"], cwd=folder, env=_child_env(),
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    return done, folder


def test_run_prints_one_summary_and_no_prefect_logs(sample_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, folder = sample_run
    assert done.stderr == ""  # Prefect's INFO lines (and its temporary server's banner) are gone
    lines = done.stdout.splitlines()
    for stage in ("ingest", "signals", "clusters", "goal themes", "publish", "warehouse"):
        assert sum(line.startswith(f"{stage}: ") for line in lines) == 1, (stage, done.stdout)
    assert sum(line.startswith("drafts: ") for line in lines) == 2  # the stage, then the review queue
    # Each line whole, however long: nothing is cut at 80 columns, not even mid-path.
    assert all(line.split(":")[0] in STAGES for line in lines), done.stdout
    assert f"warehouse: {folder / 'feedback.duckdb'}" in lines
    assert f"digest: {folder / 'digests' / 'digest-2026-W48.html'}" in lines
    clusters = next(line for line in lines if line.startswith("clusters: "))
    assert len(clusters) > 80 and clusters.endswith("unclustered")


def _commands(group: typer.main.TyperGroup, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], bool]]:
    """Every command and group of the app: (its words, whether it is a group)."""
    found = [(path, True)]
    for name, command in group.commands.items():
        if isinstance(command, typer.main.TyperGroup):
            found += _commands(command, (*path, name))
        else:
            found.append(((*path, name), False))
    return found


def _bracketed(command: object) -> set[str]:
    """The [section] names its help text and its options' help texts mention."""
    texts = [getattr(command, "help", None) or "", getattr(command, "epilog", None) or ""]
    texts += [getattr(p, "help", None) or "" for p in getattr(command, "params", [])]
    return {m for text in texts for m in re.findall(r"\[[a-z_.]+\]", text)}


def test_help_shows_brackets_plain_flags_and_an_example_for_every_group() -> None:
    root = typer.main.get_command(app)
    assert isinstance(root, typer.main.TyperGroup)
    mentioned: set[str] = set()
    for words, is_group in _commands(root):
        command = root
        for word in words:
            command = command.commands[word]
        shown = render_help(*words)
        assert shown.exit_code == 0, (words, shown.output)
        assert "<bool>" not in shown.stdout, words
        assert "``" not in shown.stdout, words  # reStructuredText of a docstring, not help
        for name in _bracketed(command):
            assert name in shown.stdout, (words, name)
            mentioned.add(name)
        if is_group:
            assert "Example:" in shown.stdout, words
            assert f"feedback-insights {' '.join(words)}".strip() in shown.stdout.split("Example:")[1], words
    # The sections the help names, each shown where it is named.
    assert {"[llm]", "[digest]", "[collector]"} <= mentioned
    assert "--llm  " in render_help("draft-preview").stdout  # a flag, shown without a type


def _draft_ids(config: Path) -> list[dict[str, object]]:
    import orjson

    listed = run_cli("drafts", "list", "--json", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    return [orjson.loads(line) for line in listed.stdout.splitlines()]


def _config(folder: Path, warehouse: Path, github: str = "") -> Path:
    path = folder / "feedback-insights.toml"
    path.write_text(f'[warehouse]\npath = "{warehouse}"\n\n[privacy]\nhmac_key = "{SAMPLE_HMAC_KEY}"\n{github}')
    return path


def test_drafts_show_prints_what_is_filed_without_escapes_or_emoji(
    sample_run: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    warehouse = tmp_path / "feedback.duckdb"
    shutil.copyfile(sample_run[1] / "feedback.duckdb", warehouse)
    config = _config(tmp_path, warehouse)
    draft = next(d for d in _draft_ids(config) if d["status"] == "pending")
    # A report's text, neutralised as the drafting stage quotes it, through the real `drafts edit`.
    report = "Mail [REDACTED:email:1] got :smile: a_b *x* `f` [h](javascript:x) <b>"  # fits in a line
    body = "## What agents reported\n\n" + neutralise.quote(report) + "\n"
    form = tmp_path / "form.txt"
    form.write_text(edit_form({"title": "export fails for [REDACTED:email:1] :email:", "labels": ["bug"],
                               "workaround": None, "body": body}))
    editor = tmp_path / "editor.py"
    editor.write_text(f"import sys, shutil\nshutil.copyfile({str(form)!r}, sys.argv[1])\n")
    edited = run_cli("drafts", "edit", str(draft["id"]), "--config", str(config),
                     env={**os.environ, "EDITOR": f"{sys.executable} {editor}"})
    assert edited.returncode == 0 and "changed" in edited.stdout, edited.stdout + edited.stderr

    shown = run_cli("drafts", "show", str(draft["id"]), "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    assert "export fails for [REDACTED:email:1] :email:" in shown.stdout
    assert report in shown.stdout
    assert "\\" not in shown.stdout  # no Markdown escape is left to read
    assert not set("\N{ENVELOPE}\N{SMILING FACE WITH SMILING EYES}\N{SMILING FACE WITH OPEN MOUTH AND SMILING EYES}") & set(shown.stdout)

    raw = run_cli("drafts", "show", str(draft["id"]), "--raw", "--config", str(config))
    assert neutralise.quote(report) in raw.stdout  # the Markdown exactly as it is filed


def test_publish_dry_run_names_the_repository_publish_files_on(
    sample_run: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    warehouse = tmp_path / "feedback.duckdb"
    shutil.copyfile(sample_run[1] / "feedback.duckdb", warehouse)
    with running_github() as github:
        github.add_repo("acme/api")
        github.add_repo("acme/orbit")
        settings = (f'\n[github]\nbase_url = "{github.url}"\ntoken_env = "FI_QUIET_TOKEN"\ntimeout = 5\nretries = 0\n'
                    'backoff = 0\nseconds_between_writes = 0\nrepos = { "acme-companies-api" = "acme/api", '
                    '"orbit-mcp" = "acme/orbit" }\n')
        config = _config(tmp_path, warehouse, settings)
        pending = [d for d in _draft_ids(config) if d["status"] == "pending"]
        chosen = {service: next(d for d in pending if d["service"] == service)
                  for service in ("acme-companies-api", "orbit-mcp", "pags-console")}
        for draft in chosen.values():
            assert run_cli("drafts", "approve", str(draft["id"]), "--config", str(config)).returncode == 0

        env = {**os.environ, "FI_QUIET_TOKEN": github.token}
        dry = run_cli("publish", "--dry-run", "--config", str(config), env=env)
        would = dict(re.findall(r"^would file draft (\d+) on (\S+): ", dry.stdout, re.MULTILINE))
        assert would == {str(chosen["acme-companies-api"]["id"]): "acme/api", str(chosen["orbit-mcp"]["id"]): "acme/orbit"}
        assert "publish: dry run: would file 2 issues (on acme/api, acme/orbit), 1 with no repository" in dry.stdout
        assert f"draft {chosen['pags-console']['id']}: no repository for service 'pags-console'" in dry.stderr
        assert dry.returncode == 1  # as publish will: one approved draft cannot be filed
        assert github.issues("acme/api") == [] and github.issues("acme/orbit") == []

        real = run_cli("publish", "--config", str(config), env=env)
        filed = dict(re.findall(r"^filed draft (\d+): http://127\.0\.0\.1:\d+/(\S+?)/issues/\d+$", real.stdout, re.MULTILINE))
        assert filed == would
        assert f"draft {chosen['pags-console']['id']}: no repository for service 'pags-console'" in real.stderr
        assert real.returncode == 1


def test_drafts_list_in_a_pipe_keeps_every_id_whole(
    sample_run: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    warehouse = tmp_path / "feedback.duckdb"
    shutil.copyfile(sample_run[1] / "feedback.duckdb", warehouse)
    config = _config(tmp_path, warehouse)
    listed = run_cli("drafts", "list", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    drafts = _draft_ids(config)
    assert max(cell_len(line) for line in listed.stdout.splitlines()) <= 80  # a pipe's width, not a terminal's
    _, rows = _table(listed.stdout, len(drafts))
    assert [int(lines[0].split()[0]) for lines in rows] == [d["id"] for d in drafts]  # a row's first line


#: Where the README's examples say they were run: the quick start's folder, as they print it.
README_FOLDER = "/srv/feedback"


def _readme_examples() -> list[tuple[str, list[str]]]:
    """The README's ```console blocks: each ``$ feedback-insights …`` line and the lines the
    README shows it printing (stdout, then stderr, as a terminal shows them); a command that
    ends with ``; echo "exit $?"`` shows its exit status last."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    examples: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```console\n(.*?)^```$", readme, re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ "):
                assert line.startswith("$ feedback-insights "), line  # the only command the blocks show
                examples.append((line.removeprefix("$ feedback-insights "), []))
            else:
                examples[-1][1].append(line.rstrip())
    return examples


def test_the_readme_s_examples_print_what_the_readme_shows(
    sample_run: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quick start's ``run`` (this module's run, in a fresh folder), then every other
    example in a copy of its folder, in this process: what each prints is what the README
    shows, paths under the quick start's folder written as :data:`README_FOLDER`."""
    import shlex

    from .test_cli_output import invoke

    done, folder = sample_run
    examples = _readme_examples()
    assert [command for command, _ in examples][:1] == ["run"] and len(examples) >= 4, examples
    assert done.stdout.replace(str(folder), README_FOLDER).splitlines() == examples[0][1]
    shutil.copyfile(folder / "feedback.duckdb", tmp_path / "feedback.duckdb")
    monkeypatch.chdir(tmp_path)  # the embedded default, on the warehouse the quick start left
    for command, shown in examples[1:]:
        status_shown = command.endswith('; echo "exit $?"')
        status, stdout, stderr = invoke(*shlex.split(command.removesuffix('; echo "exit $?"')))
        printed = [line.rstrip() for line in (stdout + stderr).replace(str(tmp_path), README_FOLDER).splitlines()]
        if status_shown:
            printed.append(f"exit {status}")
        else:
            assert status == 0, (command, stderr)
        assert printed == shown, command
