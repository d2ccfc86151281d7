"""Citations from the PDFs' own reference lists: each parsed reference (``paper_references``) matched to a
corpus paper or a known work, and written as a ``citations`` edge with ``source = 'pdf'``.

Matching, in order (the first that answers wins):

1. the arXiv id printed in the reference ('arXiv:1409.0473', 'CoRR abs/1409.0473') against the corpus
   papers' arXiv ids and the known works' ``arxiv_id``;
2. the DOI against ``papers.doi`` and ``works.doi``;
3. the normalised full title (NFKD, accents and punctuation dropped, case-folded): equal, with the
   years at most ``TITLE_YEAR_SLACK`` apart where both are known (a preprint year against the venue's);
4. a fuzzy title (rapidfuzz ``fuzz.ratio`` >= ``FUZZY_MIN_RATIO``, years at most 1 apart and both
   known) among the titles that share the first or the last word (blocking keeps it linear);
5. a known title printed whole in the entry, as a sentence of its own (". Attention is all you need. In
   ..."): this holds when the parser cut the title wrongly. Candidates come from the entry's word
   trigrams; a longer title that merely starts with a known one ("Attention is all you need in speech
   separation") does not match, as the known title must end at a sentence boundary.

A short name is not a title: titles under ``MIN_TITLE_WORDS`` words or ``MIN_TITLE_CHARS`` characters are
never matched by title, and a reference that prints an arXiv id or a DOI is never matched by title to a
paper with a different one (BERT's "U-net: machine reading comprehension ..." is not the U-Net).

A reference that matches nothing stays a work of its own (``works.detail = 'pdf'``): keyed by its arXiv
id, its DOI or a hash of its normalised title and year, and matched against the other unknown works by
the same rules, so every paper citing the same unknown work cites the same vertex and CCBC and citation
counts see it. The step replaces everything it wrote before (edges
with source 'pdf', works with detail 'pdf', ``reference_links``) on each run: idempotent, and a paper
that joins the corpus later is linked on the next run.

The pure part (normalising, the index, ``match``) is separate from the warehouse I/O (``link_references``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from dataclasses import dataclass, field

from pipeline import catalog_changes

log = logging.getLogger(__name__)

SOURCE = "pdf"
TITLE_YEAR_SLACK = 2
FUZZY_YEAR_SLACK = 1
# rapidfuzz ratio (normalised Indel similarity, 0-100) at or above which two titles are one. Measured on the
# 393 parsed references of the 10 recorded PDFs against their titles: the 11 true pairs score 99.2 ("attention-
# based" printed "attention- based") or 100; the best wrong pair 77.6 ("Fully convolutional networks for
# semantic segmentation" vs U-Net's title).
FUZZY_MIN_RATIO = 90.0
MIN_TITLE_WORDS = 3
MIN_TITLE_CHARS = 20
_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_LEADING_ARTICLE = re.compile(r"^(?:a|an|the) ")


def normalise_title(title: str | None) -> str:
    """'Deep Residual Learning for Im-age Recognition.' -> 'deep residual learning for im age recognition'."""
    if not title:
        return ""
    t = unicodedata.normalize("NFKD", title)
    t = "".join(c for c in t if not unicodedata.combining(c)).casefold()
    return _NON_ALNUM.sub(" ", t).strip()


def title_matchable(norm: str) -> bool:
    """A full title, not a short name ('U-Net', 'BERT', 'Adam')."""
    return len(norm) >= MIN_TITLE_CHARS and len(norm.split()) >= MIN_TITLE_WORDS


def _blocking_keys(norm: str) -> tuple[str, str]:
    words = _LEADING_ARTICLE.sub("", norm).split()
    return (f"^{words[0]}", f"${words[-1]}") if words else ("", "")


@dataclass
class Target:
    """Something a reference can be matched to: a corpus paper or a known work."""

    work_id: str
    paper_id: str | None
    arxiv_id: str | None
    doi: str | None
    title: str | None
    year: int | None


@dataclass
class Match:
    work_id: str | None  # None: unmatched
    paper_id: str | None
    method: str  # arxiv_id | doi | title | fuzzy_title | unmatched
    score: float | None = None


@dataclass
class TargetIndex:
    """Look-ups over the targets by arXiv id, DOI, normalised title and blocking key. Corpus papers are
    added first and win over a known work with the same key."""

    by_arxiv: dict[str, Target] = field(default_factory=dict)
    by_doi: dict[str, Target] = field(default_factory=dict)
    by_title: dict[str, list[Target]] = field(default_factory=dict)
    by_block: dict[str, list[tuple[str, Target]]] = field(default_factory=dict)
    by_trigram: dict[str, list[tuple[str, Target]]] = field(default_factory=dict)

    def add(self, t: Target) -> None:
        if t.arxiv_id:
            self.by_arxiv.setdefault(t.arxiv_id.lower(), t)
        if t.doi:
            self.by_doi.setdefault(t.doi.lower(), t)
        norm = normalise_title(t.title)
        if title_matchable(norm):
            self.by_title.setdefault(norm, []).append(t)
            for key in set(_blocking_keys(norm)):
                self.by_block.setdefault(key, []).append((norm, t))
            self.by_trigram.setdefault(" ".join(norm.split()[:3]), []).append((norm, t))

    def match(self, *, arxiv_id: str | None, doi: str | None, title: str | None, year: int | None,
              raw: str | None = None) -> Match:
        if arxiv_id and (t := self.by_arxiv.get(arxiv_id.lower())):
            return Match(t.work_id, t.paper_id, "arxiv_id")
        if doi and (t := self.by_doi.get(doi.lower())):
            return Match(t.work_id, t.paper_id, "doi")
        norm = normalise_title(title)

        def compatible(t: Target, slack: int, need_years: bool) -> bool:
            if arxiv_id and t.arxiv_id and t.arxiv_id.lower() != arxiv_id.lower():
                return False  # the reference names another arXiv paper of the same title
            if doi and t.doi and t.doi.lower() != doi.lower():
                return False
            if year is None or t.year is None:
                return not need_years
            return abs(year - t.year) <= slack

        if not title_matchable(norm):
            return self._in_text(raw, compatible)
        for t in self.by_title.get(norm, []):
            if compatible(t, TITLE_YEAR_SLACK, need_years=False):
                return Match(t.work_id, t.paper_id, "title", 100.0)
        from rapidfuzz import fuzz

        best: tuple[float, Target] | None = None
        seen: set[int] = set()
        for key in set(_blocking_keys(norm)):
            for cand_norm, t in self.by_block.get(key, []):
                if id(t) in seen:
                    continue
                seen.add(id(t))
                score = fuzz.ratio(norm, cand_norm, score_cutoff=FUZZY_MIN_RATIO)
                if score and compatible(t, FUZZY_YEAR_SLACK, need_years=True) and (best is None or score > best[0]):
                    best = (score, t)
        if best is not None:
            return Match(best[1].work_id, best[1].paper_id, "fuzzy_title", round(best[0], 2))
        return self._in_text(raw, compatible)

    def _in_text(self, raw: str | None, compatible) -> Match:
        """A known title printed whole, as its own sentence, in the entry (method 'title_in_text')."""
        if not raw:
            return Match(None, None, "unmatched")
        words = normalise_title(raw).split()
        seen: set[int] = set()
        flat = _flat(raw)
        for i in range(max(0, len(words) - 2)):
            for cand_norm, t in self.by_trigram.get(" ".join(words[i:i + 3]), []):
                if id(t) in seen:
                    continue
                seen.add(id(t))
                if compatible(t, TITLE_YEAR_SLACK, need_years=False) and _sentence_re(cand_norm).search(flat):
                    return Match(t.work_id, t.paper_id, "title_in_text", 100.0)
        return Match(None, None, "unmatched")


def _flat(text: str) -> str:
    """Accents dropped, case-folded, whitespace collapsed; punctuation kept (it marks the title's ends)."""
    t = unicodedata.normalize("NFKD", text)
    return " ".join("".join(c for c in t if not unicodedata.combining(c)).casefold().split())


def _sentence_re(norm_title: str) -> re.Pattern:
    """The title as a sentence of an entry: after a start, '.', ',', ':' or a quote, and ending at one."""
    body = r"[^0-9a-z]+".join(re.escape(w) for w in norm_title.split())
    return re.compile(r"(?:^|[.,:;\"“”'] ?)" + body + r" ?(?:[.,:;?!\"“”']|$)")


def own_work_id(*, arxiv_id: str | None, doi: str | None, title: str | None, year: int | None) -> str | None:
    """The id of an unmatched reference's own work; None when it names nothing identifiable."""
    if arxiv_id:
        return f"arxiv:{arxiv_id.lower()}"
    if doi:
        return f"doi:{doi.lower()}"
    norm = normalise_title(title)
    if not title_matchable(norm):
        return None
    return "ref:" + hashlib.sha1(f"{norm}|{year or ''}".encode()).hexdigest()[:20]


# ================================================================================================
# the warehouse (I/O)


def _targets(con) -> tuple[TargetIndex, dict[str, str]]:
    """The index over corpus papers (first) and known works; and paper_id -> the paper's citing work id."""
    index = TargetIndex()
    work_of: dict[str, str] = {
        pid: wid for wid, pid in con.execute(
            "SELECT min(work_id), paper_id FROM works WHERE paper_id IS NOT NULL AND coalesce(detail, '') <> ? "
            "GROUP BY paper_id", [SOURCE]).fetchall()}
    for pid, source, ext, doi, title, year in con.execute(
            "SELECT paper_id, source, external_id, doi, title, year FROM papers ORDER BY paper_id").fetchall():
        index.add(Target(work_of.get(pid, pid), pid, ext if source == "arxiv" else None, doi, title, year))
    for wid, pid, arxiv_id, doi, title, year in con.execute(
            "SELECT work_id, paper_id, arxiv_id, doi, title, year FROM works WHERE coalesce(detail, '') <> ? "
            "ORDER BY work_id", [SOURCE]).fetchall():
        index.add(Target(wid, pid, arxiv_id, doi, title, year))
    return index, work_of


def link_references(con, run_id: str | None = None) -> dict:
    """Match every row of ``paper_references``, then replace this step's ``reference_links``, ``works``
    (detail 'pdf') and ``citations`` (source 'pdf'). Runs inside the caller's transaction."""
    refs = con.execute("SELECT reference_id, paper_id, arxiv_id, doi, title, year, raw FROM paper_references "
                       "ORDER BY paper_id, ordinal").fetchall()
    # no PDF references (a graph from S2 or a collection alone, at any scale): nothing to index over the works
    index, work_of = _targets(con) if refs else (TargetIndex(), {})
    links: dict[str, list] = {k: [] for k in ("reference_id", "paper_id", "citing_work_id", "cited_work_id",
                                                  "cited_paper_id", "method", "score", "run_id")}
    own: dict[str, tuple] = {}  # work_id -> (arxiv_id, doi, title, year) of unmatched references' works
    counts = {"references": len(refs), "arxiv_id": 0, "doi": 0, "title": 0, "fuzzy_title": 0, "title_in_text": 0,
              "unmatched": 0,
              "unidentifiable": 0}
    # unknown works are matched among themselves too (one vertex for "Layer normalization" whether an entry
    # prints its arXiv id or not): entries with an id first, each new work added to an index of its own
    unknown = TargetIndex()
    matches = {r[0]: index.match(arxiv_id=r[2], doi=r[3], title=r[4], year=r[5], raw=r[6]) for r in refs}
    for rid, pid, arxiv_id, doi, title, year, raw in sorted(refs, key=lambda r: (r[2] is None and r[3] is None, r[0])):
        if matches[rid].work_id is not None:
            continue
        m = unknown.match(arxiv_id=arxiv_id, doi=doi, title=title, year=year)
        if m.work_id is None and (wid := own_work_id(arxiv_id=arxiv_id, doi=doi, title=title, year=year)):
            own[wid] = (arxiv_id, doi, title, year)
            unknown.add(Target(wid, None, arxiv_id, doi, title, year))
            m = Match(wid, None, "unmatched")
        matches[rid] = Match(m.work_id, None, "unmatched", m.score)
    for rid, pid, arxiv_id, doi, title, year, raw in refs:
        m = matches[rid]
        citing = work_of.get(pid, pid)
        cited, cited_pid = m.work_id, m.paper_id
        if cited is None:
            counts["unidentifiable"] += 1
            continue
        if cited == citing:
            continue  # a paper listing itself (an earlier version) is not a citation
        counts[m.method] += 1
        for k, v in (("reference_id", rid), ("paper_id", pid), ("citing_work_id", citing), ("cited_work_id", cited),
                     ("cited_paper_id", cited_pid), ("method", m.method), ("score", m.score), ("run_id", run_id)):
            links[k].append(v)
    # corpus papers without a work of their own (no S2 record): their paper_id is their work
    citing_ids = sorted({c for c, p in zip(links["citing_work_id"], links["paper_id"]) if c == p})
    cited_corpus = sorted({c for c, p in zip(links["cited_work_id"], links["cited_paper_id"]) if p is not None and c == p})
    corpus_works = sorted(set(citing_ids) | set(cited_corpus))

    # every run replaces these rows; the change log gets only those that came out different
    with catalog_changes.diffed(con, "citations", "source = ?", [SOURCE]), \
            catalog_changes.diffed(con, "works", "detail = ?", [SOURCE]), \
            catalog_changes.diffed(con, "reference_links", "TRUE"):
        n_edges = _replace_links(con, links, own, corpus_works)
    counts["edges"] = int(n_edges[0][0]) if n_edges else 0
    counts["corpus_edges"] = len({(c, d) for c, d, p in zip(links["citing_work_id"], links["cited_work_id"],
                                                             links["cited_paper_id"]) if p is not None})
    log.info("graph: %d PDF references: %d matched by arXiv id, %d by DOI, %d by title, %d by fuzzy title, "
             "%d by a title in the text, %d to works of their own, %d without a title or id; %d citation edges from PDFs",
             counts["references"], counts["arxiv_id"], counts["doi"], counts["title"], counts["fuzzy_title"],
             counts["title_in_text"],
             counts["unmatched"], counts["unidentifiable"], counts["edges"])
    return counts


def _replace_links(con, links: dict[str, list], own: dict[str, tuple], corpus_works: list[str]) -> list:
    """Replace ``reference_links``, the works (detail 'pdf') and the citations (source 'pdf') by this run's. A link
    that comes out as it was keeps the ``run_id`` of the run that made it. Returns the INSERT's count row."""
    import pyarrow as pa

    con.execute("CREATE OR REPLACE TEMP TABLE _links_before AS SELECT * FROM reference_links")
    con.execute("DELETE FROM citations WHERE source = ?", [SOURCE])
    con.execute("DELETE FROM works WHERE detail = ?", [SOURCE])
    con.execute("DELETE FROM reference_links")
    lt = pa.table({k: pa.array(v, pa.float64() if k == "score" else pa.string()) for k, v in links.items()})
    con.register("_links", lt)
    try:
        con.execute(f"INSERT INTO reference_links ({', '.join(lt.column_names)}) SELECT * FROM _links")
        if corpus_works:
            con.execute("""
                INSERT INTO works (work_id, paper_id, arxiv_id, doi, title, year, detail)
                SELECT p.paper_id, p.paper_id, CASE WHEN p.source = 'arxiv' THEN p.external_id END, p.doi, p.title,
                       p.year, ?
                FROM papers p WHERE p.paper_id IN (SELECT unnest(?))
                  AND p.paper_id NOT IN (SELECT work_id FROM works)""", [SOURCE, corpus_works])
        if own:
            ot = pa.table({"work_id": list(own), "arxiv_id": [v[0] for v in own.values()],
                           "doi": [v[1] for v in own.values()], "title": [v[2] for v in own.values()],
                           "year": pa.array([v[3] for v in own.values()], pa.int32())})
            con.register("_own", ot)
            con.execute("""INSERT INTO works (work_id, arxiv_id, doi, title, year, detail)
                           SELECT work_id, arxiv_id, doi, title, year, ? FROM _own
                           WHERE work_id NOT IN (SELECT work_id FROM works)""", [SOURCE])
            con.unregister("_own")
        # one edge per (citing, cited): an edge another source (S2) already holds is kept as it is
        n_edges = con.execute("""
            INSERT INTO citations (citing_work_id, cited_work_id, source)
            SELECT DISTINCT l.citing_work_id, l.cited_work_id, ? FROM _links l
            WHERE NOT EXISTS (SELECT 1 FROM citations c WHERE c.citing_work_id = l.citing_work_id
                                                       AND c.cited_work_id = l.cited_work_id)""",
                              [SOURCE]).fetchall()
    finally:
        con.unregister("_links")
    cols = [c for c in links if c != "run_id"]
    con.execute(f"""
        UPDATE reference_links r SET run_id = b.run_id FROM _links_before b
        WHERE r.reference_id = b.reference_id AND {" AND ".join(f"r.{c} IS NOT DISTINCT FROM b.{c}" for c in cols)}""").fetchall()
    con.execute("DROP TABLE _links_before").fetchall()
    return n_edges
