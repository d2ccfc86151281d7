"""The snapshot's own query encoder (ONNX Runtime + tokenizers, no torch) and its stored BM25 statistics.

On the real CISI snapshot: the light encoder's query vectors match sentence-transformers' within the stated
tolerance on CISI's own queries and the rankings are the same; a snapshot published without these files (as
before issue 29) is still searched, with sentence-transformers and statistics counted at open; a model whose
pipeline the light encoder does not reproduce gets no export, and the publish goes on.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from pipeline.evaluation.qrels import read_queries
from pipeline.query import Searcher, open_snapshot

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# the largest difference per vector component allowed between the two encoders (unit vectors of 384
# components); measured on CISI's 112 queries: 1.6e-7 (ONNX Runtime fp32 against torch fp32), 1.9e-7 without
# ONNX Runtime's weight pre-packing (one-shot)
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def cisi_queries(shared_data):
    qs = read_queries(shared_data / "collections" / "cisi" / "CISI.QRY")
    texts = list(qs.values()) if isinstance(qs, dict) else [t for _, t in qs]
    return [" ".join(t.split()) for t in texts]


@pytest.fixture(scope="module")
def pair(cisi_snapshot, cisi_snapshot_as_before):
    """(searcher on the snapshot as published now, searcher on the same snapshot without its reader files);
    queries in float32 on both (query_bf16 would put the sentence-transformers side under bf16 autocast)."""
    new = Searcher(open_snapshot(cisi_snapshot), cisi_snapshot.model_copy(update={"query_bf16": False}))
    old = Searcher(open_snapshot(cisi_snapshot_as_before), cisi_snapshot_as_before.model_copy(update={"query_bf16": False}))
    yield new, old
    new.close()
    old.close()


def test_the_snapshot_carries_its_query_encoder_and_bm25_statistics(cisi_snapshot):
    from pipeline import snapshots

    folder = snapshots.resolve(cisi_snapshot)
    m = snapshots.read_manifest(folder)
    assert m["layout"]["query_encoder"] == "query_encoder" and m["layout"]["bm25"] == "bm25/chunks.npz"
    for rel in ("query_encoder/model.onnx", "query_encoder/model.onnx.data", "query_encoder/tokenizer.json",
                "query_encoder/query_encoder.json", "bm25/chunks.npz"):
        assert rel in m["files"] and m["sizes"][rel] == (folder / rel).stat().st_size, rel
    d = json.loads((folder / "query_encoder" / "query_encoder.json").read_text())
    assert (d["backend"], d["precision"], d["pooling"], d["max_seq_length"], d["dim"]) == ("onnx", "fp32", "mean", 256, 384)
    # the weights are the export kept beside the vector cache, hard-linked: no disk per snapshot
    weights = folder / "query_encoder" / "model.onnx.data"
    cached = [p for p in (cisi_snapshot.embed_cache_dir / "models").rglob("model.onnx.data")
              if p.stat().st_ino == weights.stat().st_ino]
    assert cached and weights.stat().st_nlink >= 2 and weights.stat().st_mode & 0o044  # readable by other users
    assert snapshots.verify(cisi_snapshot) == []


def test_light_encoder_matches_sentence_transformers_on_cisi_queries(pair, cisi_queries):
    new, old = pair
    a, b = new.encode(cisi_queries), old.encode(cisi_queries)
    assert new.encoder_kind.startswith("onnx-fp32") and old.encoder_kind == "sentence-transformers"
    assert a.shape == b.shape == (len(cisi_queries), 384) and a.dtype == b.dtype == np.float32
    assert float(np.abs(a - b).max()) < TOLERANCE
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    # one query alone (no padding) and inside a batch (padded to the longest) give the same vector, and so does
    # the encoder of a one-shot process (ONNX Runtime without pre-packed weights)
    new._qcache.clear()
    alone = new.encode([cisi_queries[0]])[0]
    assert float(np.abs(alone - a[0]).max()) < TOLERANCE
    one_shot = Searcher(new.snap, new.settings, one_shot=True)
    assert float(np.abs(one_shot.encode(cisi_queries[:20]) - b[:20]).max()) < TOLERANCE


def test_rankings_are_unchanged(pair, cisi_queries):
    new, old = pair
    for q in cisi_queries[:30]:
        ra, rb = new.search(q, k=10), old.search(q, k=10)
        assert [r.paper_id for r in ra.results] == [r.paper_id for r in rb.results], q
        assert [r.score for r in ra.results] == pytest.approx([r.score for r in rb.results], abs=1e-4)


def test_stored_bm25_statistics_are_those_counted_at_open(cisi_snapshot, pair):
    from pipeline import snapshots
    from pipeline.query import bm25_stats

    new, old = pair
    stored = bm25_stats.read(snapshots.resolve(cisi_snapshot) / "bm25" / "chunks.npz")
    counted = bm25_stats.count(new._chunks)
    assert stored is not None and stored.passages is not None
    assert (stored.stats.n_docs, stored.stats.sampled, stored.stats.df) == (counted.stats.n_docs, counted.stats.sampled, counted.stats.df)
    assert stored.stats.avgdl == pytest.approx(counted.stats.avgdl)
    # the searcher on the old snapshot counted them at open: the same BM25 for any passages and terms
    rowids = new._resident[2].rowids[::7]
    texts = [new._resident[2].lists["text"][i] for i in range(0, len(new._resident[2].rowids), 7)]
    words = [("retrieval", 1.0), ("indexing", 0.5), ("citation", 0.3), ("libraries", 0.2)]
    assert np.allclose(new._cand_bm25.score(words, rowids, texts), old._cand_bm25.score(words, rowids, texts))


def test_an_unreadable_or_newer_encoder_folder_falls_back(cisi_snapshot, tmp_path):
    from pipeline import snapshots
    from pipeline.embedding.query_encoder import DESCRIPTOR, open_query_encoder

    src = snapshots.resolve(cisi_snapshot) / "query_encoder"
    assert open_query_encoder(src) is not None
    folder = tmp_path / "query_encoder"
    shutil.copytree(src, folder, copy_function=os.link)
    (folder / DESCRIPTOR).unlink()
    d = json.loads((src / DESCRIPTOR).read_text())
    (folder / DESCRIPTOR).write_text(json.dumps({**d, "format": d["format"] + 1}))
    assert open_query_encoder(folder) is None  # written by a newer paperkb: sentence-transformers encodes
    (folder / DESCRIPTOR).write_text(json.dumps({**d, "pooling": "weightedmean"}))
    assert open_query_encoder(folder) is None
    (folder / DESCRIPTOR).write_text("{")
    assert open_query_encoder(folder) is None
    assert open_query_encoder(None) is None and open_query_encoder(tmp_path / "nowhere") is None


def test_a_pipeline_the_light_encoder_does_not_reproduce_is_refused():
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    from pipeline.embedding.backends import Runtime
    from pipeline.embedding.encoders import default_model_path, load_model
    from pipeline.embedding.query_export import NotExportable, pipeline_of

    st = load_model(default_model_path())
    rt = Runtime("onnx", "fp32")
    assert pipeline_of(st, rt, None).pooling == "mean"
    weighted = SentenceTransformer(modules=[st[0], Pooling(384, pooling_mode="weightedmean")], device="cpu")
    with pytest.raises(NotExportable, match="pooling"):
        pipeline_of(weighted, rt, None)
    prompted = SentenceTransformer(modules=[st[0], st[1]], device="cpu", prompts={"query": "query: "},
                                   default_prompt_name="query")
    with pytest.raises(NotExportable, match="prompt"):
        pipeline_of(prompted, rt, None)


def test_publish_goes_on_without_an_encoder_it_cannot_make(cisi_snapshot, tmp_path, caplog):
    """A model stamp the export cannot serve (here: a model path that is gone) leaves the snapshot without
    ``query_encoder/``; the snapshot is complete otherwise and readers encode with sentence-transformers."""
    from pipeline.steps.publish import write_reader_files
    from pipeline import snapshots

    src = snapshots.resolve(cisi_snapshot)
    tmp = tmp_path / "x.tmp"
    shutil.copytree(src / "lancedb", tmp / "lancedb", copy_function=os.link)
    model = {**snapshots.read_manifest(src)["model"], "path": str(tmp_path / "no-model"), "query_path": str(tmp_path / "no-model")}
    layout = write_reader_files(cisi_snapshot.model_copy(update={"embed_cache_dir": tmp_path / "cache"}), tmp, model)
    assert layout == {"bm25": "bm25/chunks.npz"}
    assert not (tmp / "query_encoder").exists() and (tmp / "bm25" / "chunks.npz").is_file()
    assert any("without its query encoder" in r.getMessage() for r in caplog.records)


def test_an_openvino_fp32_snapshot_gets_an_onnx_fp32_query_encoder_in_its_vector_space(tmp_path, cisi_queries):
    """The CPU default embeds with OpenVINO fp32. Its snapshot's query encoder is ONNX Runtime fp32 (fp32 is one vector
    space on every backend; a one-shot search opens ONNX Runtime ~0.5 s sooner): checked against what a reader
    without the folder computes, sentence-transformers on OpenVINO fp32, on CISI's own queries."""
    from pathlib import Path

    from pipeline.embedding.backends import Runtime
    from pipeline.embedding.encoders import default_model_path, load_model
    from pipeline.embedding.query_encoder import open_query_encoder
    from pipeline.embedding.query_export import documents_runtime, ensure_query_export, export_runtime

    assert export_runtime("openvino", "fp32") == export_runtime("torch", "fp32") == Runtime("onnx", "fp32")
    assert export_runtime(None, None) == export_runtime("torch", "fp16") == Runtime("onnx", "fp32")
    assert export_runtime("openvino", "int8") == Runtime("openvino", "int8")  # their own spaces
    assert export_runtime("onnx", "int8") == Runtime("onnx", "int8")
    assert documents_runtime("openvino", "fp32") == Runtime("openvino", "fp32")
    assert documents_runtime("torch", "fp32") is None and documents_runtime("openvino", "int8") is None
    models = Path(os.environ["PAPERKB_MODEL_CACHE_DIR"])
    path = default_model_path()
    folder = ensure_query_export({"path": path, "backend": "openvino", "precision": "fp32"}, tmp_path / "cache", models)
    assert folder.name.startswith("query-onnx-fp32-")
    d = json.loads((folder / "query_encoder.json").read_text())
    assert (d["backend"], d["precision"]) == ("onnx", "fp32") and (folder / "model.onnx").is_file()
    queries = cisi_queries[:24]
    got = open_query_encoder(folder, one_shot=True)(queries)
    ov = load_model(path, runtime=Runtime("openvino", "fp32"), export_root=models, threads=1)
    want = ov.encode(queries, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    assert float(np.abs(got - want).max()) < TOLERANCE


def test_without_onnx_an_openvino_fp32_snapshot_gets_the_openvino_encoder(tmp_path):
    """An install without the `onnx` package (the exporter's, in [onnx]) cannot save the ONNX encoder: the publish
    makes the documents' own OpenVINO fp32 one instead, says so, and the snapshot's queries still skip torch."""
    import subprocess
    import sys

    from conftest import REPO_ROOT

    code = ("import sys, json, logging; sys.modules['onnx'] = None; logging.basicConfig(level=logging.WARNING);"
            "from pathlib import Path; import os;"
            "from pipeline.embedding.encoders import default_model_path;"
            "from pipeline.embedding.query_export import ensure_query_export;"
            "from pipeline.embedding.query_encoder import open_query_encoder;"
            "f = ensure_query_export({'path': default_model_path(), 'backend': 'openvino', 'precision': 'fp32'},"
            f" Path({str(tmp_path / 'cache')!r}), Path(os.environ['PAPERKB_MODEL_CACHE_DIR']));"
            "v = open_query_encoder(f, one_shot=True)(['citation analysis']);"
            "print(json.dumps([f.name, json.loads((f / 'query_encoder.json').read_text())['backend'], v.shape[1]]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_") or k == "PAPERKB_MODEL_CACHE_DIR"}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO_ROOT))
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    name, backend, dim = json.loads(res.stdout.strip().splitlines()[-1])
    assert name.startswith("query-openvino-fp32-") and backend == "openvino" and dim == 384
    assert "making it for the documents' own runtime, openvino-fp32, instead" in res.stderr


