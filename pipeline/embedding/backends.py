"""Where a sentence-transformers model runs: torch, ONNX Runtime or OpenVINO, at which precision.

``PAPERKB_EMBED_BACKEND`` and ``PAPERKB_EMBED_PRECISION`` pick it; :func:`resolve` checks the pair
against the device and turns ``auto`` (unset) into a concrete choice. Both unset: on a CPU, OpenVINO (fp32, or bf16
on a CPU with native bfloat16: :func:`auto_cpu`, the fastest pair measured to hold retrieval quality); torch fp16
on CUDA. openvino int8 (``PAPERKB_EMBED_PRECISION=int8``) is not part of auto: measured on AVX2, AVX512-VNNI and AMX
hosts, it is slower than fp32 on the first, no faster than bf16 on the last, and below the quality a default must
hold on all (:data:`AUTO_INT8`; BENCHMARKS.md, "The fast encoder as the default").
``PAPERKB_EMBED_BACKEND=torch`` (or ``PAPERKB_EMBED_PRECISION=fp32``) gives plain PyTorch fp32. A backend set alone:
fp16 for torch on CUDA, bf16 for openvino on CPUs with native bfloat16, else fp32. A model that cannot be exported
while the backend is auto falls back to torch fp32
with one warning (:func:`pipeline.embedding.encoders.model_spec`). What each precision means:

============  ==============================================  =======================================
backend       precision                                       what runs
============  ==============================================  =======================================
torch         fp32                                            PyTorch float32 (any device)
torch         fp16                                            ``model.half()``: float16 weights and
                                                              activations (CUDA only; the default there)
torch         bf16                                            bfloat16 (CPU: autocast, needs native
                                                              bfloat16; CUDA: ``model.to(bfloat16)``)
onnx          fp32                                            the exported ONNX graph on ONNX Runtime
onnx          int8                                            the same graph, MatMul weights quantized to
                                                              int8 per channel, activations quantized
                                                              per batch (dynamic quantization)
openvino      fp32                                            the model converted to OpenVINO IR,
                                                              inference precision f32
openvino      bf16                                            the same IR, inference precision bf16
                                                              (CPUs with AVX512-BF16 or AMX; the default
                                                              precision for openvino on such CPUs)
openvino      int8                                            the IR quantized by NNCF (static int8:
                                                              weights and activations of the MatMuls,
                                                              activation ranges calibrated once on a
                                                              fixed text set, see :func:`calibration_texts`);
                                                              the rest runs bf16 where the CPU has it
                                                              (NNCF, in paperkb[encoders])
============  ==============================================  =======================================

Every other pair is refused with one line (int8 with torch, half precision with ONNX Runtime, fp16
on a CPU...). ONNX and OpenVINO run on the CPU only.

Only the transformer inside the sentence-transformers model is replaced (``model[0].model``): the
tokenizer, truncation, pooling, normalisation and Matryoshka truncation stay sentence-transformers'
own code, so a backend changes nothing but the arithmetic of the transformer.

Exports are made once per model + backend + precision and kept in the model cache
(``PAPERKB_MODEL_CACHE_DIR``, by default ``~/.cache/paperkb/models``; ``<model cache>/<model id>/<backend>-<precision>/``),
shared by every warehouse, vector cache and process on the host: a second run, another shard or a searcher
loads the file. An export is written into a private folder renamed into place, under a file lock, so
concurrent processes wait for one export instead of each making their own, and nobody reads a half-written
one. Exports are deterministic (openvino int8 calibrates on texts that ship with Python, not on the
corpus), so a host that lacks the cached file exports the same model again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import UserError

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "openvino")
PRECISIONS = ("fp32", "fp16", "bf16", "int8")
# Off: openvino int8 is not part of auto. With the fast export recipe (32 calibration texts, no SmoothQuant; 17.7 s of
# CPU instead of 130 s), documents embedded on an AVX2-only host scored CISI nDCG@10 -0.0069 against fp32 through the
# whole pipeline, on a Xeon with AMX -0.0090 and on that Xeon capped at AVX512-VNNI -0.0097 (Cranfield -0.0038 /
# -0.0046), past the 0.005 the default must hold; on AMX it costs what bf16 (the default there) costs. On, auto would
# pick int8 on CPUs with int8 dot products (BENCHMARKS.md, "The fast encoder as the default").
AUTO_INT8 = False
ONNX_EXTRA = "paperkb[onnx]"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class Runtime:
    """A resolved backend and precision (what vectors are stamped with)."""

    backend: str = "torch"
    precision: str = "fp32"

    def label(self) -> str:
        return f"{self.backend}-{self.precision}"


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:  # not Linux
        return False
    return any(f in flags for f in ("avx512_bf16", "amx_bf16"))


@functools.cache
def cpu_has_int8_dot() -> bool:
    """Whether this CPU has int8 dot-product instructions (AVX512-VNNI, AVX-VNNI or AMX), which make OpenVINO int8
    fast. Without them (AVX2 only) int8 measured 1.8x *more* CPU than torch fp32 (BENCHMARKS.md, "The fast encoder as
    the default"), so auto does not pick int8 there."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:  # not Linux
        return False
    return any(f in flags for f in ("avx512_vnni", "avx_vnni", "amx_int8"))


def auto_cpu() -> tuple[str, str]:
    """What backend and precision unset mean on this CPU: the fastest pair measured to hold retrieval quality
    (BENCHMARKS.md, "The fast encoder as the default"). OpenVINO always: fp32 on its IR computes what torch fp32
    computes (cosine 1.0000 to torch's vectors) for 1.1-1.5x less CPU on an AVX2-only CPU; on a CPU with native
    bfloat16 (AVX512-BF16, AMX), bf16 inference (2.2-2.4x less CPU, CISI nDCG@10 -0.0008, Cranfield -0.0005). int8
    only where :data:`AUTO_INT8` is on. A model OpenVINO cannot convert embeds with torch fp32 (one warning:
    :func:`pipeline.embedding.encoders.model_spec`)."""
    if AUTO_INT8 and cpu_has_int8_dot() and can_quantize_openvino():
        return "openvino", "int8"
    return "openvino", ("bf16" if cpu_has_native_bf16() else "fp32")


def vector_tolerance(precision: str) -> float:
    """How far (absolute, per component of a unit vector) two encodings of the same text may differ at this
    precision: across backends, batch sizes and thread counts. fp32 1e-4 (measured within 5e-7 on a quiet machine,
    and 3.1e-5 once: OpenVINO fp32, a text alone against the same text in a padded batch of three, while another
    test suite shared the two cores); bf16 and fp16 round activations to 8 / 11 bits (measured ~4e-4 per component,
    batch to batch); int8 (cosine >= 0.99 to fp32)."""
    return {"fp32": 1e-4, "fp16": 5e-3, "bf16": 5e-3}.get(precision, 3e-2)


def _device_kind(device: str | None) -> str:
    return (device or "cpu").split(":")[0].lower()


DEVICE_SETTING = "PAPERKB_EMBED_DEVICE (or --device)"


def check_device(device: str | None) -> None:
    """InvalidSetting (one line, exit code 2) unless torch can use ``device`` on this machine: a device
    string torch does not know, ``cuda`` without a CUDA build or GPU, ``cuda:N`` past the last GPU,
    ``mps`` off Apple silicon. ``cpu`` is always fine (and imports nothing)."""
    from pipeline.errors import InvalidSetting

    if _device_kind(device) == "cpu":
        return
    import torch

    def bad(why: str) -> InvalidSetting:
        return InvalidSetting(f"setting {DEVICE_SETTING} is {device!r}: {why}", ["PAPERKB_EMBED_DEVICE"])

    try:
        dev = torch.device(str(device).strip())
    except (RuntimeError, ValueError):
        raise bad("expected a torch device such as cpu, cuda, cuda:1 or mps") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = "torch was built without CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise bad(f"CUDA is not available on this machine ({build}, torch {torch.__version__}): use cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise bad(f"this machine has {torch.cuda.device_count()} CUDA GPU(s), numbered from 0")
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise bad("MPS (Apple silicon) is not available on this machine: use cpu")
    elif dev.type != "cpu":
        available = getattr(getattr(torch, dev.type, None), "is_available", None)
        if available is None or not available():
            raise bad(f"torch cannot use {dev.type} devices on this machine: use cpu")


def resolve(backend: str | None, precision: str | None, device: str | None = "cpu") -> Runtime:
    """Check backend / precision / device and turn ``auto`` (or None) into concrete values (whether this
    machine has the device is :func:`check_device`'s question)."""
    dev = _device_kind(device)
    b = (backend or "auto").strip().lower()
    p = (precision or "auto").strip().lower()
    if b not in BACKENDS + ("auto",):
        raise UserError(f"embed_backend must be one of auto, {', '.join(BACKENDS)}, not {backend!r}")
    if p not in PRECISIONS + ("auto",):
        raise UserError(f"embed_precision must be one of auto, {', '.join(PRECISIONS)}, not {precision!r}")
    if b == "auto":
        if dev == "cpu" and p == "auto":
            b, p = auto_cpu()
        elif p == "int8" and dev == "cpu":
            b = "openvino"  # and require_backend / the quantizer name what is missing
        else:
            b = "torch"
    if b != "torch" and dev != "cpu":
        raise UserError(f"embed_backend {b} runs on the CPU only; device {device} takes embed_backend torch")
    if p == "auto":
        if b == "torch":
            p = "fp16" if dev == "cuda" else "fp32"
        elif b == "openvino":
            p = "bf16" if cpu_has_native_bf16() else "fp32"
        else:
            p = "fp32"
    allowed = {"torch": ("fp32", "fp16", "bf16"), "onnx": ("fp32", "int8"), "openvino": ("fp32", "bf16", "int8")}[b]
    if p not in allowed:
        hint = {"int8": "int8 needs embed_backend openvino (static) or onnx (dynamic quantization)",
                "fp16": "fp16 is for CUDA with embed_backend torch; on a CPU use bf16 (torch or openvino)",
                "bf16": "bf16 runs with embed_backend openvino or torch"}[p]
        raise UserError(f"embed_precision {p} does not go with embed_backend {b}: {hint}")
    if b == "torch" and p == "fp16" and dev != "cuda":
        raise UserError(f"embed_precision fp16 needs device cuda (device is {device}): on a CPU use bf16 or fp32")
    if p == "bf16" and dev == "cpu" and not cpu_has_native_bf16():
        raise UserError("embed_precision bf16 needs a CPU with native bfloat16 (AVX512-BF16 or AMX), which this one lacks: use fp32")
    return Runtime(b, p)


def can_quantize_openvino() -> bool:
    """Whether NNCF is installed (in paperkb[encoders], which an install may leave out): only making the int8
    export needs it, loading one does not."""
    import importlib.util

    try:
        return importlib.util.find_spec("nncf") is not None and importlib.util.find_spec("openvino") is not None
    except ValueError:  # sys.modules['nncf'] = None (tests hiding it)
        return False


def query_runtime(backend: str | None, precision: str | None) -> Runtime:
    """The runtime for queries of a snapshot stamped (backend, precision); older snapshots: torch fp32.

    A bf16 snapshot searched on a CPU without native bfloat16 encodes its queries in fp32 (vectors
    within ~5e-5 cosine): searching never fails for want of an instruction set."""
    rt = Runtime(backend or "torch", precision or "fp32")
    if rt.backend not in BACKENDS or rt.precision not in PRECISIONS:
        raise UserError(f"the snapshot was embedded with an unknown backend {rt.label()}: upgrade paperkb to search it")
    if rt.precision == "bf16" and not cpu_has_native_bf16():
        log.info("snapshot embedded with %s: this CPU has no native bfloat16, queries are encoded in fp32", rt.label())
        return Runtime(rt.backend, "fp32")
    if rt.precision == "fp16":  # a GPU-embedded snapshot searched on a CPU: fp32 queries, same space
        return Runtime(rt.backend, "fp32")
    return rt


# ---- exports ------------------------------------------------------------------------------------------
def model_id(name_or_path: str) -> str:
    """Identity of a model's weights for the export cache: its name, plus size and mtime of a local folder's files."""
    ident: dict = {"model": name_or_path}
    p = Path(name_or_path)
    if p.is_dir():
        ident["files"] = sorted((str(f.relative_to(p)), f.stat().st_size, f.stat().st_mtime_ns)
                                for f in p.rglob("*") if f.is_file() and f.suffix in (".safetensors", ".bin", ".json"))
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


# a new number when an export's recipe changes what it computes (a cached export of the old recipe is then left alone)
_RECIPES = {"openvino-int8": "openvino-int8-r2"}


def export_dir(root: Path, name_or_path: str, rt: Runtime) -> Path:
    """``root``: the model cache (:func:`pipeline.embedding.encoders.model_cache`)."""
    return Path(root) / model_id(name_or_path) / _RECIPES.get(rt.label(), rt.label())


_EXPORT_FILES = {"onnx": "model.onnx", "openvino": "openvino_model.xml"}


def exported_file(root: Path, name_or_path: str, rt: Runtime) -> Path:
    return export_dir(root, name_or_path, rt) / _EXPORT_FILES[rt.backend]


def _input_names(st_model) -> list[str]:
    """The inputs the graph takes: a prefix of (input_ids, attention_mask, token_type_ids) that the tokenizer gives."""
    feats = st_model.tokenizer(["an example"], return_tensors="pt")
    names = [k for k in _INPUTS if k in feats]
    if names != list(_INPUTS[:len(names)]):
        raise UserError(f"cannot export a model whose tokenizer gives {sorted(feats)}: use embed_backend torch")
    return names


class _Traceable:
    """The transformer as a plain function of its input tensors (for tracing): returns last_hidden_state."""

    @staticmethod
    def make(hf_model, names: list[str]):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = hf_model

            # named parameters in the order of _INPUTS (converters take the graph's input names from them)
            def forward(self, input_ids, attention_mask=None, token_type_ids=None):
                given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
                return self.m(**{k: v for k, v in given.items() if k in names}, return_dict=True).last_hidden_state

        return Wrapped().eval()


def _example(st_model, names: list[str]):
    # two texts of different lengths: batch > 1 and padding, so nothing specialises on batch 1
    feats = st_model.tokenizer(["an example text to trace the model with", "a shorter one"], padding=True,
                               return_tensors="pt")
    return tuple(feats[k] for k in names)


def require_backend(rt: Runtime) -> None:
    """One line naming what to install when the backend's packages are missing (checked before loading)."""
    if rt.backend == "onnx":
        try:
            import onnx  # noqa: F401  (torch's exporter and the quantizer need it)
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            raise UserError(f"embed_backend onnx needs ONNX Runtime and onnx ({exc.name} is missing): "
                            f"pip install '{ONNX_EXTRA}'") from exc
    elif rt.backend == "openvino":
        try:
            import openvino  # noqa: F401
        except ImportError as exc:
            raise UserError("embed_backend openvino needs OpenVINO (in paperkb[encoders]): pip install openvino") from exc


def _export_onnx_fp32(st_model, out: Path) -> None:
    import warnings

    import torch

    names = _input_names(st_model)
    axes = {k: {0: "batch", 1: "seq"} for k in names + ["last_hidden_state"]}
    # the tracer's warnings (legacy exporter, shapes taken as constants) are about graphs with control flow on
    # values; an encoder's is not, and the export is checked against torch where it is used (query_export)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_Traceable.make(st_model[0].model, names), _example(st_model, names), str(out),
                          input_names=names, output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)


