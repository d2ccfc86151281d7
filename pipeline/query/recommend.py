"""Recommendations from positive and negative seed papers, each with the reasons it was recommended.

Candidates come from two places:

1. the vector space: the papers nearest the positives' doc vectors (the abstract vector where a paper
   has no doc vector) -- the LanceDB ``papers`` table, searched with the positives' centroid and with
   each positive;
2. the citation graph: the snapshot's ``related`` table (weighted co-citation / bibliographic coupling
   and direct citations, as ``paperkb related`` reads it) of every positive.

Scoring (pure functions below, Rocchio-style):

* ``semantic = 0.5 * cos(candidate, centroid of the positives) + 0.5 * max over positives cos(candidate, p)``
* ``graph = mean over positives of ccbc_weighted(candidate, p) / max ccbc_weighted of p's neighbours``
  (a candidate related to several positives gains from each);
* ``positive = (1 - a) * graph + a * max(0, semantic)``, ``a`` = setting ``query_related_semantic_weight``;
* negatives push away with the same evidence:
  ``negative = (1 - a) * graph_to_negatives + a * max(0, max over negatives cos(candidate, n))``;
* a prior, as for related papers: ``quality`` = log(1 + citations) over the candidates' best,
  ``positive' = (1 - b) * positive + b * quality``, ``b`` = setting ``query_related_quality_weight``;
* ``score = positive' - NEGATIVE_WEIGHT * negative``.

Seeds themselves are never recommended. Every result says why: its nearest positive and the cosine to
it, its nearest negative (if any), and per seed the graph evidence -- the stored CCBC weight, the
number of shared references and shared citers (read from the ``citations`` table, with up to
``WHY_IDS`` of their ids) and whether it cites or is cited by the seed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from pipeline.errors import UserError
from pipeline.query import by_cited
from pipeline.vectors import l2_normalise

NEGATIVE_WEIGHT = 0.5
MAX_SEEDS = 100
MAX_K = 1000
WHY_IDS = 5


@dataclass
class SeedLink:
    """Graph evidence between a recommended paper and one seed."""

    seed: str
    polarity: str  # 'pos' | 'neg'
    ccbc_weighted: float = 0.0
    shared_references: int = 0
    shared_citers: int = 0
    reference_ids: list[str] = field(default_factory=list)  # up to WHY_IDS shared references (paper id, else work id)
    citer_ids: list[str] = field(default_factory=list)  # up to WHY_IDS shared citers
    cites: bool = False  # the recommended paper cites the seed
    cited_by: bool = False  # the seed cites the recommended paper


@dataclass
class Recommendation:
    paper_id: str
    title: str | None
    year: int | None
    score: float
    semantic: float  # the positive semantic similarity (see the module docstring)
    graph: float  # the positive graph evidence in [0, 1]
    negative: float  # what the negatives took off (before NEGATIVE_WEIGHT)
    quality: float  # log citations over the candidates' best
    nearest_seed: str | None
    nearest_similarity: float | None
    nearest_negative: str | None = None
    negative_similarity: float | None = None
    links: list[SeedLink] = field(default_factory=list)
    external_id: str | None = None
    rank: int = 0

    def why(self) -> str:
        """One line: the nearest seed and the graph evidence."""
        parts = []
        if self.nearest_seed is not None:
            parts.append(f"near {self.nearest_seed} (cos {self.nearest_similarity:.2f})")
        for ln in self.links:
            if ln.polarity != "pos":
                continue
            if ln.cites:
                parts.append(f"cites {ln.seed}")
            if ln.cited_by:
                parts.append(f"cited by {ln.seed}")
            shared = []
            if ln.shared_references:
                shared.append(f"{ln.shared_references} reference{'s' if ln.shared_references > 1 else ''}")
            if ln.shared_citers:
                shared.append(f"{ln.shared_citers} citer{'s' if ln.shared_citers > 1 else ''}")
            if shared:
                parts.append(f"shares {' and '.join(shared)} with {ln.seed}")
        if self.nearest_negative is not None:
            parts.append(f"away from {self.nearest_negative} (cos {self.negative_similarity:.2f})")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("score", "semantic", "graph", "negative", "quality", "nearest_similarity", "negative_similarity"):
            if d[key] is not None:
                d[key] = round(float(d[key]), 6)
        for ln in d["links"]:
            ln["ccbc_weighted"] = round(float(ln["ccbc_weighted"]), 6)
        d["why"] = self.why()
        return d


@dataclass
class RecommendResponse:
    positives: list[str]
    negatives: list[str]
    results: list[Recommendation]
    snapshot_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"snapshot_id": self.snapshot_id, "positives": self.positives, "negatives": self.negatives,
                "results": [r.to_dict() for r in self.results]}


# ---- pure scoring ------------------------------------------------------------------------------
def semantic_scores(cands: np.ndarray, pos: np.ndarray, neg: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Cosine evidence of each candidate row against the seeds' vectors.

    Returns ``semantic`` (0.5 centroid cosine + 0.5 best positive cosine), ``nearest`` (index of the
    nearest positive), ``nearest_sim``, and for negatives ``neg_sim`` (best cosine, 0 without negatives)
    and ``neg_nearest`` (-1 without negatives)."""
    C, P = l2_normalise(cands, dtype=np.float64), l2_normalise(pos, dtype=np.float64)
    sims = C @ P.T  # (n, |pos|)
    centroid = l2_normalise(P.mean(axis=0), dtype=np.float64)
    cen = (C @ centroid.T)[:, 0]
    nearest = sims.argmax(axis=1) if sims.shape[1] else np.full(len(C), -1)
    nearest_sim = sims.max(axis=1) if sims.shape[1] else np.zeros(len(C))
    out = {"semantic": 0.5 * cen + 0.5 * nearest_sim, "nearest": nearest, "nearest_sim": nearest_sim,
           "neg_sim": np.zeros(len(C)), "neg_nearest": np.full(len(C), -1)}
    if neg is not None and len(neg):
        nsims = C @ l2_normalise(neg, dtype=np.float64).T
        out["neg_sim"], out["neg_nearest"] = nsims.max(axis=1), nsims.argmax(axis=1)
    return out


