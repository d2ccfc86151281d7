"""Benchmark for `paperkb embed` and `paperkb publish`.

1. Throughput of the embed step against bare ``model.encode`` on the same texts (CISI abstracts,
   the real collection), same model object, same batch size, alternated in one run so both see the
   same machine load. Step time = ``run_embed`` on a fresh warehouse and vector cache (DuckDB read,
   hashing, encoding, vector cache, LanceDB tables + FTS/B-tree indexes, run log).
   Target: step throughput >= 0.85 x bare.
2. An unchanged rerun: texts encoded (target 0) and its wall time.
3. Publish at 100,000 chunks: a warehouse of synthetic papers and chunks (text drawn from CISI's
   vocabulary), vectors synthetic (random unit vectors written into the vector cache under the
   chunks' real content keys, so no encoding happens), merged into LanceDB by the real
   ``merge_embeddings`` (ANN index included past ``embed_vector_index_min_rows``), then
   ``run_publish`` timed and the snapshot's size measured.

    .venv/bin/python -m bench.embed [--texts 400] [--rounds 2] [--chunks 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
SHARED = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))


def cisi_docs(n: int) -> str:
    text = (SHARED / "collections" / "cisi" / "CISI.ALL").read_text(encoding="utf-8", errors="replace")
    starts = [m.start() for m in re.finditer(r"^\.I ", text, flags=re.M)]
    return text[: starts[n] if n < len(starts) else len(text)]


def fresh_settings(root: Path, **kw):
    from pipeline.settings import Settings

    return Settings(warehouse=root / "warehouse", **kw)


def bench_throughput(n_texts: int, rounds: int, batch_size: int) -> dict:
    from pipeline.collections import import_collection
    from pipeline.embed import read_passages, passage_inputs, run_embed, _open_read
    from pipeline.encoders import get_encoder

    tmp = Path(tempfile.mkdtemp(prefix="bench-embed-"))
    src = tmp / "cisi" / "CISI.ALL"
    src.parent.mkdir(parents=True)
    src.write_text(cisi_docs(n_texts), encoding="utf-8")
    # the texts exactly as the step will see them, read once from a template warehouse
    template = fresh_settings(tmp / "template", embed_batch_size=batch_size)
    import_collection(template, src, fmt="smart", name="cisi")
    enc = get_encoder(template)
    con = _open_read(template)
    texts = passage_inputs(enc, read_passages(con))
    con.close()
    model = enc.doc_model
    model.encode(texts[:batch_size], batch_size=batch_size, normalize_embeddings=True)  # warm-up

    bare, step, rerun, bare_cpu, step_cpu = [], [], [], [], []
    for r in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        model.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True)
        bare.append(time.perf_counter() - t0)
        bare_cpu.append(time.process_time() - c0)

        run_root = tmp / f"run{r}"
        shutil.copytree(template.warehouse, run_root / "warehouse")  # imported, never embedded
        s = fresh_settings(run_root, embed_batch_size=batch_size)
        t0, c0 = time.perf_counter(), time.process_time()
        first = run_embed(s)
        step.append(time.perf_counter() - t0)
        step_cpu.append(time.process_time() - c0)
        assert first["encoded"] == len(texts), first
        t0 = time.perf_counter()
        again = run_embed(s)
        rerun.append((time.perf_counter() - t0, again["encoded"]))
    shutil.rmtree(tmp, ignore_errors=True)
    n = len(texts)
    res = {
        "texts": n, "batch_size": batch_size, "rounds": rounds,
        "bare_s": [round(x, 2) for x in bare], "step_s": [round(x, 2) for x in step],
        "bare_texts_per_s": round(n / min(bare), 1), "step_texts_per_s": round(n / min(step), 1),
        "ratio_best": round(min(bare) / min(step), 3),
        "ratio_per_round": [round(b / s, 3) for b, s in zip(bare, step)],
        "bare_cpu_s": [round(x, 2) for x in bare_cpu], "step_cpu_s": [round(x, 2) for x in step_cpu],
        "cpu_ratio_best": round(min(bare_cpu) / min(step_cpu), 3),
        "rerun_s": [round(t, 2) for t, _ in rerun], "rerun_encoded": [e for _, e in rerun],
    }
    return res


def bench_publish(n_chunks: int, chunks_per_paper: int = 20, **settings_kw) -> dict:
    import pyarrow as pa

    from pipeline.embed import VectorCache, input_hash, merge_embeddings, passage_inputs, read_passages, \
        read_figures, figure_inputs, _open_read, _cache_key, model_facts
    from pipeline.encoders import get_encoder
    from pipeline.publish import run_publish
    from pipeline.warehouse import Warehouse

    tmp = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    s = fresh_settings(tmp, **settings_kw)
    rng = np.random.default_rng(0)
    vocab = sorted(set(re.findall(r"[A-Za-z]{3,}", cisi_docs(1460))))
    n_papers = max(1, n_chunks // chunks_per_paper)
    words = np.array(vocab)
    with Warehouse(s) as wh:
        wh.init()
        pids = [f"bench:{i}" for i in range(n_papers)]
        wh.upsert("papers", pa.table({
            "paper_id": pids, "source": ["bench"] * n_papers, "external_id": [str(i) for i in range(n_papers)],
            "title": [" ".join(rng.choice(words, 8)) for _ in range(n_papers)],
            "abstract": [" ".join(rng.choice(words, 120)) for _ in range(n_papers)],
            "year": pa.array(rng.integers(1990, 2026, n_papers), pa.int32())}), keys=["paper_id"])
        rows = {"chunk_id": [], "paper_id": [], "ordinal": [], "section": [], "page_start": [], "page_end": [],
                "char_start": [], "char_end": [], "text": [], "n_tokens": [], "content_hash": []}
        for i in range(n_chunks):
            p, o = pids[i % n_papers], i // n_papers
            t = " ".join(rng.choice(words, 180))
            for k, v in (("chunk_id", f"{p}#{o}"), ("paper_id", p), ("ordinal", o), ("section", "body"),
                         ("page_start", 1 + o // 3), ("page_end", 1 + o // 3), ("char_start", 0), ("char_end", len(t)),
                         ("text", t), ("n_tokens", 230), ("content_hash", str(i))):
                rows[k].append(v)
        wh.upsert("chunks", pa.table(rows), keys=["chunk_id"])
    enc = get_encoder(s)
    con = _open_read(s)
    inputs = passage_inputs(enc, read_passages(con)) + figure_inputs(enc, read_figures(con))
    con.close()
    dim = model_facts(s, enc)["dim"]
    hashes = list(dict.fromkeys(input_hash(x) for x in inputs))
    vec = rng.standard_normal((len(hashes), dim)).astype(np.float32)
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    VectorCache(s, _cache_key(enc)).write_staged("synthetic", hashes, vec, dim)

    t0 = time.perf_counter()
    merged = merge_embeddings(s)
    merge_s = time.perf_counter() - t0
    assert merged["encoded"] == 0, merged
    t0 = time.perf_counter()
    pub = run_publish(s)
    publish_s = time.perf_counter() - t0
    snap = Path(pub["path"])
    lance_bytes = sum(f.stat().st_size for f in (snap / "lancedb").rglob("*") if f.is_file())
    res = {
        "chunks": n_chunks, "papers": n_papers, "passages": merged["passages"], "dim": dim,
        "merge_s": round(merge_s, 1), "merge_timings": merged["timings"], "indexes_built": merged["indexes_built"],
        "publish_s": round(publish_s, 1),
        "snapshot_mb": round(pub["bytes"] / 1e6, 1), "lancedb_mb": round(lance_bytes / 1e6, 1),
        "catalog_mb": round((snap / "catalog.duckdb").stat().st_size / 1e6, 1),
        "vector_index_min_rows": s.embed_vector_index_min_rows, "vector_index_type": s.embed_vector_index_type,
    }
    shutil.rmtree(tmp, ignore_errors=True)
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=400, help="CISI abstracts for the throughput comparison")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--chunks", type=int, default=100_000, help="chunks for the publish benchmark (0 = skip)")
    a = ap.parse_args()
    import torch

    res = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                       "load_avg_at_start": os.getloadavg()}}
    res["throughput"] = bench_throughput(a.texts, a.rounds, a.batch_size)
    print(json.dumps(res["throughput"], indent=1), flush=True)
    if a.chunks:
        res["publish"] = bench_publish(a.chunks)
        print(json.dumps(res["publish"], indent=1), flush=True)
    res["machine"]["load_avg_at_end"] = os.getloadavg()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "embed.json").write_text(json.dumps(res, indent=1))
    t = res["throughput"]
    print(f"embed: step {t['step_texts_per_s']} texts/s vs bare encode {t['bare_texts_per_s']} texts/s "
          f"-> ratio {t['ratio_best']} (target >= 0.85); unchanged rerun encoded {t['rerun_encoded']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
