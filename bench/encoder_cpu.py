"""The embedding backends on one CPU, without the pipeline: what each costs and what it does to retrieval.

Made to measure a host the product's tests never run on (a GPU lease's Xeon with AVX512-VNNI and AMX) with only
numpy, torch, sentence-transformers, OpenVINO and NNCF installed there: no DuckDB, no LanceDB. It uses the
product's own export and runners (:mod:`pipeline.embedding.backends`), so the int8 recipe is the shipped one.

``encode`` (on the host being measured), per ``backend:precision``:

1. the first run's export into an empty model cache (CPU and wall seconds; int8 includes NNCF's calibration);
2. speed: the first ``--speed-texts`` CISI documents encoded with ``--speed-threads`` threads, the runtimes
   rotated within each round so all see the same load; process CPU seconds and wall seconds per round;
3. with ``--vectors``: every document and query of the test collections encoded (the backend's own thread
   count), saved as ``vectors-<backend>-<precision>.npz`` under ``--out``;
4. with ``--inputs`` too: a warehouse's own embed inputs (written by ``inputs``) encoded the same way, saved as
   ``inputs-<backend>-<precision>.npz``, for ``cache`` to put into that warehouse's vector cache.

``inputs`` / ``cache`` (here): the embed step's (content hash, text) pairs of warehouses, and the vectors made
elsewhere written into their vector cache, so ``paperkb embed`` / ``publish`` / ``eval`` then measure the whole
pipeline with the other host's document vectors (queries are encoded where ``eval`` runs).

``pack`` (here) / ``unpack`` (there): the model carried as fp16 weights with only the word-embedding rows that
these texts use (87 MB -> 31 MB for all-MiniLM-L6-v2), made fp32 again there; "fp32" on that host is then the
fp16-rounded model, so the reference vectors here come from an unpacked copy too.

``compare`` (anywhere, with ir-measures): dense-only retrieval (exact cosine, documents are title + abstract)
on each collection from the saved vectors, nDCG@10 and MAP per runtime, and each runtime's cosine to a
reference runtime's vectors of the same texts.

    .venv/bin/python -m bench.encoder_cpu pack --model MODEL_DIR --out CARRY/model     # here (fp16, rows used)
    python -m bench.encoder_cpu unpack CARRY/model                                     # there
    python -m bench.encoder_cpu encode --model CARRY/model --runtimes torch:fp32,openvino:bf16,openvino:int8 \\
        --vectors openvino:bf16,openvino:int8 --out DIR
    python -m bench.encoder_cpu compare --ref DIR/vectors-torch-fp32.npz DIR/vectors-openvino-int8.npz ...
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))
COLLECTIONS = {  # documents, queries, qrels under <data>/collections/
    "cisi": ("cisi/CISI.ALL", "cisi/CISI.QRY", "cisi/CISI.REL"),
    "cranfield": ("cranfield/cran.all.1400", "cranfield/cran.qry", "cranfield/cranqrel"),
}
BATCH = 64  # the embed step's batch size


def collection(data: Path, name: str) -> tuple[list[str], list[str], list[str], list[str], dict]:
    """(doc ids, doc texts, query ids, query texts, qrels) of one SMART collection."""
    from pipeline.evaluation.qrels import align_query_ids, read_qrels, read_queries
    from pipeline.sources.smart import iter_smart_records, normalise_docno

    docs_f, qry_f, rel_f = (data / "collections" / p for p in COLLECTIONS[name])
    ids, texts = [], []
    for rec in iter_smart_records(docs_f.read_text(encoding="utf-8", errors="replace")):
        text = ". ".join(t for t in (rec.text("T"), rec.text("W")) if t)
        if text:
            ids.append(normalise_docno(rec.docno))
            texts.append(text)
    qrels = read_qrels(rel_f)
    queries, _ = align_query_ids(read_queries(qry_f), qrels)
    return ids, texts, list(queries), list(queries.values()), qrels


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_flags() -> list[str]:
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return []
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile")
    return [f for f in wanted if f in flags]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def load(model: str, rt, cache: Path, threads: int | None):
    """A fresh SentenceTransformer on ``rt`` (exported into ``cache`` when not torch)."""
    from sentence_transformers import SentenceTransformer

    from pipeline.embedding.backends import attach

    st = SentenceTransformer(model, device="cpu")
    if rt.backend != "torch":
        attach(st, model, cache, rt, threads=threads)
    return st


def encode(st, texts: list[str]) -> np.ndarray:
    return np.asarray(st.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True),
                      dtype=np.float32)


def run_encode(args) -> dict:
    import torch

    from pipeline.embedding import backends
    from pipeline.embedding.backends import Runtime

    if args.no_native_bf16:  # compute as the product does on a CPU without bfloat16: int8's float layers in fp32
        setattr(backends, "cpu_has_native_bf16", lambda: False)

    runtimes = [Runtime(*r.split(":")) for r in args.runtimes.split(",")]
    keep = {tuple(r.split(":")) for r in args.vectors.split(",") if r}
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict = {"host": {"cpu": cpu_model(), "flags": cpu_flags(), "cores": os.cpu_count(),
                             "load_before": os.getloadavg()[0], "python": platform.python_version(),
                             "torch": torch.__version__},
                    "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),
                    "no_native_bf16": args.no_native_bf16, "speed_threads": args.speed_threads, "speed_texts": args.speed_texts, "runtimes": {}}
    try:
        import openvino

        result["host"]["openvino"] = openvino.__version__
    except ImportError:
        pass

    def save():
        (args.out / "encoder_cpu.json").write_text(json.dumps(result, indent=1))

    cache = Path(tempfile.mkdtemp(prefix="paperkb-models-"))
    models = {}
    for rt in runtimes:  # 1. the first run's export, into an empty cache
        c0, w0 = _cpu(), time.perf_counter()
        torch.set_num_threads(args.speed_threads)
        models[rt] = load(args.model, rt, cache, args.speed_threads)
        result["runtimes"][rt.label()] = {"load_and_export_cpu_s": round(_cpu() - c0, 2),
                                          "load_and_export_wall_s": round(time.perf_counter() - w0, 2),
                                          "rounds": []}
        print(f"{rt.label()}: loaded and exported in {time.perf_counter() - w0:.1f} s", flush=True)
        save()
    texts = collection(args.data, "cisi")[1][: args.speed_texts]
    for rt in runtimes:  # warm-up (first inference compiles kernels)
        encode(models[rt], texts[:BATCH])
    for rnd in range(args.speed_rounds):  # 2. speed, rotated
        order = runtimes[rnd % len(runtimes):] + runtimes[: rnd % len(runtimes)]
        for rt in order:
            torch.set_num_threads(args.speed_threads)
            c0, w0 = _cpu(), time.perf_counter()
            encode(models[rt], texts)
            row = {"round": rnd, "cpu_s": round(_cpu() - c0, 3), "wall_s": round(time.perf_counter() - w0, 3)}
            result["runtimes"][rt.label()]["rounds"].append(row)
            print(f"round {rnd} {rt.label()}: {row}", flush=True)
            save()
    torch.set_num_threads(os.cpu_count() or 1)
    if args.inputs:  # 4. a warehouse's own embed inputs (from ``inputs``), for its vector cache
        given = json.loads(args.inputs.read_text())
        for rt in runtimes:
            if (rt.backend, rt.precision) not in keep:
                continue
            st = load(args.model, rt, cache, None)
            encoded: dict[str, Any] = {name: encode(st, v["inputs"]) for name, v in given.items()}
            np.savez(args.out / f"inputs-{rt.backend}-{rt.precision}.npz", **encoded)
            print(f"{rt.label()}: {sum(len(v['inputs']) for v in given.values())} warehouse inputs encoded", flush=True)
    for rt in runtimes:  # 3. the collections' vectors
        if (rt.backend, rt.precision) not in keep:
            continue
        st = load(args.model, rt, cache, None)
        arrays: dict[str, Any] = {}
        for name in args.collections.split(","):
            _, docs, _, queries, _ = collection(args.data, name)
            w0 = time.perf_counter()
            arrays[f"{name}_docs"] = encode(st, docs)
            arrays[f"{name}_queries"] = encode(st, queries)
            print(f"{rt.label()} {name}: {len(docs)} docs, {len(queries)} queries in "
                  f"{time.perf_counter() - w0:.1f} s", flush=True)
        np.savez(args.out / f"vectors-{rt.backend}-{rt.precision}.npz", **arrays)
    result["host"]["load_after"] = os.getloadavg()[0]
    save()
    shutil.rmtree(cache, ignore_errors=True)
    return result


def dense_scores(data: Path, name: str, vectors: Mapping[str, np.ndarray]) -> dict[str, float]:
    """nDCG@10, MAP and R@100 of exact cosine search with these vectors."""
    from pipeline.evaluation.evaluate import score_run

    ids, _, qids, _, qrels = collection(data, name)
    d, q = vectors[f"{name}_docs"], vectors[f"{name}_queries"]
    sims = q @ d.T
    top = np.argsort(-sims, axis=1, kind="stable")[:, :1000]
    run = {qid: {ids[j]: float(sims[i, j]) for j in top[i]} for i, qid in enumerate(qids)}
    return score_run(qrels, run)


def run_compare(args) -> dict:
    ref = np.load(args.ref)
    out: dict = {}
    for path in [args.ref, *args.runs]:
        v = np.load(path)
        row: dict = {}
        for name in args.collections.split(","):
            if f"{name}_docs" not in v:
                continue
            m = dense_scores(args.data, name, v)
            cos = np.einsum("ij,ij->i", v[f"{name}_docs"], ref[f"{name}_docs"])
            row[name] = {"ndcg@10": round(m["nDCG@10"], 4), "map": round(m["AP"], 4),
                         "cos_min": round(float(cos.min()), 4), "cos_mean": round(float(cos.mean()), 5)}
        out[str(path)] = row
        print(path, json.dumps(row), flush=True)
    return out


# ---- the model to a host with no hub and little room: fp16, and only the word-embedding rows the texts use ----
EMBEDDING_SUFFIX = "word_embeddings.weight"


def pack_model(model: Path, out: Path, texts: list[str]) -> dict:
    """Copy the sentence-transformers folder ``model`` to ``out`` with its weights in fp16 and its word-embedding
    matrix cut to the rows of the tokens that ``texts`` (and the special tokens) use, in ``packed.safetensors``.
    :func:`unpack_model` there makes an fp32 ``model.safetensors`` again (the other rows zero): for these texts, the
    fp16-rounded model's own vectors. all-MiniLM-L6-v2: 87 MB -> 31 MB with the test collections' texts."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model))
    ids: set[int] = set(tok.all_special_ids)
    for i in range(0, len(texts), 512):
        for row in tok(texts[i:i + 512], truncation=False)["input_ids"]:
            ids.update(row)
    keep = torch.tensor(sorted(ids), dtype=torch.int64)
    shutil.copytree(model, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("model.safetensors", "*.md"))
    weights = load_file(str(model / "model.safetensors"))
    name = next(k for k in weights if k.endswith(EMBEDDING_SUFFIX))
    full = weights.pop(name)
    packed = {k: v.to(torch.float16).contiguous() for k, v in weights.items()}
    packed.update({f"__rows__{name}": full[keep].to(torch.float16).contiguous(), f"__ids__{name}": keep,
                   f"__shape__{name}": torch.tensor(list(full.shape))})
    save_file(packed, str(out / "packed.safetensors"))
    return {"rows_kept": len(keep), "rows": int(full.shape[0])}


