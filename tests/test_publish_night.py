"""Issue 31 part 1: a night's publish grows with the change (real CISI, the product's own steps, no mocks).

CISI without its last 1% is imported, graphed, embedded and published; then the last 1% arrives and the same
steps run again (``bench.publish_night.run_cisi``, the benchmark's CISI night). The second snapshot must add
at most 20% of the first's disk, link the catalog partitions that did not change, and rewrite no paper's
vector row when only the graph's values move.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.publish_night import new_bytes, run_cisi
from conftest import SNAPSHOT_BACKEND
from embed_helpers import clone_settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def night(cisi_snapshot, tmp_path_factory):
    """Both CISI nights, embedded as ``cisi_snapshot`` is (torch fp32, its vector cache): the vectors of CISI, made
    once per run for ``cisi_snapshot``, are read back from the cache, not encoded again."""
    from pipeline.settings import Settings

    cache = cisi_snapshot.embed_cache_dir or tmp_path_factory.mktemp("night-vectors")
    work = tmp_path_factory.mktemp("night")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAPERKB_BENCH_VECTOR_CACHE", str(cache))
        mp.setenv("PAPERKB_EMBED_BACKEND", SNAPSHOT_BACKEND)
        res = run_cisi(work, 0.01)
    res["settings"] = Settings(warehouse=work / "warehouse", embed_cache_dir=cache, snapshot_keep=10,
                               embed_backend=SNAPSHOT_BACKEND)
    return res


def _snap(res, which: str) -> Path:
    return res["settings"].snapshots_dir / res[which]["snapshot"]


def test_a_cisi_night_adds_at_most_a_fifth_of_the_first_snapshot(night):
    assert night["papers_second"] - night["papers_first"] >= 14  # 1% of CISI's 1460
    assert night["second"]["lance_rows_written"]["papers"] == night["papers_second"] - night["papers_first"]
    assert night["added_total"] <= 0.2 * night["first_total"], (night["added_bytes"], night["first_bytes"])
    # the counting is the benchmark's: new inodes only
    a, b = _snap(night, "first"), _snap(night, "second")
    seen: set = set()
    new_bytes(a, seen)
    assert sum(new_bytes(b, seen).values()) == night["added_total"]
    # the manifest says as much (its own file aside): what the publish line and `snapshots list` show as new
    from pipeline import snapshots

    assert snapshots.read_manifest(b)["bytes_new"] == night["added_total"] - os.path.getsize(b / "manifest.json")


def test_unchanged_catalog_partitions_are_hard_links_and_the_views_read_them(night):
    from pipeline import snapshots

    a, b = _snap(night, "first"), _snap(night, "second")
    linked = 0
    for table in sorted(p.name for p in (b / "catalog").iterdir()):
        for f in (b / "catalog" / table).glob("*.parquet"):
            old = a / "catalog" / table / f.name
            if old.exists():  # same name = same content fingerprint: the same file
                assert os.stat(old).st_ino == os.stat(f).st_ino, f
                linked += 1
    assert linked >= 3
    m = snapshots.read_manifest(b)
    unchanged = [t for t, f in m["catalog_files"].items() if f["written"] == 0]
    assert unchanged, m["catalog_files"]
    # the views are the same: catalog.duckdb is the first snapshot's file, linked
    assert m["catalog_views"]["linked"] and os.stat(a / "catalog.duckdb").st_ino == os.stat(b / "catalog.duckdb").st_ino
    # the catalog answers from any working directory, and the snapshot verifies by re-hashing every file
    cwd = os.getcwd()
    try:
        os.chdir("/")
        con = snapshots.open_catalog(b)
        try:
            assert con.execute("SELECT count(*) FROM papers").fetchone()[0] == night["papers_second"]
            assert con.execute("SELECT count(*) FROM paper_ranks WHERE pagerank IS NOT NULL").fetchone()[0] > 0
            with pytest.raises(Exception, match="read-only"):
                con.execute("CREATE TABLE t (a INTEGER)")
        finally:
            con.close()
    finally:
        os.chdir(cwd)
    assert snapshots.verify(night["settings"], b.name) == []


def test_snapshots_verify_cli_passes(night, capsys):
    from pipeline.cli import main

    code = main(["--warehouse", str(night["settings"].warehouse), "snapshots", "verify"])
    assert code in (0, None), capsys.readouterr()
    assert "intact" in capsys.readouterr().out


def test_only_pagerank_moving_rewrites_no_vector_row(night, tmp_path):
    import duckdb

    from pipeline.query import Searcher, open_snapshot
    from pipeline.steps.embed import run_embed
    from pipeline.steps.publish import run_publish

    s = clone_settings(night["settings"], tmp_path)
    con = duckdb.connect(str(s.db_path))
    con.execute("UPDATE paper_metrics SET pagerank = pagerank * 1.5 + 0.001, weight = weight / 2")
    con.execute("UPDATE papers SET citation_count = coalesce(citation_count, 0) + 1")
    pid, want_pr = con.execute("SELECT paper_id, pagerank FROM paper_ranks WHERE pagerank IS NOT NULL "
                               "ORDER BY paper_id LIMIT 1").fetchone()
    con.close()
    before = s.snapshots_dir / night["second"]["snapshot"]
    emb = run_embed(s)
    assert {k: (c["inserted"], c["updated"], c["deleted"]) for k, c in emb["changes"].items()} == \
        {"chunks": (0, 0, 0), "papers": (0, 0, 0), "figures": (0, 0, 0)}
    after = Path(run_publish(s)["path"])
    # (the clone copied every file, so compare by name: Lance names each data and index file once, at random)
    old_files = {p.relative_to(before).as_posix() for p in (before / "lancedb").rglob("*") if p.is_file()}
    new_files = {p.relative_to(after).as_posix(): p.stat().st_size for p in (after / "lancedb").rglob("*") if p.is_file()}
    fresh = {rel: size for rel, size in new_files.items() if rel not in old_files}
    assert not [rel for rel in fresh if "/data/" in rel or "/_indices/" in rel], fresh
    assert sum(fresh.values()) < 64_000, fresh  # Lance's version metadata only
    # readers see the night's values, from the catalog
    with Searcher(open_snapshot(s), s) as searcher:
        p = searcher.paper(pid)
        assert p["metrics"]["pagerank"] == pytest.approx(want_pr)
        assert p["paper"]["pagerank"] == pytest.approx(want_pr)
    with Searcher(open_snapshot(s, before.name), s) as searcher:
        assert searcher.paper(pid)["metrics"]["pagerank"] != pytest.approx(want_pr)


def test_the_partition_size_is_kept_until_a_table_doubles(night):
    """The second night reuses the first snapshot's partition sizes (no count of distinct keys); a table that has
    doubled or halved since its size was chosen gets a new one."""
    import duckdb

    from pipeline import snapshots
    from pipeline.steps import catalog

    first = snapshots.read_manifest(_snap(night, "first"))["catalog_files"]
    second = snapshots.read_manifest(_snap(night, "second"))["catalog_files"]
    assert second["papers"]["part_rows"] == first["papers"]["part_rows"]
    assert second["papers"]["sized_at_rows"] == first["papers"]["sized_at_rows"] == night["papers_first"]
    assert "parts_per_table" not in second["papers"]  # the default, 64
    assert second["related_incoming"]["parts_per_table"] == catalog.PARTS_PER_TABLE_OF["related_incoming"] == 8
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{night['settings'].db_path}' AS wh (READ_ONLY)")
        con.execute("CREATE TABLE big AS SELECT paper_id || '-' || i AS paper_id FROM wh.papers, range(40) t(i)")
        n = con.execute("SELECT count(*) FROM big").fetchone()[0]
        kept = {"part_rows": 128, "sized_at_rows": n // 2 + 1}
        assert catalog.partition_size(con, "big", "paper_id", kept) == (128, n // 2 + 1)  # under twice: kept
        doubled = {"part_rows": 128, "sized_at_rows": n // 2}
        assert catalog.partition_size(con, "big", "paper_id", doubled) == (catalog.part_rows(n), n)
        assert catalog.part_rows(n) > 128
        assert catalog.partition_size(con, "big", "paper_id", None) == (catalog.part_rows(n), n)
        # a table cut in fewer parts (related_incoming: each run appends a large share of it) has larger partitions;
        # a size chosen for another number of parts is chosen again
        assert catalog.part_rows(n, 8) == 8 * catalog.part_rows(n)
        assert catalog.partition_size(con, "big", "paper_id", kept, 8) == (catalog.part_rows(n, 8), n)
        eight = {**kept, "parts_per_table": 8}
        assert catalog.partition_size(con, "big", "paper_id", eight, 8) == (128, n // 2 + 1)
        assert catalog.partition_size(con, "big", "paper_id", eight) == (catalog.part_rows(n), n)
    finally:
        con.close()


def test_a_night_counts_its_tables_from_their_files_and_finds_a_file_that_lost_rows(night, tmp_path):
    """The second snapshot links the first's views, so its check counts each table from its files (a partition linked
    from the first counts what the first recorded, a new file its Parquet footer): the counts the views give. A file
    that is not the linked one and holds other rows fails the publish's check, naming the table."""
    import shutil

    import duckdb

    from pipeline import snapshots
    from pipeline.errors import UserError
    from pipeline.steps.catalog import file_rows
    from pipeline.steps.publish import verify_contents

    a, b = _snap(night, "first"), _snap(night, "second")
    counts = {t: n for t, n in snapshots.read_manifest(b)["counts"].items() if not t.startswith("lancedb.")}
    assert file_rows(b, list(counts), a) == counts
    con = snapshots.open_catalog(b)
    try:
        assert {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in counts} == counts
    finally:
        con.close()

    copy = tmp_path / b.name  # every file a new inode: each one's rows read from its footer
    shutil.copytree(b, copy)
    assert verify_contents(copy, counts, {}, ({}, []), a) == {}
    table = max(counts, key=counts.get)
    victim = max((copy / "catalog" / table).glob("*.parquet"), key=lambda f: f.stat().st_size)
    with duckdb.connect() as c:
        c.execute(f"COPY (SELECT * FROM read_parquet('{victim}') LIMIT 1) TO '{victim}.tmp' (FORMAT parquet)")
    os.replace(f"{victim}.tmp", victim)
    with pytest.raises(UserError, match=rf"snapshot verification failed: catalog\.{table}: \d+ rows, warehouse has "
                                        rf"{counts[table]}"):
        verify_contents(copy, counts, {}, ({}, []), a)
