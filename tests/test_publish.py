"""Publishing snapshots: manifest, verification, crashes at every stage, readers, rollback, corruption."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from embed_helpers import clone_settings, import_cisi_subset

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def wh(cisi30_embedded, tmp_path):
    """30 real CISI documents imported and embedded (built once per run, tests/conftest.py): a copy per test."""
    return clone_settings(cisi30_embedded, tmp_path)


def _visible(settings):
    """What a reader can see: complete snapshot folders and the CURRENT id."""
    from pipeline import snapshots

    return [s["snapshot_id"] for s in snapshots.list_snapshots(settings)], snapshots.current_id(settings)


def _search_ids(folder: Path, text: str) -> list[str]:
    import lancedb

    t = lancedb.connect(str(folder / "lancedb")).open_table("chunks")
    return [h["chunk_id"] for h in t.search(text, query_type="fts").limit(10).to_list()]


def test_publish_builds_a_verified_snapshot(wh):
    import duckdb

    from pipeline import snapshots
    from pipeline.steps.publish import run_publish

    r = run_publish(wh)
    folder = snapshots.resolve(wh)
    assert folder == Path(r["path"]) and folder.name == r["snapshot_id"]
    assert sorted(p.name for p in folder.iterdir()) == ["bm25", "catalog", "catalog.duckdb", "lancedb", "manifest.json",
                                                        "query_encoder"]
    m = snapshots.read_manifest(folder)
    assert m["schema_version"] == snapshots.SCHEMA_VERSION and m["snapshot_id"] == r["snapshot_id"]
    assert m["model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2" and m["model"]["dim"] == 384
    assert set(m["weights"]) >= {"ck", "doc", "abs", "fig", "pr"}
    # counts match the warehouse, table by table
    con = duckdb.connect(str(wh.db_path), read_only=True)
    try:
        for table in ("papers", "paper_authors", "works", "citations", "chunks", "figures"):
            assert m["counts"][table] == con.execute(f"SELECT count(*) FROM {table}").fetchone()[0], table
        n_passages = con.execute("SELECT count(*) FROM passages").fetchone()[0]
    finally:
        con.close()
    assert m["counts"]["papers"] == 30 and m["counts"]["lancedb.chunks"] == n_passages
    assert "run_log" not in m["counts"] and "rejects" not in m["counts"]
    # every file is listed with its sha256, and verification passes
    assert "catalog.duckdb" in m["files"] and any(f.startswith("lancedb/chunks.lance/") for f in m["files"])
    assert snapshots.verify(wh) == []
    # the catalog: views over Parquet files inside the snapshot; tables and the passages view answer
    assert any(f.startswith("catalog/papers/") and f.endswith(".parquet") for f in m["files"])
    cat = snapshots.open_catalog(folder)
    try:
        assert cat.execute("SELECT count(*) FROM passages").fetchone()[0] == n_passages
    finally:
        cat.close()
    assert _search_ids(folder, "library")


def test_publish_refuses_stale_vectors(wh):
    """Papers added after the last embed: verification fails, nothing becomes visible."""
    import duckdb

    from pipeline.errors import UserError
    from pipeline.steps.publish import run_publish

    first = run_publish(wh)["snapshot_id"]
    con = duckdb.connect(str(wh.db_path))
    con.execute("INSERT INTO papers (paper_id, source, external_id, title, abstract) "
                "VALUES ('cisi:new', 'cisi', 'new', 'A new paper', 'Not embedded yet.')")
    con.close()
    with pytest.raises(UserError, match="paperkb embed"):
        run_publish(wh)
    assert _visible(wh) == ([first], first)
    assert not [p for p in wh.snapshots_dir.iterdir() if p.name.endswith(".tmp")]


def _table_rows(settings) -> dict[str, int]:
    import duckdb

    with duckdb.connect(str(settings.db_path), read_only=True) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("chunks", "papers", "figures")}


def test_a_publish_takes_the_passage_counts_from_the_embed_run_while_no_logged_write_came_after(wh):
    """The check that LanceDB holds every passage need not count the passages (a scan of every text) when the embed
    run recorded what it wrote and the change log shows no write to the passages' tables since; a graph run writes
    other tables and keeps that; a new paper (written by the upsert, so logged) makes the publish count again, and
    refuse."""
    import duckdb
    import pyarrow as pa

    from pipeline.errors import UserError
    from pipeline.steps.graph import run_graph
    from pipeline.steps.publish import embedded_counts, last_embed, run_publish
    from pipeline.warehouse import Warehouse

    with duckdb.connect(str(wh.db_path), read_only=True) as con:
        passages, papers = con.execute("SELECT count(*), count(DISTINCT paper_id) FROM passages").fetchone()
    assert embedded_counts(last_embed(wh), _table_rows(wh)) == {"chunks": passages, "papers": papers, "figures": 0}
    run_graph(wh)
    assert embedded_counts(last_embed(wh), _table_rows(wh)) == {"chunks": passages, "papers": papers, "figures": 0}
    r = run_publish(wh)
    assert r["counts"]["lancedb.chunks"] == passages and r["counts"]["lancedb.papers"] == papers
    assert embedded_counts(last_embed(wh), {**_table_rows(wh), "papers": 29}) is None  # rows the embed run did not see

    with Warehouse(wh) as w:
        w.upsert("papers", pa.table({"paper_id": ["cisi:new"], "source": ["cisi"], "external_id": ["new"],
                                     "title": ["A new paper"], "abstract": ["Not embedded yet."]}), ["paper_id"])
    assert embedded_counts(last_embed(wh), _table_rows(wh)) is None
    with pytest.raises(UserError, match="paperkb embed"):
        run_publish(wh)
    assert _visible(wh) == ([r["snapshot_id"]], r["snapshot_id"])


@pytest.mark.parametrize("stage", ["built", "verified"])
def test_crash_before_rename_leaves_previous_serving(wh, stage):
    from pipeline.steps.publish import run_publish

    first = run_publish(wh)["snapshot_id"]

    def boom(at, path):
        if at == stage:
            assert path.name.endswith(".tmp") and (path / "manifest.json").exists()
            raise RuntimeError(f"crash at {at}")

    with pytest.raises(RuntimeError, match="crash"):
        run_publish(wh, on_stage=boom)
    assert _visible(wh) == ([first], first)
    assert sorted(p.name for p in wh.snapshots_dir.iterdir() if not p.name.startswith(".")) == sorted(["CURRENT", first])


def test_crash_between_rename_and_swap(wh):
    from pipeline import snapshots
    from pipeline.steps.publish import run_publish

    first = run_publish(wh)["snapshot_id"]
    seen = {}

    def boom(at, path):
        if at == "renamed":
            seen["id"] = path.name
            raise RuntimeError("crash after rename")

    with pytest.raises(RuntimeError):
        run_publish(wh, on_stage=boom)
    ids, cur = _visible(wh)
    assert cur == first  # readers still get the previous snapshot
    assert seen["id"] in ids  # the new one is complete and intact, just not CURRENT: a rollback target
    assert snapshots.verify(wh, seen["id"]) == []
    third = run_publish(wh)["snapshot_id"]
    assert _visible(wh)[1] == third


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pipeline.settings import Settings
    from pipeline.steps.publish import run_publish

    stage, marker = sys.argv[2], Path(sys.argv[3])

    def hang(at, path):
        if at == stage:
            marker.write_text(str(path))
            time.sleep(600)

    run_publish(Settings(warehouse=Path(sys.argv[1])), on_stage=hang)
""")


