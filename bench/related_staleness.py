"""Benchmark: what a longer related refresh cycle costs in the lists' quality, on CACM's real citations (issue 31,
item 1: a night's publish rewrites ``related``'s rolling slice, 1/``graph_related_refresh_runs`` of the table).

A graph run recomputes the lists of new and changed papers and, in turn, 1/R of the others
(:mod:`pipeline.steps.related_plan`); a stored list is exact for the graph of the run that computed it. This replays
CACM in its own order (its records run by date, 1958-1979): the first ``--start`` share of the records imported and a
full graph run, then ``--nights`` nights that each import the next ``--grow`` share and run ``graph`` with R =
``--refresh-runs`` (each R in its own warehouse; ``N%`` replays the sweep by the graph's change instead,
``graph_related_refresh_change = N/100`` with no bound in runs, the product's default at 7%). After every night the
stored lists are set beside an exact recomputation of every list on a copy of the same warehouse (``graph --full``).

Reported per R, night by night and as means over the nights after the first cycle (night > R, the steady state):

- ``recall10``: of each paper's exact top 10 (related works by weighted CCBC), the share in its stored top 10,
  averaged over the papers whose exact list is not empty;
- ``same10``: the share of those papers whose stored top 10 holds the same works;
- ``new_missed``: of the exact top-10 entries that are papers imported in the last R nights, the share missing from
  the stored top 10 (what a reader does not see yet: the weeks' new papers in older papers' lists);
- ``recomputed``: the share of the corpus papers whose lists the night's run recomputed (what a publish rewrites of
  ``related``).

and the same three (``*_merged``) when each stored list is read together with the lists computed after it that name
its paper (CCBC is symmetric: a newer list's score for the pair is that of a later graph), a reading that rewrites
no list, and (``*_new_lists``) with only the lists of the papers imported in the last R nights read that way.
R = 1 (every list every night) is the control: its stored lists are the exact ones. Two more say what a refresh
driven by change rather than by turn could do:

- ``cover_new_lists``: of each paper's exact top 10, the share its stored candidates hold (its whole stored list and
  the new papers' lists that name it): the most that re-ranking them by the current graph would give;
- ``exact_moved``: the share of the papers whose exact top 10 changed since the night before (the same for every R):
  what a run that recomputed exactly the lists whose top moved would recompute a night.
- ``recall10_reranked``: recall@10 of the lists as readers show them: each stored list read with the new papers' lists
  that name its paper, every entry re-scored with the current graph's weights and in-degrees of its two works (its
  stored coupling term and shared citers kept: :mod:`pipeline.query.ccbc_now`, :func:`reranked`).

    .venv/bin/python -m bench.related_staleness [--refresh-runs 1,7,14,28] [--nights 40] [--start 0.5] [--grow 0.01]
    .venv/bin/python -m bench.related_staleness --collection synthetic [--papers 5000] [...]

CACM is the one collection beside the checkout whose records carry citations (CISI's ``.X`` lines are co-citation
counts, which the importer does not take as citations; Cranfield has none). The second graph is synthetic
(``--collection synthetic``: :func:`synthetic_nights`, the papers the publish benchmark times): no real collection is
held out, but a cycle chosen on CACM is checked on a graph of another shape (uniform references to earlier papers
rather than CACM's few much-cited ones). Results: ``bench/out/related_staleness.json`` (CACM),
``bench/out/related_staleness_synthetic.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
SHARED = Path(os.environ.get("PAPERKB_SHARED_DATA", ROOT.parent / "shared" / "data"))
TOP = 10
CACM = "collections/cacm/cacm.all"


def stored_rows(db: Path) -> dict[str, tuple[str, dict[str, tuple[float, float]], list[str]]]:
    """Each paper's stored list in the warehouse ``db``: (the run that computed it, {related work: (weighted, naive
    CCBC)}, the corpus papers among those works)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        out: dict[str, tuple[str, dict[str, tuple[float, float]], list[str]]] = {}
        for pid, wid, rpid, w, nv, run in con.execute(
                "SELECT paper_id, related_work_id, related_paper_id, ccbc_weighted, ccbc_naive, run_id FROM related"
                ).fetchall():
            entry = out.setdefault(pid, (run, {}, []))
            entry[1][wid] = (float(w), float(nv))
            if rpid is not None:
                entry[2].append(rpid)
        return out
    finally:
        con.close()


