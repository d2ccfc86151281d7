"""Embedding backends (torch, ONNX Runtime, OpenVINO) and precisions, the GPU path's length order and
overlapped staging, on real CISI abstracts with the bundled all-MiniLM-L6-v2.

Exports are kept in the session's model cache (``PAPERKB_MODEL_CACHE_DIR``, set by conftest), so each
(backend, precision) is exported once per test session.
The fast tests take ~30 s here; the OpenVINO conversion, the empty-cache export and the subprocess
with a missing package are marked slow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from embed_helpers import import_cisi_subset

from conftest import REPO_ROOT, isolated_settings

N_TEXTS = 24


@pytest.fixture(scope="session")
def export_cache(tmp_path_factory) -> Path:
    """One vector cache shared by these tests."""
    return tmp_path_factory.mktemp("vector_cache")


@pytest.fixture(scope="session")
def models() -> Path:
    """The session's model cache, where every export of these tests goes (conftest sets it)."""
    return Path(os.environ["PAPERKB_MODEL_CACHE_DIR"])


@pytest.fixture(scope="module")
def texts(shared_data) -> list[str]:
    raw = (shared_data / "collections" / "cisi" / "CISI.ALL").read_text(encoding="utf-8", errors="replace")
    out = []
    for rec in raw.split("\n.I ")[1:N_TEXTS + 1]:
        body = rec.split("\n.W\n", 1)[1].split("\n.X\n", 1)[0] if "\n.W\n" in rec else rec
        out.append(" ".join(body.split()))
    return out


def _settings(tmp: Path, cache: Path, **kw):
    return isolated_settings(tmp / "warehouse", embed_cache_dir=cache, **kw)


def _encoder(tmp, cache, backend, precision):
    from pipeline.embedding.encoders import get_encoder

    return get_encoder(_settings(tmp, cache, embed_backend=backend, embed_precision=precision))


@pytest.fixture(scope="module")
def torch_vectors(texts, tmp_path_factory, export_cache):
    return _encoder(tmp_path_factory.mktemp("t"), export_cache, "torch", "fp32").encode_docs(texts)


def _cos(a, b):
    return (a * b).sum(axis=1)


# ---- settings ----------------------------------------------------------------------------------------
def test_cache_key_differs_per_backend_and_precision(tmp_path, export_cache):
    from pipeline.embedding.encoders import model_spec
    from pipeline.steps.embed import VectorCache

    combos = [("torch", "fp32"), ("onnx", "fp32"), ("onnx", "int8"), ("openvino", "fp32"), ("openvino", "int8")]
    from pipeline.embedding.backends import cpu_has_native_bf16

    if cpu_has_native_bf16():  # bf16 on a CPU without it is refused (test_bad_combinations...)
        combos += [("openvino", "bf16"), ("torch", "bf16")]
    specs = {c: model_spec(_settings(tmp_path, export_cache, embed_backend=c[0], embed_precision=c[1])) for c in combos}
    keys = {c: s.key() for c, s in specs.items()}
    # fp32 is one vector space on every backend (they agree to 1e-6 cosine); each other precision is its own
    spaces = {"fp32" if c[1] == "fp32" else c for c in combos}
    assert len(set(keys.values())) == len(spaces), keys
    assert keys[("onnx", "fp32")] == keys[("openvino", "fp32")] == keys[("torch", "fp32")]
    assert all((s.backend, s.precision) == c for c, s in specs.items())
    # torch fp32 keeps the key it had before backends existed: caches and tables of earlier runs stay valid
    old = model_spec(_settings(tmp_path, export_cache, embed_backend="torch"))
    ident = {"doc": old.name, "query": old.query_name, "format": "text", "truncate": None, "max_seq": None}
    import hashlib
    import json

    assert keys[("torch", "fp32")] == hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    # and the vector cache folders differ with them
    dirs = {VectorCache(_settings(tmp_path, export_cache), k).dir for k in keys.values()}
    assert len(dirs) == len(spaces)


