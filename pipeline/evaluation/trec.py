"""TREC run and qrels files, the format ``trec_eval``, Pyserini and ir-measures read.

Runs: ``qid Q0 docid rank score tag`` (docid = the paper's external id, as Pyserini writes them); qrels:
``qid 0 docid gain``. Every run paperkb writes (``paperkb eval`` and ``paperkb search --queries``) goes
through :func:`ranked_run`, so ties keep paperkb's order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pipeline.errors import UserError

Run = dict[str, dict[str, float]]  # {qid: {docid: score}}
Qrels = dict[str, dict[str, int]]  # {qid: {docid: gain}}


def ranked_run(ranked: Mapping[str, list[tuple[str, float]]]) -> Run:
    """Turn ranked lists into a run whose scores strictly follow the ranks.

    ``trec_eval`` (and ir-measures) order by score and break ties by docid, which would silently
    reorder equal-score results; ties and NaNs are nudged down so the evaluated order is ours.
    """
    run: Run = {}
    for qid, items in ranked.items():
        docs: dict[str, float] = {}
        prev = None
        for docid, score in items:
            if docid in docs:
                continue  # a paper appears once per query
            s = float(score)
            if s != s:  # NaN
                s = prev - 1e-6 if prev is not None else 0.0
            if prev is not None and s >= prev:
                s = prev - 1e-6 * max(1.0, abs(prev))
            docs[docid] = s
            prev = s
        run[qid] = docs
    return run


def write_trec_run(run: Run, path: Path | str, tag: str) -> Path:
    """``qid Q0 docid rank score tag`` lines, best first per query."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = "_".join(tag.split()) or "paperkb"
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for qid in sorted(run, key=_qid_key):
            for rank, (docid, score) in enumerate(sorted(run[qid].items(), key=lambda kv: -kv[1]), 1):
                fh.write(f"{qid} Q0 {docid} {rank} {score!r} {tag}\n")  # repr: exact round trip, ties stay broken
    tmp.replace(path)  # a reader never sees half a run
    return path


def read_trec_run(path: Path | str) -> Run:
    """A run file (``.gz`` too) as ``{qid: {docid: score}}``, read as ir-measures reads it (blank lines skipped, six
    fields a line); a malformed line is a ``UserError``."""
    import gzip

    run: Run = {}
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                qid, _, docid, _, score, _ = line.split()
                run.setdefault(qid, {})[docid] = float(score)
            except ValueError as exc:
                raise UserError(f"{path}: not a TREC run (qid Q0 docid rank score tag per line): line {n}: {exc}") from None
    return run


def write_trec_qrels(qrels: Qrels, path: Path | str) -> Path:
    """``qid 0 docid gain`` lines (what ``trec_eval`` and Pyserini read)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for qid in sorted(qrels, key=_qid_key):
            for docid, gain in sorted(qrels[qid].items(), key=lambda kv: _qid_key(kv[0])):
                fh.write(f"{qid} 0 {docid} {gain}\n")
    return path


def _qid_key(q: str):
    return (0, int(q), "") if q.isdigit() else (1, 0, q)
