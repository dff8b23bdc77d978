"""Configuration: typed, relative to its file, and every mistake named by its key."""

from __future__ import annotations

from datetime import UTC, datetime
from fnmatch import fnmatch
from pathlib import Path

import pytest

from feedback_insights.config import (
    ConfigError,
    FileDropConfig,
    SqlTableConfig,
    embedded_default,
    load,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "feedback-insights.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[warehouse]\npaht = "x"\n', "warehouse.paht: unknown key (did you mean `path`?)"),
        ("[[sources]]\nname = \"a\"\nkind = \"files\"\n", "sources.0.path: field required"),
        ('[[sources]]\nname = "a"\nkind = "ftp"\npath = "x"\n', "sources.0: input tag 'ftp' found using 'kind' does not match"),
        ('[[sources]]\nname = "a"\nkind = "files"\npath = "x"\ndialect = "xml"\n', "sources.0.dialect: must be one of: auto, afp"),
        ("[ingest]\nmax_bytes = 1000\n", "ingest.max_bytes: input should be greater than or equal to 16384"),
        ('[[sources]]\nname = "a"\nkind = "files"\npath = "x"\n[[sources]]\nname = "a"\nkind = "sql"\npath = "y"\nservice = "s"\n',
         "sources: source names must be unique; repeated: a"),
        ('[[sources]]\nname = "console"\nkind = "sql"\npath = "y"\n',
         "sources.0.service: source 'console' reads dialect 'session', whose reports name no service: set service "
         "(dialects that name none: session)"),
        ('[[sources]]\nname = "d"\nkind = "files"\npath = "x"\ndialect = "session"\nservice = ""\n',
         "sources.0.service: string should have at least 1 character"),
        ('[[sources]]\nname = "d"\nkind = "files"\npath = "x"\nservice_by_tool = { "/*" = "" }\n',
         "sources.0.service_by_tool./*: string should have at least 1 character"),
        ('[[sources]]\nname = "d"\nkind = "files"\npath = "x"\nreceived_at = 2026-11-29T23:59:59\n',
         "sources.0.received_at: must be file, ingest, or an RFC 3339 time with an offset (2026-11-29T23:59:59Z)"),
        ('[[sources]]\nname = "d"\nkind = "files"\npath = "x"\nreceived_at = "yesterday"\n',
         "sources.0.received_at: must be file, ingest, or an RFC 3339 time with an offset"),
        ("[warehouse\n", "not valid TOML"),
        ('[drafts.links]\ntrace_id = "https://c.example/{instance}/trace?id={trace_id}"\n',
         "drafts.links.trace_id: unknown placeholder {instance} (placeholders: actual, agent_framework,"),
        ('[drafts.links]\ninstance_id = "https://{instance_id}.console.example/"\n',
         "drafts.links.instance_id: {instance_id} is in the host: a report would choose where the link goes"),
        ('[drafts.links]\ntrace_id = "https://c.example/trace?id={trace_id"\n', "drafts.links.trace_id: a { or } opens or closes no placeholder"),
        ('[drafts.links]\naudio_key = "https://c.example/audio/{instance_id}"\n', "drafts.links.audio_key: must contain the placeholder {audio_key}"),
    ],
)
def test_errors_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load(path)
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


def test_every_problem_is_listed_each_with_the_key_it_was_probably_meant_to_be(tmp_path: Path) -> None:
    path = write(tmp_path, (
        '[warehouse]\npaht = "x"\n\n[github]\ntoekn_env = "T"\nrepo = "a/b"\n\n'
        '[llm]\nbase_url = "https://llm.example/v1"\nmodel = "m"\nulr = "x"\n\n'
        '[[sources]]\nname = "c"\nkind = "http"\nulr = "https://c.example"\nkey_env = "K"\n\n[warehous]\n'
    ))
    with pytest.raises(ConfigError) as error:
        load(path)
    assert str(error.value).splitlines() == [
        f"{path}: 7 problems:",
        "  warehouse.paht: unknown key (did you mean `path`?)",
        "  llm.ulr: unknown key (did you mean `base_url`?)",  # a word of the key: base_url's url
        "  github.toekn_env: unknown key (did you mean `token_env`?)",
        "  github.repo: unknown key (did you mean `repos`?)",
        "  sources.0.url: field required",
        "  sources.0.ulr: unknown key (did you mean `url`?)",
        "  warehous: unknown key (did you mean `warehouse`?)",
    ]