def graph_scores(edges: dict[str, dict[str, float]], seeds: list[str], candidates: list[str]) -> np.ndarray:
    """``edges[seed][candidate] = ccbc_weighted``: per seed normalised by its best neighbour, then
    averaged over the seeds (0 for a candidate no seed is related to)."""
    out = np.zeros(len(candidates))
    if not seeds:
        return out
    idx = {c: i for i, c in enumerate(candidates)}
    for s in seeds:
        nb = edges.get(s) or {}
        top = max(nb.values(), default=0.0)
        if top <= 0:
            continue
        for c, w in nb.items():
            if c in idx:
                out[idx[c]] += w / top
    return out / len(seeds)


def quality_scores(citation_counts: list) -> np.ndarray:
    """log(1 + citations) over the candidates' best (0 where unknown), as ``related``'s citations component."""
    v = np.log1p(np.array([max(float(c or 0), 0.0) for c in citation_counts], dtype=np.float64))
    top = v.max() if len(v) else 0.0
    return v / top if top > 0 else np.zeros(len(v))


def combine(semantic: np.ndarray, graph: np.ndarray, neg_semantic: np.ndarray, neg_graph: np.ndarray,
            a: float, negative_weight: float = NEGATIVE_WEIGHT, quality: np.ndarray | None = None,
            b: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(score, negative): ``(1-b) ((1-a) graph + a max(0, semantic)) + b quality
    - w ((1-a) neg_graph + a max(0, neg_semantic))``."""
    positive = (1 - a) * graph + a * np.maximum(semantic, 0.0)
    if quality is not None and b > 0:
        positive = (1 - b) * positive + b * quality
    negative = (1 - a) * neg_graph + a * np.maximum(neg_semantic, 0.0)
    return positive - negative_weight * negative, negative


# ---- reading the snapshot ----------------------------------------------------------------------
def related_edges(con, seeds: list[str]) -> dict[str, dict[str, dict]]:
    """seed -> corpus paper -> the stored ``related`` row (ccbc_weighted, shared counts, cites, cited_by), with the
    entries of the lists computed after the seed's own that name it (a new paper's, the night it arrives: see
    :func:`pipeline.query.related.newer_entries_of`), a newer score replacing the stored one; each scored with the
    snapshot's current weights and in-degrees (:mod:`pipeline.query.ccbc_now`)."""
    from pipeline.query.ccbc_now import rescore
    from pipeline.query.related import PARTS, newer_entries_of

    if not seeds:
        return {}
    keep = ["work_id", "ccbc_weighted", "shared_references", *PARTS]
    cur = con.execute(
        "SELECT *, related_work_id AS work_id FROM related "
        "WHERE paper_id IN (SELECT unnest(?::VARCHAR[])) AND related_paper_id IS NOT NULL", [seeds])
    names = [d[0] for d in cur.description]
    out: dict[str, dict[str, dict]] = {}
    for values in cur.fetchall():
        r = dict(zip(names, values))
        out.setdefault(r["paper_id"], {})[r["related_paper_id"]] = {k: r.get(k) for k in keep}
    for seed, entries in newer_entries_of(con, seeds).items():
        for e in entries:
            out.setdefault(seed, {})[e["paper_id"]] = {k: e.get(k) for k in keep}
    rescore(con, [(seed, e) for seed, nb in out.items() for e in nb.values()])
    for nb in out.values():
        for e in nb.values():
            e["ccbc_weighted"] = float(e["ccbc_weighted"] or 0.0)
    return out