def pair_parts(db: Path) -> dict[str, dict[str, tuple[int, bool, bool, float | None]]]:
    """Each stored list's entries' (shared citers, the paper cites the work, the work cites the paper, the coupling
    term its run stored), by paper."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        out: dict[str, dict[str, tuple[int, bool, bool, float | None]]] = {}
        for pid, wid, sc, cites, cited_by, coupling in con.execute(
                "SELECT paper_id, related_work_id, shared_citers, cites, cited_by, coupling FROM related").fetchall():
            out.setdefault(pid, {})[wid] = (int(sc), bool(cites), bool(cited_by), coupling)
        return out
    finally:
        con.close()


def graph_state(db: Path) -> dict[str, tuple[float, int]]:
    """{work: (its power-law weight, its in-degree)} of the warehouse ``db``'s last graph run."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return {w: (float(wt), int(ind)) for w, wt, ind in con.execute(
            "SELECT work_id, weight, in_degree FROM paper_metrics").fetchall()}
    finally:
        con.close()


def rescored(lists: dict, parts: dict[str, dict[str, tuple[int, bool, bool, float | None]]],
             now: dict[str, tuple[float, int]], work_of: dict[str, str]) -> dict:
    """``lists`` with each stored entry scored as readers score it (:func:`pipeline.query.ccbc_now.score`: its stored
    coupling term and shared citers, the two works' weights and in-degrees of the current graph ``now``); an entry
    without them keeps its stored score."""
    from pipeline.query.ccbc_now import score

    out = {}
    for p, (run, entries, papers) in lists.items():
        a = work_of.get(p)
        scored = dict(entries)
        for b, (_w, naive) in entries.items():
            sc, cites, cited_by, coupling = parts.get(p, {}).get(b, (0, False, False, None))
            if coupling is not None and a in now and b in now:
                scored[b] = (score(coupling, sc, cites, cited_by, now[a], now[b]), naive)
        out[p] = (run, scored, papers)
    return out


def reranked(lists: dict, parts: dict[str, dict[str, tuple[int, bool, bool, float | None]]],
             now: dict[str, tuple[float, int]], work_of: dict[str, str], only: set[str] | None = None
             ) -> dict[str, set[str]]:
    """Each paper's top works as readers show them (pipeline.query.related.graph_neighbours): its stored list and the
    newer lists that name it (``only``: of these papers, as :func:`merged`), every entry re-scored with the current
    graph (:func:`rescored`)."""
    return merged(rescored(lists, parts, now, work_of), work_of, only)


def top(entries: dict[str, tuple[float, float]]) -> set[str]:
    """The ``TOP`` works of a list by the product's order (weighted CCBC, then naive, descending; then the id)."""
    return {w for w, _ in sorted(entries.items(), key=lambda e: (-e[1][0], -e[1][1], e[0]))[:TOP]}


def newer_entries(lists: dict, work_of: dict[str, str], only: set[str] | None = None
                  ) -> dict[str, dict[str, tuple[float, float]]]:
    """Each paper's entries from the lists computed after its own that name it (CCBC is symmetric: paper Q's newer
    list scores the pair (Q, P) for the graph of a later run). ``only``: the newer lists of these papers alone."""
    newer: dict[str, dict[str, tuple[float, float]]] = {}
    for q, (run, entries, papers) in lists.items():
        wq = work_of.get(q)
        if only is not None and q not in only:
            continue
        for p in papers:
            wp = work_of.get(p)
            if wq is not None and wp in entries and p in lists and run > lists[p][0]:
                newer.setdefault(p, {})[wq] = entries[wp]
    return newer