def test_auto_resolves_by_device():
    from pipeline.embedding.backends import cpu_has_native_bf16, resolve

    from pipeline.embedding.backends import cpu_has_int8_dot

    from pipeline.embedding import backends

    # the default on a CPU: OpenVINO, bf16 where the CPU has it natively, else fp32 (int8 only with AUTO_INT8 on)
    want = "openvino-int8" if backends.AUTO_INT8 and cpu_has_int8_dot() else \
        ("openvino-bf16" if cpu_has_native_bf16() else "openvino-fp32")
    assert resolve(None, None, "cpu").label() == want
    assert resolve("torch", None, "cpu").label() == "torch-fp32"   # one setting away
    assert resolve(None, "fp32", "cpu").label() == "torch-fp32"    # (or the precision alone)
    if cpu_has_native_bf16():
        assert resolve(None, "bf16", "cpu").label() == "torch-bf16"
    assert resolve(None, "int8", "cpu").label() == "openvino-int8"  # int8 alone: openvino on any CPU
    ov = resolve("openvino", None, "cpu")
    assert ov.precision == ("bf16" if cpu_has_native_bf16() else "fp32")
    assert resolve(None, None, "cuda").label() == "torch-fp16"
    assert resolve("torch", None, "cuda:1").label() == "torch-fp16"
    assert resolve("torch", None, "cpu").label() == "torch-fp32"
    assert resolve("onnx", None, "cpu").label() == "onnx-fp32"
    assert resolve("ONNX", "INT8", "cpu").label() == "onnx-int8"
    assert resolve("openvino", "int8", "cpu").label() == "openvino-int8"


@pytest.mark.parametrize("backend,precision,device,words", [
    ("torch", "int8", "cpu", "int8 needs embed_backend openvino (static) or onnx"),
    ("openvino", "int8", "cuda", "runs on the CPU only"),
    ("onnx", "fp16", "cpu", "fp16 is for CUDA"),
    ("onnx", "bf16", "cpu", "bf16 runs with embed_backend openvino or torch"),
    ("torch", "fp16", "cpu", "fp16 needs device cuda"),
    ("onnx", "fp32", "cuda", "runs on the CPU only"),
    ("openvino", None, "cuda:0", "runs on the CPU only"),
    ("tensorrt", None, "cpu", "embed_backend must be one of"),
    ("torch", "fp8", "cpu", "embed_precision must be one of"),
])
def test_bad_combinations_are_one_line_user_errors(backend, precision, device, words):
    from pipeline.embedding.backends import resolve
    from pipeline.errors import UserError

    with pytest.raises(UserError) as err:
        resolve(backend, precision, device)
    msg = str(err.value)
    assert words in msg and "\n" not in msg


def test_bad_setting_exits_2_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(PAPERKB_EMBED_BACKEND="torch", PAPERKB_EMBED_PRECISION="int8", HF_HUB_OFFLINE="1",
               PYTHONPATH=str(REPO_ROOT))
    (tmp_path / "wh").mkdir()
    res = subprocess.run([sys.executable, "-m", "pipeline.cli", "--warehouse", str(tmp_path / "wh"), "embed"],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("paperkb: error: embed_precision int8 does not go with embed_backend torch")


@pytest.mark.slow
@pytest.mark.parametrize("backend,precision,module,words,extra", [
    ("onnx", "fp32", "onnxruntime", "embed_backend onnx needs ONNX Runtime and onnx", "paperkb[onnx]"),
    ("openvino", "int8", "nncf", "embed_backend openvino with precision int8 needs NNCF to quantize", "nncf"),
])
def test_missing_extra_is_one_line_naming_it(shared_data, tmp_path, backend, precision, module, words, extra):
    from embed_helpers import make_settings

    import_cisi_subset(make_settings(tmp_path), shared_data, 2)
    code = (f"import sys; sys.modules[{module!r}] = None; from pipeline.cli import main;"
            f"sys.argv = ['paperkb', '--warehouse', {str(tmp_path / 'warehouse')!r}, 'embed']; sys.exit(main())")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(PAPERKB_EMBED_BACKEND=backend, PAPERKB_EMBED_PRECISION=precision, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO_ROOT),
               PAPERKB_MODEL_CACHE_DIR=str(tmp_path / "models"))  # empty: nothing exported yet
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and "Warning" not in ln and not ln.startswith(" ")]
    assert res.returncode == 2, res.stderr[-2000:]
    assert lines[-1].startswith(f"paperkb: error: {words}")
    assert (f"pip install '{extra}'" in lines[-1] or f"pip install {extra}" in lines[-1]) and sum(ln.startswith("paperkb: error") for ln in lines) == 1


