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

5. ``--cold-export openvino:int8 [--before DIR]``: the first run's export (calibration included) into an
   empty model cache, each round in a fresh process; with ``--before`` the same for a checkout of earlier
   code, alternated.

4. ``--backends torch:fp32,onnx:int8,openvino:bf16``: the embed step (``run_embed`` on a fresh warehouse,
   as in 1) once per backend/precision on the same texts, rotated within each round so all see the same
   load; texts/s and the ratio to torch fp32 of the same round, the one-off export time, and how close
   each one's vectors are to torch fp32's (cosine).

    .venv/bin/python -m bench.embed [--texts 400] [--rounds 2] [--chunks 100000]
    .venv/bin/python -m bench.embed --backends torch:fp32,onnx:fp32,onnx:int8,openvino:fp32,openvino:bf16 \
        --texts 300 --rounds 3 --chunks 0 --skip-throughput
    # on a GPU host: the step against bare fp16 encode, same texts (CISI x20 = 29,200 abstracts)
    .venv/bin/python -m bench.embed --device cuda --precision fp16 --texts 1460 --copies 20 --batch-size 256 --chunks 0 --rounds 3
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
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
SHARED = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))


def cisi_docs(n: int, copies: int = 1) -> str:
    """The first ``n`` CISI records (SMART format); ``copies`` > 1 repeats them under new ids with
    ``copy k:`` before each abstract, so every copy is a distinct text (more real passages for a GPU)."""
    text = (SHARED / "collections" / "cisi" / "CISI.ALL").read_text(encoding="utf-8", errors="replace")
    starts = [m.start() for m in re.finditer(r"^\.I ", text, flags=re.M)]
    head = text[: starts[n] if n < len(starts) else len(text)]
    out = [head]
    for k in range(1, max(1, copies)):
        def renumbered(m: re.Match, k: int = k) -> str:  # (k bound now: B023)
            return f".I {int(m.group(1)) + 10000 * k}"

        c = re.sub(r"^\.I (\d+)", renumbered, head, flags=re.M)
        out.append(re.sub(r"^\.W\n", f".W\ncopy {k}: ", c, flags=re.M))
    return "".join(out)


def fresh_settings(root: Path, **kw):
    from pipeline.settings import Settings

    return Settings(warehouse=root / "warehouse", **kw)


def bench_throughput(n_texts: int, rounds: int, batch_size: int, copies: int = 1, **runtime) -> dict:
    """Step vs bare encode; ``runtime``: embed_device / embed_backend / embed_precision for both sides."""
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.embed import read_passages, passage_inputs, run_embed, _open_read
    from pipeline.embedding.encoders import get_encoder

    runtime = {k: v for k, v in runtime.items() if v}
    tmp = Path(tempfile.mkdtemp(prefix="bench-embed-"))
    src = tmp / "cisi" / "CISI.ALL"
    src.parent.mkdir(parents=True)
    src.write_text(cisi_docs(n_texts, copies), encoding="utf-8")
    # the texts exactly as the step will see them, read once from a template warehouse
    template = fresh_settings(tmp / "template", embed_batch_size=batch_size, model_cache_dir=tmp / "models", **runtime)
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
        s = fresh_settings(run_root, embed_batch_size=batch_size, embed_cache_dir=tmp / f"cache{r}", model_cache_dir=tmp / "models",
                           **runtime)  # the template's model cache: the export was made before timing
        t0, c0 = time.perf_counter(), time.process_time()
        first = run_embed(s)
        step.append(time.perf_counter() - t0)
        step_cpu.append(time.process_time() - c0)
        assert first["encoded"] == len(set(texts)), first  # identical texts are encoded once
        t0 = time.perf_counter()
        again = run_embed(s)
        rerun.append((time.perf_counter() - t0, again["encoded"]))
    shutil.rmtree(tmp, ignore_errors=True)
    n = len(texts)
    res = {
        "texts": n, "batch_size": batch_size, "rounds": rounds, "runtime": enc.spec.runtime.label(),
        "device": template.embed_device,
        "bare_s": [round(x, 2) for x in bare], "step_s": [round(x, 2) for x in step],
        "bare_texts_per_s": round(n / min(bare), 1), "step_texts_per_s": round(n / min(step), 1),
        "ratio_best": round(min(bare) / min(step), 3),
        "ratio_per_round": [round(b / s, 3) for b, s in zip(bare, step)],
        "bare_cpu_s": [round(x, 2) for x in bare_cpu], "step_cpu_s": [round(x, 2) for x in step_cpu],
        "cpu_ratio_best": round(min(bare_cpu) / min(step_cpu), 3),
        "rerun_s": [round(t, 2) for t, _ in rerun], "rerun_encoded": [e for _, e in rerun],
    }
    return res