def test_an_unknown_key_nothing_resembles_gets_no_guess(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load(write(tmp_path, '[digest]\nzzz = 1\n'))
    assert str(error.value).endswith("digest.zzz: unknown key")


@pytest.mark.parametrize("text", ['[source]\nname = "a"\nkind = "files"\npath = "x"\n',
                                  '[[source]]\nname = "a"\nkind = "files"\npath = "x"\n',
                                  '[sources]\nname = "a"\nkind = "files"\npath = "x"\n'])
def test_a_source_written_as_a_table_is_explained(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load(path)
    key = "sources" if text.startswith("[sources]") else "source"
    assert str(error.value) == (f"{path}: {key}: [{key}] is not a section: sources are a list of tables, each "
                                "written [[sources]] (two brackets), one per source")


def test_relative_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    path = write(tmp_path, '[warehouse]\npath = "w/f.duckdb"\n[[sources]]\nname = "s"\nkind = "sql"\npath = "app.sqlite"\n'
                           'service = "pags"\n')
    config = load(path)
    assert config.warehouse.path == tmp_path / "w" / "f.duckdb"
    (source,) = config.sources
    assert isinstance(source, SqlTableConfig)
    assert (source.path, source.table, source.dialect) == (tmp_path / "app.sqlite", "agent_feedback", "session")


def test_the_environment_variable_points_at_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, '[warehouse]\npath = "env.duckdb"\n')
    monkeypatch.setenv("FEEDBACK_INSIGHTS_CONFIG", str(path))
    assert load().warehouse.path == tmp_path / "env.duckdb"
    monkeypatch.setenv("FEEDBACK_INSIGHTS_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="no such configuration file"):
        load()


def test_the_embedded_default_reads_the_packaged_sample(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FEEDBACK_INSIGHTS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    config = load()
    assert config == embedded_default()
    files, submissions, table = config.sources
    assert isinstance(files, FileDropConfig) and files.path.name == "sample"
    assert isinstance(submissions, FileDropConfig) and submissions.path.name == "afp_submissions.jsonl"
    assert isinstance(table, SqlTableConfig) and table.path.name == "session.sqlite"
    # Every source of the sample says which service its nameless reports are about.
    assert not any(fnmatch("afp_submissions.jsonl", pattern) for pattern in files.patterns)
    assert submissions.service and table.service


def test_a_source_says_which_service_and_when_for_reports_that_name_neither(tmp_path: Path) -> None:
    path = write(tmp_path, """[[sources]]
name = "drop"
kind = "files"
path = "drop"
service = "orbit-mcp"
service_by_tool = { "/*" = "acme-companies-api", "deploy_*" = "deployer" }
received_at = 2026-11-29T23:59:59+01:00
""")
    (source,) = load(path).sources
    assert isinstance(source, FileDropConfig)
    assert source.service == "orbit-mcp"
    assert list(source.service_by_tool.items()) == [("/*", "acme-companies-api"), ("deploy_*", "deployer")]
    assert source.received_at == datetime(2026, 11, 29, 22, 59, 59, tzinfo=UTC)
    assert FileDropConfig(kind="files", name="d", path=tmp_path).received_at == "file"
    text = '[[sources]]\nname = "d"\nkind = "files"\npath = "x"\nreceived_at = "{}"\n'
    assert load(write(tmp_path, text.format("ingest"))).sources[0].received_at == "ingest"  # type: ignore[attr-defined]
    assert load(write(tmp_path, text.format("2026-11-29T10:00:00Z"))).sources[0].received_at == datetime(  # type: ignore[attr-defined]
        2026, 11, 29, 10, tzinfo=UTC)


def test_link_templates_may_use_several_placeholders(tmp_path: Path) -> None:
    path = write(tmp_path, """[drafts.links]
trace_id = "https://console.example/v1/instances/{instance_id}/trace?trace_id={trace_id}"
instance_id = "https://console.example/instances/{instance_id}"
audio_key = "https://console.example/audio/{audio_key}?agent={agent_name}&at={target_at}"
timeline_seq = "https://console.example/sessions/{session_id}/timeline/{timeline_seq}"
""")
    links = load(path).drafts.links
    assert links.trace_id == "https://console.example/v1/instances/{instance_id}/trace?trace_id={trace_id}"
    assert links.url("timeline_seq", {"session_id": "cs 1", "timeline_seq": "7"}) == "https://console.example/sessions/cs%201/timeline/7"


def test_a_plugin_dialect_that_names_no_service_needs_its_source_to_say_which() -> None:
    from types import SimpleNamespace

    from pydantic import ValidationError

    from feedback_insights.core import DIALECTS

    DIALECTS.register("ticketless", SimpleNamespace(NAMES_SERVICE=False))
    try:
        with pytest.raises(ValidationError, match=r"dialects that name none: session, ticketless\)"):
            FileDropConfig(kind="files", name="desk", path=Path("x"), dialect="ticketless")
        assert FileDropConfig(kind="files", name="desk", path=Path("x"), dialect="ticketless", service="helpdesk").service
        # A dialect whose reports may name one (AFP records do; bare submissions do not) is
        # checked report by report when ingested.
        assert FileDropConfig(kind="files", name="desk", path=Path("x"), dialect="afp").service is None
    finally:
        DIALECTS.unregister("ticketless")


SHORT_KEY_MESSAGE = "the pseudonymisation key is 1 character long; it needs at least 32"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[flows]\ningest = "61 * * * *"\n', "flows.ingest: '61 * * * *' is not a cron schedule: minute 61 is out of range (0–59)"),
        ('[flows]\npublish = "0 25 * * *"\n', "flows.publish: '0 25 * * *' is not a cron schedule: hour 25 is out of range (0–23)"),
        ('[flows]\nweekly_digest = "0 8 * * funday"\n', "flows.weekly_digest: '0 8 * * funday' is not a cron schedule: "
                                                        "day of the week 'funday' is not a number or a name (sun, mon,"),
        ('[flows]\ninsights = "*/0 * * * *"\n', "flows.insights: '*/0 * * * *' is not a cron schedule: minute '*/0' steps by 0"),
        ('[flows]\ningest = "0 * *"\n', "flows.ingest: '0 * *' is not a cron schedule: it has 3 fields, a cron schedule has 5"),
        ("[flows]\ningest = 0\n", "flows.ingest: 0 seconds between runs: the least is 1"),
        ('[flows]\ntask_runner = "dask"\ndask_address = "scheduler:8786:x"\n',
         "flows.dask_address: 'scheduler:8786:x' is not a Dask scheduler address: write protocol://host:port"),
        ('[flows]\ntask_runner = "dask"\ndask_address = "tcp://scheduler:99999"\n',
         "flows.dask_address: 'tcp://scheduler:99999': port 99999 is out of range"),
        ('[flows]\ndask_address = "tcp://scheduler:8786"\n',
         "flows: dask_address is set, but task_runner is 'local', which does not use it"),
        ('[privacy]\nhmac_key = "k"\n', f"privacy.hmac_key: {SHORT_KEY_MESSAGE}"),
        ('[warehouse]\npath = "no/such/folder/feedback.duckdb"\n', "warehouse.path: the folder "),
        ('[warehouse]\npath = "a-folder"\n', "warehouse.path: "),
        ('[collector]\ndb = "a-folder"\n', "collector.db: "),
        ('[digest]\nfolder = "a-file"\n', "digest.folder: "),
        ("[github]\nrepos = " + "[" * 5000 + "]" * 5000 + "\n", "line 2: github.repos: nested more than 16 levels deep"),
        ('[[sources]]\nname = "a"\nkind = "files"\npath = "."\nservice_by_tool = ' + "{a = " * 40 + "1" + "}" * 40 + "\n",
         "line 5: sources.service_by_tool: nested more than 16 levels deep"),
    ],
)
def test_each_mistake_is_one_line_naming_the_file_and_the_key_at_load(tmp_path: Path, text: str, message: str) -> None:
    """Found when the file is read, not when ``serve`` creates a deployment, the insights flow
    reaches for Dask, or ingest opens a warehouse somewhere new; and in one line."""
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("")
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load(path)
    assert str(error.value).startswith(f"{path}: {message}"), str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('[warehouse]\npath = "f.duckdb"\n'.encode("utf-16"), "is UTF-16 (or UTF-32) text; TOML files are UTF-8"),
        ('[warehouse]\npath = "f.duckdb"\n'.encode("utf-16-be"), "is UTF-16 (or UTF-32) text; TOML files are UTF-8"),
        ('[desk]\nreviewer = "José"\n'.encode("latin-1"), "line 2: byte 0xe9 is not UTF-8; TOML files are UTF-8"),
        (b"x" * (1024 * 1024 + 1), "larger than 1024 KiB"),
    ],
    ids=["utf-16", "utf-16-be", "latin-1", "over-1-MiB"],
)
def test_a_file_that_is_not_utf8_text_says_so_in_one_line(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "feedback-insights.toml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as error:
        load(path)
    assert str(error.value).startswith(f"{path}: {message}"), str(error.value)


def test_a_folder_given_as_the_file_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError) as error:
        load(tmp_path)
    assert str(error.value) == f"{tmp_path}: is a folder, not a configuration file (name the .toml file)"
    monkeypatch.setenv("FEEDBACK_INSIGHTS_CONFIG", str(tmp_path))
    with pytest.raises(ConfigError, match=r": is a folder, not a configuration file"):
        load()