def shared_evidence(con, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    """For (candidate, seed) paper pairs: the shared references and shared citers (ids, from the
    ``citations`` table, shown as paper ids where the work is a corpus paper) and direct citations."""
    if not pairs:
        return {}
    cand = sorted({c for c, _ in pairs})
    seeds = sorted({s for _, s in pairs})
    wanted = set(pairs)
    works = dict(con.execute("SELECT work_id, paper_id FROM works WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))",
                             [cand + seeds]).fetchall())
    paper_of_work: dict[str, str] = {w: p for w, p in works.items()}
    work_of = {p: w for w, p in works.items()}
    cw = [work_of[c] for c in cand if c in work_of]
    sw = [work_of[s] for s in seeds if s in work_of]
    out: dict[tuple[str, str], dict[str, Any]] = {
        p: {"references": [], "citers": [], "cites": False, "cited_by": False} for p in pairs}
    if not cw or not sw:
        return out
    q = """
        SELECT a.{me} AS cand, b.{me} AS seed, a.{other} AS shared
        FROM {table} a JOIN {table} b ON a.{other} = b.{other}
        WHERE a.{me} IN (SELECT unnest(?::VARCHAR[])) AND b.{me} IN (SELECT unnest(?::VARCHAR[])) AND a.{me} <> b.{me}
        ORDER BY 1, 2, 3"""
    shared_ids: set[str] = set()
    found: list[tuple[str, tuple, str]] = []
    for kind, me, other in (("references", "citing_work_id", "cited_work_id"), ("citers", "cited_work_id", "citing_work_id")):
        # (by the cited work: the table whose files are sorted by it)
        table = by_cited.PLACEHOLDER if me == "cited_work_id" else "citations"
        for cwid, swid, shared in by_cited.execute(con, q.format(me=me, other=other, table=table), [cw, sw]).fetchall():
            key = (paper_of_work.get(cwid, ""), paper_of_work.get(swid, ""))
            if key in wanted:
                found.append((kind, key, shared))
                shared_ids.add(shared)
    names = dict(con.execute("SELECT work_id, COALESCE(paper_id, work_id) FROM works WHERE work_id IN (SELECT unnest(?::VARCHAR[]))",
                             [sorted(shared_ids)]).fetchall()) if shared_ids else {}
    for kind, key, shared in found:
        out[key][kind].append(names.get(shared, shared))
    for a, b in con.execute("""SELECT citing_work_id, cited_work_id FROM citations
                               WHERE (citing_work_id IN (SELECT unnest(?::VARCHAR[])) AND cited_work_id IN (SELECT unnest(?::VARCHAR[])))
                                  OR (citing_work_id IN (SELECT unnest(?::VARCHAR[])) AND cited_work_id IN (SELECT unnest(?::VARCHAR[])))""",
                            [cw, sw, sw, cw]).fetchall():
        pa, pb = paper_of_work.get(a, ""), paper_of_work.get(b, "")
        if (pa, pb) in wanted:
            out[(pa, pb)]["cites"] = True
        if (pb, pa) in wanted:
            out[(pb, pa)]["cited_by"] = True
    return out


def _check(searcher, pos, neg, k) -> tuple[list[str], list[str]]:
    if isinstance(pos, str):
        pos = [pos]
    if isinstance(neg, str):
        neg = [neg]
    pos, neg = list(pos or []), list(neg or [])
    if not pos:
        raise UserError("give at least one positive seed paper")
    if len(pos) + len(neg) > MAX_SEEDS:
        raise UserError(f"{len(pos) + len(neg)} seed papers; the limit is {MAX_SEEDS}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise UserError(f"k must be between 1 and {MAX_K}, got {k!r}")
    rp = list(dict.fromkeys(searcher.resolve_id(p) for p in pos))  # UnknownPaper for an unknown id
    rn = list(dict.fromkeys(searcher.resolve_id(n) for n in neg))
    both = sorted(set(rp) & set(rn))
    if both:
        raise UserError(f"paper {both[0]} is both a positive and a negative seed")
    return rp, rn


def recommend(searcher, pos, neg=None, k: int = 20, *, pool: int | None = None, use_graph: bool = True,
              use_vectors: bool = True, use_quality: bool = True, graph: dict[str, dict[str, dict]] | None = None,
              citation_counts: dict[str, int] | None = None) -> RecommendResponse:
    """Papers like the positives and unlike the negatives, best first, each with its reasons.

    ``use_graph`` / ``use_vectors`` / ``use_quality`` switch one kind of evidence off (the benchmark's ablations).
    ``graph`` (seed -> paper -> row, as :func:`related_edges` returns) and ``citation_counts`` (paper ->
    count, for the prior) replace the snapshot's evidence where given: the benchmark's leak-free mode passes
    them computed without the citing paper. The reasons' shared references and citers are still read
    from the snapshot's ``citations``."""
    pos, neg = _check(searcher, pos, neg, k)
    a = float(searcher.settings.query_related_semantic_weight) if use_graph and use_vectors else (1.0 if use_vectors else 0.0)
    seeds = set(pos) | set(neg)
    pool = pool or max(100, 5 * k)

    # seed vectors: doc vector, else the abstract vector
    def vectors(ids: list[str]) -> np.ndarray:
        if not ids:
            return np.zeros((0, searcher.dim))
        dv, av = searcher.paper_vectors(ids)
        return np.where(np.linalg.norm(dv, axis=1, keepdims=True) > 0, dv, av)

    pv, nv = vectors(pos), vectors(neg)

    # candidates from the vector space
    cands: dict[str, None] = {}
    if use_vectors:
        queries = [l2_normalise(pv.mean(axis=0), dtype=np.float64)[0]] + list(l2_normalise(pv, dtype=np.float64))
        for qv in queries:
            if np.linalg.norm(qv) == 0:
                continue
            hits = searcher.papers.search(qv.astype(np.float32), vector_column_name="doc_vector") \
                .select(["paper_id", "_distance"]).limit(pool + len(seeds)).to_arrow()
            for pid in hits["paper_id"].to_pylist():
                if pid not in seeds:
                    cands[pid] = None

    # candidates and evidence from the citation graph
    edges: dict[str, dict[str, dict]] = {}
    con = searcher.snap.catalog() if searcher.snap.catalog_path.is_file() else None
    try:
        if graph is not None:
            edges = {s: graph[s] for s in seeds if s in graph}
        elif con is not None:
            edges = related_edges(con, sorted(seeds))
        if use_graph:
            for p in pos:
                for c in edges.get(p, {}):
                    if c not in seeds and c in searcher.paper_row:
                        cands[c] = None
        ids = list(cands)
        if not ids:
            return RecommendResponse(positives=pos, negatives=neg, results=[], snapshot_id=searcher.snap.snapshot_id)
        cv = vectors(ids)
        sem = semantic_scores(cv, pv, nv)
        w = {s: {c: e["ccbc_weighted"] for c, e in nb.items()} for s, nb in edges.items()}
        g_pos = graph_scores(w, pos, ids) if use_graph else np.zeros(len(ids))
        g_neg = graph_scores(w, neg, ids) if use_graph else np.zeros(len(ids))
        if use_vectors:
            s_pos, s_neg = sem["semantic"], sem["neg_sim"]
        else:
            s_pos, s_neg = np.zeros(len(ids)), np.zeros(len(ids))
        cc = searcher.meta["citation_count"].to_pylist() if "citation_count" in searcher.meta.column_names else []
        if citation_counts is not None:
            quality = quality_scores([citation_counts.get(c, 0) for c in ids])
        else:
            quality = quality_scores([cc[searcher.paper_row[c]] for c in ids] if cc else [0] * len(ids))
        b = float(searcher.settings.query_related_quality_weight) if use_quality else 0.0
        score, negative = combine(s_pos, g_pos, s_neg, g_neg, a, quality=quality, b=b)
        order = sorted(range(len(ids)), key=lambda i: (-score[i], ids[i]))[:k]

        top = [ids[i] for i in order]
        pairs = [(c, s) for c in top for s in pos + neg]
        evidence = shared_evidence(con, pairs) if con is not None else {}
    finally:
        if con is not None:
            con.close()

    out: list[Recommendation] = []
    meta = searcher.meta
    for rank, i in enumerate(order, start=1):
        pid = ids[i]
        m = meta.slice(searcher.paper_row[pid], 1).to_pylist()[0]
        links = []
        for s in pos + neg:
            e = edges.get(s, {}).get(pid)
            ev = evidence.get((pid, s), {"references": [], "citers": [], "cites": False, "cited_by": False})
            if e is None and not (ev["references"] or ev["citers"] or ev["cites"] or ev["cited_by"]):
                continue
            links.append(SeedLink(seed=s, polarity="pos" if s in pos else "neg",
                                  ccbc_weighted=float(e["ccbc_weighted"]) if e else 0.0,
                                  shared_references=len(ev["references"]), shared_citers=len(ev["citers"]),
                                  reference_ids=ev["references"][:WHY_IDS], citer_ids=ev["citers"][:WHY_IDS],
                                  cites=ev["cites"], cited_by=ev["cited_by"]))
        nn = int(sem["neg_nearest"][i])
        out.append(Recommendation(
            paper_id=pid, title=m.get("title"), year=m.get("year"), external_id=m.get("external_id"),
            score=float(score[i]), semantic=float(sem["semantic"][i]), graph=float(g_pos[i]), negative=float(negative[i]),
            quality=float(quality[i]),
            nearest_seed=pos[int(sem["nearest"][i])], nearest_similarity=float(sem["nearest_sim"][i]),
            nearest_negative=neg[nn] if nn >= 0 else None, negative_similarity=float(sem["neg_sim"][i]) if nn >= 0 else None,
            links=links, rank=rank))
    return RecommendResponse(positives=pos, negatives=neg, results=out, snapshot_id=searcher.snap.snapshot_id)
