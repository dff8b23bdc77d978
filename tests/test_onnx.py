"""The default embedding backend: the packaged model exported to ONNX and run by ONNX Runtime.
It must give the torch path's vectors, keep its export in a cache that heals itself, keep its
vectors apart from the torch path's, and take over a warehouse clustered by the other backend
without starting every problem again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pydantic
import pytest

from feedback_insights.clusters import (
    MiniLMEmbedder,
    OnnxMiniLMEmbedder,
    cluster_new_records,
    embedder_for,
    exported_model,
    members_model,
)
from feedback_insights.config import Config, EmbeddingConfig, FileDropConfig, PrivacyConfig, WarehouseConfig
from feedback_insights.ingest import ingest
from feedback_insights.warehouse import Warehouse

from .conftest import SHARED, write_jsonl
from .test_cluster_assist import _afp
from .test_cluster_command import GLOB, WEBHOOK

TEXTS = [json.loads(line)["text"] for line in (SHARED / "data" / "bug_duplicates.jsonl").read_text().splitlines()[:48]]
TEXTS += ["", "ok", "x " * 600]  # empty, tiny, and longer than the model's 256 tokens


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return MiniLMEmbedder().encode(TEXTS)


def test_the_default_backend_gives_the_torch_path_s_vectors(embedder, torch_vectors: np.ndarray) -> None:
    assert isinstance(embedder, OnnxMiniLMEmbedder)
    vectors = embedder.encode(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert float((vectors * torch_vectors).sum(axis=1).min()) > 0.99999
    # Batches are cut by length, the answer comes back in the order asked.
    assert np.allclose(embedder.encode(TEXTS[::-1])[::-1], vectors, atol=1e-5)


def test_the_vectors_do_not_depend_on_how_many_threads_encode_them() -> None:
    # One single-threaded session per thread, taking the batches in turn: each batch is computed
    # the same way whatever the thread count (a Dask worker with one thread embeds as the flow does).
    seen: list[int] = []
    one = embedder_for(EmbeddingConfig(threads=1, batch_size=8)).encode(TEXTS)
    three = embedder_for(EmbeddingConfig(threads=3, batch_size=8)).encode(TEXTS, on_batch=seen.append)
    assert np.array_equal(one, three)
    assert sum(seen) == len(TEXTS) and len(seen) == -(-len(TEXTS) // 8)  # progress for every batch, once


def test_backends_and_precisions_are_different_models() -> None:
    ids = {embedder_for(EmbeddingConfig(backend="torch")).model_id, embedder_for(EmbeddingConfig()).model_id,
           embedder_for(EmbeddingConfig(precision="int8")).model_id}
    assert ids == {MiniLMEmbedder.model_id, f"{MiniLMEmbedder.model_id}+onnx-fp32", f"{MiniLMEmbedder.model_id}+onnx-int8"}
    with pytest.raises(pydantic.ValidationError, match="precision int8 needs backend onnx"):
        EmbeddingConfig(backend="torch", precision="int8")


def test_the_export_is_cached_and_a_damaged_file_is_exported_again(tmp_path: Path, torch_vectors: np.ndarray) -> None:
    path = exported_model(tmp_path, "fp32")
    assert path.is_relative_to(tmp_path) and path.stat().st_size > 50_000_000
    stamp = path.stat().st_mtime_ns
    assert exported_model(tmp_path, "fp32") == path and path.stat().st_mtime_ns == stamp  # reused as it is
    path.write_bytes(path.read_bytes()[:1000])  # a crash mid-copy
    assert exported_model(tmp_path, "fp32") == path and path.stat().st_size > 50_000_000
    assert not list(path.parent.glob("*.partial"))
    vectors = OnnxMiniLMEmbedder(EmbeddingConfig(onnx_cache=tmp_path)).encode(TEXTS[:8])
    assert float((vectors * torch_vectors[:8]).sum(axis=1).min()) > 0.99999


def test_int8_is_an_option_with_vectors_of_its_own(tmp_path: Path, torch_vectors: np.ndarray) -> None:
    int8 = OnnxMiniLMEmbedder(EmbeddingConfig(precision="int8", onnx_cache=tmp_path))
    vectors = int8.encode(TEXTS)
    cosine = (vectors * torch_vectors).sum(axis=1)
    assert 0.9 < float(cosine.mean()) < 0.99999  # close, but not the same vectors
    assert exported_model(tmp_path, "int8").parent != exported_model(tmp_path, "fp32").parent


def test_the_export_needs_no_network(tmp_path: Path) -> None:
    code = ("from pathlib import Path; from feedback_insights.clusters import exported_model; "
            f"print(exported_model(Path({str(tmp_path)!r}), 'fp32').name)")
    env = {"PATH": "/usr/bin:/bin", "HF_ENDPOINT": "http://127.0.0.1:9", "HOME": str(tmp_path),
           "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "model.onnx"


def test_a_warehouse_clustered_on_torch_keeps_its_clusters_on_onnx(tmp_path: Path, embedder) -> None:
    """Switching backend must not make the existing clusters invisible: their members are
    embedded again in the new space, and a new report of a known problem joins its cluster."""
    drop = tmp_path / "drop"
    drop.mkdir()
    write_jsonl(drop / "one.jsonl", [_afp(f"g{i}", text, "search_files") for i, text in enumerate(GLOB)]
                + [_afp(f"w{i}", text, "/webhooks") for i, text in enumerate(WEBHOOK)])
    config = Config(warehouse=WarehouseConfig(path=tmp_path / "wh.duckdb"), privacy=PrivacyConfig(hmac_key="k" * 32),
                    sources=[FileDropConfig(kind="files", name="drop", path=drop)])
    with Warehouse(config.warehouse.path) as wh:
        ingest(config, wh)
        cluster_new_records(wh, MiniLMEmbedder())
        before = dict(wh.con.execute("SELECT id, cluster_id FROM cluster_members WHERE view = 'reports'").fetchall())
        assert len({before[f"g{i}"] for i in range(3)}) == 1 and before["g0"] is not None
        assert members_model(wh.con, "reports") == MiniLMEmbedder.model_id
        write_jsonl(drop / "two.jsonl", [_afp("g9", "glob argument to search_files has no effect: every file is listed",
                                               "search_files")])
        ingest(config, wh)
        run = cluster_new_records(wh, embedder)
        assert run.joined["reports"] == 1 and run.new_clusters["reports"] == 0
        after = dict(wh.con.execute("SELECT id, cluster_id FROM cluster_members WHERE view = 'reports'").fetchall())
        assert after["g9"] == before["g0"] and {k: after[k] for k in before} == before
        assert members_model(wh.con, "reports") == embedder.model_id  # every member now has an ONNX vector too
