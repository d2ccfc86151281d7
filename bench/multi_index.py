"""Several indexes, one ranking: CISI and Cranfield searched together against each searched alone.

For each collection's judged queries: nDCG@10 (ir-measures, run depth 100 as ``paperkb eval``) of the
collection's snapshot searched alone, and of the merged ranking over both snapshots for every
normalisation in :data:`pipeline.query.multi.NORMALISATIONS` (the qrels judge the collection's own papers;
the other collection's count as not relevant, :func:`pipeline.query.multi.run_docid`). Each index is
searched once per query and the merges are computed from those answers with the MultiSearcher's own
:func:`~pipeline.query.multi.merge` (a check compares one query with ``MultiSearcher.search``).

Latency: per query (k=10, default settings, warm searchers, the query-vector cache emptied before each call so
each one encodes its query), in turn: CISI alone, Cranfield alone, both merged searched side by side (threads)
and one after the other (one encoding: the two snapshots share their query model); p50/p95 of each.

    .venv/bin/python -m bench.multi_index [--cisi WAREHOUSE] [--cranfield WAREHOUSE] [--workdir DIR]
                                          [--latency-queries N] [--json PATH]

Without --cisi/--cranfield the snapshots are built in --workdir (import-collection, graph, embed, publish).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
DATA = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))
TOPICS = {"cisi": ("CISI.QRY", "CISI.REL"), "cranfield": ("cran.qry", "cranqrel")}
DEPTH = 100


def build(workdir: Path, name: str) -> Path:
    from bench.quality import paperkb

    wh = workdir / name
    if not (wh / "snapshots" / "CURRENT").is_file():
        paperkb(wh, "import-collection", str(DATA / "collections" / name))
        paperkb(wh, "graph")
        paperkb(wh, "embed")
        paperkb(wh, "publish")
    return wh


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * len(xs) + 0.5) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cisi", type=Path)
    ap.add_argument("--cranfield", type=Path)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/paperkb-bench-multi"))
    ap.add_argument("--latency-queries", type=int, default=150)
    ap.add_argument("--json", type=Path, default=OUT / "multi_index.json")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from pipeline.evaluation.evaluate import clip_queries, load_topics, score_run
    from pipeline.evaluation.trec import ranked_run
    from pipeline.query.multi import NORMALISATIONS, MultiSearcher, IndexAnswer, merge, open_multi, run_docid
    from pipeline.settings import Settings

    whs = {"cisi": a.cisi or build(a.workdir, "cisi"), "cranfield": a.cranfield or build(a.workdir, "cranfield")}
    settings = Settings.load()
    ms: MultiSearcher = open_multi(settings, [f"{n}={w}" for n, w in whs.items()]).warm(encoder=True)
    by_name = dict(zip(ms.names, ms.searchers))
    topics = {}
    for name, (qf, rf) in TOPICS.items():
        queries, qrels, _ = load_topics(DATA / "collections" / name / qf, DATA / "collections" / name / rf)
        queries, _ = clip_queries(queries, settings.query_max_chars)
        topics[name] = (queries, qrels)

    # ---- quality: each index once per query, then every merge --------------------------------------
    quality: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    for name, (queries, qrels) in topics.items():
        other = next(n for n in ms.names if n != name)
        alone: dict[str, list] = {}
        merged: dict[str, dict[str, list]] = {m: {} for m in NORMALISATIONS}
        for qid, text in queries.items():
            own = by_name[name].search(text, k=DEPTH).results
            theirs = by_name[other].search(text, k=DEPTH).results
            alone[qid] = [(str(r.external_id or r.paper_id), r.score) for r in own]
            answers = [IndexAnswer(name, own, ms._dois_of(ms.names.index(name))),
                       IndexAnswer(other, theirs, ms._dois_of(ms.names.index(other)))]
            for m in NORMALISATIONS:
                merged[m][qid] = [(run_docid(r, name), r.score) for r in merge(answers, DEPTH, m)]
        row = {"alone": score_run(qrels, ranked_run(alone))["nDCG@10"]}
        for m in NORMALISATIONS:
            row[m] = score_run(qrels, ranked_run(merged[m]))["nDCG@10"]
            # the share of the merged top 10 taken by the other collection's papers
            row[f"{m}_other_in_top10"] = statistics.mean(
                sum(1 for d, _ in ranked[:10] if d.startswith(other + ":")) / 10 for ranked in merged[m].values())
        quality[name] = row
        print(name, {k: round(v, 4) for k, v in row.items()}, flush=True)
    quality_s = time.perf_counter() - t0

    # the offline merge is what MultiSearcher.search answers
    q1 = next(iter(topics["cisi"][0].values()))
    ms.normalisation = "raw"
    live = [(r.index, r.paper_id) for r in ms.search(q1, k=DEPTH).results]
    offline = [(r.index, r.paper_id) for r in merge([IndexAnswer(n, s.search(q1, k=DEPTH).results) for n, s in by_name.items()], DEPTH)]
    assert live == offline, "MultiSearcher.search and the offline merge disagree"

    # ---- latency ------------------------------------------------------------------------------------
    texts = [t for name in topics for t in topics[name][0].values()][: a.latency_queries]
    lat: dict[str, list[float]] = {"cisi alone": [], "cranfield alone": [], "merged, threads": [], "merged, sequential": []}
    for text in texts:
        for label, fn in (("cisi alone", lambda text=text: by_name["cisi"].search(text, k=10)),
                          ("cranfield alone", lambda text=text: by_name["cranfield"].search(text, k=10)),
                          ("merged, threads", lambda text=text: ms.search(text, k=10)),
                          ("merged, sequential", lambda text=text: ms.search(text, k=10))):
            ms.parallel = label != "merged, sequential"
            for one in ms.searchers:  # every call encodes its query, as a new query would
                one._qcache.clear()
            s0 = time.perf_counter()
            fn()
            lat[label].append((time.perf_counter() - s0) * 1000)
    latency = {k: {"p50_ms": round(pct(v, 50), 1), "p95_ms": round(pct(v, 95), 1), "n": len(v)} for k, v in lat.items()}
    single_p95 = max(latency["cisi alone"]["p95_ms"], latency["cranfield alone"]["p95_ms"])
    for k, v in latency.items():
        print(f"{k:20} p50 {v['p50_ms']:7.1f} ms  p95 {v['p95_ms']:7.1f} ms  (p95 / single {v['p95_ms'] / single_p95:.2f}x)")
    out = {"machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
           "load_average": os.getloadavg(), "command": "python -m bench.multi_index " + " ".join(sys.argv[1:]),
           "snapshots": {n: s.snap.snapshot_id for n, s in by_name.items()}, "encoders": ms.encoder_kind,
           "ndcg10": quality, "quality_seconds": round(quality_s, 1), "latency": latency}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("machine", "load_average", "encoders")}))
    ms.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