@pytest.mark.parametrize("stage", ["built", "renamed"])
def test_publish_killed_with_sigkill(wh, tmp_path, stage):
    from pipeline import snapshots
    from pipeline.steps.publish import run_publish

    first = run_publish(wh)["snapshot_id"]
    marker = tmp_path / "at-stage"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(wh.warehouse), stage, str(marker)],
                            cwd=REPO, env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 180
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.time() < deadline, "publish subprocess never reached the stage"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    ids, cur = _visible(wh)
    assert cur == first and snapshots.resolve(wh).name == first
    if stage == "built":
        assert ids == [first]  # the half-built folder is a .tmp that no reader lists or resolves
        assert Path(marker.read_text()).name.endswith(".tmp") and Path(marker.read_text()).exists()
    else:
        assert len(ids) == 2 and snapshots.verify(wh, Path(marker.read_text()).name) == []
    # the next publish cleans up and takes over (the lock died with the process)
    nxt = run_publish(wh)["snapshot_id"]
    assert _visible(wh)[1] == nxt
    assert not [p for p in wh.snapshots_dir.iterdir() if p.name.endswith(".tmp")]


def test_reader_keeps_its_snapshot_while_another_is_published(wh):
    import duckdb
    import lancedb

    from pipeline import snapshots
    from pipeline.steps.embed import run_embed
    from pipeline.steps.publish import run_publish

    run_publish(wh)
    a = snapshots.resolve(wh)  # a reader opens A...
    cat = snapshots.open_catalog(a)
    chunks = lancedb.connect(str(a / "lancedb")).open_table("chunks")
    n_a, hits_a = chunks.count_rows(), _search_ids(a, "library classification")

    # ... while the warehouse loses ten papers and B is embedded and published
    w = duckdb.connect(str(wh.db_path))
    gone = [r[0] for r in w.execute("SELECT paper_id FROM papers ORDER BY paper_id LIMIT 10").fetchall()]
    for table in ("paper_authors", "papers"):
        w.execute(f"DELETE FROM {table} WHERE paper_id IN (SELECT unnest(?))", [gone])
    w.close()
    run_embed(wh)
    b = Path(run_publish(wh)["path"])
    assert snapshots.resolve(wh) == b != a

    assert cat.execute("SELECT count(*) FROM papers").fetchone()[0] == 30
    assert chunks.count_rows() == n_a and _search_ids(a, "library classification") == hits_a
    cat.close()
    assert snapshots.read_manifest(b)["counts"]["papers"] == 20
    assert lancedb.connect(str(b / "lancedb")).open_table("chunks").count_rows() == n_a - 10


