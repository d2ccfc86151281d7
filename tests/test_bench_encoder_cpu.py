"""bench/encoder_cpu.py: the collections it reads, its dense-only scoring, and the round trip of a warehouse's embed
inputs out to another host and that host's vectors back into the warehouse's vector cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from conftest import isolated_settings

from bench import encoder_cpu


def test_dense_scores_rank_the_judged_documents_first(shared_data):
    ids, docs, qids, queries, qrels = encoder_cpu.collection(shared_data, "cisi")
    assert (len(ids), len(qids)) == (1460, 112) and len(docs) == len(ids) and len(queries) == len(qids)
    # one dimension per document; each query points at exactly its relevant documents: an ideal ranking
    d = np.eye(len(ids), dtype=np.float32)
    pos = {doc: i for i, doc in enumerate(ids)}
    q = np.zeros((len(qids), len(ids)), np.float32)
    for i, qid in enumerate(qids):
        for doc, grade in qrels.get(qid, {}).items():
            if grade > 0:
                q[i, pos[doc]] = 1.0
    ideal = encoder_cpu.dense_scores(shared_data, "cisi", {"cisi_docs": d, "cisi_queries": q})
    assert ideal["nDCG@10"] == 1.0 and ideal["AP"] == 1.0
    shuffled = encoder_cpu.dense_scores(shared_data, "cisi", {"cisi_docs": d, "cisi_queries": q[::-1].copy()})
    assert shuffled["nDCG@10"] < 0.2  # the queries' own ids, not their rows' order, decide what is relevant


def test_vectors_made_elsewhere_leave_the_embed_step_nothing_to_encode(shared_data, tmp_path):
    from pipeline.embedding.encoders import Encoder
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.embed import VectorCache, _cache_key, _shard_work

    wh = tmp_path / "wh"
    import_collection(isolated_settings(wh), shared_data / "collections" / "cisi")
    out = tmp_path / "inputs.json"
    spec = f"cisi={wh}"
    encoder_cpu.main(["inputs", "--warehouse", spec, "--backend", "openvino", "--precision", "fp32", "--out", str(out)])
    given = json.loads(out.read_text())["cisi"]
    assert len(given["hashes"]) == len(set(given["hashes"])) == 1459  # one CISI abstract is there twice
    assert all(isinstance(x, str) and x for x in given["inputs"])

    vectors = np.random.default_rng(0).normal(size=(len(given["hashes"]), 384)).astype(np.float32)
    np.savez(tmp_path / "inputs-openvino-fp32.npz", cisi=vectors)
    encoder_cpu.main(["cache", "--warehouse", spec, "--backend", "openvino", "--precision", "fp32",
                      "--inputs", str(out), "--vectors", str(tmp_path / "inputs-openvino-fp32.npz")])
    _, settings = encoder_cpu._warehouse_settings(spec, "openvino", "fp32")
    encoder = Encoder(settings)
    cached, missing = VectorCache(settings, _cache_key(encoder)).lookup(given["hashes"], 384)
    assert missing == []
    assert np.array_equal(cached, vectors)
    assert _shard_work(settings, encoder, None) == ([], [])  # `paperkb embed` would encode nothing


def test_a_packed_model_encodes_its_texts_as_the_fp16_rounded_model(tmp_path):
    from sentence_transformers import SentenceTransformer

    from pipeline.embedding.encoders import default_model_path

    model = Path(default_model_path())
    texts = ["Editions of the Dewey Decimal Classification.", "a shorter one", "Retrieval of scientific papers."]
    facts = encoder_cpu.pack_model(model, tmp_path / "m", texts[:2])  # the third text's words are not all kept
    assert 0 < facts["rows_kept"] < facts["rows"] // 100
    assert (tmp_path / "m" / "packed.safetensors").stat().st_size < (model / "model.safetensors").stat().st_size / 2
    encoder_cpu.unpack_model(tmp_path / "m")
    packed = SentenceTransformer(str(tmp_path / "m"), device="cpu").encode(texts, normalize_embeddings=True)
    full = SentenceTransformer(str(model), device="cpu").encode(texts, normalize_embeddings=True)
    cos = np.einsum("ij,ij->i", packed, full)
    assert cos[0] > 0.9999 and cos[1] > 0.9999  # fp16 rounding only
    assert cos[2] < 0.999  # a text with words outside the packed rows is not that model's: pack every text you encode