def merged(lists: dict, work_of: dict[str, str], only: set[str] | None = None) -> dict[str, set[str]]:
    """Each paper's top works when its stored list is read together with the lists computed after it that name it
    (:func:`newer_entries`: Q enters or moves in P's list with the newer score): what a reader could show without
    rewriting P's list. ``only``: read the newer lists of these papers alone (the new papers')."""
    newer = newer_entries(lists, work_of, only)
    return {p: top({**entries, **newer.get(p, {})}) for p, (_run, entries, _papers) in lists.items()}


def cover(lists: dict, work_of: dict[str, str], exact: dict[str, set[str]], only: set[str] | None = None) -> float:
    """Of each paper's exact top works, the share its stored candidates hold (every work of its stored list, not only
    its top, and the works of the newer lists that name it, as :func:`merged` reads them), averaged over the papers
    with an exact list: what re-ranking the stored candidates by the current graph's scores would give at most, so
    how much of what a cycle loses is order (scores that moved) rather than works the stored lists never held."""
    newer = newer_entries(lists, work_of, only)
    shares = [len(want & (set(lists.get(p, (None, {}, []))[1]) | set(newer.get(p, {})))) / len(want)
              for p, want in exact.items()]
    return round(sum(shares) / max(1, len(shares)), 4)


def moved(before: dict[str, set[str]], now: dict[str, set[str]]) -> float | None:
    """The share of the papers with an exact list both nights whose exact top works changed between them: what a
    refresh that recomputed exactly the lists whose top moved would recompute that night."""
    both = [p for p in now if p in before]
    return round(sum(before[p] != now[p] for p in both) / len(both), 4) if both else None


