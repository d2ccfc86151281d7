"""Benchmark: what a search pays to name the cited works whose title the query names (``reading.cited_works_named``).

On a published snapshot (``--warehouse DIR``: e.g. the ``new/warehouse`` of ``bench.publish_night synthetic --papers
100000 --keep DIR``, whose papers cite 100,000 works outside the corpus), ``--rounds`` times: 11 corpus papers drawn
at random (a page of results), then, in an order drawn each round, on one connection:

- ``join``: the works those papers cite outside the corpus, with their titles, as one join of works, citations and
  works (the first form of ``reading.cited_titles``);
- ``lookups``: the same as three lookups by lists of keys (``reading.cited_titles`` now);
- ``named``: the whole ``reading.cited_works_named`` for a query naming one of them (the lookups, the match, the
  in-degrees and the cards);
- ``references``: ``reading.references`` of one of the papers (what its page reads), for scale;

and then, for scale too, ``GET /api/search`` (k=10, TestClient) for the title of each round's first paper and for
the query ``named`` used (the server keeps the papers' cited titles it read: a paper found again costs no lookup).

Medians and p90 in ms.

    .venv/bin/python -m bench.cited_titles --warehouse DIR [--rounds 30]
    .venv/bin/python -m bench.cited_titles [--papers 20000]   # builds bench.publish_night's synthetic papers first

Results: ``bench/out/cited_titles.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"

JOIN = """
    WITH mine AS (SELECT work_id, paper_id FROM works WHERE paper_id IN (SELECT unnest(?::VARCHAR[])))
    SELECT DISTINCT mine.paper_id, c.cited_work_id, w.title
    FROM citations c JOIN mine ON c.citing_work_id = mine.work_id JOIN works w ON w.work_id = c.cited_work_id
    WHERE w.paper_id IS NULL AND w.title IS NOT NULL"""


def _ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main(argv: list[str] | None = None) -> int:
    from pipeline import snapshots as snap
    from pipeline.query import reading

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", type=Path, help="a published warehouse (default: --papers synthetic papers, built)")
    ap.add_argument("--papers", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if args.warehouse is None:
        import tempfile

        from bench.publish_replay import build

        work = Path(tempfile.mkdtemp(prefix="cited_titles_"))
        build(work, args.papers)
        args.warehouse = work / "warehouse"
    root = args.warehouse / "snapshots"
    sid = snap.current_id(root)
    if sid is None:
        raise SystemExit(f"no snapshot under {root}")
    con = snap.open_catalog(root / sid)
    title_of = dict(con.execute("SELECT paper_id, title FROM papers ORDER BY paper_id").fetchall())
    papers = list(title_of)
    named_queries: list[str] = []
    rng = random.Random(args.seed)
    times: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        pick = rng.sample(papers, min(11, len(papers)))
        cited = reading.cited_titles(con, pick)
        titles = [t for lst in cited.values() for _, t in lst]
        query = rng.choice(titles) if titles else "no title at all"
        named_queries.append(query)
        runs = [("join", lambda pick=pick: con.execute(JOIN, [pick]).fetchall()),
                ("lookups", lambda pick=pick: reading.cited_titles(con, pick)),
                ("named", lambda query=query, pick=pick: reading.cited_works_named(con, query, pick)),
                ("references", lambda pick=pick: reading.references(con, pick[0], limit=20))]
        rng.shuffle(runs)  # the order changes round by round
        for name, fn in runs:
            times.setdefault(name, []).append(_ms(fn))
    con.close()
    from fastapi.testclient import TestClient

    from pipeline.serve.app import create_app
    from pipeline.settings import Settings

    rng = random.Random(args.seed)
    # (Starlette's TestClient sends Host: testserver)
    served = Settings(warehouse=args.warehouse, serve_allowed_hosts=["localhost", "testserver"])
    with TestClient(create_app(served)) as client:
        client.get("/api/search", params={"q": "warm up", "k": 10}).raise_for_status()
        for _ in range(args.rounds):
            for name, q in (("search: a paper's title", title_of[rng.choice(papers)] or "none"),
                            ("search: a cited work's title", rng.choice(named_queries))):
                times.setdefault(name, []).append(
                    _ms(lambda q=q: client.get("/api/search", params={"q": q, "k": 10}).raise_for_status()))
    stats = {k: {"median_ms": round(statistics.median(v), 2),
                 "p90_ms": round(sorted(v)[max(0, int(0.9 * len(v)) - 1)], 2)} for k, v in times.items()}
    counts = json.loads((root / sid / "manifest.json").read_text())["counts"]
    result = {"snapshot": sid, "papers": counts.get("papers"), "works": counts.get("works"),
              "citations": counts.get("citations"), "rounds": args.rounds, "times": stats,
              "machine": f"{platform.machine()} {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}"}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "cited_titles.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