def test_rollback_and_retention(wh, tmp_path):
    from pipeline import snapshots
    from pipeline.errors import UserError
    from pipeline.steps.publish import run_publish

    s = wh.model_copy(update={"snapshot_keep": 2, "snapshot_min_age_h": 0})
    ids = [run_publish(s)["snapshot_id"] for _ in range(3)]
    assert _visible(s) == (ids[1:], ids[2])  # oldest removed, CURRENT kept
    r = snapshots.rollback(s, ids[1])
    assert r == {"snapshot_id": ids[1], "previous": ids[2], "path": str(s.snapshots_dir / ids[1])}
    assert snapshots.resolve(s).name == ids[1]
    with pytest.raises(UserError, match="not found"):
        snapshots.rollback(s, ids[0])
    new = run_publish(s)["snapshot_id"]
    assert _visible(s) == ([ids[2], new], new)


def test_retention_keeps_young_snapshots_and_current(tmp_path):
    """Beyond snapshot_keep, a snapshot goes only when it is older than snapshot_min_age_h and not CURRENT."""
    import json
    from datetime import datetime, timedelta, timezone

    from pipeline import snapshots
    from pipeline.steps.publish import apply_retention

    now = datetime(2026, 11, 22, 12, tzinfo=timezone.utc)
    root = tmp_path / "snapshots"
    ages_h = {"s1": 72, "s2": 48, "s3": 30, "s4": 20, "s5": 2, "s6": 1}  # oldest first
    for sid, age in ages_h.items():
        (root / sid).mkdir(parents=True)
        created = (now - timedelta(hours=age)).isoformat()
        (root / sid / "manifest.json").write_text(json.dumps({"snapshot_id": sid, "created_at": created}))
    (root / "CURRENT").write_text("s1\n")  # rolled back to the oldest: never deleted
    assert apply_retention(root, keep=2, min_age_h=24, now=now) == ["s2", "s3"]  # s4 is younger than a day
    assert [s["snapshot_id"] for s in snapshots.list_snapshots(root)] == ["s1", "s4", "s5", "s6"]
    assert apply_retention(root, keep=2, min_age_h=24, now=now + timedelta(hours=5)) == ["s4"]
    assert [s["snapshot_id"] for s in snapshots.list_snapshots(root)] == ["s1", "s5", "s6"]  # the newest 2 + CURRENT
    (root / "CURRENT").write_text("s6\n")
    assert apply_retention(root, keep=1, min_age_h=0, now=now) == ["s1", "s5"]  # 0: snapshot_keep alone decides


