"""Batch search into a standard TREC run file (``paperkb search --queries Q --run-out RUN``), written by
:mod:`pipeline.evaluation.trec` with the same tie rule as ``paperkb eval``'s runs."""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.errors import UserError

log = logging.getLogger(__name__)


def search_trec_run(searcher, queries: dict[str, str], path: Path, k: int = 100, tag: str = "paperkb", **kwargs) -> int:
    """Search every query and write the run; returns the number of lines. Bad queries are skipped and logged."""
    from pipeline import progress
    from pipeline.evaluation.trec import ranked_run, write_trec_run

    if not queries:
        raise UserError("the queries file holds no queries")
    if any(c.isspace() for c in tag) or not tag:
        raise UserError("--tag must be one word")
    from pipeline.query.multi import run_docid

    judged = (getattr(searcher, "names", None) or [None])[0]  # several indexes: the first one's docnos stay bare
    ranked: dict[str, list[tuple[str, float]]] = {}
    skipped = 0
    with progress.task("search: queries", total=len(queries), unit="queries") as bar:
        for qid, text in queries.items():
            try:
                resp = searcher.search(text, k=k, **kwargs)
            except UserError as exc:
                if "query" not in str(exc):
                    raise
                skipped += 1
                log.warning("query %s skipped: %s", qid, exc)
            else:
                ranked[qid] = [(run_docid(r, judged), float(r.score)) for r in resp.results]
            bar.advance()
    run = ranked_run(ranked)
    write_trec_run(run, path, tag)
    if skipped:
        log.warning("%d of %d queries skipped (empty or too long)", skipped, len(queries))
    return sum(len(docs) for docs in run.values())
