"""A table published by its changes (issue 31 part 1): the graph step logs which papers' related lists it replaced
(``_catalog_changes``), and a publish rewrites only the catalog partitions holding them, linking the others without
reading the table. On real CACM citation links, the result is the same partitions, file for file, as a full scan."""

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


def _catalog(settings, out: Path, previous: Path | None, *, forget_log: bool = False) -> dict:
    """``build_catalog`` into ``out`` (with a manifest holding its ``catalog_files``), from ``previous``."""
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
    counts, _, files = build_catalog(settings, out, previous)
    (out / snap.MANIFEST).write_text(json.dumps({"id": out.name, "catalog_files": files}))
    return {"counts": counts, "files": files}


def _names(folder: Path, table: str) -> set[str]:
    return {f.name for f in (folder / "catalog" / table).glob("*.parquet")}


def _same_rows(settings, folder: Path) -> bool:
    from pipeline import snapshots as snap

    con = snap.open_catalog(folder)
    try:
        con.execute(f"ATTACH '{settings.db_path}' AS wh (READ_ONLY)")
        return con.execute("SELECT count(*) FROM (SELECT * FROM related EXCEPT ALL SELECT * FROM wh.related "
                           "UNION ALL SELECT * FROM wh.related EXCEPT ALL SELECT * FROM related)").fetchone()[0] == 0
    finally:
        con.close()


def test_a_graph_night_publishes_related_by_its_changes_as_a_full_scan_would(settings, shared_data, tmp_path, caplog,
                                                                            monkeypatch):
    import duckdb

    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps import catalog
    from pipeline.steps.graph import run_graph

    monkeypatch.setattr(catalog, "MIN_PART_ROWS", 16)  # CACM's 2,000 lists in ~64 partitions, as a large table is cut
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    import_collection(settings, cacm_without_last(shared_data, tmp_path / "head", 32), fmt="smart", name="cacm")
    run_graph(settings)
    first = _catalog(settings, snaps / "s1", None)
    assert first["files"]["related"]["parts"] and first["files"]["related"]["journal"][0] >= 1

    import_collection(settings, shared_data / "collections" / "cacm", fmt="smart", name="cacm")
    night = run_graph(settings)  # the 32 new papers, the changed ones, and a seventh of the others in turn
    assert not night["related_full"]
    second = _catalog(settings, snaps / "s2", snaps / "s1")
    assert second["counts"]["related"] == night["related"] and _same_rows(settings, snaps / "s2")
    # the same partitions, file for file, as scanning the whole table
    scanned = _catalog(settings, snaps / "s2-scan", snaps / "s1", forget_log=True)
    assert "journal" not in (json.loads((snaps / "s1-nolog" / "manifest.json").read_text())["catalog_files"]["related"])
    assert _names(snaps / "s2", "related") == _names(snaps / "s2-scan", "related")
    assert second["files"]["related"]["parts"] == scanned["files"]["related"]["parts"]

    # a rerun changes no paper: its lists are the next seventh in turn, a range of keys, so the publish reads only
    # the partitions holding them and links the rest, unread
    again = run_graph(settings)
    assert again["related_changed"] == 0 and again["related_papers"] > 0
    with caplog.at_level(logging.INFO, logger="pipeline.steps.catalog"):
        third = _catalog(settings, snaps / "s3", snaps / "s2")
    rel = third["files"]["related"]
    assert re.search(r"related by its changes: \d+ of \d+ partition\(s\) read again", caplog.text)
    assert rel["linked"] > rel["written"] > 0 and third["counts"]["related"] == again["related"]
    assert _same_rows(settings, snaps / "s3")
    scan3 = _catalog(settings, snaps / "s3-scan", snaps / "s2", forget_log=True)
    assert _names(snaps / "s3", "related") == _names(snaps / "s3-scan", "related")
    assert rel["parts"] == scan3["files"]["related"]["parts"]

    # a write the log does not know of: the row count gives it away, and the table is scanned whole
    with duckdb.connect(str(settings.db_path)) as con:
        con.execute("INSERT INTO related SELECT 'cacm:zzz', rank, related_work_id, related_paper_id, ccbc_weighted, "
                    "ccbc_naive, shared_references, shared_citers, cites, cited_by, run_id FROM related "
                    "WHERE paper_id = 'cacm:1'")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pipeline.steps.catalog"):
        fourth = _catalog(settings, snaps / "s4", snaps / "s3")
    assert "not the" in caplog.text and "its change log explains" in caplog.text
    assert _same_rows(settings, snaps / "s4") and fourth["counts"]["related"] == third["counts"]["related"] + len(
        [r for r in _rows_of(settings, "cacm:1")])


def _rows_of(settings, paper: str) -> list:
    import duckdb

    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        return con.execute("SELECT rank FROM related WHERE paper_id = ?", [paper]).fetchall()
