"""Publish an immutable snapshot: build ``<id>.tmp/``, verify it, rename it, swap ``CURRENT``.

Stages (a crash at any point leaves the previous snapshot serving)::

    build     snapshots/<id>.tmp/{catalog.duckdb, catalog/, lancedb/, query_encoder/, bm25/, feeds/, manifest.json}
              readers never look here (catalog.duckdb + catalog/: views over Parquet partitions, those the
              previous snapshot holds hard-linked, see ``pipeline.steps.catalog``; lancedb/: Lance's
              immutable files hard-linked, see ``link_tree``; query_encoder/, bm25/: what readers would
              otherwise compute at open, see ``write_reader_files``; feeds/: each interest's new matching
              papers since CURRENT, see ``pipeline.feeds.write``)
    verify    counts match the warehouse, LanceDB tables + indexes open, probe queries answer,
              every file the manifest lists is there with its size (each sha256 taken from the file as written)
    rename    <id>.tmp -> <id>          complete but not yet CURRENT (rollback target)
    swap      CURRENT := <id>           os.replace of a one-line file: atomic
    retain    keep the newest ``snapshot_keep`` snapshots, CURRENT, any younger than ``snapshot_min_age_h``,
              and any a reader pins (a lease in ``snapshots/.pins/``, see ``pipeline.pins``)

Only one writer runs at a time on a warehouse, publish included (``pipeline.writer_lock``); an
abandoned ``*.tmp`` folder from a killed publish is removed by the next one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from pipeline import progress
from pipeline import snapshots as snap
from pipeline import writer_lock
from pipeline.errors import UserError
from pipeline.query.configs import weights_for
from pipeline.steps.catalog import FOLDER as CATALOG_FOLDER
from pipeline.steps.catalog import build_catalog, file_rows, require_warehouse
from pipeline.settings import Settings
from pipeline.warehouse import scalar

if TYPE_CHECKING:
    from lancedb.query import LanceVectorQueryBuilder

log = logging.getLogger(__name__)

LANCE_TABLES = ("chunks", "papers", "figures")
# the model stamp's fields a manifest carries (readers load the query encoder from them)
MODEL_KEYS = ("name", "query_model", "dim", "key", "doc_format", "truncate_dim", "max_seq_length", "path", "query_path",
              "backend", "precision")

StageHook = Callable[[str, Path], None]


def new_snapshot_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%dT%H%M%S}Z-{uuid.uuid4().hex[:4]}"


def _remove_abandoned(root: Path) -> list[str]:
    """Folders left by a publish or a retention that was killed (we hold the lock: none is live)."""
    from pipeline import pins

    removed = []
    for d in root.iterdir():
        if d.is_dir() and d.name.endswith((snap.TMP_SUFFIX, snap.DELETING_SUFFIX)):
            sid = d.name[: -len(snap.DELETING_SUFFIX)]
            if d.name.endswith(snap.DELETING_SUFFIX) and not (root / sid).exists() and pins.holders(root, sid):
                os.replace(d, root / sid)  # retention was killed before it could put back a pinned one
                continue
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    return removed


# ---- build ---------------------------------------------------------------------------------------------
def lancedb_model(settings: Settings) -> dict:
    """The model stamp of the working LanceDB's tables (one-line errors when a table is missing, or they were embedded
    with different models): what :func:`copy_lancedb` links into a snapshot."""
    import lancedb

    from pipeline.steps.embed import table_model, table_names

    src = settings.lancedb_dir
    if not src.is_dir():
        raise UserError(f"no LanceDB at {src}: run `paperkb embed` before `paperkb publish`")
    db = lancedb.connect(str(src))
    names = set(table_names(db))
    missing = [t for t in LANCE_TABLES if t not in names]
    if missing:
        raise UserError(f"LanceDB at {src} has no {', '.join(missing)} table: run `paperkb embed` first")
    models = {t: table_model(db.open_table(t)) for t in LANCE_TABLES}
    keys = {(m["key"], m["dim"]) for m in models.values()}
    if len(keys) != 1:
        raise UserError("LanceDB tables were embedded with different models: run `paperkb embed` again")
    return models["chunks"]


def copy_lancedb(settings: Settings, out: Path) -> None:
    """Link the working LanceDB into the snapshot (see ``link_tree``)."""
    linked = link_tree(settings.lancedb_dir, out)
    log.info("publish: LanceDB %d file(s) hard-linked, %d copied", linked["linked"], linked["copied"])


# Lance never rewrites these files in place: a new version writes new files, so a snapshot can share them.
IMMUTABLE_DIRS = ("data", "_deletions", "_indices")


def link_tree(src: Path, out: Path) -> dict[str, int]:
    """Copy ``src`` to ``out``, hard-linking Lance's immutable data, deletion and index files instead of
    copying them; small mutable metadata (_versions, _transactions, _latest.manifest) is copied. Falls back
    to a copy when the link fails (e.g. snapshots on another filesystem)."""
    done = {"linked": 0, "copied": 0}
    warned = False
    top = str(src)
    for dirpath, _dirs, names in os.walk(top):  # (strings, not a Path per file: thousands of files a night)
        rel_dir = os.path.relpath(dirpath, top)
        dest = os.path.normpath(os.path.join(out, rel_dir))
        os.makedirs(dest, exist_ok=True)
        immutable = any(part in IMMUTABLE_DIRS for part in rel_dir.split(os.sep))
        for n in names:
            if immutable:
                try:
                    os.link(os.path.join(dirpath, n), os.path.join(dest, n))
                    done["linked"] += 1
                    continue
                except OSError as e:
                    if not warned:
                        log.info("publish: cannot hard-link LanceDB files into the snapshot (%s): copying them", e)
                        warned = True
            shutil.copy2(os.path.join(dirpath, n), os.path.join(dest, n))
            done["copied"] += 1
    return done


# ---- verify --------------------------------------------------------------------------------------------
def _vector_query(table, vector) -> LanceVectorQueryBuilder:
    """A cosine nearest-neighbour query on ``table.vector`` (``search`` is typed for every query kind)."""
    return cast("LanceVectorQueryBuilder", table.search(vector, vector_column_name="vector")).distance_type("cosine")


PASSAGE_TABLES = ("chunks", "papers", "figures")  # what the passages, paper_meta and figure_legends marts read


def last_embed(settings: Settings) -> dict | None:
    """The counts the last embed run recorded (``run_log``: each LanceDB table's rows and each passage table's), when
    no write to the passages' tables came after it (the change log, :mod:`pipeline.catalog_changes`); None when that is
    not known. Read beside the catalog's write; :func:`embedded_counts` compares them with the catalog's."""
    import duckdb

    from pipeline import catalog_changes

    try:
        con = duckdb.connect(str(settings.db_path), read_only=True)
    except duckdb.Error:
        return None
    try:
        row = con.execute("SELECT counts FROM run_log WHERE step = 'embed' AND status = 'ok' "
                          "ORDER BY finished_at DESC LIMIT 1").fetchall()
        counts_then = json.loads(row[0][0]) if row and row[0][0] else {}
        seq = counts_then.get("journal_seq")
        db = con.execute("SELECT current_database()").fetchall()[0][0]
        if not isinstance(seq, int) or not catalog_changes.unchanged_since(con, PASSAGE_TABLES, seq, db):
            return None
        return counts_then
    except duckdb.Error:  # a warehouse of an older version (no run_log yet): count them
        return None
    finally:
        con.close()


def embedded_counts(counts_then: dict | None, counts: dict[str, int]) -> dict[str, int] | None:
    """The rows of each LanceDB table as the last embed run left them (:func:`last_embed`), when the passages' tables
    hold the rows they held then (``counts``: the catalog's; a write that escaped the log shows there): what the
    catalog's passages would count. None when that is not known (then :func:`verify_contents` counts them)."""
    if counts_then is None:
        return None
    want = {t: counts_then.get(f"lancedb_{t}") for t in PASSAGE_TABLES}
    if not all(isinstance(n, int) for n in want.values()) \
            or any(counts.get(t) != counts_then.get(f"warehouse_{t}") for t in PASSAGE_TABLES):
        return None
    return {t: int(n) for t, n in want.items() if n is not None}


def verify_contents(folder: Path, expected_counts: dict[str, int], embedded: dict[str, int] | None = None,
                    lance: tuple[dict[str, int], list[str]] | None = None, previous: Path | None = None) -> dict[str, int]:
    """Open the catalog and the LanceDB copy, compare counts, check indexes, run probe queries. ``embedded``: the
    LanceDB rows the passages give (:func:`embedded_counts`), else counted here over the catalog's passages (a scan
    of every passage's text). ``lance``: what :func:`check_lancedb` found, when it already ran. ``previous``: the
    snapshot whose ``catalog.duckdb`` this one links (the same views): then the tables' rows are counted from their
    files (:func:`pipeline.steps.catalog.file_rows`: a partition linked from it counts the rows it recorded), not
    through the views."""
    problems: list[str] = []
    if previous is not None and embedded is not None:
        got_counts = file_rows(folder, list(expected_counts), previous)
        want = dict(embedded)
    else:
        con = snap.open_catalog(folder)
        try:
            got_counts = {t: scalar(con, f'SELECT count(*) FROM "{t}"') for t in expected_counts}
            if embedded is not None:
                want = dict(embedded)
            else:
                passages, papers = con.execute("SELECT count(*), count(DISTINCT paper_id) FROM passages").fetchone() or (0, 0)
                want = {"chunks": passages, "papers": papers,
                        "figures": scalar(con, "SELECT count(*) FROM figure_legends")}
        finally:
            con.close()
    for t, n in expected_counts.items():
        if got_counts[t] != n:
            problems.append(f"catalog.{t}: {got_counts[t]} rows, warehouse has {n}")

    lance_counts, lance_problems = lance if lance is not None else check_lancedb(folder)
    for name, n in lance_counts.items():
        if name in want and want[name] != n:
            problems.append(f"lancedb.{name}: {n} rows, warehouse has {want[name]}: run `paperkb embed` first")
    problems += lance_problems
    if problems:
        raise UserError(f"snapshot verification failed: {problems[0]}" + (
            f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
    return {f"lancedb.{k}": v for k, v in lance_counts.items()}


def check_lancedb(folder: Path) -> tuple[dict[str, int], list[str]]:
    """The rows of the snapshot's LanceDB tables, and the problems found: no full-text index, a probe query (exact
    and through the index, vector and BM25) that misses."""
    import lancedb

    problems: list[str] = []
    db = lancedb.connect(str(folder / "lancedb"))
    lance_counts = {name: db.open_table(name).count_rows() for name in LANCE_TABLES}
    chunks = db.open_table("chunks")
    indexed = {c for ix in chunks.list_indices() for c in ix.columns}
    if lance_counts["chunks"] and "text" not in indexed:
        problems.append("lancedb.chunks has no full-text index on text")
    probes: list[Callable[[], str | None]] = []
    if lance_counts["chunks"]:
        row = chunks.search().limit(1).select(["chunk_id", "paper_id", "text", "vector"]).to_list()[0]

        def exact() -> str | None:
            # exact distance among its paper's chunks (prefiltered on the indexed paper_id: a brute-force scan of every
            # vector costs ~2 s at 1M chunks)
            hits = (_vector_query(chunks, row["vector"]).where(f"paper_id = '{snap.sql_quote(row['paper_id'])}'", prefilter=True)
                    .bypass_vector_index().limit(1).to_list())
            return None if hits and hits[0]["_distance"] <= 1e-3 else "probe vector query (exact) did not find its own chunk"

        def ann() -> str | None:
            # through the ANN index when there is one (approximate: the chunk must be among the top 10). One IVF
            # partition: the chunk's own vector lies in the partition nearest to it, and the default 20 cost twice the
            # probe's time (the index files are opened and read either way)
            hits = _vector_query(chunks, row["vector"]).nprobes(1).refine_factor(5).limit(10).to_list()
            return None if row["chunk_id"] in {h["chunk_id"] for h in hits} else \
                "probe vector query (index) did not find its own chunk"

        word = max((w.strip(".,;:()[]\"'") for w in (row["text"] or "").split()), key=len, default="")

        def bm25() -> str | None:
            return None if chunks.search(word, query_type="fts").limit(5).to_list() else \
                f"probe BM25 query {word!r} answered nothing"

        probes += [exact, ann] + ([bm25] if word else [])
    if lance_counts["papers"]:
        papers = db.open_table("papers")

        def paper_row() -> str | None:  # the papers table's vectors read (an error raises)
            papers.search().limit(1).select(["paper_id", "doc_vector"]).to_list()
            return None

        probes.append(paper_row)
    # at once: each opens its own index files (the cold reads are most of a probe's time), and LanceDB runs them
    # in Rust without the GIL
    with ThreadPoolExecutor(max_workers=max(1, len(probes)), thread_name_prefix="publish-probe") as pool:
        problems += [p for p in pool.map(lambda probe: probe(), probes) if p]
    return lance_counts, problems


def lance_indexes(lance_dir: Path) -> dict[str, list[dict]]:
    """``{table: [{name, type, columns, uuid}]}``: the indexes readers may expect (the open check looks
    for each one's files, see ``pipeline.snapshots.check``)."""
    import lancedb

    db = lancedb.connect(str(lance_dir))
    out = {}
    for name in LANCE_TABLES:
        out[name] = [{"name": ix.name, "type": str(ix.index_type), "columns": list(ix.columns),
                      "uuid": getattr(ix, "index_uuid", None)} for ix in db.open_table(name).list_indices()]
    return out


def write_reader_files(settings: Settings, tmp: Path, model: dict, previous: Path | None = None) -> dict[str, str]:
    """What a reader would otherwise compute when it opens the snapshot (DESIGN.md: "Reading is light"): the
    query encoder (``query_encoder/``) and the BM25 statistics (``bm25/chunks.npz``). Returns their layout
    entries. The passages counted by the last publish (:func:`pipeline.query.bm25_stats.terms_cache`, else the
    ``previous`` snapshot's statistics) are not analysed again. Never raises: a snapshot without them is searched
    as before (sentence-transformers encodes the queries, the statistics are counted at open), so the warning
    says why and the publish goes on."""
    from pipeline.embedding.query_encoder import FOLDER
    from pipeline.query import bm25_stats

    layout: dict[str, str] = {}
    try:
        link_query_encoder(settings, model, tmp / FOLDER)
        layout["query_encoder"] = FOLDER
    except Exception as exc:  # noqa: BLE001 - a reader's shortcut never blocks a publish
        shutil.rmtree(tmp / FOLDER, ignore_errors=True)
        log.warning("snapshot %s goes out without its query encoder (readers encode queries with sentence-transformers): %s",
                    tmp.name.removesuffix(snap.TMP_SUFFIX), exc)
    try:
        t0 = time.perf_counter()
        cache = bm25_stats.terms_cache(settings.warehouse)
        before = bm25_stats.read(cache) or (bm25_stats.read(previous / bm25_stats.FILE) if previous is not None else None)
        counted = bm25_stats.count(_read_table(tmp / "lancedb", "chunks"), previous=before)
        bm25_stats.write(tmp / bm25_stats.FILE, counted)
        try:
            bm25_stats.write(cache, counted, with_sample=True)
        except OSError as exc:  # only the next publish's shortcut
            log.warning("publish: could not keep the BM25 terms for the next publish in %s: %s", cache, exc)
        layout["bm25"] = bm25_stats.FILE
        log.info("publish: BM25 statistics of %d of %d passages stored (%.1fs)", counted.stats.sampled,
                 counted.stats.n_docs, time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - as above: readers count them at open
        shutil.rmtree(tmp / Path(bm25_stats.FILE).parent, ignore_errors=True)
        log.warning("snapshot %s goes out without BM25 statistics (readers count them when they open it): %s: %s",
                    tmp.name.removesuffix(snap.TMP_SUFFIX), type(exc).__name__, exc)
    return layout


def link_query_encoder(settings: Settings, model: dict, out: Path) -> None:
    """Hard-link (else copy) the query encoder of the tables' model into ``out``: made once per model under the
    vector cache (:func:`pipeline.embedding.query_export.ensure_query_export`) from the model cache's export, shared by every snapshot."""
    from pipeline.embedding.encoders import model_cache, writable_export_root
    from pipeline.embedding.query_export import ensure_query_export

    src = ensure_query_export(model, writable_export_root(settings), model_cache(settings))
    out.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        try:
            os.link(f, out / f.name)
        except OSError:  # another filesystem
            shutil.copy2(f, out / f.name)


def _read_table(folder: Path, name: str):
    from pipeline.query.tables import ReadTable

    def open_lancedb():
        import lancedb

        return lancedb.connect(str(folder)).open_table(name)

    return ReadTable(folder, name, open_lancedb)


def write_snapshot_feeds(settings: Settings, root: Path, tmp: Path, manifest: dict) -> dict:
    """Every interest's feed of new papers (against CURRENT, the snapshot this one follows) into ``tmp/feeds``.
    Never raises: when the feeds cannot be written at all, the snapshot goes out without them and the
    returned ``feeds_failed`` says why (``run_publish`` puts it in the manifest)."""
    from pipeline.feeds.write import write_feeds

    if (manifest.get("counts") or {}).get("interests") == 0:  # no interest saved: no feed (the catalog left unopened)
        return {}
    prev = snap.current_id(root)
    try:
        return write_feeds(tmp, manifest, root / prev if prev and (root / prev).is_dir() else None, settings)
    except Exception as exc:  # noqa: BLE001 - a feed never blocks a publish: the snapshot goes out without feeds
        log.warning("feeds of snapshot %s could not be written: %s: %s", manifest.get("snapshot_id"), type(exc).__name__, exc)
        shutil.rmtree(tmp / "feeds", ignore_errors=True)
        return {"feeds_failed": {"(every feed)": {"feeds": f"{type(exc).__name__}: {exc}"}}}


# ---- publish -------------------------------------------------------------------------------------------
def write_manifest(folder: Path, manifest: dict, previous: Path | None = None) -> None:
    """Write manifest.json with every file's sha256 and size, and ``bytes_new``: the bytes of the files that are not
    the ``previous`` snapshot's (what this snapshot adds to the disk). A file that is the same inode as the same path
    in the ``previous`` snapshot (a shared hard link) reuses that snapshot's checksum instead of being read again."""
    files = snap.snapshot_files(folder)
    prev_files = _previous_manifest(previous).get("files") or {}
    manifest["files"], manifest["sizes"] = {}, {}
    to_hash = []
    added = 0
    top, before = str(folder), str(previous) if previous is not None else None  # (strings: a Path per file costs)
    for rel in files:
        st = os.stat(os.path.join(top, rel))
        digest = prev_files.get(rel)
        shared = before is not None and snap.same_inode(st, os.path.join(before, rel))
        if not (digest and shared):
            to_hash.append(rel)
        added += 0 if shared else st.st_size
        manifest["files"][rel] = digest
        manifest["sizes"][rel] = st.st_size
    manifest["bytes_new"] = added
    manifest["files"].update(zip(to_hash, snap.sha256_files([os.path.join(top, rel) for rel in to_hash])))
    tmp = folder / f".{snap.MANIFEST}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, folder / snap.MANIFEST)


def _previous_manifest(previous: Path | None) -> dict:
    if previous is None:
        return {}
    try:
        return snap.read_manifest(previous)
    except Exception:  # a damaged previous snapshot only means no checksums to reuse
        return {}


def apply_retention(root: Path, keep: int, min_age_h: float = 0.0, now: datetime | None = None,
                    kept: dict[str, str] | None = None) -> list[str]:
    """Delete the oldest snapshots beyond ``keep``, but never CURRENT, never a pinned one (a reader holds a
    lease on it: :mod:`pipeline.pins`) and never one published less than ``min_age_h`` hours before
    ``now`` (readers get that long to notice a newer one; a snapshot whose age or manifest cannot be
    read is kept). Renamed first, so a half-deleted snapshot is never visible under its id; the pins
    are read again after the rename, and a snapshot pinned meanwhile is renamed back.

    Returns the deleted ids; ``kept`` (when given) receives ``{id: "pinned by ..."}`` for each snapshot
    that retention would have deleted but a reader holds."""
    from pipeline import pins

    kept = kept if kept is not None else {}
    if sum(1 for d in os.scandir(root) if d.is_dir() and snap.is_snapshot_name(d.name)) <= keep:
        pins.clean_stale(root)  # no more snapshots than it keeps: no manifest to read (~3 ms each at 3,000 files)
        return []
    snaps = [s for s in snap.list_snapshots(root, check_files=False, with_pins=False) if s["created_at"]]
    cur = snap.current_id(root)
    now = now or datetime.now(timezone.utc)
    candidates = [s["snapshot_id"] for s in snaps[:-keep]
                  if s["snapshot_id"] != cur and _old_enough(s.get("created_at"), now, min_age_h)] if len(snaps) > keep else []
    doomed = []
    for sid in candidates:
        held = pins.holders(root, sid, clean=True)
        gone = root / f"{sid}{snap.DELETING_SUFFIX}"
        if not held:
            os.replace(root / sid, gone)
            held = pins.holders(root, sid)  # a reader that pinned it between the look and the rename
            if held:
                os.replace(gone, root / sid)
        if held:
            kept[sid] = "pinned by " + "; ".join(held[:3]) + (f" (+{len(held) - 3} more)" if len(held) > 3 else "")
            log.info("retention: kept %s: %s", sid, kept[sid])
            continue
        shutil.rmtree(gone, ignore_errors=True)
        doomed.append(sid)
    pins.clean_stale(root)
    return doomed


def _old_enough(created_at: str | None, now: datetime, min_age_h: float) -> bool:
    if min_age_h <= 0:
        return True
    try:
        created = datetime.fromisoformat(created_at or "")
    except ValueError:
        return False
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    return (now - created).total_seconds() >= min_age_h * 3600


def _lancedb_side(settings: Settings, tmp: Path, model: dict, previous: Path | None
                  ) -> tuple[tuple[dict[str, int], list[str]], dict[str, list[dict]], dict[str, str]]:
    """What a publish links, checks and writes from the working LanceDB alone: :func:`copy_lancedb`, then
    :func:`check_lancedb`, :func:`lance_indexes` and :func:`write_reader_files` on the snapshot's copy."""
    copy_lancedb(settings, tmp / "lancedb")
    return check_lancedb(tmp), lance_indexes(tmp / "lancedb"), write_reader_files(settings, tmp, model, previous)


@writer_lock.writes("publish")  # the run_log row at the end too
def run_publish(settings: Settings, *, on_stage: StageHook | None = None, full: bool = False) -> dict:
    """Build, verify and switch to a new snapshot. ``on_stage(stage, path)`` is called after the stages
    'built', 'verified', 'renamed' and 'swapped' (tests use it to crash a publish at each point). ``full``: read
    every table of the warehouse, none by its change log (:mod:`pipeline.steps.catalog`)."""
    t0 = time.perf_counter()
    root = settings.snapshots_dir
    hook = on_stage or (lambda stage, path: None)
    # the lock is reentrant: already held by @writes
    with writer_lock.hold(settings.warehouse, "publish"), progress.task("publish: copying the LanceDB tables") as bar:
        root.mkdir(parents=True, exist_ok=True)
        abandoned = _remove_abandoned(root)
        if abandoned:
            log.info("removed %d abandoned folder(s) from an interrupted publish: %s", len(abandoned), ", ".join(abandoned))
        sid = new_snapshot_id()
        tmp = root / f"{sid}{snap.TMP_SUFFIX}"
        final = root / sid
        tmp.mkdir(parents=True)
        prev_id = snap.current_id(root)
        prev_dir = root / prev_id if prev_id and (root / prev_id).is_dir() else None
        try:
            require_warehouse(settings)
            model = lancedb_model(settings)
            model_entry = {k: model.get(k) for k in MODEL_KEYS}
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="publish-lancedb") as pool:
                # the LanceDB side needs no catalog: its links, probe queries and the readers' files (mostly in Rust and
                # numpy, without the GIL) run beside the catalog's write (mostly in DuckDB, likewise)
                lance_side = pool.submit(_lancedb_side, settings, tmp, model_entry, prev_dir)
                embed_run = pool.submit(last_embed, settings) if not full else None
                bar.stage("publish: building the catalog")
                counts, watermarks, catalog_files, catalog_views = build_catalog(settings, tmp, prev_dir, full=full)
                lance, indexes, layout = lance_side.result()
                embedded = embedded_counts(embed_run.result(), counts) if embed_run is not None else None
            manifest: dict[str, Any] = {
                "snapshot_id": sid,
                "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
                "schema_version": snap.SCHEMA_VERSION,
                "counts": dict(counts),
                "model": model_entry,
                "score_config": settings.query_config,
                "weights": weights_for(settings.query_config, settings.query_weights),
                "watermarks": watermarks,
                "layout": {"catalog": snap.CATALOG, "catalog_files": CATALOG_FOLDER, "lancedb": "lancedb",
                           "lancedb_tables": list(LANCE_TABLES)},
                "catalog_files": catalog_files,
                "catalog_views": catalog_views,
            }
            bar.stage("publish: checking the tables")
            lance_counts = verify_contents(tmp, counts, embedded, lance, prev_dir if catalog_views["linked"] else None)
            manifest["counts"].update(lance_counts)
            manifest["indexes"] = indexes
            manifest["layout"].update(layout)
            feeds = write_snapshot_feeds(settings, root, tmp, manifest)
            if feeds.get("feeds") is not None:
                manifest["layout"]["feeds"] = "feeds"
                manifest["feeds"] = {n: f["matched"] for n, f in feeds["feeds"].items()}
            failed = {n: f["failed"] for n, f in feeds.get("feeds", {}).items() if f.get("failed")}
            failed.update(feeds.get("feeds_failed", {}))
            if failed:  # a feed never blocks a publish: the manifest names it (the warning is logged)
                manifest["feeds_failed"] = failed
            write_manifest(tmp, manifest, prev_dir)
            hook("built", tmp)
            bar.stage("publish: verifying the snapshot")
            # every checksum was just taken from the file itself (or, for a link, from the snapshot it shares): hashing
            # them again read the same bytes from the page cache (1.3 s of a full publish at 100,000 papers) and could
            # only disagree if something wrote into the folder meanwhile; presence, sizes, stray files and the manifest's
            # shape are checked here, and `paperkb snapshots verify` re-hashes everything
            problems = snap.verify(root, path=tmp, trusted=set(manifest["files"]))
            if problems:
                raise UserError(f"snapshot {sid} failed verification: {problems[0]}")
            hook("verified", tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        os.rename(tmp, final)
        snap.fsync_dir(root)
        hook("renamed", final)
        previous = snap.current_id(root)
        snap.write_current(root, sid)
        hook("swapped", final)
        kept: dict[str, str] = {}
        removed = apply_retention(root, settings.snapshot_keep, settings.snapshot_min_age_h, kept=kept)
    size = sum((manifest.get("sizes") or {}).values())
    summary = {"snapshot_id": sid, "path": str(final), "previous": previous, "counts": manifest["counts"],
               "bytes": size, "bytes_new": manifest["bytes_new"], "removed": removed, "kept_pinned": kept, "seconds": round(time.perf_counter() - t0, 2)}
    if manifest.get("feeds_failed"):
        summary["feeds_failed"] = sorted(manifest["feeds_failed"])
    log.info("publish: snapshot %s is CURRENT (%d chunks, %d papers, %.1f MB, %.1f MB of it new) in %.1fs; removed %d old, "
             "kept %d pinned", sid, manifest["counts"].get("lancedb.chunks", 0), manifest["counts"].get("lancedb.papers", 0),
             size / 1e6, manifest["bytes_new"] / 1e6, summary["seconds"], len(removed), len(kept))
    _record_run(settings, summary)
    if settings.snapshot_store:  # and on object storage (pipeline.store.push): objects, manifest, CURRENT last
        from pipeline.store.push import push_published

        summary["store"] = push_published(settings, final)
    return summary


def _record_run(settings: Settings, summary: dict) -> None:
    from pipeline.warehouse import Warehouse

    with Warehouse(settings) as wh, wh.run("publish") as run:
        run.count("out", summary["counts"].get("lancedb.chunks", 0))
        run.count("bytes", summary["bytes"])
        run.count("bytes_new", summary["bytes_new"])  # what the night added to the disk (the rest: hard links)
        run.message = f"snapshot {summary['snapshot_id']}"


# ---- no empty snapshots ----------------------------------------------------------------------------------
def warehouse_papers(settings: Settings) -> int:
    """Papers in the working warehouse (0 when it has no database yet)."""
    if not settings.db_path.is_file():
        return 0
    import duckdb

    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        return int(scalar(con, "SELECT count(*) FROM papers"))
    except duckdb.CatalogException:  # no papers table yet
        return 0
    finally:
        con.close()


def empty_warehouse_reason(settings: Settings, replay: bool = False) -> str | None:
    """Why a refresh must not publish (the warehouse holds no paper after its steps), or ``None``.

    A snapshot of 0 papers would replace a good CURRENT with one that finds nothing; an empty source
    (an empty raw zone under ``--replay``, a window with nothing harvested into an empty warehouse,
    a wrong ``--warehouse``) is far likelier a mistake than the intent."""
    if warehouse_papers(settings) > 0:
        return None
    from pipeline import snapshots

    source = "the raw zone holds nothing to replay" if replay else "nothing was harvested or imported"
    current = snapshots.current_id(settings)
    keep = f"; CURRENT stays {current}" if current else ""
    return (f"the warehouse {settings.warehouse} holds no papers ({source}): not embedding or publishing an empty "
            f"snapshot{keep}")


@writer_lock.writes("publish")  # the check reads the warehouse: under the lock, like the publish
def publish_unless_empty(settings: Settings) -> dict:
    """:func:`run_publish`, unless the warehouse holds no papers: then ``{"skipped": reason}`` and CURRENT
    stays as it is (the DAG marks its publish task skipped)."""
    empty = empty_warehouse_reason(settings)
    if empty is not None:
        log.warning("%s", empty)
        return {"skipped": empty}
    return run_publish(settings)
