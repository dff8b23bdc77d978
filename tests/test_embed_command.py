"""``feedback-insights embed``: the pipeline's vectors for a file, one Parquet row per input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from feedback_insights.clusters import record_text

from .conftest import run_cli, write_jsonl
from .test_cli_output import invoke
from .test_cluster_command import GLOB, WEBHOOK
from .test_dialects import AFS_SNAKE


def test_every_input_gets_a_row_with_the_pipeline_s_vector(tmp_path: Path, embedder) -> None:
    inputs = [{"key": f"r{i}", "body": text} for i, text in enumerate([GLOB[0], WEBHOOK[0], GLOB[1]])]
    inputs.append({"key": "blank", "body": "   "})
    write_jsonl(tmp_path / "in.jsonl", inputs)
    done = run_cli("embed", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.parquet"),
                   "--text-field", "body", "--id-field", "key")
    assert done.returncode == 0, done.stderr
    assert "4 inputs → 3 vectors (1 without text)" in done.stderr
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.column("id").to_pylist() == ["r0", "r1", "r2", "blank"]
    vector_type = table.schema.field("vector").type
    assert vector_type.list_size == 384 and str(vector_type.value_type) == "float"
    assert table.schema.metadata[b"feedback_insights.model"] == embedder.model_id.encode()
    vectors = table.column("vector").to_pylist()
    assert vectors[3] is None
    found = np.array(vectors[:3], dtype=np.float32)
    assert np.allclose(found, embedder.encode([GLOB[0], WEBHOOK[0], GLOB[1]]), atol=1e-5)
    assert found[0] @ found[2] > found[0] @ found[1]  # duplicates closer than strangers


def test_canonical_records_embed_the_pipeline_s_text_and_bad_input_is_one_line(tmp_path: Path, embedder) -> None:
    record = {"id": "fb_1", "service": "orbit-mcp", "lane": "bug_or_failure", "category": "bug", "tool": "search_files",
              "summary": GLOB[0]}
    write_jsonl(tmp_path / "records.jsonl", [record])
    done = run_cli("embed", "-i", str(tmp_path / "records.jsonl"), "-o", str(tmp_path / "out.parquet"))
    assert done.returncode == 0, done.stderr
    (vector,) = pq.read_table(tmp_path / "out.parquet").column("vector").to_pylist()
    assert np.allclose(vector, embedder.encode([record_text(record)])[0], atol=1e-5)
    (tmp_path / "bad.jsonl").write_bytes(b'{"id": "x", "text": 42}\n')
    bad = run_cli("embed", "-i", str(tmp_path / "bad.jsonl"), "-o", str(tmp_path / "bad.parquet"))
    assert bad.returncode == 1 and "bad.jsonl:1: text: expected a string, got int" in bad.stderr
    assert bad.stderr.count("\n") == 1 and not (tmp_path / "bad.parquet").exists()


def test_a_file_with_no_text_to_embed_is_refused_in_one_line(tmp_path: Path) -> None:
    """The sample's afs.jsonl as it is (a wire dialect, not normalised) made a file of nulls
    and said "0 vectors", exit 0."""
    write_jsonl(tmp_path / "afs.jsonl", [{"id": f"a{i}", "service": "svc", "feedback": AFS_SNAKE} for i in range(3)])
    for command in ("embed", "cluster"):
        status, stdout, stderr = invoke(command, "-i", str(tmp_path / "afs.jsonl"), "-o", str(tmp_path / "out"))
        assert status == 1 and stdout == "", (command, stderr)
        assert stderr.startswith(f"error: {tmp_path / 'afs.jsonl'}: none of its 3 inputs has text to embed")
        assert "feedback-insights normalise" in stderr and stderr.count("\n") == 1
        assert not (tmp_path / "out").exists()
