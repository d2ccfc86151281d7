"""Recommendations (issue 15) against plain related papers, on CACM's real citations.

Seed sets: every CACM paper P with at least ``--min-refs`` (3) references inside the corpus gives one
set: its references minus one hidden at random (seeded) are the positives. A method is asked for the
papers like the positives; it finds the hidden reference when it is in the top ``k`` (20), P itself
and the positives not counted (P is the paper being written: it is dropped from every list).

Methods:

* ``recommend``: ``pipeline.query.recommend`` (vectors + the stored CCBC + the citation prior, see its
  docstring); ``recommend_no_prior`` without the prior; ``recommend_vectors`` and ``recommend_graph``
  its two halves alone (each with the prior);
* ``related_sum``: ``Searcher.related`` of each positive (top 50), merged by the sum of each paper's
  related score over the positives;
* ``related_round_robin``: the same lists interleaved rank by rank (the first of each positive's list,
  then the second, ...).

Caveat, the same for every graph method: the snapshot's citation graph holds P's own references, so the
hidden one is co-cited by P with each positive. ``recommend_vectors`` does not see the graph at all;
``subsets`` splits the sets by whether the hidden paper is linked to a positive other than through P.
The leak-free mode (``--mode leak-free``, or ``both``: the default) removes the caveat: for each set
every method gets the graph evidence and citation counts computed as if P did not exist
(``bench/leak_free.py``); its results are under ``leak_free`` in the JSON.

    .venv/bin/python -m bench.recommend [--warehouse DIR] [--limit N] [--k 20] [--mode both|stored|leak-free]

With no ``--warehouse`` it builds one from ``../shared/data/collections/cacm`` (import, graph, embed,
publish) in a temporary folder. Prints the JSON; writes it to bench/out/recommend.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

from bench.leak_free import LeakFreeGraph

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
METHODS = ("recommend", "recommend_no_prior", "recommend_vectors", "recommend_graph", "related_sum", "related_round_robin")


def seed_sets(con, min_refs: int = 3, seed: int = 0, limit: int | None = None) -> list[dict]:
    """[{paper, positives, hidden}] for each corpus paper with >= min_refs in-corpus references."""
    rows = con.execute("""
        SELECT a.paper_id, list(DISTINCT b.paper_id ORDER BY b.paper_id)
        FROM citations c JOIN works a ON a.work_id = c.citing_work_id JOIN works b ON b.work_id = c.cited_work_id
        WHERE a.paper_id IS NOT NULL AND b.paper_id IS NOT NULL AND a.paper_id <> b.paper_id
        GROUP BY 1 HAVING count(DISTINCT b.paper_id) >= ? ORDER BY 1""", [min_refs]).fetchall()
    rng = random.Random(seed)
    sets = []
    for paper, refs in rows:
        hidden = rng.choice(refs)
        sets.append({"paper": paper, "positives": [r for r in refs if r != hidden], "hidden": hidden})
    if limit is not None and limit < len(sets):
        sets = random.Random(seed + 1).sample(sets, limit)
        sets.sort(key=lambda s: s["paper"])
    return sets


def beyond_citing(con, sets: list[dict]) -> None:
    """Mark each set with ``graph_beyond_citing``: whether the hidden paper is linked to some positive in
    the citation graph other than through P (a shared reference, a citer other than P, a direct citation).
    Where it is not, a graph method can find it only through P's own co-citation (the caveat above)."""
    edges = con.execute("""SELECT a.paper_id, b.paper_id FROM citations c
                           JOIN works a ON a.work_id = c.citing_work_id JOIN works b ON b.work_id = c.cited_work_id""").fetchall()
    refs: dict[str, set] = {}
    citers: dict[str, set] = {}
    for a, b in edges:
        refs.setdefault(a, set()).add(b)
        citers.setdefault(b, set()).add(a)
    for st in sets:
        h, p = st["hidden"], st["paper"]
        st["graph_beyond_citing"] = any(
            (refs.get(h, set()) & refs.get(q, set())) or ((citers.get(h, set()) & citers.get(q, set())) - {p})
            or q in refs.get(h, set()) or h in refs.get(q, set()) for q in st["positives"])


def _top(ids, drop: set[str], k: int) -> list[str]:
    out: list[str] = []
    for i in ids:
        if i is not None and i not in drop and i not in out:
            out.append(i)
        if len(out) == k:
            break
    return out


def run_methods(searcher, s: dict, k: int, related_cache: dict, evidence=None) -> dict[str, list[str]]:
    """Each method's top-k paper ids for one seed set (P and the positives dropped). ``evidence`` (a
    ``bench.leak_free.LeakFreeEvidence``): the graph and citation counts without P instead of the snapshot's."""
    from pipeline.query.recommend import recommend
    from pipeline.query.related import related_papers

    drop = {s["paper"], *s["positives"]}
    ask = k + 1  # P may be among them
    pos = s["positives"]
    over = {} if evidence is None else {"graph": evidence.recommend_edges(), "citation_counts": evidence.citation_counts}
    lists: dict[str, list] = {
        "recommend": [r.paper_id for r in recommend(searcher, pos, k=ask, **over).results],
        "recommend_no_prior": [r.paper_id for r in recommend(searcher, pos, k=ask, use_quality=False, **over).results],
        "recommend_vectors": [r.paper_id for r in recommend(searcher, pos, k=ask, use_graph=False, **over).results],
        "recommend_graph": [r.paper_id for r in recommend(searcher, pos, k=ask, use_vectors=False, **over).results],
    }
    rel = []
    for p in pos:
        if evidence is not None:  # depends on P: not cached
            rel.append([(r.paper_id, r.score) for r in related_papers(
                searcher, p, k=50, graph=evidence.related[p], citation_counts=evidence.citation_counts)])
            continue
        if p not in related_cache:
            related_cache[p] = [(r.paper_id, r.score) for r in searcher.related(p, k=50)]
        rel.append(related_cache[p])
    summed: dict[str, float] = {}
    for lst in rel:
        for pid, sc in lst:
            if pid is not None:
                summed[pid] = summed.get(pid, 0.0) + sc
    lists["related_sum"] = sorted(summed, key=lambda x: (-summed[x], x))
    lists["related_round_robin"] = [lst[i][0] for i in range(max((len(x) for x in rel), default=0)) for lst in rel if i < len(lst)]
    return {m: _top(v, drop, k) for m, v in lists.items()}