def unpack_model(folder: Path) -> None:
    """``packed.safetensors`` in ``folder`` -> an fp32 ``model.safetensors`` beside it (see :func:`pack_model`)."""
    import torch
    from safetensors.torch import load_file, save_file

    packed = load_file(str(folder / "packed.safetensors"))
    out = {k: v.to(torch.float32).contiguous() for k, v in packed.items() if not k.startswith("__")}
    for key in [k for k in packed if k.startswith("__rows__")]:
        name = key[len("__rows__"):]
        m = torch.zeros(packed[f"__shape__{name}"].tolist(), dtype=torch.float32)
        m[packed[f"__ids__{name}"]] = packed[key].to(torch.float32)
        out[name] = m
    save_file(out, str(folder / "model.safetensors"))


def pack_texts(data: Path, inputs: Path | None) -> list[str]:
    """Every text a run of this bench tokenizes: the collections, the int8 calibration set, the export's traced
    example, and a warehouse's embed inputs when given."""
    from pipeline.embedding.backends import calibration_texts

    texts = ["an example", "an example text to trace the model with", "a shorter one", *calibration_texts(10_000)]
    for name in COLLECTIONS:
        _, docs, _, queries, _ = collection(data, name)
        texts += docs + queries
    if inputs is not None:
        texts += [x for v in json.loads(inputs.read_text()).values() for x in v["inputs"]]
    return texts