def test_without_the_encoders_a_snapshot_without_its_query_encoder_is_one_line_naming_the_extra(
        cisi_snapshot_as_before, monkeypatch, capsys):
    """A base install (no sentence-transformers, so no torch) reading a snapshot published before snapshots carried
    their query encoder: `paperkb search` exits 2 with one line naming the extra, a server answers 503 with it."""
    import sys

    from fastapi.testclient import TestClient

    from pipeline.cli import main
    from pipeline.embedding.query_encoder import fallback_installed, why_not_usable
    from pipeline.serve.app import create_app

    assert fallback_installed()
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    assert not fallback_installed()
    assert why_not_usable(None).startswith("this snapshot has no query encoder export")
    assert why_not_usable(None).endswith("; install paperkb[encoders] to encode queries")
    code = main(["--warehouse", str(cisi_snapshot_as_before.warehouse), "search", "library classification", "-k", "2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "Traceback" not in err, err
    assert err == ("paperkb: error: this snapshot has no query encoder export (it was published before snapshots "
                   "carried one); install paperkb[encoders] to encode queries")
    with TestClient(create_app(cisi_snapshot_as_before)) as client:
        r = client.get("/api/search", params={"q": "library classification", "k": 2})
        assert r.status_code == 503 and "install paperkb[encoders]" in r.json()["detail"], r.text
        assert client.get("/api/health").status_code == 200  # the snapshot itself is fine


def test_a_query_encoder_whose_runtime_is_missing_is_named(cisi_snapshot, tmp_path, monkeypatch):
    from pipeline import snapshots
    from pipeline.embedding.query_encoder import DESCRIPTOR, why_not_usable

    src = snapshots.resolve(cisi_snapshot) / "query_encoder"
    folder = tmp_path / "query_encoder"
    shutil.copytree(src, folder, copy_function=os.link)
    (folder / DESCRIPTOR).unlink()
    d = json.loads((src / DESCRIPTOR).read_text())
    (folder / DESCRIPTOR).write_text(json.dumps({**d, "backend": "openvino", "precision": "bf16"}))
    monkeypatch.setitem(__import__("sys").modules, "openvino", None)
    assert why_not_usable(folder) == ("this snapshot's query encoder runs on openvino (bf16), and openvino is not installed; "
                                      "install paperkb[encoders] (or openvino alone) to encode queries")
    (folder / DESCRIPTOR).write_text(json.dumps({**d, "format": d["format"] + 1}))
    assert "cannot run (query encoder format" in why_not_usable(folder)
    assert why_not_usable(folder).endswith("; install paperkb[encoders] to encode queries")