def evaluate(searcher, sets: list[dict], k: int = 20, leak_free=None) -> dict:
    """recall@k of the hidden reference per method (one hidden per set, so recall = hit rate), and MRR.
    ``leak_free`` (a ``bench.leak_free.LeakFreeGraph``): each set's methods see the graph without P."""
    hits = {m: 0 for m in METHODS}
    rr = {m: 0.0 for m in METHODS}
    per_set = []
    cache: dict = {}
    t0 = time.perf_counter()
    for s in sets:
        ev = leak_free.evidence(s["paper"], s["positives"]) if leak_free is not None else None
        lists = run_methods(searcher, s, k, cache, ev)
        ranks = {}
        for m in METHODS:
            rank = lists[m].index(s["hidden"]) + 1 if s["hidden"] in lists[m] else None
            ranks[m] = rank
            if rank:
                hits[m] += 1
                rr[m] += 1.0 / rank
        per_set.append({**s, "rank": ranks})
    n = max(1, len(sets))
    subsets = {}
    for name, want in (("graph_beyond_citing", True), ("only_through_citing", False)):
        sub = [p for p in per_set if p.get("graph_beyond_citing") is want]
        if sub:
            subsets[name] = {"sets": len(sub), f"recall@{k}": {
                m: round(sum(1 for p in sub if p["rank"][m]) / len(sub), 4) for m in METHODS}}
    return {"sets": len(sets), "k": k, "subsets": subsets,
            f"recall@{k}": {m: round(hits[m] / n, 4) for m in METHODS},
            f"mrr@{k}": {m: round(rr[m] / n, 4) for m in METHODS},
            "hits": hits, "seconds": round(time.perf_counter() - t0, 1), "per_set": per_set}


def check_stored(con, leak_free, sets: list[dict]) -> None:
    """The leak-free graph, with nothing removed, must give the snapshot's own ``related`` rows (same
    graph settings as when the snapshot was built); SystemExit otherwise."""
    seeds = sorted({p for s in sets for p in s["positives"]})
    ev = leak_free.evidence(None, seeds)
    stored: dict[str, list[tuple]] = {}
    for pid, rid, w in con.execute("SELECT paper_id, related_work_id, ccbc_weighted FROM related "
                                   "WHERE paper_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY paper_id, rank", [seeds]).fetchall():
        stored.setdefault(pid, []).append((rid, round(float(w), 9)))
    mine = {p: [(r["work_id"], round(r["ccbc_weighted"], 9)) for r in rows] for p, rows in ev.related.items() if rows}
    if mine != stored:
        raise SystemExit("bench.recommend: the graph recomputed here differs from the snapshot's related table "
                         "(built with other graph settings?): leak-free results would not be comparable")


def build_cacm(root: Path):
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.embed import run_embed
    from pipeline.steps.graph import run_graph
    from pipeline.steps.publish import run_publish
    from pipeline.settings import Settings

    settings = Settings.load(warehouse=root / "warehouse")
    data = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))
    import_collection(settings, data / "collections" / "cacm")
    run_graph(settings)
    run_embed(settings)
    run_publish(settings)
    return settings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", type=Path, help="a warehouse with a published CACM snapshot (default: build one)")
    ap.add_argument("--limit", type=int, help="evaluate a seeded sample of this many seed sets")
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--min-refs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT / "recommend.json")
    ap.add_argument("--mode", choices=("both", "stored", "leak-free"), default="both",
                    help="the snapshot's graph (stored), the graph without each set's citing paper (leak-free), or both")
    args = ap.parse_args(argv)

    from pipeline.query import Searcher, open_snapshot
    from pipeline.settings import Settings

    tmp = None
    if args.warehouse:
        settings = Settings.load(warehouse=args.warehouse)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="paperkb-bench-recommend-")
        settings = build_cacm(Path(tmp.name))
    searcher = Searcher(open_snapshot(settings), settings)
    load = [round(x, 2) for x in os.getloadavg()]
    con = searcher.snap.catalog()
    leak_free = None
    try:
        sets = seed_sets(con, args.min_refs, args.seed, args.limit)
        beyond_citing(con, sets)
        if args.mode != "stored":
            leak_free = LeakFreeGraph(con, settings)
            check_stored(con, leak_free, sets[:5])
    finally:
        con.close()
    res = evaluate(searcher, sets, args.k) if args.mode != "leak-free" else {}
    if leak_free is not None:
        lf = evaluate(searcher, sets, args.k, leak_free=leak_free)
        res = {**res, "leak_free": lf} if res else {"mode": "leak-free", **lf}
    res = {"bench": "recommend", "snapshot_id": searcher.snap.snapshot_id, "min_refs": args.min_refs, "seed": args.seed,
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                       "load_average_1_5_15": {"start": load, "end": [round(x, 2) for x in os.getloadavg()]}},
           **res}
    searcher.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    summary = {k: v for k, v in res.items() if k != "per_set"}
    if isinstance(summary.get("leak_free"), dict):
        summary["leak_free"] = {k: v for k, v in summary["leak_free"].items() if k != "per_set"}
    print(json.dumps(summary, indent=1))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
