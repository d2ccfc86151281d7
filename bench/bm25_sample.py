"""Quality of RM3 feedback when the BM25 statistics come from a sample of the passages.

Above 20,000 chunks the searcher estimates BM25's collection statistics (N, mean length, document
frequencies) from a fixed-seed sample of 20,000 passages (``pipeline.query.bm25``, ``_STATS_SAMPLE_ROWS``
in ``pipeline.query.search``); below, it counts every passage and the scores are the index's own. The
1M-chunk benchmark is synthetic and has no judgements, so this checks the estimate where there are:
CISI and Cranfield evaluated with the default configuration on the path a large table takes (first pass
top-k from LanceDB's index; the candidates' BM25, original query and feedback terms, from their text),
with the statistics from every passage and from a sample of 1/2, 1/4 and 1/8 of them, beside the
collection's own (small-table) path, in one process on the same snapshot.
(At 1M chunks the sample is 2 %, but each document frequency estimated there rests on ~50x more
sampled passages than at 1/8 of CISI: 20,000 against ~180.)

    .venv/bin/python -m bench.bm25_sample [--workdir bench/out/quality] [--collections cisi,cranfield]

The warehouses are those of ``bench.quality`` (built there: ``--workdir`` the same folder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
DATA = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))
TOPICS = {"cisi": ("cisi", "CISI.QRY", "CISI.REL"), "cranfield": ("cranfield", "cran.qry", "cranqrel")}


def evaluate_with_sample(warehouse: Path, queries_path: Path, qrels_path: Path, fractions: list[float]) -> list[dict]:
    from pipeline.evaluation.evaluate import clip_queries, load_topics, run_searcher, score_run
    from pipeline.query import Searcher, open_snapshot
    from pipeline.query import search as search_mod
    from pipeline.settings import Settings

    settings = Settings.load(warehouse=warehouse)
    queries, qrels, _ = load_topics(queries_path, qrels_path)
    queries, _ = clip_queries(queries, settings.query_max_chars)
    n = open_snapshot(settings).table("chunks").count_rows()
    rows = []
    defaults = search_mod._STATS_SAMPLE_ROWS, search_mod._SCORE_ALL_MAX_ROWS
    configs: list[tuple[str, float | None]] = [("small-table path (this collection's default)", None)]
    configs += [(f"large-table path, statistics from {'every passage' if f >= 1 else f'a {f:g} sample'}", f) for f in fractions]
    try:
        for label, frac in configs:
            if frac is None:
                search_mod._STATS_SAMPLE_ROWS, search_mod._SCORE_ALL_MAX_ROWS = defaults
            else:  # what a table above 20,000 chunks does: first pass top-k from LanceDB's index, the candidates'
                # BM25 (original query and feedback terms) from their text, statistics from a sample
                search_mod._SCORE_ALL_MAX_ROWS = 0
                search_mod._STATS_SAMPLE_ROWS = n if frac >= 1 else max(1, int(n * frac))
            searcher = Searcher(open_snapshot(settings), settings).warm()
            t0 = time.perf_counter()
            run = run_searcher(searcher, queries)
            m = score_run(qrels, run)
            rows.append({"configuration": label, "sampled_passages": searcher._cand_bm25.stats.sampled, "passages": n,
                         "nDCG@10": round(m["nDCG@10"], 4), "AP": round(m["AP"], 4),
                         "seconds": round(time.perf_counter() - t0, 1)})
            print(json.dumps(rows[-1]), flush=True)
            searcher.close()
    finally:
        search_mod._STATS_SAMPLE_ROWS, search_mod._SCORE_ALL_MAX_ROWS = defaults
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=OUT / "quality")
    ap.add_argument("--collections", default="cisi,cranfield")
    ap.add_argument("--fractions", default="1,0.5,0.25,0.125")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    fractions = [float(x) for x in args.fractions.split(",")]
    out = {}
    for name in [c.strip() for c in args.collections.split(",") if c.strip()]:
        folder, qry, rel = TOPICS[name]
        wh = args.workdir / name / "warehouse"
        if not (wh / "snapshots" / "CURRENT").is_file():
            print(f"{name}: no snapshot in {wh}; build it with python -m bench.quality --workdir {args.workdir}")
            return 2
        print(f"== {name}", flush=True)
        out[name] = evaluate_with_sample(wh, DATA / "collections" / folder / qry, DATA / "collections" / folder / rel, fractions)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bm25_sample.json").write_text(json.dumps({"load_avg": os.getloadavg(), "results": out}, indent=2))
    for name, rows in out.items():
        for r in rows:
            print(f"{name}: {r['configuration']} ({r['sampled_passages']} of {r['passages']} passages counted): "
                  f"nDCG@10 {r['nDCG@10']:.4f}, MAP {r['AP']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