def paper_works(db: Path) -> dict[str, str]:
    """paper id -> work id of the corpus papers in ``db``."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT paper_id, work_id FROM works WHERE paper_id IS NOT NULL").fetchall())
    finally:
        con.close()


def exact_lists(settings, scratch: Path) -> dict[str, set[str]]:
    """Every paper's exact top lists: ``graph --full`` on a copy of the warehouse (the copy removed after)."""
    from pipeline.steps.graph import run_graph

    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    shutil.copy2(settings.db_path, scratch / settings.db_path.name)
    copy = settings.model_copy(update={"warehouse": scratch})
    try:
        run_graph(copy, full=True)
        return {p: top(entries) for p, (_run, entries, _papers) in stored_rows(copy.db_path).items()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def compare(stored: dict[str, set[str]], exact: dict[str, set[str]], recent: set[str]) -> dict:
    """recall10, same10 and new_missed (see the module doc) of the top works ``stored`` against the ``exact`` ones;
    ``recent``: the work ids of the papers imported in the last R nights."""
    recall, same, new_total, new_missed = [], 0, 0, 0
    for pid, want in exact.items():
        got = stored.get(pid, set())
        recall.append(len(want & got) / len(want))
        same += want == got
        fresh = want & recent
        new_total += len(fresh)
        new_missed += len(fresh - got)
    n = max(1, len(recall))
    return {"papers": len(recall), "recall10": round(sum(recall) / n, 4), "same10": round(same / n, 4),
            "new_in_exact": new_total, "new_missed": round(new_missed / new_total, 4) if new_total else None}


def cacm_nights(start: float, grow: float):
    """``load(settings, night)``: import CACM's first ``start`` share of records (night 0), then ``grow`` more a night."""
    from bench.publish_night import smart_head
    from pipeline.sources.local_corpus import import_collection

    source = SHARED / CACM
    text = source.read_text(encoding="utf-8", errors="replace")
    starts = [m.start() for m in re.finditer(r"^\.I ", text, flags=re.M)]
    first, step = round(len(starts) * start), max(1, round(len(starts) * grow))

    def load(settings, night: int) -> None:
        n = min(len(starts), first + night * step)
        import_collection(settings, smart_head(text, n, settings.warehouse.parent / "head" / source.name), fmt="smart",
                          name="cacm")

    return load


def synthetic_nights(papers: int, grow: float):
    """``load(settings, night)``: ``papers`` synthetic papers (``bench.publish_night``'s: arXiv-like ids, 12 references
    each to earlier papers drawn uniformly, 8 to outside works drawn with a skew), then ``grow`` x ``papers`` a night:
    a citation graph of another shape than CACM's, the one the publish benchmark times."""
    from bench.publish_night import add_papers
    from pipeline.warehouse import Warehouse

    step = max(1, round(papers * grow))

    def load(settings, night: int) -> None:
        if night == 0:
            with Warehouse(settings) as wh:
                wh.init()
        lo = 0 if night == 0 else papers + (night - 1) * step
        add_papers(settings.db_path, lo, papers + night * step, outside=max(1000, papers))

    return load


def cycle_settings(spec: int | str) -> tuple[str, int, float]:
    """A cycle to replay: an int or ``"N"``, a sweep by runs (``graph_related_refresh_runs = N``, the sweep by change
    off: ``graph_related_refresh_change = 1``); ``"N%"``, the sweep by the graph's change (``graph_related_refresh_change
    = N/100``, no bound in runs). Returns (its label, the two settings); the replay sets no bound on the newer entries
    (``graph_related_incoming_rows = 0``), so each cycle is the sweep it names alone."""
    text = str(spec).strip()
    if text.endswith("%"):
        share = float(text[:-1]) / 100
        if not 0 < share <= 1:
            raise ValueError(f"a change share between 0 and 100%, not {text!r}")
        return text, 0, share
    return text, int(text), 1.0


def run_cycle(work: Path, refresh: int | str, nights: int, start: float, grow: float, load=None) -> dict:
    """One warehouse replayed with the cycle ``refresh`` (:func:`cycle_settings`); ``load(settings, night)`` brings each
    night's papers (default: CACM's, :func:`cacm_nights`)."""
    from pipeline.settings import Settings
    from pipeline.steps.graph import run_graph

    load = load or cacm_nights(start, grow)
    label, runs, change = cycle_settings(refresh)
    folder = work / ("r" + label.replace("%", "pct").replace(".", "_"))
    settings = Settings(warehouse=folder / "warehouse", graph_related_refresh_runs=runs,
                        graph_related_refresh_change=change, graph_related_incoming_rows=0)
    added: list[set[str]] = []  # work ids of the papers each night imported
    run_ids: list[str] = []  # each night's graph run
    before: set[str] = set()
    exact_before: dict[str, set[str]] = {}
    rows = []
    steady_from: int | None = runs + 1 if runs else None  # by change: the first night whose lists all followed night 0
    for night in range(nights + 1):
        load(settings, night)
        summary = run_graph(settings, full=night == 0)
        run_ids.append(summary["run_id"])
        work_of = paper_works(settings.db_path)
        works = set(work_of.values())
        added.append(works - before if night else set())  # (night 0's papers are the start, not new)
        before = works
        lists = stored_rows(settings.db_path)
        # the window of "new" papers: a cycle's nights (by runs), or the nights since the oldest stored list (by change)
        oldest = min((r for r, _e, _ps in lists.values()), default=run_ids[-1])
        window = runs if runs else night - max((i for i, r in enumerate(run_ids) if r <= oldest), default=0)
        if steady_from is None and night and oldest > run_ids[0]:
            steady_from = night
        recent = set().union(*added[-window:]) if night and window else set()
        exact = exact_lists(settings, folder / "exact")
        if not exact:
            raise SystemExit(f"bench.related_staleness: no related list after night {night}: the papers gave no citations")
        row = {"night": night, "papers": summary["corpus_papers"], "with_list": len(exact),
               "recomputed": round(summary["related_papers"] / max(1, summary["corpus_papers"]), 4),
               **compare({p: top(e) for p, (_r, e, _ps) in lists.items()}, exact, recent)}
        row.update({f"{k}_merged": v for k, v in compare(merged(lists, work_of), exact, recent).items() if k != "papers"})
        new_papers = {p for p, w in work_of.items() if w in recent}
        row.update({f"{k}_new_lists": v for k, v in compare(merged(lists, work_of, new_papers), exact, recent).items()
                    if k != "papers"})
        row["cover_new_lists"] = cover(lists, work_of, exact, new_papers)
        row["recall10_reranked"] = compare(
            reranked(lists, pair_parts(settings.db_path), graph_state(settings.db_path), work_of, new_papers),
            exact, recent)["recall10"]
        row["exact_moved"] = moved(exact_before, exact) if night else None
        exact_before = exact
        rows.append(row)
        print(json.dumps({"refresh_runs": label, **row}), flush=True)
    steady = [r for r in rows if steady_from is not None and r["night"] >= steady_from] or rows[1:]

    def mean(key: str) -> float | None:
        vals = [r[key] for r in steady if r[key] is not None]
        return round(sum(vals) / len(vals), 4) if vals else None

    return {"refresh_runs": label, "nights_detail": rows, "steady_nights": len(steady),
            **{f"mean_{k}": mean(k) for k in ("recall10", "same10", "new_missed", "recomputed", "recall10_merged",
                                              "same10_merged", "new_missed_merged", "recall10_new_lists",
                                              "same10_new_lists", "new_missed_new_lists", "cover_new_lists",
                                              "exact_moved", "recall10_reranked")},
            "min_recall10": min((r["recall10"] for r in steady), default=None)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refresh-runs", default="1,7,14,28",
                    help="the cycles to compare, comma-separated: N runs, or N%% of the graph's change (the sweep by change)")
    ap.add_argument("--nights", type=int, default=40)
    ap.add_argument("--start", type=float, default=0.5, help="share of CACM's records imported before the first night")
    ap.add_argument("--grow", type=float, default=0.01, help="share of the papers a night imports")
    ap.add_argument("--collection", choices=["cacm", "synthetic"], default="cacm",
                    help="CACM's real citations (default), or bench.publish_night's synthetic papers (a second graph)")
    ap.add_argument("--papers", type=int, default=5000, help="synthetic: papers before the first night")
    args = ap.parse_args(argv)
    if args.collection == "cacm" and not (SHARED / CACM).is_file():
        print(f"bench.related_staleness: CACM not found: {SHARED / CACM}", file=sys.stderr)
        return 2
    try:
        cycles = [cycle_settings(x)[0] for x in args.refresh_runs.split(",") if x.strip()]
    except ValueError:
        print(f"bench.related_staleness: --refresh-runs takes whole numbers of runs or shares of change such as 7%, "
              f"not {args.refresh_runs!r}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-staleness-") as tmp:
        runs = [run_cycle(Path(tmp), r, args.nights, args.start, args.grow,
                          synthetic_nights(args.papers, args.grow) if args.collection == "synthetic" else None)
                for r in cycles]
    out = {"machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.machine()})",
           "command": "python -m bench.related_staleness " + " ".join(argv if argv is not None else sys.argv[1:]),
           "load_before": load, "collection": args.collection, "nights": args.nights, "grow": args.grow, "top": TOP,
           **({"papers": args.papers} if args.collection == "synthetic" else {"start": args.start}),
           "runs": runs, "wall_s": round(time.perf_counter() - t0, 1)}
    OUT.mkdir(parents=True, exist_ok=True)
    name = "related_staleness.json" if args.collection == "cacm" else f"related_staleness_{args.collection}.json"
    (OUT / name).write_text(json.dumps(out, indent=1), encoding="utf-8")
    for r in runs:
        print(f"R={r['refresh_runs']}: over {r['steady_nights']} nights after the first cycle, recall@10 "
              f"{r['mean_recall10']} (min {r['min_recall10']}), same top 10 {r['mean_same10']}, "
              f"new papers missed {r['mean_new_missed']}, lists recomputed a night {r['mean_recomputed']}; read with "
              f"the newer lists that name them: recall@10 {r['mean_recall10_merged']}, same top 10 "
              f"{r['mean_same10_merged']}, new papers missed {r['mean_new_missed_merged']}; with the new papers' lists "
              f"alone: recall@10 {r['mean_recall10_new_lists']}, same top 10 {r['mean_same10_new_lists']}, new papers "
              f"missed {r['mean_new_missed_new_lists']}, exact top 10 among the stored candidates {r['mean_cover_new_lists']}; "
              f"exact top 10 moved a night {r['mean_exact_moved']}; re-ranked by the current weights and in-degrees: "
              f"recall@10 {r['mean_recall10_reranked']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
