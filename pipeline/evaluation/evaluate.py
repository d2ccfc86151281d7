"""Retrieval evaluation over a published snapshot: TREC runs, qrels and trec_eval's measures.

``evaluate(settings, queries_path, qrels_path)`` runs every query through
:class:`pipeline.query.Searcher` once per configuration (the default and, with ``ablations=True``,
BM25 only, dense only, fusion only, the seed formula, each signal removed, expansion on/off and
title boosts on/off), writes each run as a standard TREC run file (``qid Q0 docid rank score tag``,
docid = the paper's external id, as Pyserini does) and scores it as ``trec_eval`` and ir-measures do
(nDCG@10, MAP, R@100: :mod:`pipeline.evaluation.measures`), so the numbers compare with the literature.

Pure pieces (run/qrels I/O, scoring, the ablation list) are separate from the searching, so tests
can check them on hand-made runs.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pipeline.errors import UserError
from pipeline.evaluation.qrels import align_query_ids, read_qrels, read_queries
from pipeline.evaluation.trec import Qrels, Run, ranked_run, write_trec_qrels, write_trec_run
from pipeline.progress import task as progress_task

log = logging.getLogger(__name__)

#: measures reported by ``paperkb eval`` (ir-measures' names)
MEASURE_NAMES = ("nDCG@10", "AP", "R@100")
#: results fetched per query: deep enough for R@100
RUN_DEPTH = 100



@dataclass(frozen=True)
class Ablation:
    """One evaluated configuration: a row name and the keyword arguments for ``Searcher.search``."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""


def ablations(signal_names: Iterable[str], full: bool = True) -> list[Ablation]:
    """The configurations to evaluate, default first.

    ``full=False`` gives the three rows the quality target is stated against (BM25 only, dense only,
    default). ``signal_names`` are the signals the default configuration scores with (for the
    "minus X" rows); signals with weight 0 in the default are skipped by the caller.
    """
    rows = [
        Ablation("default", {}, "the default configuration"),
        Ablation("bm25 only", {"config": "bm25", "expand": "off"}, "rank by the BM25 score alone, no expansion"),
        Ablation("dense only", {"config": "dense", "expand": "off"}, "rank by query-passage cosine alone, no expansion"),
    ]
    if not full:
        return rows
    rows += [
        Ablation("fusion only", {"config": "fusion", "expand": "off"}, "rank by the candidate fusion score alone, no expansion"),
        Ablation("seed formula", {"config": "seed"}, "0.5 ck + 0.3 doc + 0.1 abs + 0.1 fig + 0.2 log(1+pr)"),
    ]
    rows += [Ablation(f"- {s}", {"weights": {s: 0.0}}, f"default with signal {s} weighted 0") for s in signal_names]
    rows += [
        Ablation("expansion off", {"expand": "off"}, "no query expansion"),
        Ablation("expansion prf", {"expand": "prf"}, "offline pseudo-relevance-feedback expansion (a sub-query)"),
        Ablation("expansion rm3", {"expand": "rm3"}, "offline RM3 feedback on the lexical side (the rm3 signal)"),
        Ablation("title boosts on", {"title_boost": True}, "design's title-match boosts added"),
        Ablation("title boosts off", {"title_boost": False}, "no title boosts"),
    ]
    return rows


# ---- scoring -----------------------------------------------------------------------------------


def score_run(qrels: Qrels, run: Run) -> dict[str, float]:
    """Mean nDCG@10, MAP (AP) and R@100 over the judged queries, as ``trec_eval`` and ir-measures compute them
    (:mod:`pipeline.evaluation.measures`).

    Judged queries missing from the run count as 0 (``trec_eval -c``), so a configuration cannot
    look better by answering fewer queries.
    """
    from pipeline.evaluation.measures import per_query as measure_per_query

    per_query = measure_per_query(MEASURE_NAMES, qrels, run)
    judged = [q for q, docs in qrels.items() if any(g > 0 for g in docs.values())]
    if not judged:
        raise UserError("the qrels judge no document relevant")
    return {name: sum(per_query[name].get(q, 0.0) for q in judged) / len(judged) for name in per_query}


