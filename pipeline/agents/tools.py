"""What each MCP tool does, over the snapshot being served: the query layer's calls, their answers as
:mod:`pipeline.agents.answers` models. No protocol here (:mod:`pipeline.agents.server` registers them);
errors are the query layer's own (UserError, UnknownPaper), which the server turns into tool errors.

``cur`` is the served snapshot (:class:`Served`): its id, its searcher, and cursors on its catalog.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import Any, Callable

from pipeline.agents import answers
from pipeline.errors import CitedWork, UnknownPaper, UserError


@dataclass
class Served:
    snapshot_id: str
    searcher: Any  # pipeline.query.Searcher
    catalog: Callable[[], AbstractContextManager[Any]]  # a cursor on the snapshot's catalog, closed after the block
    # several indexes searched as one (PAPERKB_SERVE_SNAPSHOTS): their MultiSearcher and each index's catalog
    multi: Any = None
    catalogs: dict[str, Callable[[], AbstractContextManager[Any]]] | None = None


def search(cur, query: str, *, k: int, year_from: int | None, year_to: int | None, categories: list[str],
           authors: list[str], expand: str | None) -> answers.SearchAnswer:
    from pipeline.query import Filters
    from pipeline.query.reading import cited_works_named, may_cite_outside, paper_cards

    filters = Filters(year_from=year_from, year_to=year_to, categories=list(categories), authors=list(authors))
    resp = (cur.multi or cur.searcher).search(query, k=k, filters=filters, expand=expand)
    hits = [r.to_dict() for r in resp.results]
    for index in dict.fromkeys(h.get("index") for h in hits):
        # citation counts, venues and links of the papers found (as /api/search gives them), from their own index
        with (cur.catalog if index is None or not cur.catalogs else cur.catalogs[index])() as con:
            cards = paper_cards(con, [h["paper_id"] for h in hits if h.get("index") == index])
        for h in hits:
            card = cards.get(h["paper_id"]) if h.get("index") == index else None
            if card is not None:
                h.update(citation_count=card.citation_count, venue=card.venue, links=asdict(card.links))
    first = resp.indexes[0]["index"] if resp.indexes else None
    named: list = []
    if may_cite_outside(cur.searcher.snap.manifest):  # (the first index's searcher, whose catalog it reads)
        with (cur.catalog if first is None or not cur.catalogs else cur.catalogs[first])() as con:
            named = cited_works_named(con, query, [h["paper_id"] for h in hits if h.get("index") == first])
    return answers.SearchAnswer(snapshot_id=resp.snapshot_id if resp.indexes else cur.snapshot_id, query=query,
                                queries=list(resp.queries), notes=list(resp.notes),
                                results=[answers.SearchHit.model_validate(h) for h in hits],
                                cited_works=[answers.NamedWork.model_validate(w.to_dict()) for w in named],
                                indexes=[answers.Index.model_validate(ix) for ix in resp.indexes] if resp.indexes else None)


def get_paper(cur, paper_id: str) -> answers.PaperAnswer:
    from pipeline.query.reading import paper_facts

    try:
        d = cur.searcher.paper(paper_id)
    except CitedWork as cited:  # a work the papers cite, outside the corpus: say which tool reads it
        raise UnknownPaper(f"{paper_id!r} is {cited.work_id}, a work the papers of snapshot {cur.snapshot_id} cite, "
                           f"not one of its papers: get_work tells what is known of it") from None
    rec: dict[str, Any] = d["paper"]
    with cur.catalog() as con:
        facts = paper_facts(con, rec["paper_id"]).to_dict()
    metrics = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d["metrics"].items()}
    authors = facts.pop("bylines") or [{"name": n} for n in rec.get("authors") or []]
    return answers.PaperAnswer.model_validate({
        **facts, "snapshot_id": cur.snapshot_id, "external_id": rec.get("external_id"), "source": rec.get("source"),
        "title": rec.get("title"), "authors": authors, "year": rec.get("year"), "abstract": d.get("abstract"),
        "passages": rec.get("n_passages"), "figures": d["figures"], "metrics": metrics})


def get_work(cur, work_id: str, *, top: int) -> answers.WorkAnswer:
    from pipeline.query.paper_detail import work_detail
    from pipeline.query.records import resolve_ids

    with cur.catalog() as con:
        (kind, found), = resolve_ids(con, [work_id])  # UnknownPaper
        if kind == "paper":
            raise UserError(f"{work_id!r} is the corpus paper {found}: get_paper tells what is known of it")
        d = work_detail(con, found, top=top)
    return answers.WorkAnswer.model_validate({
        **d["work"], "snapshot_id": cur.snapshot_id, "reference_count": d["references"]["total"],
        "cited_by_count": d["cited_by"]["total"], "printed_total": d["printed"]["total"], "printed": d["printed"]["items"],
        "citing": d["cited_with"]["citing"], "cited_with": d["cited_with"]["items"]})


def get_citations(cur, paper_id: str, direction: str, *, limit: int, offset: int, sort: str | None) -> answers.CitationsAnswer:
    from pipeline.query import reading

    with cur.catalog() as con:
        pid, _ = reading.resolve(con, paper_id)  # UnknownPaper
        if direction == "references":
            page = reading.references(con, paper_id, limit=limit, offset=offset, sort=sort or "order")
        else:
            page = reading.cited_by(con, paper_id, limit=limit, offset=offset, sort=sort or "citations")
    return answers.CitationsAnswer.model_validate({**page.to_dict(), "snapshot_id": cur.snapshot_id,
                                                   "paper_id": pid or paper_id, "direction": direction})


def get_passages(cur, paper_id: str, *, section: str | None, page_from: int | None, page_to: int | None,
                 limit: int, offset: int) -> answers.PassagesAnswer:
    from pipeline.query.passages import paper_passages

    with cur.catalog() as con:
        page = paper_passages(con, paper_id, section=section, page_from=page_from, page_to=page_to,
                              limit=limit, offset=offset)
    return answers.PassagesAnswer.model_validate({"snapshot_id": cur.snapshot_id, **page.to_dict()})


def related(cur, paper_id: str, *, k: int) -> answers.RelatedAnswer:
    paper = cur.searcher.paper(paper_id)["paper"]  # UnknownPaper
    items = cur.searcher.related(paper["paper_id"], k=k)
    return answers.RelatedAnswer(snapshot_id=cur.snapshot_id, paper_id=paper["paper_id"], title=paper.get("title"),
                                 related=[answers.RelatedPaper.model_validate(r.to_dict()) for r in items])


def recommend(cur, positive: list[str], negative: list[str], *, k: int) -> answers.RecommendAnswer:
    resp = cur.searcher.recommend(list(positive), list(negative), k=k)
    return answers.RecommendAnswer.model_validate({**resp.to_dict(), "snapshot_id": cur.snapshot_id})


def citation_path(cur, source: str, target: str, *, max_length: int, limit: int) -> answers.PathAnswer:
    from pipeline.query.paths import shortest_paths

    with cur.catalog() as con:
        res = shortest_paths(con, source, target, max_length=max_length, limit=limit)
    res.snapshot_id = cur.snapshot_id
    return answers.PathAnswer.model_validate(res.to_dict())


def export(cur, paper_ids: list[str], fmt: str) -> answers.ExportAnswer:
    from pipeline.exports import render
    from pipeline.query.records import bib_records

    with cur.catalog() as con:
        records = bib_records(con, list(paper_ids))  # UnknownPaper names every unknown id
    return answers.ExportAnswer(snapshot_id=cur.snapshot_id, format=fmt, count=len(records),
                                text=render(fmt, records))


def ask(cur, settings, question: str, *, k: int, use_llm: bool) -> answers.AskAnswer:
    from pipeline.query.ask import ask as ask_question

    found = ask_question(cur.multi or cur.searcher, settings, question, k=k, use_llm=use_llm)
    return answers.AskAnswer.model_validate({**found.to_dict(), "snapshot_id": found.snapshot_id or cur.snapshot_id})


def public_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The snapshot's manifest without filesystem paths (where the warehouse lives is no client's business)."""
    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()
                    if not (k == "path" or k.endswith(("_path", "_dir")) or (isinstance(v, str) and v.startswith("/")))}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean(manifest)