def _export(st_model, name_or_path: str, root: Path, rt: Runtime, tmp: Path) -> None:
    """Write the export for ``rt`` into the (empty) folder ``tmp``."""
    if rt.backend == "onnx":
        if rt.precision == "fp32":
            _export_onnx_fp32(st_model, tmp / "model.onnx")
        else:  # int8: dynamic quantization of the fp32 export (itself cached)
            from onnxruntime.quantization import QuantType, quantize_dynamic

            fp32 = ensure_export(st_model, name_or_path, root, Runtime("onnx", "fp32"))
            quantize_dynamic(str(fp32), str(tmp / "model.onnx"), weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul"])
    elif rt.backend == "openvino" and rt.precision == "int8":
        _quantize_openvino(st_model, name_or_path, tmp)
    elif rt.backend == "openvino":
        import openvino as ov

        # the IR keeps fp32 weights for both precisions: bf16 is an inference-time choice of OpenVINO's CPU plugin
        ov.save_model(_openvino_fp32(st_model), str(tmp / "openvino_model.xml"), compress_to_fp16=False)
    else:  # pragma: no cover - resolve() never asks for it
        raise ValueError(rt.backend)


# The MatMul whose input is the GELU output of each feed-forward block (BERT-family naming): its
# activations have outliers that int8 ranges clip, so it stays in bf16/fp32. On 300 CISI abstracts
# this took the worst cosine to torch fp32 from 0.990 to 0.997 for ~10 % of the speed-up. A model
# with other layer names simply has every MatMul quantized.
_INT8_KEEP_FLOAT = [r".*layer\.\d+\.output\.dense/.*"]
# The calibration set: how many texts, in batches of how many, cut at how many tokens. Statistics collection
# (inference of the fp32 graph recording every quantized input) is the export's main cost. 32 texts of at most
# 128 tokens, without SmoothQuant, quantize in ~12 s of CPU where 300 texts of up to 256 tokens with SmoothQuant
# took ~126 s, with vectors as close to torch fp32 (300 CISI abstracts: cosine min 0.9916 / mean 0.9957, was
# 0.9910 / 0.9963) and the same nDCG@10 (BENCHMARKS.md, "The fast encoder as the default").
CALIBRATION_TEXTS = 32
CALIBRATION_BATCH = 8
CALIBRATION_MAX_TOKENS = 128


def calibration_texts(n: int = CALIBRATION_TEXTS) -> list[str]:
    """The int8 calibration set: the first ``n`` prose paragraphs (40+ words) of Python's own reference
    documentation (``pydoc_data``, part of the standard library). Technical English that every host
    has, in a fixed order: the quantized model depends on the model alone, never on the corpus, so
    vectors from different hosts and nights stay comparable."""
    import re

    from pydoc_data.topics import topics

    paras = (" ".join(p.split()) for k in sorted(topics) for p in re.split(r"\n\s*\n", topics[k])
             if len(p.split()) >= 40 and not p.startswith(" "))
    return [p for _, p in zip(range(n), paras)]


def _openvino_fp32(st_model):
    """The transformer converted to an OpenVINO model in memory (fp32 weights)."""
    import warnings

    import openvino as ov
    import torch

    names = _input_names(st_model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's, as in _export_onnx_fp32
        return ov.convert_model(_Traceable.make(st_model[0].model, names), example_input=_example(st_model, names),
                                input=[(n, [-1, -1], ov.Type.i64) for n in names])


def _quantize_openvino(st_model, name_or_path: str, tmp: Path) -> None:
    """Static int8 with NNCF's transformer preset: symmetric int8 weights per channel, activations per
    tensor, softmax / layer norm / GELU left in float; quantizes the model converted in memory (no fp32 IR
    on disk) and skips SmoothQuant, whose extra statistics pass doubled the export's cost for no measurable
    gain here."""
    import openvino as ov

    try:
        import nncf
        from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, AdvancedSmoothQuantParameters
    except ImportError as exc:
        raise UserError("embed_backend openvino with precision int8 needs NNCF to quantize the model once: "
                        "pip install nncf (or PAPERKB_EMBED_BACKEND=torch)") from exc
    names = _input_names(st_model)
    texts = calibration_texts()
    max_len = min(CALIBRATION_MAX_TOKENS, int(st_model.max_seq_length or CALIBRATION_MAX_TOKENS))

    def feeds(batch: list[str]) -> dict:
        t = st_model.tokenizer(batch, padding=True, truncation=True, max_length=max_len, return_tensors="np")
        return {k: (t[k] if k in t else np.zeros_like(t["input_ids"])).astype(np.int64) for k in names}

    batches = [feeds(texts[i:i + CALIBRATION_BATCH]) for i in range(0, len(texts), CALIBRATION_BATCH)]
    nncf.set_log_level(logging.WARNING)  # its per-layer tables and progress bars would flood the embed log
    log.info("embed: quantizing %s to int8 for OpenVINO (once; calibrated on %d texts)", name_or_path, len(texts))
    model = nncf.quantize(_openvino_fp32(st_model), nncf.Dataset(batches), subset_size=len(batches),
                          preset=nncf.QuantizationPreset.MIXED, model_type=nncf.ModelType.TRANSFORMER,
                          ignored_scope=nncf.IgnoredScope(patterns=_INT8_KEEP_FLOAT, validate=False),
                          advanced_parameters=AdvancedQuantizationParameters(
                              smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=-1)))
    ov.save_model(model, str(tmp / "openvino_model.xml"), compress_to_fp16=False)


_EXPORT_LOCK = threading.RLock()  # reentrant: the onnx int8 export first makes (or takes) the fp32 one


@contextlib.contextmanager
def file_lock(path: Path):
    """An exclusive lock between processes (``flock`` on ``path``, created if missing), held for the block;
    where the OS or filesystem has none, no lock (the rename into place still keeps exports whole)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:  # a read-only cache: the caller's write fails with its own message
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a filesystem without locks (some network mounts)
            pass
        yield
    finally:
        os.close(fd)  # releases the lock


def ensure_export(st_model, name_or_path: str, root: Path, rt: Runtime) -> Path:
    """The exported model file for (model, backend, precision): made once, then read from the cache.

    Concurrent exporters (parallel embed shards, test processes) take a file lock beside the folder: one
    exports while the others wait, then find its folder. The export is written into a private folder and
    renamed into place, so a reader (or a process the lock could not hold, as on a filesystem without
    locks) never sees half of it; when two renames race, the first wins and the other discards its copy."""
    target = exported_file(root, name_or_path, rt)
    if target.exists():
        return target
    final = target.parent
    final.parent.mkdir(parents=True, exist_ok=True)
    with _EXPORT_LOCK, file_lock(final.with_name(f".{final.name}.lock")):
        if target.exists():
            return target
        tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.mkdir()
        try:
            log.info("exporting %s for %s into %s (once)", name_or_path, rt.label(), final)
            _export(st_model, name_or_path, root, rt, tmp)
            (tmp / "export.json").write_text(json.dumps({"model": name_or_path, "backend": rt.backend,
                                                         "precision": rt.precision}, indent=1))
            try:
                os.rename(tmp, final)
            except OSError:  # another process exported it meanwhile: keep theirs
                if not target.exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


# ---- the replacement transformers ---------------------------------------------------------------------
class _Runner:
    """Shared part of the replacement modules: the model config and the inputs the graph takes."""

    input_names: list[str]

    def _feeds(self, kw: dict) -> dict:
        out = {}
        for name in self.input_names:
            t = kw.get(name)
            if t is None:  # e.g. token_type_ids not produced by this tokenizer call
                t = np.zeros_like(kw["input_ids"].cpu().numpy())
            else:
                t = t.cpu().numpy()
            out[name] = t.astype(np.int64, copy=False)
        return out


def _make_module(run, config, input_names: list[str]):
    import torch

    class Replacement(torch.nn.Module, _Runner):
        """Stands in for the Hugging Face model inside sentence-transformers' Transformer module."""

        def __init__(self):
            super().__init__()
            self.config = config
            self.input_names = input_names

        def forward(self, **kw):
            out = run(self._feeds(kw))
            return {"last_hidden_state": torch.from_numpy(np.ascontiguousarray(out, dtype=np.float32))}

    return Replacement()


def _onnx_runner(path: Path, threads: int | None, prepack: bool = True):
    """``prepack=False``: ONNX Runtime uses the weights as stored (memory-mapped when they are external data)
    instead of re-laying them out for its MatMul kernels: a session opens ~40 ms sooner and each run takes
    ~4 ms longer (all-MiniLM-L6-v2 here), the better trade for a process that encodes one query."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
    if not prepack:
        so.add_session_config_entry("session.disable_prepacking", "1")
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return (lambda feeds: sess.run(None, feeds)[0]), names  # ONNX Runtime sessions are thread-safe


def _openvino_runner(path: Path, precision: str, threads: int | None):
    import openvino as ov

    core = ov.Core()
    # int8: the layers NNCF left in float run bf16 where the CPU computes it natively
    use_bf16 = precision == "bf16" or (precision == "int8" and cpu_has_native_bf16())
    config: dict[str, str | int] = {"INFERENCE_PRECISION_HINT": "bf16" if use_bf16 else "f32"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = int(threads)
    compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
    names = [i.get_any_name() for i in compiled.inputs]
    local = threading.local()  # an infer request serves one thread at a time (the searcher encodes from several)

    def run(feeds):
        req = getattr(local, "req", None)
        if req is None:
            req = local.req = compiled.create_infer_request()
        res = req.infer(feeds)
        return np.array(res[compiled.outputs[0]])

    return run, names


def attach(st_model, name_or_path: str, root: Path, rt: Runtime, threads: int | None = None):
    """Swap the transformer of ``st_model`` for the exported one of ``rt`` (exporting it first if needed)."""
    if rt.backend == "torch":
        return st_model
    from sentence_transformers.base.modules.transformer import Transformer

    first = st_model[0] if len(st_model) else None
    if not isinstance(first, Transformer):
        raise UserError(f"embed_backend {rt.backend} needs a transformer model; {name_or_path!r} starts with "
                        f"{type(first).__name__}: use embed_backend torch")
    require_backend(rt)
    path = ensure_export(st_model, name_or_path, root, rt)
    if rt.backend == "onnx":
        run, names = _onnx_runner(path, threads)
    else:
        run, names = _openvino_runner(path, rt.precision, threads)
    first.model = _make_module(run, first.model.config, names)
    return st_model