# ---- exports and vectors --------------------------------------------------------------------------------
def test_onnx_fp32_matches_torch(texts, torch_vectors, tmp_path, export_cache):
    v = _encoder(tmp_path, export_cache, "onnx", "fp32").encode_docs(texts)
    assert v.dtype == np.float32 and v.shape == torch_vectors.shape
    assert float(_cos(v, torch_vectors).min()) > 1 - 1e-4


def test_onnx_int8_is_close(texts, torch_vectors, tmp_path, export_cache):
    v = _encoder(tmp_path, export_cache, "onnx", "int8").encode_docs(texts)
    cos = _cos(v, torch_vectors)
    assert float(cos.min()) > 0.98 and float(cos.mean()) > 0.99
    assert float(cos.min()) < 1 - 1e-4  # really quantized, not the fp32 graph
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_openvino_matches_torch(texts, torch_vectors, tmp_path, export_cache):
    from pipeline.embedding.backends import cpu_has_native_bf16

    v = _encoder(tmp_path, export_cache, "openvino", "fp32").encode_docs(texts)
    assert float(_cos(v, torch_vectors).min()) > 1 - 1e-4
    if cpu_has_native_bf16():
        b = _encoder(tmp_path, export_cache, "openvino", "bf16").encode_docs(texts)
        assert 1 - 1e-3 < float(_cos(b, torch_vectors).min()) < 1 - 1e-7


def test_openvino_int8_is_close_and_calibrated_without_the_corpus(texts, torch_vectors, tmp_path, export_cache, models):
    from pipeline.embedding.backends import CALIBRATION_TEXTS, calibration_texts

    cal = calibration_texts()
    assert len(cal) == CALIBRATION_TEXTS and all(len(t.split()) >= 40 for t in cal)
    assert calibration_texts() == cal  # a fixed set: every host quantizes the same way
    assert not set(cal) & set(texts)
    v = _encoder(tmp_path, export_cache, "openvino", "int8").encode_docs(texts)
    cos = _cos(v, torch_vectors)
    # static int8 (feed-forward outputs kept in float): closer than ONNX Runtime's dynamic int8 (> 0.98)
    assert float(cos.min()) > 0.99 and float(cos.mean()) > 0.995, (cos.min(), cos.mean())
    assert float(cos.min()) < 1 - 1e-4  # really quantized, not the fp32 IR
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # the quantized IR holds int8 MatMul weights, much smaller than the model's fp32 weights; no fp32 IR was written
    from pipeline.embedding.backends import Runtime, exported_file
    from pipeline.embedding.encoders import default_model_path

    weights = sum(f.stat().st_size for f in Path(default_model_path()).rglob("*.safetensors"))
    int8 = exported_file(models, default_model_path(), Runtime("openvino", "int8"))
    assert int8.with_suffix(".bin").stat().st_size < 0.5 * weights
    assert not [p for p in int8.parent.parent.iterdir() if p.name.endswith(".tmp")]


