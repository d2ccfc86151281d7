"""Semantic Scholar in bulk through the S2 Datasets API (issue 14): ``s2_mode = datasets``.

First run (no release loaded, watermark ``s2_datasets`` empty): the release ``s2_datasets_release``
('latest' = the newest S2 lists) is checked against the release list and its dataset list, the
download links of the ``papers`` and ``citations`` datasets are asked, and every file lands in the raw
zone (``pipeline.sources.s2.datasets``). Later runs ask the diffs from the loaded release to the target
one and download their update and delete files. Only then is DuckDB opened: it reads the gzipped JSON
lines straight from the raw zone (``sql/staging/s2_datasets_formats.sql``) and keeps only what touches
the corpus, in three passes over the files (``s2_datasets_corpus.sql``: corpus papers matched on any id
S2 resolves; ``s2_datasets_citations.sql``: edges with a corpus end; ``s2_datasets_neighbours.sql``: the
papers on the other end), then upserts the same core tables the Graph API path fills (``works``,
``citations``, ``work_authors``, ``s2_authors``, ``papers``' S2 columns) and records the loaded release
in the watermark ``s2_datasets``. A diff applies its update files like a load, then its delete files
(papers by corpus id, edges by citation id through ``s2_dataset_citations``).

Corpus papers the release does not hold (new arXiv papers, say) stay pending; ``run_enrich`` asks the
Graph API (batch mode) for them in the same run.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipeline.errors import UserError
from pipeline.raw import RawZone
from pipeline.settings import SQL_DIR, Settings
from pipeline.sources.s2.client import SOURCE
from pipeline.sources.s2.datasets import S2DatasetsClient, file_name
from pipeline.warehouse import UpsertStats, Warehouse

log = logging.getLogger(__name__)

WATERMARK = "s2_datasets"
DATASETS = ("papers", "citations")


def _arrow(wh: Warehouse, relpath: str, params: dict[str, Any] | None = None):
    """The rows of a SELECT under sql/ as an Arrow table (the staging layer handed to ``upsert``)."""
    return wh.con.sql((SQL_DIR / relpath).read_text(encoding="utf-8"), params=params).to_arrow_table()


def _files(client: S2DatasetsClient, urls: list[str], reldir: str, params: dict[str, Any]) -> list[str]:
    return [str(client.download(u, f"{reldir}/{file_name(u)}", {**params, "file": file_name(u)})) for u in urls]


def fetch_release(client: S2DatasetsClient, release: str) -> list[dict[str, Any]]:
    """The files of a whole release: one step, updates only."""
    info = client.release(release)
    names = {d.get("name") for d in info.get("datasets") or [] if isinstance(d, dict)}
    missing = [d for d in DATASETS if names and d not in names]
    if missing:
        raise UserError(f"Semantic Scholar release {release} has no dataset {', '.join(missing)}; "
                        "pick another PAPERKB_S2_DATASETS_RELEASE")
    step: dict[str, Any] = {"from": None, "to": release, "update": {}, "delete": {}}
    for ds in DATASETS:
        urls = client.download_links(release, ds)
        step["update"][ds] = _files(client, urls, f"datasets/release/{release}/{ds}",
                                    {"kind": "datasets_file", "release": release, "dataset": ds})
    return [step]


def fetch_diffs(client: S2DatasetsClient, start: str, end: str) -> list[dict[str, Any]]:
    """The files of every diff from ``start`` to ``end``, both datasets, in release order."""
    steps: dict[tuple[str, str], dict[str, Any]] = {}
    for ds in DATASETS:
        for diff in client.diffs(start, end, ds):
            key = (str(diff.get("from_release")), str(diff.get("to_release")))
            step = steps.setdefault(key, {"from": key[0], "to": key[1], "update": {}, "delete": {}})
            reldir = f"datasets/diff/{key[0]}_to_{key[1]}/{ds}"
            params = {"kind": "datasets_diff_file", "from": key[0], "to": key[1], "dataset": ds}
            step["update"][ds] = _files(client, list(diff.get("update_files") or []), f"{reldir}/update", params)
            step["delete"][ds] = _files(client, list(diff.get("delete_files") or []), f"{reldir}/delete", params)
    return [steps[k] for k in sorted(steps, key=lambda k: k[1])]


def apply_step(wh: Warehouse, step: dict[str, Any], *, fetched_at: datetime, raw_root: str) -> dict[str, Any]:
    """Load one release or one diff (its update files, then its delete files) into the core tables."""
    wh.sql_file("staging/s2_datasets_formats.sql")
    papers, citations = step["update"].get("papers") or [], step["update"].get("citations") or []
    out: dict[str, Any] = {"release": step["to"], "files": sum(len(v) for v in step["update"].values())
                           + sum(len(v) for v in step["delete"].values())}
    works, edges = UpsertStats(), UpsertStats()
    done: list[str] = []
    if papers:
        wh.sql_file("staging/s2_datasets_corpus.sql", {"files": papers}).fetchall()
    else:
        wh.con.execute("CREATE OR REPLACE TEMP TABLE _ds_corpus AS SELECT * FROM (SELECT NULL::BIGINT AS corpusid, "
                       "NULL::VARCHAR AS sha, NULL::VARCHAR AS paper_id) WHERE false").fetchall()
    if citations:
        wh.sql_file("staging/s2_datasets_citations.sql", {"files": citations}).fetchall()
    else:
        wh.con.execute("CREATE OR REPLACE TEMP TABLE _ds_citations AS SELECT NULL::BIGINT AS citationid, "
                       "NULL::BIGINT AS citingcorpusid, NULL::BIGINT AS citedcorpusid, NULL::BOOLEAN AS isinfluential, "
                       "NULL::VARCHAR[] AS intents WHERE false").fetchall()
    if papers:
        wh.sql_file("staging/s2_datasets_neighbours.sql", {"files": papers}).fetchall()
        params = {"fetched_at": fetched_at, "raw_root": raw_root}
        works = wh.upsert("works", _arrow(wh, "staging/s2_datasets_works.sql", params), ["work_id"])
        byline = _arrow(wh, "staging/s2_datasets_authors.sql")
        if byline.num_rows:
            wh.upsert("work_authors", byline, ["work_id", "position"])
            wh.con.register("_ds_byline", byline)
            wh.upsert("s2_authors", wh.con.sql(
                "SELECT author_id, any_value(name) AS name FROM _ds_byline WHERE author_id IS NOT NULL GROUP BY ALL"
            ).to_arrow_table(), ["author_id"])
            wh.con.unregister("_ds_byline")
        done = [r[0] for r in wh.con.execute("SELECT DISTINCT paper_id FROM _ds_corpus WHERE paper_id IS NOT NULL").fetchall()]
    else:
        wh.con.execute("CREATE OR REPLACE TEMP TABLE _ds_neighbours AS SELECT NULL::BIGINT AS corpusid, "
                       "NULL::VARCHAR AS sha WHERE false").fetchall()
    staged_edges = wh.con.execute("SELECT count(*) FROM _ds_citations").fetchall()[0][0]
    rows = _arrow(wh, "staging/s2_datasets_edges.sql", {"fetched_at": fetched_at})
    if rows.num_rows:
        edges = wh.upsert("citations", rows.drop_columns(["citation_id"]), ["citing_work_id", "cited_work_id"])
        wh.upsert("s2_dataset_citations", rows.select(["citation_id", "citing_work_id", "cited_work_id"]), ["citation_id"])
    out.update(corpus_papers=len(done), works=works, citations=edges, edges_unlinked=staged_edges - rows.num_rows)

    deleted_works = deleted_edges = 0
    if step["delete"].get("citations"):
        wh.sql_file("staging/s2_datasets_delete_citations.sql", {"files": step["delete"]["citations"]}).fetchall()
        deleted_edges += wh.sql_file_returning("citations", "core/merge/s2_datasets_unlink_citations.sql")
    if step["delete"].get("papers"):
        wh.sql_file("staging/s2_datasets_delete_papers.sql", {"files": step["delete"]["papers"]}).fetchall()
        deleted_edges += wh.sql_file_returning("citations", "core/merge/s2_datasets_unlink_works.sql")
        deleted_works = wh.sql_file_returning("works", "core/merge/s2_datasets_delete_works.sql")
    out.update(works_deleted=deleted_works, citations_deleted=deleted_edges)

    if done:  # ids and counts onto papers, as the Graph API path does
        import pyarrow as pa

        wh.con.register("s2_done", pa.table({"paper_id": pa.array(sorted(done), pa.string())}))
        try:
            out["papers_updated"] = wh.sql_file_returning("papers", "core/merge/s2_update_papers.sql")
        finally:
            wh.con.unregister("s2_done")
    return out


def sync_datasets(settings: Settings, raw: RawZone) -> dict[str, Any]:
    """Bring the warehouse to the target release: a full load the first time, the diffs afterwards.
    Returns a JSON-able summary (requests by kind, files, what was loaded)."""
    client = S2DatasetsClient(settings, raw)
    with Warehouse(settings) as wh:
        wh.init()
        loaded = wh.get_watermark(WATERMARK)
    releases = client.releases()
    if not releases:
        raise UserError("Semantic Scholar lists no dataset releases; check PAPERKB_S2_API_URL")
    wanted = settings.s2_datasets_release
    target = max(releases) if wanted == "latest" else wanted
    if target not in releases:
        raise UserError(f"Semantic Scholar has no dataset release {target!r} (the newest is {max(releases)}): "
                        "check PAPERKB_S2_DATASETS_RELEASE (a release id such as 2025-08-19, or 'latest')")
    summary: dict[str, Any] = {"loaded_before": loaded, "release": target}
    if loaded == target:
        steps: list[dict[str, Any]] = []
    elif loaded is None:
        steps = fetch_release(client, target)
    elif target < loaded:
        raise UserError(f"Semantic Scholar release {target} is older than the loaded release {loaded}; "
                        "PAPERKB_S2_DATASETS_RELEASE can only move forward")
    else:
        steps = fetch_diffs(client, loaded, target)
    summary["mode"] = "none" if not steps else ("full" if loaded is None else "diffs")
    fetched_at = datetime.now(timezone.utc).replace(microsecond=0)
    loaded_steps = []
    t0 = time.perf_counter()
    with Warehouse(settings) as wh, wh.transaction():
        raw_root = str(Path(raw.root).resolve() / "x")[:-1]
        for step in steps:
            loaded_steps.append(apply_step(wh, step, fetched_at=fetched_at, raw_root=raw_root))
        # the release reached: the target, or the last diff S2 listed when its list stops short of it
        reached = steps[-1]["to"] if steps else (loaded or target)
        wh.set_watermark(WATERMARK, reached)
    summary["release"] = reached
    summary.update(
        steps=[{**s, "works": vars(s["works"]), "citations": vars(s["citations"])} for s in loaded_steps],
        requests=sum(client.calls.values()), calls=dict(client.calls), files_from_raw=client.from_raw,
        bytes_downloaded=client.bytes, rate_wait_s=round(client.rate_wait_s, 3),
        load_s=round(time.perf_counter() - t0, 3))
    log.info("S2 datasets: %s", one_line(summary))
    return summary


def steps_from_raw(raw: RawZone) -> tuple[str | None, list[dict[str, Any]]]:
    """What the raw zone holds, as load steps: the newest release whose files were fetched, then the
    fetched diffs that follow it, chained from release to release. Returns (last release, steps)."""
    full: dict[str, dict[str, list[str]]] = {}
    diffs: dict[tuple[str, str], dict[str, Any]] = {}
    for e in raw.entries(SOURCE, prefix="datasets/"):
        p = e.params
        if p.get("kind") == "datasets_file":
            full.setdefault(p["release"], {}).setdefault(p["dataset"], []).append(str(raw.path(e)))
        elif p.get("kind") == "datasets_diff_file":
            key = (p["from"], p["to"])
            step = diffs.setdefault(key, {"from": key[0], "to": key[1], "update": {}, "delete": {}})
            part = "delete" if "/delete/" in e.path else "update"
            step[part].setdefault(p["dataset"], []).append(str(raw.path(e)))
    if not full:
        return None, []
    current = max(full)
    steps = [{"from": None, "to": current, "update": full[current], "delete": {}}]
    for key in sorted(diffs, key=lambda k: k[1]):
        if key[0] == current:
            steps.append(diffs[key])
            current = key[1]
    return current, steps


def replay_datasets(settings: Settings, raw: RawZone) -> dict[str, Any]:
    """``--replay``: load the newest release in the raw zone and the diffs after it, no network."""
    release, steps = steps_from_raw(raw)
    summary: dict[str, Any] = {"loaded_before": None, "release": release, "mode": "replay" if steps else "none",
                               "requests": 0, "calls": {}, "files_from_raw": sum(
                                   len(f) for st in steps for part in ("update", "delete") for f in st[part].values())}
    fetched_at = datetime.now(timezone.utc).replace(microsecond=0)
    loaded = []
    with Warehouse(settings) as wh:
        wh.init()
        summary["loaded_before"] = wh.get_watermark(WATERMARK)
        if steps and release:
            with wh.transaction():
                raw_root = str(Path(raw.root).resolve() / "x")[:-1]
                loaded = [apply_step(wh, st, fetched_at=fetched_at, raw_root=raw_root) for st in steps]
                wh.set_watermark(WATERMARK, release)
    summary["steps"] = [{**s, "works": vars(s["works"]), "citations": vars(s["citations"])} for s in loaded]
    log.info("S2 datasets: %s", one_line(summary))
    return summary


def one_line(s: dict[str, Any]) -> str:
    steps = s.get("steps") or []
    w = sum(x["works"]["inserted"] for x in steps)
    c = sum(x["citations"]["inserted"] for x in steps)
    return (f"datasets {s.get('mode')} -> release {s.get('release')} (was {s.get('loaded_before') or 'none'}): "
            f"{sum(x.get('corpus_papers', 0) for x in steps)} corpus papers, works +{w}, citations +{c}, "
            f"-{sum(x.get('citations_deleted', 0) for x in steps)} edges, -{sum(x.get('works_deleted', 0) for x in steps)} works; "
            f"{s.get('requests', 0)} requests ({s.get('calls', {}).get('file', 0)} files), "
            f"{s.get('files_from_raw', 0)} files reused from the raw zone")