def test_a_byte_order_mark_is_read_past(tmp_path: Path) -> None:
    """Some Windows editors start a UTF-8 file with one; it is still the same UTF-8 text."""
    text = '[warehouse]\npath = "f.duckdb"\n[desk]\nreviewer = "José"\n'
    plain = load(write(tmp_path, text))
    (tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbf" + text.encode())
    marked = load(tmp_path / "bom.toml")
    assert marked.warehouse.path == plain.warehouse.path == tmp_path / "f.duckdb"
    assert marked.desk.reviewer == "José"


def test_brackets_inside_strings_and_comments_are_not_nesting(tmp_path: Path) -> None:
    brackets = "[" * 20 + "{" * 20
    path = write(tmp_path, f'# {brackets}\n[desk]\nreviewer = "{brackets}"\n[drafts]\nlabels = [\n  """{brackets}""",\n  \'{brackets}\',\n]\n')
    config = load(path)
    assert config.desk.reviewer == brackets and config.drafts.labels == [brackets, brackets]


def test_a_short_key_in_the_environment_is_refused_at_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEEDBACK_INSIGHTS_HMAC_KEY", "k")
    with pytest.raises(ConfigError) as error:
        load(write(tmp_path, '[warehouse]\npath = "f.duckdb"\n'))
    assert str(error.value).startswith(f"$FEEDBACK_INSIGHTS_HMAC_KEY: {SHORT_KEY_MESSAGE}")
    monkeypatch.setenv("FEEDBACK_INSIGHTS_HMAC_KEY", "k" * 32)
    assert load(write(tmp_path, '[privacy]\nhmac_key = "%s"\n' % ("f" * 32))).privacy.key() == "k" * 32  # the environment wins


@pytest.mark.parametrize("cron", ["*/15 * * * *", "0 8 * * mon-fri", "0 0 L * *", "0 9 * * 5#2", "0 9 * * fril",
                                  "30 2 1,15 jan-jun *", "0 0 * * 7", "5-55/10 */2 ? * *"])
def test_the_cron_schedules_prefect_reads_are_accepted(tmp_path: Path, cron: str) -> None:
    assert load(write(tmp_path, f'[flows]\ningest = "{cron}"\n')).flows.ingest == cron
