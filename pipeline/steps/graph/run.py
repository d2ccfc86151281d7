"""``run_graph``: the step (``paperkb graph``) around the pure parts: PageRank, the power-law fit and weights, the
CCBC related lists, written to DuckDB in one transaction; and the default meter of its stages."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from datetime import datetime, timezone

import numpy as np

from pipeline import catalog_changes, progress
from pipeline.steps.catalog import part_starts
from pipeline.steps.graph.related import related_top_k
from pipeline.steps.graph.tables import (degrees_changed, incoming_table, load_graph, previous_run, replace_lists,
                                         replace_rows, update_incoming)
from pipeline.steps.graph.weights import fit_powerlaw, survival_weights
from pipeline.steps.pagerank import PageRankJob
from pipeline.steps.related_plan import change_share, plan_related
from pipeline.writer_lock import writes

log = logging.getLogger(__name__)


class StageTimer:
    """Default meter: wall time per stage (the benchmark passes one that also samples memory)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - t0, 3)

    def keep(self, name: str, obj) -> None:  # the benchmark keeps the igraph Graph
        pass


@writes("graph")
def run_graph(settings, meter=None, *, full: bool = False) -> dict:
    """``paperkb graph``: PageRank, power-law fit and weights, CCBC related papers -> DuckDB.

    Replaces ``paper_metrics``, adds one ``powerlaw_fits`` row per run, and computes the related lists of every
    corpus paper (a full refresh: ``full``, or see :mod:`pipeline.steps.related_plan` for when) or of the papers the
    night changed and those whose turn it is, whose lists replace theirs (logged in ``_catalog_changes`` for the
    publish).
    """
    import pyarrow as pa

    from pipeline.warehouse import Warehouse

    meter = meter or StageTimer()
    with Warehouse(settings) as wh:
        wh.init()
        with wh.run("graph") as run:
            with meter.stage("pdf_citations"), wh.transaction():
                from pipeline.steps.pdf_citations import link_references

                pdf_links = link_references(wh.con, run.run_id)
            with meter.stage("load"):
                data = load_graph(wh.con)
            meter.keep("adjacency", data.a)
            n, m = data.n, data.a.nnz
            corpus = data.corpus_rows
            log.info("graph: %d works (%d corpus papers), %d citations", n, len(corpus), m)
            indeg = np.bincount(data.a.indices, minlength=n).astype(np.int64)
            outdeg = np.diff(data.a.indptr).astype(np.int64)
            previous = previous_run(wh.con, part_starts(settings, "related"))
            work_id_array = pa.array(data.work_ids, pa.string())
            moved = degrees_changed(wh.con, work_id_array, indeg, outdeg) if previous.top_k is not None else 2 * m
            change = change_share(moved, 2 * m)
            plan = plan_related(data.paper_ids, corpus, indeg, outdeg, previous, settings.graph_top_k,
                                settings.graph_related_refresh_runs, force_full=full, change=change,
                                refresh_change=settings.graph_related_refresh_change,
                                incoming_rows=settings.graph_related_incoming_rows)
            if plan.full:
                log.info("graph: related lists of all %d corpus papers (a full refresh: %s)", len(corpus), plan.reason)
            else:
                log.info("graph: the citation links changed by %.2f%% since the last run: related lists of %d new or "
                         "changed paper(s) and of %d in turn (every list before the links change by %g%%%s), of %d",
                         100 * change, plan.changed, len(plan.rows) - plan.changed,
                         100 * settings.graph_related_refresh_change,
                         "".join([f", and before {settings.graph_related_incoming_rows:,} newer entries name it"
                                  if settings.graph_related_incoming_rows else "",
                                  f", and at least every {settings.graph_related_refresh_runs} runs"
                                  if settings.graph_related_refresh_runs else ""]), len(corpus))
            # a large graph's PageRank runs in a child process while the fit and CCBC run here (pagerank.py)
            pr_job = PageRankJob(data.a, settings.graph_damping, settings.graph_pagerank_process_edges)
            try:
                if pr_job.in_process:
                    with meter.stage("pagerank"):
                        pr = pr_job.result()
                with meter.stage("fit"):
                    c = np.maximum(data.reported, indeg)
                    fit, fit_obj = fit_powerlaw(c, discrete=settings.graph_powerlaw_discrete,
                                                min_n=settings.graph_powerlaw_min_n, xmin=settings.graph_powerlaw_xmin)
                    w = survival_weights(c, fit_obj)
                with meter.stage("ccbc"), progress.task("graph: related papers (CCBC)", len(plan.rows), "papers") as bar:
                    rel = related_top_k(data.a, w, plan.rows, k=settings.graph_top_k,
                                        max_block_nnz=settings.graph_block_nnz, hub_citers=settings.graph_hub_citers,
                                        progress=bar.advance)
                if not pr_job.in_process:
                    with meter.stage("pagerank_wait"):  # what is left of the child's build and PageRank
                        pr = pr_job.result()
            finally:
                pr_job.close()
            with meter.stage("write"):
                work_ids = np.asarray(data.work_ids, dtype=object)
                paper_ids = np.asarray(data.paper_ids, dtype=object)
                metrics = pa.table({
                    "work_id": work_id_array,
                    "paper_id": pa.array(data.paper_ids, pa.string()),
                    "pagerank": pr,
                    "citation_count": c.astype(np.int32),
                    "in_degree": indeg.astype(np.int32),
                    "out_degree": outdeg.astype(np.int32),
                    "weight": w,
                    "run_id": pa.array([run.run_id] * n, pa.string()),
                })
                related = pa.table({
                    "paper_id": pa.array(paper_ids[rel.row].tolist(), pa.string()),
                    "rank": rel.rank,
                    "related_work_id": pa.array(work_ids[rel.col].tolist(), pa.string()),
                    "related_paper_id": pa.array(paper_ids[rel.col].tolist(), pa.string()),
                    "ccbc_weighted": rel.weighted,
                    "ccbc_naive": rel.naive,
                    "shared_references": rel.shared_refs,
                    "shared_citers": rel.shared_citers,
                    "cites": rel.cites,
                    "cited_by": rel.cited_by,
                    "run_id": pa.array([run.run_id] * len(rel), pa.string()),
                    "coupling": rel.coupling,
                })
                fit_row = fit.to_dict()
                with wh.transaction():
                    replace_rows(wh, "paper_metrics", "core/070_paper_metrics.sql", metrics)
                    if plan.full:
                        replace_rows(wh, "related", "core/072_related.sql", related)
                    else:
                        replace_lists(wh, plan.replace, related)
                    catalog_changes.record(wh.con, "related", None if plan.full else plan.replace)
                    incoming = incoming_table(rel, plan.changed_rows if plan.changed_rows is not None else
                                              np.zeros(0, np.int64), work_ids, paper_ids, run.run_id)
                    dropped = update_incoming(wh, incoming)
                    related_rows = (wh.con.execute("SELECT count(*) FROM related").fetchone() or (0,))[0]
                    cols = ["run_id", "created_at"] + list(fit_row)
                    wh.con.execute(
                        f"INSERT INTO powerlaw_fits ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                        [run.run_id, datetime.now(timezone.utc)] + list(fit_row.values()))
            run.count("in", n)
            run.count("edges", m)
            run.count("corpus_papers", len(corpus))
            run.count("out", n)
            run.count("related", len(rel))
            run.count("related_papers", len(plan.rows))
            run.count("related_changed", plan.changed)
            run.count("related_full", int(plan.full))
            run.count("related_top_k", settings.graph_top_k)
            run.count("degrees_changed", moved)  # over 2 * edges: the change (related_plan.change_share)
            run.count("related_owed_milli", round(1000 * plan.owed))  # the sweep's lists carried to the next run
            run.count("related_incoming", incoming.num_rows)
            run.count("related_incoming_dropped", dropped)
            run.count("rejected", 0)
    summary = {
        "run_id": run.run_id, "works": n, "citations": m, "corpus_papers": int(len(corpus)),
        "metrics": n, "related": int(related_rows), "related_written": int(len(rel)),
        "related_papers": int(len(plan.rows)), "related_changed": plan.changed, "related_full": plan.full,
        "links_changed": round(change, 6),  # related_plan.change_share: what moved the sweep
        "related_incoming": int(incoming.num_rows), "related_incoming_dropped": int(dropped),
        "powerlaw": fit.to_dict(), "pdf_citations": pdf_links,
        "seconds": dict(getattr(meter, "seconds", {})), "pagerank": pr_job.info,
    }
    pl = summary["powerlaw"]
    log.info("graph: %d works, %d citations, %d corpus papers -> %d related rows (%d written: %s); power law %s "
             "(xmin=%s, alpha=%s)", n, m, len(corpus), related_rows, len(rel),
             "a full refresh" if plan.full else f"{plan.changed} new or changed papers, {len(plan.rows) - plan.changed} due",
             pl["status"], pl["xmin"], None if pl["alpha"] is None else round(pl["alpha"], 3))
    return summary
