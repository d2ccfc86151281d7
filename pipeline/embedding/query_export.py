"""Make the query encoder a snapshot carries (``query_encoder/``, read by :mod:`pipeline.embedding.query_encoder`).

Publish calls :func:`ensure_query_export` for the model stamped on the snapshot's tables. The folder is
made once per model, runtime, sequence length and dimension under the vector cache
(``<cache>/models/<model id>/query-<backend>-<precision>-seq<N>-dim<D>/``, :func:`folder_name`), on the warehouse's
filesystem, so each snapshot hard-links its files (no disk per snapshot, like the LanceDB files). The exported
transformer it is made from comes from the model cache (``PAPERKB_MODEL_CACHE_DIR``, shared by every warehouse on
the host; :func:`pipeline.embedding.encoders.model_cache`). What it holds:

- the transformer exported by :func:`pipeline.embedding.backends.ensure_export` for the runtime the snapshot's
  queries run on (:func:`export_runtime`): ONNX fp32 for fp32 documents of any backend and for torch (any precision:
  queries on a CPU are fp32); the documents' own backend and precision for bf16 and int8 (OpenVINO's when
  ONNX's export cannot be made: :func:`documents_runtime`). ONNX graphs are saved again with
  their weights as external data (``model.onnx`` + ``model.onnx.data``: memory-mapped when a reader opens
  them); OpenVINO's files are hard links to the export's (copies when the model cache is on another filesystem);
- ``tokenizer.json``: the model's fast tokenizer, as transformers holds it;
- ``query_encoder.json``: pooling, sequence length, Matryoshka dimension, padding (:class:`Descriptor`).

It is made only for a pipeline that :mod:`~pipeline.embedding.query_encoder` reproduces: a Transformer, then
Pooling (mean, cls or max), optionally Normalize, no default prompt, no lower-casing outside the tokenizer,
padding and truncation on the right. Before the folder is kept, the light encoder's vectors for
:data:`PROBE_TEXTS` are compared with the vectors sentence-transformers gives for the same model and runtime
(what a reader without the folder would compute); a model that differs by more than :data:`TOLERANCE` is
refused. A refused or failed export raises :class:`NotExportable`; publish then goes on without the folder,
and readers encode with sentence-transformers as before.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import uuid
from pathlib import Path

import numpy as np

from pipeline.embedding.backends import Runtime, ensure_export, model_id, query_runtime
from pipeline.embedding.query_encoder import (DESCRIPTOR, FORMAT, MODEL_FILES, POOLINGS, TOKENIZER, Descriptor,
                                              QueryEncoder)

log = logging.getLogger(__name__)

# Largest difference allowed between the light encoder's vector components and sentence-transformers' on the
# probe texts (unit vectors of 384 components: ~0.05 each). Measured on all-MiniLM-L6-v2: ONNX Runtime fp32 vs
# torch fp32 differ by < 4e-7 per component; the same exported graph run by both sides (onnx int8, openvino
# fp32 / bf16 / int8) by < 1e-7. Well inside, rankings stay the same (tests/test_query_encoder.py).
TOLERANCE = 1e-4

# Texts the light encoder must encode as sentence-transformers does: cases, accents, punctuation, spaces at
# the ends, digits, non-Latin script, a single character, and one longer than any max_seq_length (truncation).
PROBE_TEXTS = [
    "information retrieval evaluation",
    "  What problems and concerns are there in making up descriptive titles?  ",
    "Tf-IDF weighting, BM25 & the Cranfield paradigm (1966-1975): a re-appraisal",
    "Ångström-scale café naïveté — Zürich's Gödel números",
    "機械翻訳とニューラルネットワーク",
    "x",
    " ".join(["a long query about the indexing of scientific literature and citation analysis"] * 60),
]


class NotExportable(Exception):
    """The model's pipeline is not one the light query encoder reproduces, or exporting it failed."""


def export_runtime(backend: str | None, precision: str | None) -> Runtime:
    """The runtime a snapshot's query encoder runs on, for documents embedded with (backend, precision).

    Documents in fp32 (the default, OpenVINO fp32 on a CPU without native bfloat16, as torch and ONNX fp32) get an ONNX
    Runtime fp32 encoder whatever their backend: fp32 is one vector space on every backend (within 1e-6 per
    component), and a one-shot search opens ONNX Runtime in ~0.2 s where OpenVINO's import and compile take ~0.7 s
    (BENCHMARKS.md, "One-shot CLI search"). bf16 and int8 are their own spaces: their encoder runs the documents'
    runtime (openvino bf16 stays bf16, the reader picks per CPU)."""
    rt = query_runtime(backend, precision)  # what the sentence-transformers path encodes queries with
    if rt.backend == "torch" or (precision or "fp32") == "fp32":
        return Runtime("onnx", "fp32")
    return Runtime(rt.backend, precision or rt.precision)