# One cold export in a fresh process: load the bundled model, then export it for (backend, precision) into an
# empty folder, timed (wall and the process's CPU, all threads). The same call works on the code before the
# model cache existed (its root was the vector cache), so --before runs it side by side.
_COLD_EXPORT = """
import json, sys, tempfile, time
from pathlib import Path
from sentence_transformers import SentenceTransformer
from pipeline.embedding.backends import Runtime, ensure_export
from pipeline.embedding.encoders import default_model_path
path = default_model_path()
m = SentenceTransformer(path, device="cpu")
t0, c0 = time.perf_counter(), time.process_time()
ensure_export(m, path, Path(tempfile.mkdtemp()), Runtime(sys.argv[1], sys.argv[2]))
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}))
"""


def bench_cold_export(config: str, rounds: int, before: Path | None) -> dict:
    """The first run's export (+ calibration for int8) into an empty model cache, in a fresh process each
    time; with ``before`` (a checkout of earlier code) that code's export too, alternated in one run."""
    import subprocess
    import sys

    b, p = config.split(":")
    sides = {"this": ROOT, **({"before": Path(before)} if before else {})}
    out: dict = {"config": config, "rounds": rounds}
    for r in range(rounds):
        for name, src in (sides.items() if r % 2 == 0 else reversed(list(sides.items()))):
            env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
            res = subprocess.run([sys.executable, "-c", _COLD_EXPORT, b, p], cwd=src, env=env, capture_output=True,
                                 text=True, check=True)
            got = json.loads(res.stdout.strip().splitlines()[-1])
            out.setdefault(name, []).append({k: round(v, 1) for k, v in got.items()} | {"load": round(os.getloadavg()[0], 1)})
            print(f"round {r + 1} {name} {config}: export {got['wall_s']:.1f}s wall, {got['cpu_s']:.1f}s CPU, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    return out


def bench_backends(configs: list[str], n_texts: int, rounds: int, batch_size: int) -> dict:
    """The embed step per backend/precision on the same CISI abstracts, side by side in one run."""
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.embed import input_hash, read_passages, passage_inputs, run_embed, _open_read
    from pipeline.embedding.encoders import get_encoder

    tmp = Path(tempfile.mkdtemp(prefix="bench-backends-"))
    src = tmp / "cisi" / "CISI.ALL"
    src.parent.mkdir(parents=True)
    src.write_text(cisi_docs(n_texts), encoding="utf-8")
    # a model cache of its own: the exports are made (and timed) here, then shared by every timed run
    base = fresh_settings(tmp / "template", embed_batch_size=batch_size, model_cache_dir=tmp / "models")
    import_collection(base, src, fmt="smart", name="cisi")
    pairs = [tuple(c.split(":")) for c in configs]
    if ("torch", "fp32") not in pairs:
        pairs.insert(0, ("torch", "fp32"))
    con = _open_read(base)
    passages = read_passages(con)
    con.close()
    out: dict = {"texts": passages.num_rows, "batch_size": batch_size, "rounds": rounds, "configs": {}}
    vectors, settings = {}, {}
    for b, p in pairs:  # load (and export, once) before timing; the vectors for the closeness check
        s = base.model_copy(update={"embed_backend": b, "embed_precision": p})
        t0 = time.perf_counter()
        enc = get_encoder(s)
        texts = passage_inputs(enc, passages)
        enc.encode_docs(texts[:batch_size])
        load_s = time.perf_counter() - t0
        vectors[(b, p)] = enc.encode_docs(texts)
        out["texts"] = len({input_hash(x) for x in texts})  # distinct texts: what the step encodes (CISI repeats one)
        settings[(b, p)] = s
        out["configs"][f"{b}:{p}"] = {"runtime": enc.spec.runtime.label(), "key": enc.key,
                                       "load_and_export_s": round(load_s, 1), "step_s": [], "ratio_vs_torch_fp32": []}
        print(f"{b}:{p} loaded in {load_s:.1f}s", flush=True)
    ref = vectors[("torch", "fp32")]
    for (b, p), v in vectors.items():
        cos = (v * ref).sum(axis=1)
        out["configs"][f"{b}:{p}"].update(cos_vs_torch_fp32_min=round(float(cos.min()), 6),
                                          cos_vs_torch_fp32_mean=round(float(cos.mean()), 6))
    for r in range(rounds):
        times, cpu = {}, {}
        order = pairs[r % len(pairs):] + pairs[:r % len(pairs)]  # rotate who goes first
        for b, p in order:
            run_root = tmp / f"run{r}-{b}-{p}"
            shutil.copytree(base.warehouse, run_root / "warehouse")  # imported, never embedded
            s = settings[(b, p)].model_copy(update={"warehouse": run_root / "warehouse",
                                                    "embed_cache_dir": run_root / "vector_cache"})
            t0, c0 = time.perf_counter(), time.process_time()
            summary = run_embed(s)
            times[(b, p)] = time.perf_counter() - t0
            cpu[(b, p)] = time.process_time() - c0  # all threads of this process: what the step costs a free core
            assert summary["encoded"] == out["texts"], summary
            shutil.rmtree(run_root, ignore_errors=True)
            print(f"round {r + 1} {b}:{p}: {out['texts'] / times[(b, p)]:.1f} texts/s ({times[(b, p)]:.1f}s wall, "
                  f"{cpu[(b, p)]:.1f}s CPU) load {os.getloadavg()[0]:.1f}", flush=True)
        for (b, p), t in times.items():
            c = out["configs"][f"{b}:{p}"]
            c["step_s"].append(round(t, 2))
            c.setdefault("step_cpu_s", []).append(round(cpu[(b, p)], 2))
            c["ratio_vs_torch_fp32"].append(round(times[("torch", "fp32")] / t, 3))
            c.setdefault("cpu_ratio_vs_torch_fp32", []).append(round(cpu[("torch", "fp32")] / cpu[(b, p)], 3))
    ref_cfg = out["configs"]["torch:fp32"]
    for c in out["configs"].values():
        c["texts_per_s_best"] = round(out["texts"] / min(c["step_s"]), 1)
        c["ratio_of_best"] = round(min(ref_cfg["step_s"]) / min(c["step_s"]), 3)
        c["cpu_ratio_of_best"] = round(min(ref_cfg["step_cpu_s"]) / min(c["step_cpu_s"]), 3)
        c["ratio_median_of_rounds"] = float(np.median(c["ratio_vs_torch_fp32"]))
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def bench_publish(n_chunks: int, chunks_per_paper: int = 20, **settings_kw) -> dict:
    import pyarrow as pa

    from pipeline.steps.embed import VectorCache, input_hash, merge_embeddings, passage_inputs, read_passages, \
        read_figures, figure_inputs, _open_read, _cache_key, model_facts
    from pipeline.embedding.encoders import get_encoder
    from pipeline.steps.publish import run_publish
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
        rows: dict[str, list] = {"chunk_id": [], "paper_id": [], "ordinal": [], "section": [], "page_start": [], "page_end": [],
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
        "catalog_mb": round(sum(f.stat().st_size for f in [snap / "catalog.duckdb", *(snap / "catalog").rglob("*")]
                                if f.is_file()) / 1e6, 1),
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
    ap.add_argument("--backends", default="", help="compare the step per backend:precision, e.g. torch:fp32,onnx:int8,openvino:bf16")
    ap.add_argument("--skip-throughput", action="store_true", help="skip the step vs bare encode comparison")
    ap.add_argument("--device", default=None, help="embed_device for the step vs bare comparison (cuda on a GPU host)")
    ap.add_argument("--backend", default=None, help="embed_backend for the step vs bare comparison")
    ap.add_argument("--precision", default=None, help="embed_precision for the step vs bare comparison (fp16 on CUDA)")
    ap.add_argument("--copies", type=int, default=1, help="repeat the CISI texts under new ids (distinct texts) for more work")
    ap.add_argument("--cold-export", default="", help="time the first run's export of backend:precision (e.g. "
                    "openvino:int8) into an empty model cache, in a fresh process per round")
    ap.add_argument("--before", type=Path, default=None, help="with --cold-export: a checkout of earlier code, timed alternately")
    ap.add_argument("--out", type=Path, default=OUT / "embed.json")
    a = ap.parse_args()
    import torch

    res: dict[str, Any] = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                       "load_avg_at_start": os.getloadavg()}}
    if a.cold_export:
        res["cold_export"] = bench_cold_export(a.cold_export, a.rounds, a.before)
        print(json.dumps(res["cold_export"], indent=1), flush=True)
    if a.backends:
        res["backends"] = bench_backends([c for c in a.backends.split(",") if c], a.texts, a.rounds, a.batch_size)
        print(json.dumps(res["backends"], indent=1), flush=True)
    if not a.skip_throughput:
        res["throughput"] = bench_throughput(a.texts, a.rounds, a.batch_size, a.copies, embed_device=a.device,
                                             embed_backend=a.backend, embed_precision=a.precision)
        print(json.dumps(res["throughput"], indent=1), flush=True)
    if a.chunks:
        res["publish"] = bench_publish(a.chunks)
        print(json.dumps(res["publish"], indent=1), flush=True)
    res["machine"]["load_avg_at_end"] = os.getloadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1))
    for name, c in res.get("backends", {}).get("configs", {}).items():
        print(f"embed step {name}: {c['texts_per_s_best']} texts/s, {c['ratio_of_best']}x torch fp32 best-of-rounds "
              f"(per round {c['ratio_vs_torch_fp32']}, CPU time {c['cpu_ratio_of_best']}x); "
              f"cosine to torch fp32 min {c['cos_vs_torch_fp32_min']}")
    t = res.get("throughput")
    if t:
        print(f"embed ({t['runtime']} on {t['device']}): step {t['step_texts_per_s']} texts/s vs bare encode "
              f"{t['bare_texts_per_s']} texts/s -> ratio {t['ratio_best']} (target >= 0.85 on CPU, 0.8 on GPU fp16); "
              f"unchanged rerun encoded {t['rerun_encoded']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
