"""The package's layout as its users meet it: the lazy top-level API, the extension seam
(sources, dialects and sinks registered from here, installing nothing), and the one module
that touches hdbscan's private functions."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest

from feedback_insights.config import Config, ConfigError, SourceConfig, WarehouseConfig, load
from feedback_insights.core import DIALECTS, SINKS, SOURCES, CanonicalRecord, Problem, compact
from feedback_insights.ingest import Batch, RawItem, dialects, ingest, process
from feedback_insights.ingest.dialects import Origin
from feedback_insights.publish import SinkResult, publish
from feedback_insights.warehouse import Warehouse

from .test_publish import _config, _tracker, github  # noqa: F401 (github is a fixture)


def test_importing_the_package_loads_no_stage_until_one_is_used() -> None:
    code = (
        "import sys, feedback_insights as fi\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('feedback_insights.'))\n"
        "print(loaded, fi.load_config.__module__, fi.Warehouse.__name__, fi.clusters.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("[] feedback_insights.config._loader Warehouse feedback_insights.clusters")
    import feedback_insights

    assert set(feedback_insights.__all__) == {"STAGES", "__version__", *feedback_insights._NAMES, *feedback_insights.STAGES}


@pytest.mark.parametrize(
    ("group", "names"),
    [
        ("feedback_insights.sources", {"files", "sql", "http", "platform"}),
        ("feedback_insights.dialects", {"afp", "afs", "sep2369", "session", "rfc026"}),
        ("feedback_insights.sinks", {"known_issues", "write_back"}),
    ],
)
def test_the_built_ins_register_as_entry_points_like_any_plugin(group: str, names: set[str]) -> None:
    declared = {point.name for point in entry_points(group=group)}
    assert declared == names
    registry = {"feedback_insights.sources": SOURCES, "feedback_insights.dialects": DIALECTS, "feedback_insights.sinks": SINKS}[group]
    assert names <= set(registry.names())


# -- a source of our own ----------------------------------------------------------------------


class InlineConfig(SourceConfig):
    """Reports written into the configuration itself."""

    kind: Literal["inline"]
    reports: list[dict[str, Any]]


class InlineSource:
    kind: ClassVar[str] = "inline"
    config_model: ClassVar[type[SourceConfig]] = InlineConfig

    def __init__(self, config: InlineConfig, batch_size: int = 10_000) -> None:
        self.name, self.dialect, self.service = config.name, config.dialect, config.service
        self.prevalidated = False
        self.reports = config.reports

    def batches(self, cursors: dict[str, str]) -> Iterator[Batch]:
        done = int(cursors.get("done", 0))
        items = [RawItem(report, f"report {i}") for i, report in enumerate(self.reports) if i >= done]
        yield Batch(items, "inline:", {"done": str(len(self.reports))})


@pytest.fixture
def inline_source() -> Iterator[None]:
    SOURCES.register("inline", InlineSource)
    yield
    SOURCES.unregister("inline")


def test_a_source_registered_in_code_is_configured_by_kind_and_ingested(tmp_path: Path, inline_source: None) -> None:
    config_file = tmp_path / "feedback-insights.toml"
    config_file.write_text(
        '[privacy]\nhmac_key = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"\n[warehouse]\npath = "w.duckdb"\n'
        '[[sources]]\nkind = "inline"\nname = "notes"\nservice = "acme-api"\n'
        '[[sources.reports]]\ntype = "performance"\ngoal = "Export contacts"\nmessage = "The export endpoint times out after 30 s"\n'
        '[[sources.reports]]\ntype = "bug"\ngoal = "Search companies"\nmessage = "Search ignores the country filter"\n'
        '[[sources.reports]]\ngoal = 7\n'
    )
    config = load(config_file)
    assert isinstance(config.sources[0], InlineConfig)
    with Warehouse(config.warehouse.path) as warehouse:
        first = ingest(config, warehouse)
        again = ingest(config, warehouse)
        stored = warehouse.con.execute("SELECT collector, service, goal FROM records ORDER BY goal").fetchall()
    assert (first.counts.new, first.counts.quarantined, first.errors) == (2, 1, [])
    assert (again.counts.new, again.counts.quarantined) == (0, 0)  # its cursor was kept
    assert stored == [("notes", "acme-api", "Export contacts"), ("notes", "acme-api", "Search companies")]


def test_a_wrong_key_in_a_plugin_source_names_itself_and_unknown_kinds_list_the_known(
    tmp_path: Path, inline_source: None
) -> None:
    config_file = tmp_path / "feedback-insights.toml"
    config_file.write_text('[[sources]]\nkind = "inline"\nname = "notes"\n')
    with pytest.raises(ConfigError, match=r"sources\.0\.reports: field required"):
        load(config_file)
    config_file.write_text('[[sources]]\nkind = "ftp"\nname = "notes"\n')
    with pytest.raises(ConfigError, match="'files', 'http', 'platform', 'sql', 'inline'"):
        load(config_file)


# -- a dialect of our own ---------------------------------------------------------------------


class Ticket:
    """A helpdesk ticket: ``{"ticket": id, "subject": …, "body": …}``."""

    ORDER = 5  # tried first: nothing else has a "ticket" key

    @staticmethod
    def looks_like(obj: Any) -> bool:
        return isinstance(obj, dict) and "ticket" in obj

    @staticmethod
    def validate(obj: Any, max_bytes: int = 0, size: int | None = None) -> list[Problem]:
        return [] if isinstance(obj.get("subject"), str) else [Problem("subject", "must be a string")]

    @staticmethod
    def normalise(obj: dict[str, Any], origin: Origin) -> list[CanonicalRecord]:
        record = dict.fromkeys(
            ("account", "outcome", "severity", "detail", "tool", "method", "expected", "actual", "suggestion",
             "workaround", "rating", "request_id", "session_id", "trace_id", "message_id", "agent", "evidence",
             "context", "metadata"),
        )
        record.update(id=f"t{obj['ticket']}", dialect="ticket", collector=origin.collector, service=origin.service,
                      received_at=origin.received_at, source="human_authored", lane="bug_or_failure",
                      category="other", summary=obj["subject"], goal=None, original=compact(obj))
        return [record]  # type: ignore[list-item]


@pytest.fixture
def ticket_dialect() -> Iterator[None]:
    DIALECTS.register("ticket", Ticket)
    yield
    DIALECTS.unregister("ticket")


def test_a_dialect_registered_in_code_is_detected_validated_and_chosen_by_name(ticket_dialect: None) -> None:
    assert dialects.detect({"ticket": 1, "subject": "x"}) == "ticket"
    assert "ticket" in dialects.choices()
    done = process(
        [RawItem({"ticket": 9, "subject": "Login loops back to the start page"}, "row 0"),
         RawItem({"ticket": 10, "subject": 3}, "row 1")],
        collector="desk", source_uri="desk:", received_at="2026-11-30T10:00:00Z", service="acme-api",
    )
    assert [(r["id"], r["dialect"], r["summary"]) for r in done.records] == [("t9", "ticket", "Login loops back to the start page")]
    assert [(q.dialect, [str(p) for p in q.problems]) for q in done.quarantined] == [("ticket", ["subject: must be a string"])]
    assert dialects.detect({"type": "bug", "goal": "g", "message": "m"}) == "afp"  # the others unchanged


# -- a sink of our own ------------------------------------------------------------------------


def test_a_sink_registered_in_code_is_told_after_every_publish(github, tmp_path: Path) -> None:  # noqa: F811
    told: list[tuple[Config, Warehouse, Mapping[str, Any]]] = []

    def record(config: Config, warehouse: Warehouse, collectors: Mapping[str, Any]) -> SinkResult:
        told.append((config, warehouse, collectors))
        filed = warehouse.con.execute("SELECT count(*) FROM drafts WHERE status = 'filed'").fetchone()
        return SinkResult(sent=filed[0] if filed else 0, errors=["chat is down"])

    SINKS.register("chat", record)
    try:
        config = _config(tmp_path / "w.duckdb", github).model_copy(update={"warehouse": WarehouseConfig(path=tmp_path / "w.duckdb")})
        with Warehouse(config.warehouse.path) as warehouse:
            run = publish(config, warehouse, _tracker(config), {})
    finally:
        SINKS.unregister("chat")
    assert len(told) == 1 and told[0][0] is config and told[0][2] == {}
    assert run.sinks["chat"].sent == 0 and "chat is down" in run.errors
    assert list(run.sinks) == ["known_issues", "write_back", "chat"]
    assert run.line().endswith(", chat: 0 sent")


# -- hdbscan's private functions ----------------------------------------------------------------


def test_an_hdbscan_without_its_tree_functions_fails_with_one_clear_line(tmp_path: Path) -> None:
    fake = tmp_path / "hdbscan"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "_hdbscan_linkage.py").write_text("def label(edges): ...\n")
    (fake / "hdbscan_.py").write_text("def tree_to_labels(*args): ...\n")  # renamed in this "release"
    code = "import feedback_insights.clusters._hdbscan_tree"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: hdbscan ") and last.endswith("install hdbscan>=0.8.40,<0.9"), done.stderr
