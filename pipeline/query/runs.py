"""Batch search into a standard TREC run file: ``qid Q0 docid rank score tag`` (docid = external id)."""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.errors import UserError

log = logging.getLogger(__name__)


def trec_lines(qid: str, resp, tag: str) -> list[str]:
    """One line per result; ranks are 1.., scores strictly decreasing in rank order (trec_eval sorts by score)."""
    lines = []
    prev = None
    for rank, r in enumerate(resp.results, start=1):
        score = float(r.score)
        if prev is not None and score >= prev:  # ties would be re-ordered by docid in trec_eval: keep our order
            score = prev - 1e-6
        prev = score
        docid = r.external_id or r.paper_id
        lines.append(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}")
    return lines


def write_trec_run(searcher, queries: dict[str, str], path: Path, k: int = 100, tag: str = "paperkb", **kwargs) -> int:
    """Search every query and write the run; returns the number of lines. Bad queries are skipped and logged."""
    if not queries:
        raise UserError("the queries file holds no queries")
    if any(c.isspace() for c in tag) or not tag:
        raise UserError("--tag must be one word")
    from rich.progress import Progress

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    n = skipped = 0
    import sys

    with open(tmp, "w") as out, Progress(transient=True, disable=not sys.stderr.isatty()) as progress:
        task = progress.add_task("searching", total=len(queries))
        for qid, text in queries.items():
            try:
                resp = searcher.search(text, k=k, **kwargs)
            except UserError as exc:
                if "query" not in str(exc):
                    raise
                skipped += 1
                log.warning("query %s skipped: %s", qid, exc)
                progress.advance(task)
                continue
            for line in trec_lines(qid, resp, tag):
                out.write(line + "\n")
                n += 1
            progress.advance(task)
    tmp.replace(path)
    if skipped:
        log.warning("%d of %d queries skipped (empty or too long)", skipped, len(queries))
    return n