def test_int8_snapshot_queries_without_nncf_fall_back_to_float(texts, torch_vectors, tmp_path, export_cache):
    """A base-profile searcher (no NNCF) with no cached int8 export still encodes the snapshot's queries."""
    code = ("import sys, logging, json; sys.modules['nncf'] = None; logging.basicConfig(level=logging.INFO);"
            "from pipeline.settings import Settings; from pipeline.embedding.encoders import snapshot_query_encoder, default_model_path;"
            f"s = Settings(warehouse={str(tmp_path / 'wh')!r});"
            "enc = snapshot_query_encoder(default_model_path(), {'backend': 'openvino', 'precision': 'int8'}, s);"
            f"print(json.dumps(enc({texts[:2]!r}).tolist()))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO_ROOT), PAPERKB_MODEL_CACHE_DIR=str(tmp_path / "models"))
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "NNCF is not installed here: queries are encoded in float" in res.stderr
    got = np.array(json.loads(res.stdout.strip().splitlines()[-1]), dtype=np.float32)
    assert float(_cos(got, torch_vectors[:2]).min()) > 1 - 1e-3  # float queries, in the same space
    assert not list(tmp_path.rglob("openvino-int8*"))  # nothing was quantized


def test_second_load_reuses_the_export(tmp_path, export_cache):
    from sentence_transformers import SentenceTransformer

    from pipeline.embedding.backends import Runtime, ensure_export, exported_file
    from pipeline.embedding.encoders import default_model_path

    path = default_model_path()
    rt = Runtime("onnx", "fp32")
    model = SentenceTransformer(path, device="cpu")
    first = ensure_export(model, path, export_cache, rt)
    assert first == exported_file(export_cache, path, rt) and first.is_file()
    stamp = first.stat().st_mtime_ns
    # a second load (another shard, another process reading the same cache) takes the file as it is
    again = ensure_export(model, path, export_cache, rt)
    assert again == first and first.stat().st_mtime_ns == stamp
    assert not [p for p in first.parent.parent.iterdir() if p.name.endswith(".tmp")]
    # a fresh process loads it without exporting (its log says so only when it exports)
    code = ("import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout);"
            "from pathlib import Path; from pipeline.embedding.encoders import load_model, default_model_path;"
            "from pipeline.embedding.backends import Runtime;"
            f"m = load_model(default_model_path(), runtime=Runtime('onnx', 'fp32'), export_root=Path({str(export_cache)!r}));"
            "print('dim', m.encode(['x']).shape[1])")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert "dim 384" in res.stdout and "exporting" not in res.stdout + res.stderr
    assert first.stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_int8_export_into_an_empty_cache_makes_the_fp32_one_first(tmp_path):
    from sentence_transformers import SentenceTransformer

    from pipeline.embedding.backends import Runtime, ensure_export, exported_file
    from pipeline.embedding.encoders import default_model_path

    path = default_model_path()
    got = ensure_export(SentenceTransformer(path, device="cpu"), path, tmp_path, Runtime("onnx", "int8"))
    fp32 = exported_file(tmp_path, path, Runtime("onnx", "fp32"))
    assert got.is_file() and fp32.is_file()
    assert got.stat().st_size < 0.7 * fp32.stat().st_size  # MatMul weights int8 (the embedding table stays fp32)


# ---- the GPU path's pieces, run on the CPU ----------------------------------------------------------------
def test_length_order_restores_the_original_order(texts, torch_vectors, tmp_path, export_cache):
    from pipeline.steps.embed import encode_in_length_order, length_order

    mixed = texts[:10] + [["a title", "a pair's text"], "short", ""]
    order = length_order(mixed)
    lengths = [len(x) if isinstance(x, str) else sum(map(len, x)) for x in mixed]
    assert [lengths[i] for i in order] == sorted(lengths, reverse=True)
    assert sorted(order.tolist()) == list(range(len(mixed)))
    # rows come back in input order: identical to encoding unsorted, row by row
    enc = _encoder(tmp_path, export_cache, "torch", "fp32")
    got = encode_in_length_order(enc.encode_docs, texts)
    assert float(_cos(got, torch_vectors).min()) > 1 - 1e-5
    ident = encode_in_length_order(lambda xs: np.array([[len(x)] for x in xs], dtype=np.float32), mixed[:-3])
    assert ident[:, 0].tolist() == [len(x) for x in mixed[:-3]]


def test_overlapped_staging_writes_the_same_rows_as_sequential(shared_data, tmp_path, export_cache):
    from pipeline.steps.embed import VectorCache, _cache_key, _shard_work, encode_checkpointed
    from pipeline.embedding.encoders import get_encoder

    s = _settings(tmp_path, export_cache, embed_backend="onnx", embed_precision="int8", embed_checkpoint_texts=5)
    import_cisi_subset(s, shared_data, 17)
    enc = get_encoder(s)
    hashes, inputs = _shard_work(s, enc, None)
    assert len(inputs) == 17
    rows = {}
    for overlap in (False, True):
        cache = VectorCache(s, _cache_key(enc))
        cache.staging = tmp_path / f"staging-{overlap}"
        assert encode_checkpointed(s, enc, cache, "part", hashes, inputs, overlap=overlap) == 17
        files = cache.staged()
        assert len(files) == 4  # 17 texts, checkpoints of 5
        t = __import__("pyarrow").concat_tables([pq.read_table(f) for f in files])
        got = dict(zip(t.column("content_hash").to_pylist(), t.column("vector").to_pylist()))
        assert len(got) == 17 and set(got) == set(hashes)
        rows[overlap] = got
    assert rows[False].keys() == rows[True].keys()
    for h in hashes:
        np.testing.assert_array_equal(np.array(rows[False][h]), np.array(rows[True][h]))


def test_streamed_shard_stages_the_same_rows_as_sequential_encoding(shared_data, tmp_path, export_cache):
    """embed_shard (reader thread, windows sorted by length, writer thread) against the same windows
    read, encoded and staged one after the other in this thread."""
    from pipeline.steps.embed import (SORT_WINDOW_CHECKPOINTS, VectorCache, _cache_key, _shard_blocks, _shard_work, embed_shard,
                                encode_checkpointed, plan_shards)
    from pipeline.embedding.encoders import get_encoder

    s = _settings(tmp_path, export_cache, embed_backend="onnx", embed_precision="int8", embed_checkpoint_texts=2)
    import_cisi_subset(s, shared_data, 19)
    enc = get_encoder(s)
    hashes, _ = _shard_work(s, enc, None)
    shard = plan_shards(s, 1)[0]
    seq = VectorCache(s, _cache_key(enc))
    seq.staging = tmp_path / "sequential"
    for j, (h, x) in enumerate(_shard_blocks(s, enc, shard, 2 * SORT_WINDOW_CHECKPOINTS)):
        encode_checkpointed(s, enc, seq, shard["part"] if j == 0 else f"{shard['part']}-w{j:05d}", h, x, overlap=False)
    assert embed_shard(s, shard)["encoded"] == 19
    staged = VectorCache(s, _cache_key(enc)).staged()
    assert len(staged) == 10 and any("-w00002" in f.name for f in staged)  # 3 windows of <= 8, checkpoints of 2
    assert [f.name for f in staged] == [f.name for f in seq.staged()]

    def rows(files):
        t = __import__("pyarrow").concat_tables([pq.read_table(f) for f in files])
        return dict(zip(t.column("content_hash").to_pylist(), t.column("vector").to_pylist()))

    a, b = rows(seq.staged()), rows(staged)
    assert a.keys() == b.keys() == set(hashes) and len(a) == 19
    for h in hashes:
        np.testing.assert_array_equal(np.array(a[h]), np.array(b[h]))
    # a rerun finds everything staged: nothing to read past the hashes, nothing encoded
    assert embed_shard(s, plan_shards(s, 1)[0])["encoded"] == 0


def test_prefetch_hands_errors_to_the_caller():
    from pipeline.steps.embed import prefetch

    def items():
        yield 1
        raise ValueError("bad row")

    got = []
    with pytest.raises(ValueError, match="bad row"):
        for x in prefetch(items()):
            got.append(x)
    assert got == [1]
    assert list(prefetch(iter(range(5)), depth=2)) == [0, 1, 2, 3, 4]


def test_staging_writer_hands_write_errors_to_the_caller():
    from pipeline.steps.embed import StagingWriter

    seen = []

    def write(k):
        if k == 1:
            raise OSError("disk full")
        seen.append(k)

    with pytest.raises(OSError, match="disk full"):
        with StagingWriter(write, depth=1) as w:
            for k in range(5):
                w.put(k)
    assert seen[:1] == [0] and 1 not in seen


# ---- snapshots: queries on the documents' backend -----------------------------------------------------------
def test_search_uses_the_snapshot_backend_for_queries(shared_data, tmp_path, export_cache):
    from pipeline.steps.embed import run_embed, table_model
    from pipeline.embedding.encoders import get_encoder
    from pipeline.steps.publish import run_publish
    from pipeline.query import Searcher, open_snapshot

    s = _settings(tmp_path, export_cache, embed_backend="onnx", embed_precision="int8")
    import_cisi_subset(s, shared_data, 12)
    summary = run_embed(s)
    assert summary["passages"] == 12
    import lancedb

    assert table_model(lancedb.connect(str(s.lancedb_dir)).open_table("chunks"))["backend"] == "onnx"
    run_publish(s)
    # a searcher whose own settings say torch: the snapshot's stamp decides
    reader = _settings(tmp_path, export_cache, embed_backend="torch", embed_precision="fp32")
    snap = open_snapshot(reader)
    assert snap.manifest["model"]["backend"] == "onnx" and snap.manifest["model"]["precision"] == "int8"
    q = "the use of citation indexes in information retrieval"
    with Searcher(snap, reader) as searcher:
        got = searcher.encode([q])[0]
        assert searcher.search(q, k=3).results
    int8 = get_encoder(s).encode_queries([q])[0]
    fp32 = get_encoder(reader).encode_queries([q])[0]
    assert float(got @ int8) > 1 - 1e-5          # the int8 ONNX encoder...
    assert float(got @ fp32) < float(got @ int8)  # ...not the reader's torch fp32 one
    assert float(got @ fp32) > 0.98


# ---- the default on a CPU: openvino fp32 (bf16 where the CPU has it) -------------------------------------
def test_the_cpu_default_is_openvino_with_torch_fp32s_vectors(texts, torch_vectors, tmp_path, export_cache, caplog):
    """Nothing set: OpenVINO, logged once; its vectors equal torch fp32's at the precision's tolerance, and at fp32
    they are torch fp32's vector space (same cache key, so an existing cache is reused, not re-embedded)."""
    import logging

    from pipeline.embedding.backends import auto_cpu, vector_tolerance
    from pipeline.embedding.encoders import get_encoder, model_spec

    with caplog.at_level(logging.INFO, logger="pipeline.embedding.encoders"):
        enc = get_encoder(_settings(tmp_path, export_cache))
    backend, precision = auto_cpu()
    assert backend == "openvino" and enc.spec.runtime.label() == f"openvino-{precision}"
    chosen = [r.getMessage() for r in caplog.records if "embed: backend" in r.getMessage()]
    assert len(chosen) <= 1 and all(f"openvino, precision {precision} (auto" in m for m in chosen)
    got = enc.encode_docs(texts)
    np.testing.assert_allclose(got, torch_vectors, atol=vector_tolerance(precision))
    torch_spec = model_spec(_settings(tmp_path, export_cache, embed_backend="torch"))
    assert (enc.spec.key() == torch_spec.key()) == (precision == "fp32")


# ---- the default on a CPU: openvino int8 -----------------------------------------------------------------
def test_the_cpu_default_is_openvino_int8_close_to_torch_fp32(texts, torch_vectors, tmp_path, export_cache, caplog, monkeypatch):
    """Nothing set: openvino int8, logged once, vectors within the int8 tolerance of torch fp32 (measured on 300
    CISI abstracts: cosine min 0.9916, mean 0.9957); PAPERKB_EMBED_BACKEND=torch gives torch fp32 exactly."""
    import logging

    from pipeline.embedding.encoders import get_encoder

    from pipeline.embedding import backends

    monkeypatch.setattr(backends, "AUTO_INT8", True)  # the default once turned on (off: see backends.AUTO_INT8)
    if not backends.cpu_has_int8_dot():
        monkeypatch.setattr(backends, "cpu_has_int8_dot", lambda: True)  # what a VNNI CPU gets
    with caplog.at_level(logging.INFO, logger="pipeline.embedding.encoders"):
        enc = get_encoder(_settings(tmp_path, export_cache))
        get_encoder(_settings(tmp_path / "again", export_cache))
    assert enc.spec.runtime.label() == "openvino-int8"
    chosen = [r.getMessage() for r in caplog.records if "embed: backend" in r.getMessage()]
    assert len(chosen) <= 1 and all("openvino, precision int8 (auto" in m for m in chosen)  # once per process
    cos = _cos(enc.encode_docs(texts), torch_vectors)
    assert float(cos.min()) > 0.985 and float(cos.mean()) > 0.993, (cos.min(), cos.mean())
    torch_enc = get_encoder(_settings(tmp_path, export_cache, embed_backend="torch"))
    assert torch_enc.spec.runtime.label() == "torch-fp32"
    np.testing.assert_allclose(torch_enc.encode_docs(texts[:3]), torch_vectors[:3], atol=1e-6)


def test_a_model_that_cannot_be_quantized_falls_back_to_torch_fp32(tmp_path, export_cache, monkeypatch, caplog):
    """Auto, and the export fails: one warning, torch fp32, and a .failed file so that every later process
    (the merge of a fanned-out embed, a searcher) resolves the same vector space without trying again."""
    import logging

    from pipeline.embedding import backends, encoders

    def broken(*a, **kw):
        raise RuntimeError("this architecture does not trace\nsecond line")

    monkeypatch.setattr(backends, "_export", broken)
    monkeypatch.setattr(backends, "AUTO_INT8", True)
    monkeypatch.setattr(backends, "cpu_has_int8_dot", lambda: True)  # a CPU where auto means openvino int8
    monkeypatch.setattr(encoders, "_AUTO", {})
    s = _settings(tmp_path, export_cache, model_cache_dir=tmp_path / "models")
    with caplog.at_level(logging.WARNING, logger="pipeline.embedding.encoders"):
        spec = encoders.model_spec(s)
    assert spec.runtime.label() == "torch-fp32"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "cannot run on openvino-int8 (RuntimeError: this architecture does not trace)" in warned[0]
    assert "\n" not in warned[0]
    failed = list((tmp_path / "models").rglob("*.failed"))
    assert len(failed) == 1
    # a fresh process state: the marker decides, nothing is exported again
    monkeypatch.setattr(encoders, "_AUTO", {})
    monkeypatch.setattr(backends, "_export", lambda *a, **kw: pytest.fail("exported again"))
    assert encoders.model_spec(s).runtime.label() == "torch-fp32"
    # set explicitly, the backend is not second-guessed: the failure is the user's to see
    assert encoders.model_spec(_settings(tmp_path, export_cache, model_cache_dir=tmp_path / "models",
                                         embed_backend="openvino", embed_precision="int8")).backend == "openvino"


def test_model_cache_location(tmp_path, monkeypatch):
    from pipeline.embedding.encoders import model_cache, model_cache_dir

    s = isolated_settings(tmp_path / "wh")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_cache_dir(s.model_copy(update={"model_cache_dir": None})) == tmp_path / "xdg" / "paperkb" / "models"
    assert model_cache(s.model_copy(update={"model_cache_dir": tmp_path / "m"})) == tmp_path / "m"
    blocked = tmp_path / "a-file"  # a folder that cannot be made (a file in its way: fails for root too)
    blocked.write_text("")
    got = model_cache(s.model_copy(update={"model_cache_dir": blocked / "models"}))
    assert got.parent != blocked and "paperkb-models" in got.name  # a temporary folder instead


@pytest.mark.slow
def test_concurrent_processes_export_once(tmp_path):
    """Two processes asking for the same export into an empty model cache: one exports (file lock), the other
    waits and loads its folder; nobody sees half a folder and no temporary folder is left."""
    code = ("import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout);"
            "from pathlib import Path; from pipeline.embedding.encoders import load_model, default_model_path;"
            "from pipeline.embedding.backends import Runtime;"
            f"m = load_model(default_model_path(), runtime=Runtime('onnx', 'fp32'), export_root=Path({str(tmp_path / 'models')!r}));"
            "print('dim', m.encode(['x']).shape[1])")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert all("dim 384" in o for o in outs)
    assert sum(o.count("exporting ") for o in outs) == 1, outs
    assert not [p for p in (tmp_path / "models").rglob("*") if p.name.endswith(".tmp")]