# ---- evaluating a snapshot ----------------------------------------------------------------------


@dataclass
class EvalRow:
    name: str
    description: str
    measures: dict[str, float]
    queries: int
    seconds: float
    run_path: str | None = None
    error: str | None = None


def load_topics(queries_path: Path | str, qrels_path: Path | str, fmt: str | None = None) -> tuple[dict[str, str], Qrels, list[str]]:
    """Queries restricted to the judged ones, the qrels, and notes for the user."""
    qrels = read_qrels(qrels_path, fmt)
    queries, note = align_query_ids(read_queries(queries_path, fmt), qrels)
    notes = [note] if note else []
    judged = {q: t for q, t in queries.items() if q in qrels}
    if len(judged) < len(queries):
        notes.append(f"{len(judged)} of {len(queries)} queries have judgements; evaluating those")
    return judged, qrels, notes


def clip_queries(queries: Mapping[str, str], max_chars: int) -> tuple[dict[str, str], list[str]]:
    """Cut queries longer than the searcher's limit at the last space before it (CISI has a 1,462-char one)."""
    out, cut = {}, []
    for qid, text in queries.items():
        text = " ".join(text.split())
        if len(text) > max_chars:
            head = text[:max_chars]
            text = head.rsplit(" ", 1)[0] if " " in head else head
            cut.append(qid)
        out[qid] = text
    return out, cut


def run_searcher(searcher, queries: Mapping[str, str], depth: int = RUN_DEPTH, advance=None, **kwargs) -> Run:
    """Search every query with ``Searcher.search(text, k=depth, **kwargs)``; docid = external id (several
    indexes: prefixed with the index's name but for the first index's, the one the qrels judge);
    ``advance(1)`` after each query (a progress bar)."""
    from pipeline.query.multi import run_docid

    judged = (getattr(searcher, "names", None) or [None])[0]
    ranked: dict[str, list[tuple[str, float]]] = {}
    for qid, text in queries.items():
        resp = searcher.search(text, k=depth, **kwargs)
        ranked[qid] = [(run_docid(r, judged), r.score) for r in resp.results]
        if advance is not None:
            advance(1)
    return ranked_run(ranked)