def documents_runtime(backend: str | None, precision: str | None) -> Runtime | None:
    """The documents' own runtime, for an encoder :func:`export_runtime` makes on another one (an OpenVINO fp32
    snapshot's ONNX export): what publish falls back to when that export cannot be made (e.g. no ``onnx``
    package). None when there is nothing else to try."""
    rt = export_runtime(backend, precision)
    own = query_runtime(backend, precision)
    return own if own.backend != "torch" and own != rt else None


def folder_name(rt: Runtime, max_seq_length: int | None, truncate_dim: int | None) -> str:
    """``query-<backend>-<precision>-seq<N | model>-dim<D | full>``: the stamp's settings, not yet the model's."""
    return f"query-{rt.label()}-seq{max_seq_length or 'model'}-dim{truncate_dim or 'full'}"


def pipeline_of(st_model, rt: Runtime, truncate_dim: int | None) -> Descriptor:
    """The :class:`Descriptor` of a loaded sentence-transformers model, or NotExportable naming what the
    light encoder would not reproduce."""
    from sentence_transformers.base.modules.normalize import Normalize
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    mods = list(st_model)
    kinds = [type(m).__name__ for m in mods]
    if len(mods) < 2 or not isinstance(mods[0], Transformer) or not isinstance(mods[1], Pooling) \
            or any(not isinstance(m, Normalize) for m in mods[2:]):
        raise NotExportable(f"modules {kinds} (the light encoder runs Transformer, Pooling[, Normalize])")
    mode = mods[1].pooling_mode
    if not isinstance(mode, str) or mode not in POOLINGS:
        raise NotExportable(f"pooling {mode!r} (the light encoder pools {', '.join(POOLINGS)})")
    prompt = (st_model.prompts or {}).get(st_model.default_prompt_name or "", "")
    if prompt:
        raise NotExportable(f"a default prompt {st_model.default_prompt_name!r}")
    if getattr(mods[0], "do_lower_case", False):
        raise NotExportable("do_lower_case outside the tokenizer")
    tok = st_model.tokenizer
    if not getattr(tok, "is_fast", False) or getattr(tok, "backend_tokenizer", None) is None:
        raise NotExportable(f"a slow tokenizer ({type(tok).__name__})")
    if getattr(tok, "padding_side", "right") != "right" or getattr(tok, "truncation_side", "right") != "right":
        raise NotExportable("padding or truncation on the left")
    if tok.pad_token_id is None:
        raise NotExportable("a tokenizer without a padding token")
    from pipeline.embedding.backends import _input_names

    dim = int(st_model.get_embedding_dimension())
    return Descriptor(format=FORMAT, backend=rt.backend, precision=rt.precision, inputs=tuple(_input_names(st_model)),
                      pooling=mode, max_seq_length=int(st_model.max_seq_length), truncate_dim=truncate_dim,
                      dim=min(dim, truncate_dim) if truncate_dim else dim, pad_id=int(tok.pad_token_id),
                      pad_token=str(tok.pad_token))


_MADE: dict[tuple[str, str], Path] = {}  # (model id, folder name) -> a folder made in this process (any root)
_LOCK = threading.Lock()


def ensure_query_export(model: dict, root: Path, models: Path | None = None) -> Path:
    """The query encoder folder for a snapshot whose tables are stamped ``model`` (the manifest's ``model``:
    ``query_path``/``path``, ``truncate_dim``, ``max_seq_length``, ``backend``, ``precision``), under
    ``root/models`` (``root``: the vector cache), made from the exported transformer in the model cache
    ``models`` (None: ``root/models`` too). Made once (sentence-transformers and torch load only then); later
    calls find it with a ``stat``. Raises :class:`NotExportable`."""
    path = model.get("query_path") or model.get("path")
    if not path:
        raise NotExportable("the model stamp names no model path")
    rt = export_runtime(model.get("backend"), model.get("precision"))
    try:
        return _ensure(model, path, rt, Path(root), models)
    except NotExportable as exc:
        own = documents_runtime(model.get("backend"), model.get("precision"))
        if own is None:
            raise
        log.warning("query encoder for %s: %s; making it for the documents' own runtime, %s, instead",
                    model.get("query_model") or path, exc, own.label())
        return _ensure(model, path, own, Path(root), models)


