"""Encode queries with a snapshot's own export of its query model: no torch, no sentence-transformers.

A snapshot published since issue 29 carries its query model as ``query_encoder/`` (see
:mod:`pipeline.embedding.query_export`, which makes it): the transformer exported for ONNX Runtime or
OpenVINO, the model's ``tokenizer.json``, and ``query_encoder.json``, which says what sentence-transformers
does around the transformer for this model. Encoding a query here is that pipeline rebuilt from light
parts, ~0.25 s to load instead of ~6 s for torch and sentence-transformers:

1. tokenize with the `tokenizers` library (the model's fast tokenizer itself: normaliser, pre-tokeniser,
   special tokens), truncated to the model's ``max_seq_length``, padded to the longest in the batch;
2. run the exported transformer (``last_hidden_state``) on ONNX Runtime or OpenVINO, at the precision the
   snapshot's documents were embedded with;
3. pool (mean over the attention mask, the CLS token, or max), cut to ``truncate_dim`` (Matryoshka), and
   scale to unit length.

:mod:`~pipeline.embedding.query_export` only writes a folder when the model is exactly that pipeline
(a Transformer, a Pooling module of one of these modes, optionally Normalize; no prompt) and when the
result matches sentence-transformers' own vectors on probe texts. Here, :func:`open_query_encoder` answers
None (and the caller falls back to sentence-transformers) when the folder is missing, written by a newer
format, or needs a runtime that is not installed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

log = logging.getLogger(__name__)

FOLDER = "query_encoder"          # in a snapshot
DESCRIPTOR = "query_encoder.json"  # in that folder
TOKENIZER = "tokenizer.json"
FORMAT = 1                         # of the descriptor; a newer one is not read (fallback to sentence-transformers)
POOLINGS = ("mean", "cls", "max")
# the graph, then its weights (ONNX: external data, memory-mapped by ONNX Runtime; 0.17 -> 0.075 s of CPU to open
# the session of all-MiniLM-L6-v2 here, against the same graph with its weights inside)
MODEL_FILES = {"onnx": ("model.onnx", "model.onnx.data"), "openvino": ("openvino_model.xml", "openvino_model.bin")}


@dataclass(frozen=True)
class Descriptor:
    """``query_encoder.json``: what runs around the exported transformer."""

    format: int
    backend: str                # onnx | openvino
    precision: str              # fp32 | bf16 | int8 (the snapshot's documents' precision)
    inputs: tuple[str, ...]     # the graph's inputs: a prefix of input_ids, attention_mask, token_type_ids
    pooling: str                # mean | cls | max
    max_seq_length: int
    truncate_dim: int | None
    dim: int                    # of the vectors returned
    pad_id: int
    pad_token: str
    model: str = ""             # the model's name, for messages

    @classmethod
    def read(cls, folder: Path) -> Descriptor:
        d = json.loads((Path(folder) / DESCRIPTOR).read_text(encoding="utf-8"))
        fields = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        fields["inputs"] = tuple(fields.get("inputs") or ())
        return cls(**fields)

    def write(self, folder: Path) -> None:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["inputs"] = list(self.inputs)
        (Path(folder) / DESCRIPTOR).write_text(json.dumps(d, indent=1), encoding="utf-8")

    def unsupported(self) -> str | None:
        """Why this reader cannot reproduce the pipeline the descriptor names (None: it can)."""
        if self.format != FORMAT:
            return f"query encoder format {self.format} (this paperkb reads {FORMAT})"
        if self.backend not in MODEL_FILES:
            return f"query encoder backend {self.backend!r}"
        if self.pooling not in POOLINGS:
            return f"pooling {self.pooling!r}"
        if not self.inputs or self.inputs[0] != "input_ids":
            return f"graph inputs {list(self.inputs)}"
        return None


# ---- the numeric steps (pure) -----------------------------------------------------------------------------
def pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """(batch, dim) sentence vectors from (batch, seq, dim) token states and the (batch, seq) attention
    mask, as sentence-transformers' Pooling module computes them (mean: sum of the unmasked states over
    their count, the count clamped at 1e-9; max: over the unmasked states; cls: the first token, padding
    being on the right)."""
    h = np.asarray(hidden, dtype=np.float32)
    if mode == "cls":
        return h[:, 0]
    m = np.asarray(mask, dtype=np.float32)[:, :, None]
    if mode == "max":
        return np.where(m > 0, h, -np.inf).max(axis=1).astype(np.float32)
    if mode == "mean":
        return (h * m).sum(axis=1) / np.maximum(m.sum(axis=1), np.float32(1e-9))
    raise ValueError(f"unknown pooling {mode!r}")


def finish(vectors: np.ndarray, truncate_dim: int | None) -> np.ndarray:
    """Cut to ``truncate_dim`` (Matryoshka) and scale each row to unit length, as ``encode(...,
    normalize_embeddings=True)`` does (a Normalize module before the cut changes nothing: scaling commutes)."""
    from pipeline.vectors import l2_normalise

    v = np.asarray(vectors, dtype=np.float32)
    if truncate_dim:
        v = v[:, :truncate_dim]
    return np.ascontiguousarray(l2_normalise(v))


# ---- the encoder ------------------------------------------------------------------------------------------
class QueryEncoder:
    """``encoder(list_of_queries) -> float32[n, dim]``, unit rows, from a ``query_encoder/`` folder."""

    def __init__(self, folder: Path, descriptor: Descriptor, threads: int | None = None, one_shot: bool = False):
        from tokenizers import Tokenizer

        self.folder, self.descriptor = Path(folder), descriptor
        d = descriptor
        tok = Tokenizer.from_file(str(self.folder / TOKENIZER))
        # what transformers' fast tokenizer sets for ``tokenizer(texts, padding=True, truncation="longest_first",
        # max_length=max_seq_length)``, the call sentence-transformers makes
        tok.enable_truncation(d.max_seq_length, strategy="longest_first")
        tok.enable_padding(pad_id=d.pad_id, pad_token=d.pad_token)
        self._tok = tok
        self._run, self._names = _runner(self.folder, d.backend, d.precision, threads, one_shot)

    def __call__(self, queries: list[str]) -> np.ndarray:
        d = self.descriptor
        if not queries:
            return np.zeros((0, d.dim), dtype=np.float32)
        enc = self._tok.encode_batch(list(queries))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        given = {"input_ids": ids, "attention_mask": mask,
                 "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
        hidden = self._run({n: given[n] for n in self._names})
        return finish(pool(hidden, mask, d.pooling), d.truncate_dim)


def _runner(folder: Path, backend: str, precision: str, threads: int | None, one_shot: bool) -> tuple[Callable, list[str]]:
    # the same runners the embed step's backends use (pipeline.embedding.backends imports neither torch nor
    # sentence-transformers at module level)
    from pipeline.embedding.backends import _onnx_runner, _openvino_runner, cpu_has_native_bf16

    if backend == "onnx":
        return _onnx_runner(folder / MODEL_FILES["onnx"][0], threads, prepack=not one_shot)
    if precision == "bf16" and not cpu_has_native_bf16():
        precision = "fp32"  # as pipeline.embedding.backends.query_runtime: within ~5e-5 cosine
    return _openvino_runner(folder / MODEL_FILES["openvino"][0], precision, threads)


def runtime_missing(backend: str) -> str | None:
    """The package the backend needs that is not installed (None: all there), found without importing it."""
    import importlib.util

    for name in ("tokenizers", {"onnx": "onnxruntime", "openvino": "openvino"}.get(backend, backend)):
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except ValueError:  # sys.modules[name] = None (tests hiding it)
            return name
    return None


def open_query_encoder(folder: Path | None, threads: int | None = None, one_shot: bool = False) -> QueryEncoder | None:
    """The encoder of a snapshot's ``query_encoder/`` folder, or None (logged at debug level: the caller
    falls back to sentence-transformers) when there is none or this reader cannot run it. ``one_shot``: the
    process encodes a query or two and exits (opens faster, encodes a little slower)."""
    if folder is None or not (Path(folder) / DESCRIPTOR).is_file():
        return None
    try:
        d = Descriptor.read(Path(folder))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        log.warning("query encoder in %s is unreadable (%s): queries are encoded with sentence-transformers", folder, exc)
        return None
    why = _unusable(d)
    if why:
        log.debug("not using the snapshot's query encoder (%s): sentence-transformers encodes the queries", why)
        return None
    return QueryEncoder(Path(folder), d, threads, one_shot)


def _unusable(d: Descriptor) -> str | None:
    missing = runtime_missing(d.backend)
    return d.unsupported() or (f"{missing} is not installed" if missing else None)


# What a reader without the snapshot's query encoder falls back to: sentence-transformers (on torch, or on OpenVINO
# for such a snapshot), which only the [encoders] install profile brings (pyproject.toml). The base profile reads,
# searches and serves snapshots that carry their query encoder without them.
ENCODERS_EXTRA = "paperkb[encoders]"


def fallback_installed() -> bool:
    """Whether sentence-transformers (and so torch) is installed: the fallback when :func:`open_query_encoder`
    answers None. Found without importing it (the import costs seconds)."""
    import importlib.util

    try:
        return importlib.util.find_spec("sentence_transformers") is not None
    except ValueError:  # sys.modules['sentence_transformers'] = None (tests hiding it)
        return False


def why_not_usable(folder: Path | None) -> str:
    """The line a base install (no sentence-transformers to fall back to) prints when :func:`open_query_encoder`
    answers None for ``folder``: why, and the extra to install."""
    remedy = f"install {ENCODERS_EXTRA} to encode queries"
    if folder is None or not (Path(folder) / DESCRIPTOR).is_file():
        return f"this snapshot has no query encoder export (it was published before snapshots carried one); {remedy}"
    try:
        d = Descriptor.read(Path(folder))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return f"this snapshot's query encoder is unreadable ({exc}); {remedy}"
    if d.unsupported():
        return f"this snapshot's query encoder is one this paperkb cannot run ({d.unsupported()}); {remedy}"
    missing = runtime_missing(d.backend)
    if missing:  # the runtime alone is enough for the export (an OpenVINO bf16 or int8 snapshot's)
        return (f"this snapshot's query encoder runs on {d.backend} ({d.precision}), and {missing} is not installed; "
                f"install {ENCODERS_EXTRA} (or {missing} alone) to encode queries")
    return f"this snapshot's query encoder cannot be opened; {remedy}"