def _warehouse_settings(spec: str, backend: str, precision: str):
    from pipeline.settings import Settings

    name, _, path = spec.partition("=")
    return name, Settings(warehouse=Path(path), embed_backend=backend, embed_precision=precision)


def run_inputs(args) -> dict:
    """The embed step's uncached (content hash, input) pairs of each warehouse, as ``paperkb embed`` computes them."""
    from pipeline.embedding.encoders import Encoder
    from pipeline.steps.embed import _shard_work

    out = {}
    for spec in args.warehouse:
        name, settings = _warehouse_settings(spec, args.backend, args.precision)
        hashes, inputs = _shard_work(settings, Encoder(settings), None)
        out[name] = {"hashes": hashes, "inputs": inputs}
        print(f"{name}: {len(hashes)} inputs", flush=True)
    args.out.write_text(json.dumps(out))
    return out


def run_cache(args) -> dict:
    """Vectors made elsewhere (``encode --inputs``) into each warehouse's vector cache for backend/precision."""
    from pipeline.embedding.encoders import Encoder
    from pipeline.steps.embed import VectorCache, _cache_key

    given = json.loads(args.inputs.read_text())
    vectors = np.load(args.vectors)
    done = {}
    for spec in args.warehouse:
        name, settings = _warehouse_settings(spec, args.backend, args.precision)
        v = np.asarray(vectors[name], dtype=np.float32)
        hashes = given[name]["hashes"]
        if len(hashes) != len(v):
            raise SystemExit(f"{name}: {len(hashes)} inputs but {len(v)} vectors")
        cache = VectorCache(settings, _cache_key(Encoder(settings)))
        cache.write_staged(f"from-{args.vectors.stem}", hashes, v, v.shape[1])
        cache.absorb_staged()
        done[name] = len(hashes)
        print(f"{name}: {len(hashes)} vectors into {cache.dir}", flush=True)
    return done


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("encode", help="export, time and encode on this host")
    e.add_argument("--model", required=True, help="SentenceTransformer name or path")
    e.add_argument("--runtimes", default="torch:fp32,openvino:fp32,openvino:bf16,openvino:int8")
    e.add_argument("--vectors", default="", help="runtimes whose collection vectors to save")
    e.add_argument("--inputs", type=Path, default=None,
                   help="JSON {name: {hashes, inputs}} of a warehouse's embed inputs (bench.encoder_cpu inputs): "
                        "encoded by each --vectors runtime into inputs-<backend>-<precision>.npz")
    e.add_argument("--speed-texts", type=int, default=256)
    e.add_argument("--speed-rounds", type=int, default=2)
    e.add_argument("--speed-threads", type=int, default=1)
    e.add_argument("--collections", default="cisi,cranfield")
    e.add_argument("--no-native-bf16", action="store_true",
                   help="run as on a CPU without native bfloat16 (int8's float layers in fp32), e.g. with "
                        "ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI to stand for an AVX512-VNNI CPU without AMX")
    e.add_argument("--data", type=Path, default=SHARED)
    e.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "encoder_cpu")
    c = sub.add_parser("compare", help="dense-only retrieval quality of saved vectors")
    c.add_argument("--ref", type=Path, required=True, help="the reference vectors (torch fp32)")
    c.add_argument("runs", type=Path, nargs="*")
    c.add_argument("--collections", default="cisi,cranfield")
    c.add_argument("--data", type=Path, default=SHARED)
    c.add_argument("--json", type=Path, default=None)
    pk = sub.add_parser("pack", help="the model in fp16, only the rows these texts use (to carry to another host)")
    pk.add_argument("--model", type=Path, required=True, help="a sentence-transformers folder")
    pk.add_argument("--out", type=Path, required=True)
    pk.add_argument("--data", type=Path, default=SHARED)
    pk.add_argument("--inputs", type=Path, default=None, help="also the texts of this `inputs` file")
    up = sub.add_parser("unpack", help="fp32 model.safetensors from a packed folder (on the other host)")
    up.add_argument("folder", type=Path)
    i = sub.add_parser("inputs", help="a warehouse's embed inputs, to encode on another host")
    k = sub.add_parser("cache", help="vectors from another host into a warehouse's vector cache")
    for p in (i, k):
        p.add_argument("--warehouse", action="append", required=True, help="NAME=PATH (repeat)")
        p.add_argument("--backend", default="openvino")
        p.add_argument("--precision", default="int8")
    i.add_argument("--out", type=Path, required=True)
    k.add_argument("--inputs", type=Path, required=True)
    k.add_argument("--vectors", type=Path, required=True, help="inputs-<backend>-<precision>.npz from encode --inputs")
    args = ap.parse_args(argv)
    if args.cmd == "pack":
        print(json.dumps(pack_model(args.model, args.out, pack_texts(args.data, args.inputs))))
        return
    if args.cmd == "unpack":
        unpack_model(args.folder)
        return
    result = {"encode": run_encode, "compare": run_compare, "inputs": run_inputs, "cache": run_cache}[args.cmd](args)
    if args.cmd == "compare" and args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