def evaluate(
    settings,
    queries_path: Path | str,
    qrels_path: Path | str,
    fmt: str | None = None,
    with_ablations: bool = False,
    snapshot_id: str | Sequence[str] | None = None,
    run_dir: Path | str | None = None,
    progress=None,
    normalisation: str | None = None,
) -> dict:
    """Evaluate the default configuration (and ablations) of a snapshot; returns a JSON-able summary.

    Runs go to ``run_dir`` (default ``<warehouse>/eval/<snapshot id>/``) as ``<row>.trec`` plus the
    qrels as ``qrels.trec``, so any row can be re-scored with ``trec_eval`` or Pyserini.

    Several snapshots (``snapshot_id`` a list of ``[NAME=]WHERE``, :func:`pipeline.query.multi.open_multi`):
    the merged ranking is evaluated; the qrels judge the first one's papers, the others' count as not relevant.
    """
    from pipeline.query import Searcher, open_snapshot

    queries, qrels, notes = load_topics(queries_path, qrels_path, fmt)
    queries, cut = clip_queries(queries, int(getattr(settings, "query_max_chars", 1000) or 1000))
    if cut:
        notes.append(f"{len(cut)} queries longer than the search limit were cut at a word boundary ({', '.join(cut[:5])})")
    settings = _single_thread_encoder(settings)
    specs = [snapshot_id] if isinstance(snapshot_id, str) else list(snapshot_id or [])
    searcher: Any
    if len(specs) > 1:
        from pipeline.query.multi import open_multi

        searcher = open_multi(settings, specs, normalisation=normalisation)
        snap_id = searcher.snapshot_id
    else:
        if normalisation is not None:
            raise UserError("--normalisation needs several --snapshot")
        snap = open_snapshot(settings, specs[0] if specs else None)
        searcher = Searcher(snap, settings)
        snap_id = str(getattr(snap, "snapshot_id", None) or getattr(snap, "id", None) or Path(getattr(snap, "path", "snapshot")).name)
    out_dir = Path(run_dir) if run_dir else Path(settings.warehouse) / "eval" / snap_id
    write_trec_qrels(qrels, out_dir / "qrels.trec")

    first_text = next(iter(queries.values()))
    probe = searcher.search(first_text, k=1)
    # "- X" rows for the signals the default actually weighs (a 0-weight signal's row would equal default)
    weights = getattr(probe, "weights", None) or {}
    signal_names = [s for s, w in weights.items() if w] or list(probe.results[0].signals if probe.results else {})
    rows: list[EvalRow] = []
    configs = ablations(signal_names, full=with_ablations)
    with progress_task("eval", total=len(configs) * len(queries), unit="searches") as bar:
        for i, ab in enumerate(configs):
            bar.update(completed=i * len(queries), description=f"eval: {ab.name} ({i + 1}/{len(configs)})")
            t0 = time.perf_counter()
            try:
                run = run_searcher(searcher, queries, advance=bar.advance, **ab.kwargs)
            except UserError as exc:  # a configuration this snapshot/searcher does not support
                rows.append(EvalRow(ab.name, ab.description, {}, 0, time.perf_counter() - t0, error=str(exc)))
                notes.append(f"{ab.name}: skipped ({exc})")
                continue
            path = write_trec_run(run, out_dir / f"{_slug(ab.name)}.trec", tag=f"paperkb_{_slug(ab.name)}")
            rows.append(EvalRow(ab.name, ab.description, score_run(qrels, run), len(run), time.perf_counter() - t0, str(path)))
            log.info("eval %s: %s", ab.name, _fmt_measures(rows[-1].measures))
            if progress:
                progress(i + 1, len(configs), ab.name)
    extra = {"indexes": searcher.indexes(), "normalisation": searcher.normalisation} if hasattr(searcher, "indexes") else {}
    return {
        "snapshot_id": snap_id,
        **extra,
        "queries": len(queries),
        "judged_queries": len(qrels),
        "measures": list(MEASURE_NAMES),
        "rows": [asdict(r) for r in rows],
        "run_dir": str(out_dir),
        "notes": notes,
    }


def _single_thread_encoder(settings):
    """``settings`` with one intra-op thread for query encoding during a batch evaluation (``query_torch_threads``
    1 where it is unset): the searcher applies it to the encoder it loads, torch or ONNX Runtime, so nothing
    imports torch here (a base install has none; a snapshot's own query encoder needs none).

    A query is a handful of tokens: torch's intra-op threads only add spin/wake costs, and on a
    busy 2-core machine they made one MiniLM query encode take 1-8 s instead of 0.1 s (measured).
    """
    if getattr(settings, "query_torch_threads", None) or not hasattr(settings, "model_copy"):
        return settings
    return settings.model_copy(update={"query_torch_threads": 1})


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name.replace("- ", "minus_")).strip("_")


def _fmt_measures(m: Mapping[str, float]) -> str:
    return " ".join(f"{k}={v:.4f}" for k, v in m.items())


def relative_to(summary: dict, base_rows: tuple[str, ...] = ("bm25 only", "dense only")) -> float | None:
    """Default nDCG@10 divided by the better of the base rows (the quality target's ratio)."""
    by = {r["name"]: r["measures"] for r in summary["rows"] if r["measures"]}
    bases = [by[b]["nDCG@10"] for b in base_rows if b in by]
    if "default" not in by or not bases or max(bases) <= 0:
        return None
    return by["default"]["nDCG@10"] / max(bases)


def summary_json(summary: dict) -> str:
    return json.dumps(summary, indent=2, sort_keys=False)
