"""Benchmark: citation contexts on the 10 real PDFs (where each paper's text cites each entry of its reference list).

The 10 PDFs of ``../shared/data/arxiv/pdf`` are imported, read (``paperkb fulltext``) and linked (``paperkb graph``)
in a temporary warehouse; then, per paper:

- coverage: the printed entries of its reference list with at least one sentence citing them, against all of them
  (an entry the text never cites, one cited only in a table or a figure, or a marker the rules do not read counts as
  not covered), and how many sentences cite an entry (mentions: mean, max);
- the reading cost: ``reading.references`` of its whole list (up to 200) and of a page of 10, with the contexts
  (the product) and without (``_listing`` alone, what the call cost before), and ``reading.cited_by`` of the paper,
  best of ``--repeat``;
- ``--sample N`` prints N contexts drawn at random (seeded), each with its entry, to read by hand.

    .venv/bin/python -m bench.contexts [--repeat 5] [--sample 20]

Results: ``bench/out/contexts.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PAPERKB_SHARED_DATA", REPO.parent / "shared" / "data"))
OUT = REPO / "bench" / "out"


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sample", type=int, default=0)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import duckdb

    from pipeline.library.pdf_folder import import_pdfs
    from pipeline.query import reading
    from pipeline.settings import Settings
    from pipeline.steps.fulltext import run_fulltext
    from pipeline.steps.graph import run_graph

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(warehouse=Path(tmp) / "warehouse")
        import_pdfs(settings, SHARED / "arxiv" / "pdf")
        run_fulltext(settings)
        run_graph(settings)
        con = duckdb.connect(str(settings.db_path), read_only=True)
        papers = [r[0] for r in con.execute("SELECT DISTINCT paper_id FROM paper_references ORDER BY 1").fetchall()]
        rows, drawn = [], []
        for pid in papers:
            refs = reading.references(con, pid, limit=200).items
            printed = [r for r in refs if r.raw]
            covered = [r for r in printed if r.contexts]
            mentions = [r.mentions or 0 for r in printed]
            _, works = reading.resolve(con, pid)
            rows.append({
                "paper": pid, "printed": len(printed), "covered": len(covered),
                "coverage": round(len(covered) / len(printed), 3) if printed else None,
                "mentions_mean": round(sum(mentions) / len(mentions), 2) if mentions else None,
                "mentions_max": max(mentions, default=0),
                "all_ms": round(1000 * _best(lambda pid=pid: reading.references(con, pid, limit=200), args.repeat), 1),
                "all_ms_without": round(1000 * _best(lambda pid=pid, works=works: reading._listing(
                    con, reading._REFERENCES, [works, pid], limit=200, offset=0, sort="order"), args.repeat), 1),
                "page_ms": round(1000 * _best(lambda pid=pid: reading.references(con, pid, limit=10), args.repeat), 1),
                "page_ms_without": round(1000 * _best(lambda pid=pid, works=works: reading._listing(
                    con, reading._REFERENCES, [works, pid], limit=10, offset=0, sort="order"), args.repeat), 1),
                "cited_by_ms": round(1000 * _best(lambda pid=pid: reading.cited_by(con, pid, limit=10), args.repeat), 1),
            })
            drawn += [(pid, r.raw, c.text) for r in covered for c in r.contexts]
        con.close()
    total = {"printed": sum(r["printed"] for r in rows), "covered": sum(r["covered"] for r in rows)}
    total["coverage"] = round(total["covered"] / total["printed"], 3)
    print(f"{'paper':<12} {'printed':>7} {'covered':>7} {'cov':>6} {'ment':>5} {'max':>4} "
          f"{'all ms':>7} {'(w/o)':>6} {'10 ms':>6} {'(w/o)':>6} {'citedby':>7}")
    for r in rows:
        print(f"{r['paper']:<12} {r['printed']:>7} {r['covered']:>7} {r['coverage']:>6} {r['mentions_mean']:>5} "
              f"{r['mentions_max']:>4} {r['all_ms']:>7} {r['all_ms_without']:>6} {r['page_ms']:>6} "
              f"{r['page_ms_without']:>6} {r['cited_by_ms']:>7}")
    print(f"all: {total['covered']} of {total['printed']} printed entries cited in their paper's text "
          f"({total['coverage']:.1%})")
    if args.sample:
        for pid, raw, text in random.Random(7).sample(drawn, min(args.sample, len(drawn))):
            print(f"\n{pid} | {(raw or '')[:110]}\n    -> {text[:300]}")
    OUT.mkdir(exist_ok=True)
    (OUT / "contexts.json").write_text(json.dumps({
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs)", "load": os.getloadavg(),
        "command": "python -m bench.contexts", "papers": rows, "total": total}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