def test_corrupted_file_is_caught(wh):
    from pipeline import snapshots
    from pipeline.cli import main
    from pipeline.errors import UserError
    from pipeline.steps.publish import run_publish

    old = run_publish(wh)["snapshot_id"]
    cur = run_publish(wh)["snapshot_id"]
    folder = wh.snapshots_dir / old
    victim = sorted(p for p in (folder / "lancedb").rglob("*.lance") if p.is_file())[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    os.chmod(victim, 0o644)
    victim.write_bytes(bytes(data))
    problems = snapshots.verify(wh, old)
    assert problems == [f"checksum mismatch {victim.relative_to(folder).as_posix()}"]
    with pytest.raises(UserError, match="failed verification"):
        snapshots.rollback(wh, old)
    assert snapshots.current_id(wh) == cur
    assert main(["--warehouse", str(wh.warehouse), "snapshots", "verify", old]) == 2
    # the current snapshot hard-links the same unchanged data file (zero-copy snapshots), so a bit flip in
    # that shared file shows there too; a full verify catches it in every snapshot that holds it
    assert main(["--warehouse", str(wh.warehouse), "snapshots", "verify"]) == 2
    (folder / "extra.txt").write_text("x")
    assert "unexpected file extra.txt" in snapshots.verify(wh, old)


def test_cli_embed_publish_list_rollback(wh, capsys):
    from pipeline.cli import main

    w = str(wh.warehouse)
    assert main(["--warehouse", w, "embed"]) == 0
    assert "0 texts encoded" in capsys.readouterr().out
    assert main(["--warehouse", w, "publish"]) == 0
    first = capsys.readouterr().out.split()[2]
    assert main(["--warehouse", w, "publish"]) == 0
    assert " MB new, " in capsys.readouterr().out
    assert main(["--warehouse", w, "snapshots", "list", "--json"]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out[out.index("["):])
    assert [r["current"] for r in rows] == [False, True] and rows[0]["snapshot_id"] == first
    # the first snapshot is all new; the second, with nothing changed, shares nearly everything with it (hard links)
    assert rows[0]["bytes_new"] == rows[0]["bytes"] > 0
    assert 0 < rows[1]["bytes_new"] < rows[1]["bytes"] / 2
    assert main(["--warehouse", w, "snapshots", "list"]) == 0
    assert f"    ok; {rows[1]['bytes_new'] / 1e6:.1f} MB new; " in capsys.readouterr().out
    import duckdb

    con = duckdb.connect(str(wh.db_path), read_only=True)
    try:  # each publish's run_log row counts them too (monitoring: what each night added)
        logged = [json.loads(c) for (c,) in con.execute(
            "SELECT counts FROM run_log WHERE step = 'publish' ORDER BY started_at").fetchall()]
    finally:
        con.close()
    assert [(c["bytes"], c["bytes_new"]) for c in logged[-2:]] == [(r["bytes"], r["bytes_new"]) for r in rows]
    assert main(["--warehouse", w, "snapshots", "rollback", first]) == 0
    assert f"CURRENT is {first}" in capsys.readouterr().out
    assert main(["--warehouse", w, "snapshots", "rollback", "20990101T000000Z-dead"]) == 2
    assert "not found" in capsys.readouterr().err


def test_vector_index_past_threshold_is_built_and_probed(wh):
    """Past embed_vector_index_min_rows an ANN index is built; publish probes through it."""
    import lancedb

    from pipeline.steps.embed import run_embed
    from pipeline.steps.publish import run_publish

    s = wh.model_copy(update={"embed_vector_index_min_rows": 20, "embed_vector_index_type": "IVF_FLAT",
                              "embed_vector_index_partitions": 2})
    r = run_embed(s)
    assert r["encoded"] == 0 and "ivf_flat:vector" in r["indexes_built"]["chunks"]
    assert {"ivf_flat:abs_vector", "ivf_flat:doc_vector"} <= set(r["indexes_built"]["papers"])
    folder = run_publish(s)["path"]
    t = lancedb.connect(f"{folder}/lancedb").open_table("chunks")
    assert "IvfFlat" in {ix.index_type for ix in t.list_indices()}


# ---- pins and the open check on real snapshots (issue 17) ----------------------------------------------
def test_pinned_snapshot_is_kept_by_retention(wh, capsys, monkeypatch):
    """A reader holding snapshot A (open_snapshot pins it) outlives `keep` publishes; retention says who
    holds it; once the reader closes, the next publish deletes A."""
    from pipeline.cli import main
    from pipeline.steps.publish import run_publish
    from pipeline.query import open_snapshot

    s = wh.model_copy(update={"snapshot_keep": 2, "snapshot_min_age_h": 0})
    a = run_publish(s)["snapshot_id"]
    reader = open_snapshot(s, who="report app")
    assert reader.snapshot_id == a
    results = [run_publish(s) for _ in range(3)]
    ids, cur = _visible(s)
    assert a in ids and cur == results[-1]["snapshot_id"] and len(ids) == 3  # the newest 2 + pinned A
    assert results[-1]["kept_pinned"] == {a: f"pinned by report app pid {os.getpid()}"}
    assert results[1]["removed"] == [] and results[2]["removed"] == [results[0]["snapshot_id"]]  # the next oldest goes
    assert _search_ids(reader.path, "library")  # still readable
    w = str(s.warehouse)
    monkeypatch.setenv("PAPERKB_SNAPSHOT_KEEP", "2")
    monkeypatch.setenv("PAPERKB_SNAPSHOT_MIN_AGE_H", "0")
    monkeypatch.setenv("COLUMNS", "1000")  # the summary whole on one line (80 columns wraps it)
    assert main(["--warehouse", w, "publish"]) == 0
    assert f"kept {a}: pinned by report app pid {os.getpid()}" in capsys.readouterr().out
    assert main(["--warehouse", w, "snapshots", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    status = listed[next(n for n, x in enumerate(listed) if a in x) + 1]  # each snapshot's second line
    assert status.strip().startswith("ok;") and status.endswith(f"; pinned by report app pid {os.getpid()}")
    reader.close()
    assert main(["--warehouse", w, "publish"]) == 0
    assert f"kept {a}" not in capsys.readouterr().out
    assert a not in _visible(s)[0]
    assert not list((s.snapshots_dir / ".pins").iterdir())


def _damage(folder: Path, how: str) -> None:
    import shutil

    from pipeline import snapshots

    if how == "fts index file deleted":
        victim = next(p for p in sorted((folder / "lancedb" / "chunks.lance" / "_indices").rglob("*invert.lance")))
        victim.unlink()
    elif how == "data file deleted":
        next(iter(sorted((folder / "lancedb" / "chunks.lance" / "data").glob("*.lance")))).unlink()
    elif how == "truncated manifest":
        text = (folder / "manifest.json").read_text()
        (folder / "manifest.json").write_text(text[: len(text) // 2])
    elif how == "list-shaped manifest":
        m = snapshots.read_manifest(folder)
        (folder / "manifest.json").write_text(json.dumps(sorted(m["files"])))
    elif how == "no full-text index published":  # e.g. published from a LanceDB whose index was dropped
        m = snapshots.read_manifest(folder)
        fts = next(ix for ix in m["indexes"]["chunks"] if ix["type"] == "FTS")
        m["indexes"]["chunks"].remove(fts)
        prefix = f"lancedb/chunks.lance/_indices/{fts['uuid']}/"
        for key in ("files", "sizes"):
            m[key] = {k: v for k, v in m[key].items() if not k.startswith(prefix)}
        shutil.rmtree(folder / prefix)
        (folder / "manifest.json").write_text(json.dumps(m))
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how, expected", [
    ("fts index file deleted", "(the full-text (BM25) index of chunks)"),
    ("data file deleted", "(a data file of LanceDB table chunks)"),
    ("truncated manifest", "manifest.json is not valid JSON (truncated?)"),
    ("list-shaped manifest", "manifest.json holds a JSON list, not an object"),
    ("no full-text index published", "no full-text (BM25) index on chunks.text"),
])
def test_damaged_snapshot_is_refused_in_one_line(wh, capsys, monkeypatch, how, expected):
    """Every reader (search, related, eval's open, serve) refuses a damaged snapshot with one line, exit 2;
    `snapshots list` shows it as damaged. Before: exit 0 with bm25 = 0, a 76-line traceback, or
    "no snapshots published yet"."""
    from pipeline import snapshots
    from pipeline.cli import main
    from pipeline.errors import DamagedSnapshot
    from pipeline.steps.publish import run_publish
    from pipeline.query import open_snapshot

    sid = run_publish(wh)["snapshot_id"]
    w = str(wh.warehouse)
    if how == "fts index file deleted":  # the intact snapshot answers with BM25 evidence
        assert main(["--warehouse", w, "search", "library classification", "-k", "3", "--json", "--expand", "off"]) == 0
        out = capsys.readouterr().out
        assert any(r["signals"]["bm25"] > 0 for r in json.loads(out[out.index("{"):])["results"])
    _damage(snapshots.resolve(wh), how)
    with pytest.raises(DamagedSnapshot, match=re.escape(expected)):
        open_snapshot(wh)
    import uvicorn

    def no_server(*_a, **_k):
        raise AssertionError("serve started on a damaged snapshot")

    monkeypatch.setattr(uvicorn, "run", no_server)
    for argv in (["search", "library classification", "-k", "3"], ["related", "cisi:1"],
                 ["search", "library", "--snapshot", sid], ["serve", "--port", "8999"], ["serve", "--snapshot", sid]):
        assert main(["--warehouse", w, *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"paperkb: error: snapshot {sid} is damaged: "), err
        assert expected in err
    assert main(["--warehouse", w, "snapshots", "list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"* {sid} ") and "damaged: " in out and expected in out
    assert main(["--warehouse", w, "snapshots", "verify"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    # the next publish is not disturbed by the damaged one, and becomes CURRENT
    nxt = run_publish(wh)["snapshot_id"]
    assert open_snapshot(wh).snapshot_id == nxt


def test_snapshots_share_unchanged_lance_files_and_survive_compaction_and_cleanup(wh, shared_data):
    """Issue 14 item 1: publish, add rows, publish, compact, clean up, then every kept snapshot verifies
    in full and answers searches; unchanged Lance data/index files are hard links, not copies."""
    from datetime import timedelta

    import lancedb

    from pipeline import snapshots
    from pipeline.steps.embed import run_embed
    from pipeline.steps.publish import apply_retention, run_publish

    s = wh.model_copy(update={"snapshot_keep": 3, "snapshot_min_age_h": 0})
    first = run_publish(s)["snapshot_id"]
    again = run_publish(s)["snapshot_id"]  # nothing changed: Lance files are shared, not copied
    a, b = s.snapshots_dir / first / "lancedb", s.snapshots_dir / again / "lancedb"
    data_files = [p.relative_to(a) for p in a.rglob("*") if p.is_file() and "data" in p.relative_to(a).parts[:-1]]
    assert data_files
    assert all((a / r).stat().st_ino == (b / r).stat().st_ino for r in data_files)
    assert all((a / r).stat().st_ino == (s.lancedb_dir / r).stat().st_ino for r in data_files)

    import_cisi_subset(s, shared_data, 40)  # add rows
    run_embed(s)
    third = run_publish(s)["snapshot_id"]
    m1, m3 = snapshots.read_manifest(s.snapshots_dir / first), snapshots.read_manifest(s.snapshots_dir / third)
    assert m3["counts"]["lancedb.papers"] > m1["counts"]["lancedb.papers"]

    db = lancedb.connect(str(s.lancedb_dir))  # compact the working table and drop its old versions
    for name in ("chunks", "papers"):
        db.open_table(name).optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
    assert apply_retention(s.snapshots_dir, keep=2) == [first]  # retention removes the oldest
    kept = [x["snapshot_id"] for x in snapshots.list_snapshots(s)]
    assert kept == [again, third]
    for sid in kept:
        assert snapshots.verify(s, sid) == [], sid
        assert _search_ids(s.snapshots_dir / sid, "information retrieval")
        t = lancedb.connect(str(s.snapshots_dir / sid / "lancedb")).open_table("papers")
        assert t.count_rows() == snapshots.read_manifest(s.snapshots_dir / sid)["counts"]["lancedb.papers"]


def test_a_small_night_rewrites_no_old_file_and_its_rows_are_found_at_once(wh, shared_data):
    """Issue 14 item 1, the nightly policy: new rows get small index deltas, so no data or index file is
    rewritten and the next publish adds only new files; past PAPERKB_EMBED_INDEX_MAX_DELTAS the embed
    compacts and merges the deltas; every snapshot verifies and searches throughout."""
    import lancedb

    from pipeline import snapshots
    from pipeline.steps.embed import index_state, run_embed
    from pipeline.steps.publish import run_publish

    s = wh.model_copy(update={"snapshot_keep": 5, "snapshot_min_age_h": 0, "embed_index_max_deltas": 1})
    first = run_publish(s)["snapshot_id"]
    import_cisi_subset(s, shared_data, 33)  # a small night: 3 new papers on 30
    run_embed(s)
    chunks = lancedb.connect(str(s.lancedb_dir)).open_table("chunks")
    assert index_state(chunks) == (0, 2)  # every row indexed, by the index and one delta
    second = run_publish(s)["snapshot_id"]
    a, b = s.snapshots_dir / first / "lancedb", s.snapshots_dir / second / "lancedb"
    old = {p.relative_to(a): p.stat() for p in a.rglob("*") if p.is_file() and p.relative_to(a).parts[1] in ("data", "_indices")}
    assert old and all((b / r).stat().st_ino == st.st_ino for r, st in old.items())  # every old file shared
    new = [p for p in b.rglob("*") if p.is_file() and p.relative_to(b).parts[1] in ("data", "_indices", "_deletions")
           and p.relative_to(b) not in old]
    assert new and sum(p.stat().st_size for p in new) < sum(st.st_size for st in old.values()) / 2
    # a new paper's chunk is found by the full-text search of the snapshot
    t = lancedb.connect(str(b)).open_table("chunks")
    row = next(r for r in t.to_arrow().to_pylist() if r["paper_id"] == "cisi:33")
    word = max(row["text"].split(), key=len).strip(".,;:()")
    assert row["chunk_id"] in _search_ids(s.snapshots_dir / second, word)
    # the next night would make a second delta: past the limit, the embed merges
    import_cisi_subset(s, shared_data, 36)
    run_embed(s)
    assert index_state(lancedb.connect(str(s.lancedb_dir)).open_table("chunks")) == (0, 1)
    third = run_publish(s)["snapshot_id"]
    for sid in (first, second, third):
        assert snapshots.verify(s, sid) == [], sid
        assert _search_ids(s.snapshots_dir / sid, "information retrieval")
