"""Tables published by their changes (issue 31 part 1): every write to a logged table records the keys it changed
(``_catalog_changes``), and a publish rewrites only the catalog partitions holding them, linking the others without
reading the table. On real CACM citation links and real PDFs through the import, full-text and graph steps, the
result is the same partitions, file for file, as a full scan."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from embed_helpers import cacm_without_last

from pipeline.steps.catalog import changed_ranges

PARTS = [[None, "d0", 5], ["b", "d1", 5], ["f", "d2", 5], ["m", "d3", 5], ["t", "d4", 5]]


def test_changed_keys_give_the_ranges_of_their_partitions():
    assert changed_ranges(PARTS, set()) == ([], set())
    assert changed_ranges(PARTS, {"g"}) == ([("f", "m")], {2})
    assert changed_ranges(PARTS, {"a"}) == ([(None, "b")], {0})
    assert changed_ranges(PARTS, {"z", "u"}) == ([("t", None)], {4})  # new keys past the last boundary
    assert changed_ranges(PARTS, {"c", "g"}) == ([("b", "m")], {1, 2})  # neighbours merge into one range
    # a changed first key may be gone: its partition joins the one before, so both are read again
    assert changed_ranges(PARTS, {"m"}) == ([("f", "t")], {2, 3})
    assert changed_ranges(PARTS, {"c", "g", "n"}) is None  # most of the table: a full scan is as cheap
    # no partition 0 on record: a key before the first boundary lands in a new one
    assert changed_ranges(PARTS[1:], {"a"}) == ([(None, "b")], set())
    assert changed_ranges([[None, "d0", 5], [3, "d1", 5]], {"x"}) is None  # keys that are not text


def test_a_run_cut_into_pieces_is_read_again_whole():
    # "f" and "t" start pieces of the runs starting at "b" and "m" (cut at twice the partition size): a piece is
    # numbered from its run's start, so a change in one piece reads the whole run again
    starts = [True, True, False, True, False]
    assert changed_ranges(PARTS, {"g"}, starts) == ([("b", "m")], {1, 2})
    assert changed_ranges(PARTS, {"c"}, starts) == ([("b", "m")], {1, 2})
    assert changed_ranges(PARTS, {"z"}, starts) == ([("m", None)], {3, 4})
    assert changed_ranges(PARTS, {"a"}, starts) == ([(None, "b")], {0})
    assert changed_ranges(PARTS[1:], {"c"}, starts[1:]) == ([("b", "m")], {0, 1})  # no partition 0 on record


def _catalog(settings, out: Path, previous: Path | None, *, forget_log: bool = False, full: bool = False) -> dict:
    """``build_catalog`` into ``out`` (with a manifest holding its ``catalog_files`` and ``catalog_views``), from
    ``previous``."""
    from pipeline import snapshots as snap
    from pipeline.steps.catalog import build_catalog

    if previous is not None and forget_log:  # the same previous partitions, without the log position: a full scan
        m = json.loads((previous / snap.MANIFEST).read_text())
        for entry in m["catalog_files"].values():
            entry.pop("journal", None)
        previous = previous.with_name(previous.name + "-nolog")
        previous.mkdir()
        (previous / snap.MANIFEST).write_text(json.dumps(m))
        for f in (out.parent / m["id"] / "catalog").rglob("*.parquet"):
            target = previous / f.relative_to(out.parent / m["id"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.hardlink_to(f)
    out.mkdir()
    counts, _, files, views = build_catalog(settings, out, previous, full=full)
    (out / snap.MANIFEST).write_text(json.dumps({"id": out.name, "catalog_files": files, "catalog_views": views}))
    return {"counts": counts, "files": files, "views": views}


def _names(folder: Path, table: str) -> set[str]:
    return {f.name for f in (folder / "catalog" / table).glob("*.parquet")}


def _same_rows(settings, folder: Path) -> bool:
    return _same_table(settings, folder, "related")


def test_a_graph_night_publishes_related_by_its_changes_as_a_full_scan_would(settings, shared_data, tmp_path, caplog,
                                                                            monkeypatch):
    import duckdb

    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps import catalog
    from pipeline.steps.graph import run_graph

    monkeypatch.setattr(catalog.partitions, "MIN_PART_ROWS", 16)  # CACM's 2,000 lists in ~64 partitions, as a large table is cut
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    import_collection(settings, cacm_without_last(shared_data, tmp_path / "head", 32), fmt="smart", name="cacm")
    run_graph(settings)
    first = _catalog(settings, snaps / "s1", None)
    assert first["files"]["related"]["parts"] and first["files"]["related"]["journal"][0] >= 1

    import_collection(settings, shared_data / "collections" / "cacm", fmt="smart", name="cacm")
    _make_current(settings, snaps / "s1")  # the graph run ends its slice where one of its partitions starts
    night = run_graph(settings)  # the 32 new papers, the changed ones, and the others in turn
    assert not night["related_full"]
    second = _catalog(settings, snaps / "s2", snaps / "s1")
    assert second["counts"]["related"] == night["related"] and _same_rows(settings, snaps / "s2")
    # the same partitions, file for file, as scanning the whole table
    scanned = _catalog(settings, snaps / "s2-scan", snaps / "s1", forget_log=True)
    assert "journal" not in (json.loads((snaps / "s1-nolog" / "manifest.json").read_text())["catalog_files"]["related"])
    assert _names(snaps / "s2", "related") == _names(snaps / "s2-scan", "related")
    assert second["files"]["related"]["parts"] == scanned["files"]["related"]["parts"]
    _assert_runs_cut(snaps / "s2", second["files"]["related"])

    # a rerun changes no paper; with a bound in runs (graph_related_refresh_runs) its lists are the next seventh in
    # turn, a range of keys, so the publish reads only the partitions holding them and links the rest, unread
    _make_current(settings, snaps / "s2")
    again = run_graph(settings.model_copy(update={"graph_related_refresh_runs": 7}))
    assert again["related_changed"] == 0 and again["related_papers"] > 0
    with caplog.at_level(logging.INFO, logger="pipeline.steps.catalog"):
        third = _catalog(settings, snaps / "s3", snaps / "s2")
    rel = third["files"]["related"]
    # the slice started and ended where s2's partitions start: the partitions written hold the lists it recomputed,
    # and not one row more
    before = {digest for _, digest, _ in second["files"]["related"]["parts"]}
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        recomputed = con.execute("SELECT count(*) FROM related WHERE run_id = (SELECT max(run_id) FROM related)").fetchone()
    assert sum(n for _, digest, n in rel["parts"] if digest not in before) == recomputed[0] > 0
    assert re.search(r"related by its changes: \d+ of \d+ partition\(s\) read again", caplog.text)
    assert rel["linked"] > rel["written"] > 0 and third["counts"]["related"] == again["related"]
    assert _same_rows(settings, snaps / "s3")
    # s3 wrote its few partitions a COPY each, by key range; the scan writes them in one COPY ... PARTITION_BY: the same
    # rows, so the same files
    ranged = catalog.RANGED_WRITES
    assert rel["written"] <= ranged
    monkeypatch.setattr(catalog.files, "RANGED_WRITES", 0)
    scan3 = _catalog(settings, snaps / "s3-scan", snaps / "s2", forget_log=True)
    assert scan3["files"]["related"]["written"] == rel["written"]
    assert _names(snaps / "s3", "related") == _names(snaps / "s3-scan", "related")
    assert rel["parts"] == scan3["files"]["related"]["parts"] and _same_rows(settings, snaps / "s3-scan")
    monkeypatch.setattr(catalog.files, "RANGED_WRITES", ranged)

    # a write the log does not know of: the row count gives it away, and the table is scanned whole
    with duckdb.connect(str(settings.db_path)) as con:
        con.execute("INSERT INTO related SELECT 'cacm:zzz', rank, related_work_id, related_paper_id, ccbc_weighted, "
                    "ccbc_naive, shared_references, shared_citers, cites, cited_by, run_id, coupling FROM related "
                    "WHERE paper_id = 'cacm:1'")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pipeline.steps.catalog"):
        fourth = _catalog(settings, snaps / "s4", snaps / "s3")
    assert "not the" in caplog.text and "its change log explains" in caplog.text
    assert _same_rows(settings, snaps / "s4") and fourth["counts"]["related"] == third["counts"]["related"] + len(
        [r for r in _rows_of(settings, "cacm:1")])


def _make_current(settings, folder: Path) -> None:
    """Make the catalog ``folder`` (built by :func:`_catalog`) the CURRENT snapshot of ``settings``."""
    root = settings.snapshots_dir
    root.mkdir(parents=True, exist_ok=True)
    (root / folder.name).symlink_to(folder)
    (root / "CURRENT").write_text(folder.name + "\n")


def _assert_runs_cut(folder: Path, entry: dict) -> None:
    """No partition of ``entry`` (a ``catalog_files`` entry) holds more than ``part_max`` keys, and some run was cut
    (a partition starts at a key that is no boundary), so the equality above covered pieces of runs too."""
    import duckdb

    from pipeline.steps.catalog import _run_starts

    with duckdb.connect() as con:
        for _first, digest, _rows in entry["parts"]:
            keys = con.execute(f"SELECT count(DISTINCT paper_id) FROM '{folder}/catalog/related/{digest}.parquet'").fetchone()
            assert keys[0] <= entry["part_max"] == 2 * entry["part_rows"]
        assert not all(_run_starts(con, entry["parts"], entry["part_rows"]))


def _rows_of(settings, paper: str) -> list:
    import duckdb

    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        return con.execute("SELECT rank FROM related WHERE paper_id = ?", [paper]).fetchall()


def _same_table(settings, folder: Path, table: str) -> bool:
    """Whether the snapshot's ``table`` holds the rows of the warehouse's (of its source table, for one of
    :data:`~pipeline.steps.catalog.REORDERED`). The catalog connection reads its snapshot's files alone (issue 64),
    so its rows are compared on a connection to the warehouse."""
    import duckdb

    from pipeline import snapshots as snap
    from pipeline.steps.catalog import REORDERED

    source = REORDERED[table][0] if table in REORDERED else table
    con = snap.open_catalog(folder)
    try:
        published = con.execute(f"SELECT * FROM {table}").to_arrow_table()
    finally:
        con.close()
    wh = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        wh.register("published", published)
        return wh.execute(f"SELECT count(*) FROM (SELECT * FROM published EXCEPT ALL SELECT * FROM {source} "
                          f"UNION ALL SELECT * FROM {source} EXCEPT ALL SELECT * FROM published)").fetchone()[0] == 0
    finally:
        wh.close()


def _pdf_folder(shared_data: Path, folder: Path, names: list[str]) -> Path:
    folder.mkdir(parents=True)
    for n in names:
        (folder / n).symlink_to(shared_data / "arxiv" / "pdf" / n)
    return folder


def test_every_steps_writes_are_published_by_their_changes_as_a_full_scan_would(settings, shared_data, tmp_path,
                                                                               caplog, monkeypatch):
    """Real PDFs through the library import, full text and graph steps (papers, authors, chunks, figures, references,
    their links, works and citations from PDFs), then more of them: every table the log covers is published by its
    changes, file for file the same as a full scan, and holds what the warehouse holds."""
    from pipeline.catalog_changes import JOURNALED
    from pipeline.library.pdf_folder import import_pdfs
    from pipeline.steps import catalog
    from pipeline.steps.fulltext import run_fulltext
    from pipeline.steps.graph import run_graph

    monkeypatch.setattr(catalog.partitions, "MIN_PART_ROWS", 16)  # a few hundred rows a table in several partitions
    settings = settings.model_copy(update={"arxiv_pdf_url": "http://127.0.0.1:9/no-network"})
    pdfs = sorted(p.name for p in (shared_data / "arxiv" / "pdf").glob("*.pdf"))
    snaps = tmp_path / "snaps"
    snaps.mkdir()

    def night(names: list[str]) -> None:
        import_pdfs(settings, _pdf_folder(shared_data, tmp_path / f"lib{len(names)}", names), follow_links=True)
        run_fulltext(settings)
        run_graph(settings)

    night(pdfs[:6])
    first = _catalog(settings, snaps / "s1", None)
    assert first["counts"]["chunks"] > 100 and first["counts"]["reference_links"] > 100
    night(pdfs)
    with caplog.at_level(logging.INFO, logger="pipeline.steps.catalog"):
        second = _catalog(settings, snaps / "s2", snaps / "s1")
    scanned = _catalog(settings, snaps / "s2-scan", snaps / "s1", forget_log=True)
    by_changes = set(re.findall(r"publish: (\w+) by its changes", caplog.text))
    assert {"chunks", "figures", "paper_references", "reference_links"} <= by_changes  # (the tables of one partition
    # here, papers, works..., are read whole: their one partition changed)
    for table in second["files"]:
        assert _names(snaps / "s2", table) == _names(snaps / "s2-scan", table), table
        if table in JOURNALED:
            assert second["files"][table]["parts"] == scanned["files"][table]["parts"], table
        assert _same_table(settings, snaps / "s2", table), table
    assert second["files"]["chunks"]["linked"] > 0  # the first six papers' passages are not read again
    _assert_reordered(snaps / "s2", snaps / "s1", second)

    # the graph again, with nothing new: the PDF references match as before, so their links, works and citations are
    # not changes (an unchanged link keeps the run that made it), and the publish reads none of those tables
    run_graph(settings)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pipeline.steps.catalog"):
        third = _catalog(settings, snaps / "s3", snaps / "s2")
    for table in ("reference_links", "works", "citations", "chunks", "papers"):
        assert third["files"][table]["written"] == 0, table
        assert f"publish: {table} by its changes: 0 of" in caplog.text
        assert _same_table(settings, snaps / "s3", table), table
    for name, (table, column) in catalog.REORDERED.items():
        assert third["files"][name]["written"] == 0 and f"publish: {name} ({table} by {column}): 0 of" in caplog.text
        assert _same_table(settings, snaps / "s3", name), name
    # what every graph run rewrites whole is one file, this run's
    for table in ("paper_metrics", "powerlaw_fits"):
        assert third["files"][table] == {"linked": 0, "written": 1}, table
        assert len(_names(snaps / "s3", table)) == 1 and _same_table(settings, snaps / "s3", table), table


def _assert_reordered(folder: Path, previous: Path, built: dict) -> None:
    """Each table of :data:`~pipeline.steps.catalog.REORDERED` (``cited_by``: citations by the work cited;
    ``reference_links_by_cited``) in the catalog ``folder``: the same files by name as the table it copies and as many
    rows, each file sorted by ``cited_work_id`` in row groups of at most ``REORDERED_ROW_GROUP`` rows; the files of a
    name the ``previous`` catalog holds hard-linked from it, the others written (the partitions this night wrote)."""
    import pyarrow.parquet as pq

    from pipeline.steps import catalog

    for name, (table, column) in catalog.REORDERED.items():
        names = _names(folder, name)
        assert names == _names(folder, table) and built["counts"][name] == built["counts"][table], name
        old = _names(previous, name)
        entry = built["files"][name]
        assert entry["linked"] == len(names & old) and entry["written"] == len(names - old) > 0, name
        assert entry["parts"] == built["files"][table]["parts"] and entry["order"] == column
        for f in names:
            path = folder / "catalog" / name / f
            if f in old:
                assert path.stat().st_ino == (previous / "catalog" / name / f).stat().st_ino
            cited = pq.read_table(path, columns=[column]).column(0).to_pylist()
            assert cited == sorted(cited, key=lambda w: (w is None, w or "")), f  # (NULLs last, as DuckDB sorts)
            meta = pq.ParquetFile(path).metadata  # (DuckDB writes row groups of at least 2,048 rows: one each here)
            assert all(meta.row_group(i).num_rows <= catalog.REORDERED_ROW_GROUP for i in range(meta.num_row_groups))


def test_every_write_to_a_logged_table_logs_its_keys():
    """A statement that writes a table published by its changes, outside ``Warehouse.upsert`` / ``delete_where_in``,
    must log what it changed: a Python file doing so uses ``pipeline.catalog_changes``, a merge file ends in
    ``RETURNING <key>`` and is run by ``sql_file_returning``. (A write that escapes the log would publish a stale
    table whenever it changes rows without changing their number.)"""
    from pipeline.catalog_changes import JOURNALED
    from pipeline.settings import SQL_DIR

    root = Path(__file__).resolve().parent.parent / "pipeline"
    write = re.compile(r"\b(?:INSERT\s+INTO|DELETE\s+FROM|UPDATE)\s+(\w+)", re.I)
    merge_files = {}
    for f in sorted((SQL_DIR / "core" / "merge").glob("*.sql")):
        text = "\n".join(line for line in f.read_text().splitlines() if not line.lstrip().startswith("--"))
        for stmt in text.split(";"):
            tables = [t for t in write.findall(stmt) if t in JOURNALED]
            if tables:
                assert "RETURNING" in stmt.upper(), f"{f.name}: a write to {tables[0]} without RETURNING <key>"
                merge_files[f.name] = tables[0]
    assert merge_files  # the harvest's and the enrich steps' merges
    offenders = []
    for f in sorted(root.rglob("*.py")):
        text = f.read_text()
        tables = {t for t in write.findall(text) if t in JOURNALED}
        if tables and f.name not in ("warehouse.py", "catalog_changes.py") and "catalog_changes." not in text:
            offenders.append(f"{f.relative_to(root)} writes {sorted(tables)}")
        for name in merge_files:
            for call in re.findall(r"\.(sql_file\w*)\(\s*(?:\"\w+\",\s*)?\"core/merge/" + re.escape(name), text):
                if call != "sql_file_returning":
                    offenders.append(f"{f.relative_to(root)} runs {name} without logging its keys")
    assert not offenders, offenders


def test_catalog_duckdb_is_the_previous_one_while_its_views_are_the_same(settings, shared_data, tmp_path):
    import os

    import duckdb

    from pipeline import snapshots as snap
    from pipeline.sources.local_corpus import import_collection

    import_collection(settings, shared_data / "collections" / "cacm", fmt="smart", name="cacm")
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    first = _catalog(settings, snaps / "s1", None)
    second = _catalog(settings, snaps / "s2", snaps / "s1")
    # the same tables and warehouse views: the same views file, linked (no night rebuilds it)
    assert not first["views"]["linked"] and second["views"] == {"key": first["views"]["key"], "linked": True}
    assert os.stat(snaps / "s1" / snap.CATALOG).st_ino == os.stat(snaps / "s2" / snap.CATALOG).st_ino

    def count(folder: Path, view: str) -> int:
        con = snap.open_catalog(folder)  # the views' paths are relative: they read the folder they are opened in
        try:
            return con.execute(f"SELECT count(*) FROM {view}").fetchone()[0]
        finally:
            con.close()

    assert count(snaps / "s2", "papers") == second["counts"]["papers"] == 3204
    # a view added to the warehouse: the file is made anew, with it
    with duckdb.connect(str(settings.db_path)) as con:
        con.execute("CREATE VIEW cacm_titles AS SELECT paper_id, title FROM papers")
    third = _catalog(settings, snaps / "s3", snaps / "s2")
    assert not third["views"]["linked"] and third["views"]["key"] != second["views"]["key"]
    assert count(snaps / "s3", "cacm_titles") == 3204
    assert os.stat(snaps / "s3" / snap.CATALOG).st_ino != os.stat(snaps / "s2" / snap.CATALOG).st_ino
    # and `paperkb publish --full` makes it anew whatever the key
    fourth = _catalog(settings, snaps / "s4", snaps / "s3", full=True)
    assert fourth["views"] == {"key": third["views"]["key"], "linked": False} and count(snaps / "s4", "cacm_titles") == 3204


def test_the_keys_logged_by_an_older_paperkb_are_read_and_moved_to_a_row_each(settings, shared_data, tmp_path):
    """Entries logged before ``_catalog_change_keys`` held their keys as a list: a read-only publish reads them as
    they are, and the next writer moves them to a row each (once: opened again, nothing moves twice)."""
    import duckdb

    from pipeline import catalog_changes
    from pipeline.sources.local_corpus import import_collection
    from pipeline.warehouse import Warehouse

    import_collection(settings, cacm_without_last(shared_data, tmp_path / "head", 32), fmt="smart", name="cacm")
    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        seen = catalog_changes.position(con, con.execute("SELECT current_database()").fetchone()[0])
    import_collection(settings, shared_data / "collections" / "cacm", fmt="smart", name="cacm")

    def changed(table: str) -> set[str] | None:
        with duckdb.connect() as con:
            con.execute(f"ATTACH '{settings.db_path}' AS wh (READ_ONLY)")
            return catalog_changes.since(con, table, seen, "wh")

    papers = changed("papers")
    assert papers and 32 <= len(papers) < 1000 and all(k.startswith("cacm:") for k in papers)
    logged = {t: changed(t) for t in ("papers", "citations", "works")}
    with duckdb.connect(str(settings.db_path)) as con:  # as an older paperkb left it: each entry's keys in its row
        assert con.execute("SELECT count(*) FROM _catalog_changes WHERE len(keys) > 0").fetchone()[0] == 0
        con.execute("UPDATE _catalog_changes c SET keys = (SELECT list(key ORDER BY key) FROM _catalog_change_keys k "
                    "WHERE k.seq = c.seq) WHERE keys IS NOT NULL")
        con.execute("DROP TABLE _catalog_change_keys")
    assert {t: changed(t) for t in logged} == logged

    for _ in range(2):
        Warehouse(settings).init().close()
        with duckdb.connect(str(settings.db_path), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM _catalog_changes WHERE len(keys) > 0").fetchone()[0] == 0
            moved = con.execute("SELECT count(*), count(DISTINCT (seq, key)) FROM _catalog_change_keys").fetchone()
        assert moved[0] == moved[1] >= sum(len(v or ()) for v in logged.values())
        assert {t: changed(t) for t in logged} == logged


def _works_table(path: Path, keys: list[str]) -> None:
    """A scratch warehouse at ``path`` whose `works` table (a table published by its changes) holds ``keys``."""
    import duckdb

    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE IF NOT EXISTS works (work_id VARCHAR, n INTEGER)")
        con.execute("INSERT INTO works SELECT k, length(k) FROM unnest(?::VARCHAR[]) t(k)", [keys])


def _write_works(db: Path, out: Path, previous: Path | None, changed: set[str] | None) -> dict:
    import duckdb

    from pipeline.steps.catalog import write_table

    before = json.loads((previous / "entry.json").read_text()) if previous is not None else None
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{db}' AS wh (READ_ONLY)")
        done = write_table(con, "works", out, previous, before, changed)
    (out / "entry.json").write_text(json.dumps(done))
    return done


def _piece_keys(folder: Path, entry: dict) -> list[tuple[str | None, int]]:
    """(first key, distinct keys) of each partition of ``entry``, in key order."""
    import duckdb

    with duckdb.connect() as con:
        return [(first, con.execute(f"SELECT count(DISTINCT work_id) FROM '{folder}/catalog/works/{digest}.parquet'")
                 .fetchone()[0]) for first, digest, _rows in entry["parts"]]


def test_the_last_run_is_cut_finer_so_a_night_rewrites_a_small_piece(tmp_path, caplog):
    """New increasing keys land in a table's last run: it is cut every quarter of the partition size, so a night that
    appends keys rewrites one small piece, not up to twice the partition size; when a boundary arrives among the new
    keys, the run it closes is cut as the others again. Each night, by its changes, gives the files of a full scan."""
    import duckdb

    from pipeline.steps.catalog import MAX_PART_FACTOR, _natural, tail_piece

    db = tmp_path / "wh.duckdb"
    keys = [f"w{i:07d}" for i in range(40_000)]
    _works_table(db, keys)
    first = _write_works(db, tmp_path / "s0", None, None)
    size = first["part_rows"]
    assert size == 1024 and first["tail_max"] == tail_piece(size) == 512 and first["part_max"] == 2048
    with duckdb.connect() as con:  # whether each key, old or to come, is a boundary
        is_boundary = dict(con.execute(f"SELECT k, {_natural('k', size)} FROM unnest(?::VARCHAR[]) t(k)",
                                       [[f"w{i:07d}" for i in range(60_000)]]).fetchall())
    pieces = _piece_keys(tmp_path / "s0", first)
    natural = {k for k in keys if is_boundary[k]}
    last_start = max(i for i, (k, _) in enumerate(pieces) if i == 0 or k in natural)
    assert len(pieces) - last_start >= 2, "the last run is long enough here to be cut"
    assert all(n <= 512 for _, n in pieces[last_start:]) and max(n for _, n in pieces[:last_start]) > 512
    assert all(n <= size * MAX_PART_FACTOR for _, n in pieces)

    # night 1: 200 keys after the last one, none a boundary: one piece of the last run rewritten, the rest linked, and
    # only that piece read (the run's earlier pieces are neither read nor numbered again)
    new = [k for k in (f"w{i:07d}" for i in range(40_000, 41_000)) if not is_boundary[k]][:200]
    _works_table(db, new)
    caplog.set_level(logging.INFO, logger="pipeline.steps.catalog")
    night = _write_works(db, tmp_path / "s1", tmp_path / "s0", set(new))
    assert f"works by its changes: 1 of {len(first['parts'])} partition(s) read again" in caplog.text
    full = _write_works(db, tmp_path / "f1", None, None)
    assert _names(tmp_path / "s1", "works") == _names(tmp_path / "f1", "works") and full["parts"] == night["parts"]
    assert night["written"] <= 2 and night["linked"] == len(first["parts"]) - 1
    written = _names(tmp_path / "s1", "works") - _names(tmp_path / "s0", "works")
    assert sum(n for (_, n), (_, d, _) in zip(_piece_keys(tmp_path / "s1", night), night["parts"])
               if f"{d}.parquet" in written) <= 512 + len(new)

    # a key deleted in an earlier piece of the last run: the run is read whole, and still cut as a full scan cuts it
    gone = str(pieces[last_start + 1][0])
    with duckdb.connect(str(db)) as con:
        con.execute("DELETE FROM works WHERE work_id = ?", [gone])
    caplog.clear()
    night1b = _write_works(db, tmp_path / "s1b", tmp_path / "s1", {gone})
    assert f"{len(pieces) - last_start} of {len(night['parts'])} partition(s) read again" in caplog.text
    assert night1b["parts"] == _write_works(db, tmp_path / "f1b", None, None)["parts"]
    _works_table(db, [gone])  # put back: the run read whole again, and cut as it was
    caplog.clear()
    night1c = _write_works(db, tmp_path / "s1c", tmp_path / "s1b", {gone})
    assert night1c["parts"] == night["parts"] and _names(tmp_path / "s1c", "works") == _names(tmp_path / "s1", "works")

    # night 2: new keys with a boundary among them: the run it closes is cut in pieces of twice the size again
    after = [f"w{i:07d}" for i in range(41_000, 60_000)]
    boundary = next(k for k in after if is_boundary[k])
    more = after[: after.index(boundary) + 300]
    _works_table(db, more)
    night2 = _write_works(db, tmp_path / "s2", tmp_path / "s1", set(more))
    full2 = _write_works(db, tmp_path / "f2", None, None)
    assert _names(tmp_path / "s2", "works") == _names(tmp_path / "f2", "works") and full2["parts"] == night2["parts"]
    pieces2 = _piece_keys(tmp_path / "s2", night2)
    closed = [n for k, n in pieces2 if k is not None and str(pieces[last_start][0]) <= k < boundary]
    assert max(closed) > 512  # the closed run: pieces of up to twice the partition size
    assert all(n <= 512 for k, n in pieces2 if k is not None and k >= boundary)  # the new last run: small pieces