def _ensure(model: dict, path: str, rt: Runtime, root: Path, models: Path | None) -> Path:
    mid = model_id(path)
    base = Path(root) / "models" / mid
    want = base / folder_name(rt, model.get("max_seq_length"), model.get("truncate_dim"))
    with _LOCK:
        if (want / DESCRIPTOR).is_file():
            return want
        made = _MADE.get((mid, want.name))
        tmp = base / f".{want.name}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.mkdir(parents=True)
        try:
            if made is not None and (made / DESCRIPTOR).is_file():  # exported in this process under another root
                for f in made.iterdir():
                    _link_or_copy(f, tmp / f.name)
            else:
                _make(_load(path, model), path, model, rt, Path(models) if models else Path(root) / "models", tmp)
            try:
                os.rename(tmp, want)
            except OSError:  # another process made it meanwhile: keep theirs
                if not (want / DESCRIPTOR).is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        _MADE[(mid, want.name)] = want
        return want


def _load(path: str, model: dict):
    from pipeline.embedding.encoders import load_model

    try:
        return load_model(path, truncate_dim=model.get("truncate_dim"), max_seq_length=model.get("max_seq_length"))
    except Exception as exc:  # noqa: BLE001 - any failure to load means no export, never a failed publish
        raise NotExportable(f"cannot load {path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc


def _make(st_model, path: str, model: dict, rt: Runtime, root: Path, out: Path) -> None:
    """Write the folder into ``out`` and check it against sentence-transformers on the probe texts (``root``:
    the model cache)."""
    from pipeline.embedding.encoders import load_model

    d = pipeline_of(st_model, rt, model.get("truncate_dim"))
    try:
        exported = ensure_export(st_model, path, root, rt)
        if rt.backend == "onnx":
            _with_external_weights(exported, out / MODEL_FILES["onnx"][0], MODEL_FILES["onnx"][1])
    except Exception as exc:  # noqa: BLE001 - e.g. an architecture torch's exporter cannot trace, no `onnx` package
        raise NotExportable(f"exporting {path} for {rt.label()} failed: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    if rt.backend != "onnx":
        for name in MODEL_FILES[rt.backend]:
            _link_or_copy(exported.parent / name, out / name)
    st_model.tokenizer.backend_tokenizer.save(str(out / TOKENIZER))
    d.write(out)
    # what a reader without this folder computes: the same model on the snapshot's query runtime (for an fp32 snapshot
    # of any backend, that runtime's fp32, which the ONNX fp32 encoder must match), through sentence-transformers
    ref = query_runtime(model.get("backend"), model.get("precision"))
    reference = st_model if ref.backend == "torch" else \
        load_model(path, truncate_dim=model.get("truncate_dim"), max_seq_length=model.get("max_seq_length"),
                   runtime=ref, export_root=root, threads=1)
    want = np.asarray(reference.encode(PROBE_TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False),
                      dtype=np.float32)
    got = QueryEncoder(out, d, threads=1)(PROBE_TEXTS)
    worst = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
    if worst > TOLERANCE:
        raise NotExportable(f"the light encoder's vectors differ from sentence-transformers' by {worst:.2e} "
                            f"(more than {TOLERANCE:g}) on the probe texts")
    log.info("query encoder for %s (%s) made: %s pooling, max %d tokens, within %.1e of sentence-transformers",
             model.get("query_model") or path, rt.label(), d.pooling, d.max_seq_length, worst)


def _with_external_weights(src: Path, dst: Path, data_name: str) -> None:
    """The ONNX model ``src`` saved as ``dst`` with its weights in ``data_name`` beside it (ONNX's external data),
    which ONNX Runtime maps into memory instead of parsing and copying them (see MODEL_FILES)."""
    import onnx

    model = onnx.load(str(src))
    onnx.save_model(model, str(dst), save_as_external_data=True, all_tensors_to_one_file=True, location=data_name,
                    size_threshold=1024)
    os.chmod(dst.parent / data_name, dst.stat().st_mode & 0o777)  # onnx writes it owner-only; readers may be others


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem
        shutil.copy2(src, dst)
