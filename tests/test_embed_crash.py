"""The LanceDB sync is crash-safe and embed resumes: SIGKILL at many points of a real embed (CISI abstracts),
two concurrent `paperkb embed`, damaged tables from older versions; every time, running `embed` again
leaves consistent tables (one row per id, the warehouse's counts) that `publish` verifies."""

from __future__ import annotations

import os
import shutil
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from embed_helpers import clone_settings, import_cisi_subset, make_settings

REPO = Path(__file__).resolve().parent.parent
N_OLD, N_NEW = 120, 160  # the base warehouse embeds N_OLD abstracts; a test then imports N_NEW

KEYS = {"chunks": "chunk_id", "papers": "paper_id", "figures": "figure_id"}

# Runs `paperkb embed` in this process and SIGKILLs itself at the point named by argv[1] (test-only
# instrumentation by monkeypatching; the product has no kill hook).
KILL_EMBED = textwrap.dedent("""
    import os, signal, sys, threading
    from lancedb.table import LanceTable
    from pipeline.steps import embed
    from pipeline.steps.embed import sync as embed_sync  # where sync_lancedb looks its helpers up
    from pipeline.settings import Settings

    point = sys.argv[1]
    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def timer_on_first(obj, attr, delay):
        orig = getattr(obj, attr)
        def wrapped(*a, **k):
            threading.Timer(delay, die).start()
            setattr(obj, attr, orig)
            return orig(*a, **k)
        setattr(obj, attr, wrapped)

    kind, _, arg = point.partition("+")
    if kind == "sync":        # some time after the sync of the first table starts
        timer_on_first(embed_sync, "repair_table", float(arg))
    elif kind == "create":    # during the first create_table (fresh LanceDB)
        import lancedb.db
        timer_on_first(lancedb.db.LanceDBConnection, "create_table", float(arg))
    elif kind == "merge":     # during merge_insert (existing tables)
        timer_on_first(LanceTable, "merge_insert", float(arg))
    elif kind == "fts":       # during the full-text index build
        timer_on_first(LanceTable, "create_fts_index", float(arg))
    elif kind == "optimize":  # during compaction / cleanup of old versions
        timer_on_first(LanceTable, "optimize", float(arg))
    elif kind == "after":     # right after one table's sync committed, before the next
        orig = embed_sync.sync_table
        def sync(db, name, *a, **k):
            out = orig(db, name, *a, **k)
            if name == arg:
                die()
            return out
        embed_sync.sync_table = sync
    embed.run_embed(Settings())
""")


def _env(settings, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", PAPERKB_WAREHOUSE=str(settings.warehouse), **extra)
    if settings.embed_cache_dir:
        env["PAPERKB_EMBED_CACHE_DIR"] = str(settings.embed_cache_dir)
    if settings.model_cache_dir:  # the session's model cache: the int8 export is made once (conftest)
        env["PAPERKB_MODEL_CACHE_DIR"] = str(settings.model_cache_dir)
    return env


@pytest.fixture(scope="module")
def base(shared_data, tmp_path_factory):
    """A warehouse of N_OLD CISI abstracts, embedded; the shared vector cache also holds N_NEW (so tests
    that import N_NEW sync new rows without encoding)."""
    from pipeline.steps.embed import run_embed

    cache = tmp_path_factory.mktemp("vector-cache")
    big = make_settings(tmp_path_factory.mktemp("big"), embed_cache_dir=cache)
    import_cisi_subset(big, shared_data, N_NEW)
    run_embed(big)
    s = make_settings(tmp_path_factory.mktemp("base"), embed_cache_dir=cache)
    import_cisi_subset(s, shared_data, N_OLD)
    assert run_embed(s)["encoded"] == 0
    return s


def _clone(base, tmp_path, shared_data, *, grow: bool = True, fresh_lancedb: bool = False):
    s = clone_settings(base, tmp_path)
    if grow:
        import_cisi_subset(s, shared_data, N_NEW)
    if fresh_lancedb:  # the vector cache stays: the next embed rebuilds the tables from it
        shutil.rmtree(s.lancedb_dir, ignore_errors=True)
    return s


def assert_consistent(settings) -> dict:
    """Every table opens and reads, one row per id, counts equal the warehouse's; then publish verifies."""
    import duckdb
    import lancedb
    import pyarrow.compute as pc

    from pipeline.steps.publish import run_publish

    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        want = {"chunks": con.execute("SELECT count(*) FROM passages").fetchone()[0],
                "papers": con.execute("SELECT count(DISTINCT paper_id) FROM passages").fetchone()[0]}
    finally:
        con.close()
    db = lancedb.connect(str(settings.lancedb_dir))
    for name, key in KEYS.items():
        t = db.open_table(name)
        ids = t.search().select([key]).limit(None).to_arrow().column(key)
        assert len(pc.unique(ids)) == len(ids) == t.count_rows(), (name, len(ids), t.count_rows())
        if name in want:
            assert len(ids) == want[name], (name, len(ids), want[name])
    summary = run_publish(settings)  # counts, indexes, probe queries and checksums
    assert summary["counts"]["lancedb.chunks"] == want["chunks"]
    return want


def _kill_run(settings, point: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", KILL_EMBED, point], cwd=REPO, env=_env(settings),
                          capture_output=True, text=True, timeout=300)


def test_killed_after_one_table_synced_then_rerun(base, tmp_path, shared_data):
    from pipeline.steps.embed import run_embed

    s = _clone(base, tmp_path, shared_data)
    res = _kill_run(s, "after+chunks")
    assert res.returncode == -signal.SIGKILL, res.stderr[-2000:]
    again = run_embed(s)
    assert again["encoded"] == 0  # nothing re-encoded: the vectors were in the cache
    assert again["changes"]["papers"]["inserted"] == N_NEW - N_OLD  # papers were not synced before the kill
    assert again["changes"]["chunks"]["inserted"] == 0
    assert_consistent(s)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["sync+0", "sync+0.05", "sync+0.2", "sync+0.6", "merge+0", "merge+0.03",
                                   "after+papers", "optimize+0", "optimize+0.05"])
def test_sigkill_during_incremental_sync(base, tmp_path, shared_data, point):
    from pipeline.steps.embed import run_embed

    s = _clone(base, tmp_path, shared_data)
    res = _kill_run(s, point)
    assert res.returncode in (-signal.SIGKILL, 0), res.stderr[-2000:]
    run_embed(s)
    assert_consistent(s)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["create+0", "create+0.02", "create+0.1", "fts+0", "fts+0.05", "after+chunks",
                                   "optimize+0.02"])
def test_sigkill_while_building_fresh_tables(base, tmp_path, shared_data, point):
    from pipeline.steps.embed import run_embed

    s = _clone(base, tmp_path, shared_data, fresh_lancedb=True)
    res = _kill_run(s, point)
    assert res.returncode in (-signal.SIGKILL, 0), res.stderr[-2000:]
    run_embed(s)
    assert_consistent(s)


def test_two_concurrent_embeds_end_consistent(base, tmp_path, shared_data):
    s = _clone(base, tmp_path, shared_data)
    cmd = [sys.executable, "-m", "pipeline.cli", "embed"]
    procs = [subprocess.Popen(cmd, cwd=REPO, env=_env(s), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    codes = sorted(rc for rc, _, _ in results)
    assert codes in ([0, 0], [0, 2]), results
    for rc, out, err in results:
        if rc == 2:  # the loser was refused with one line naming the winner
            assert len(err.strip().splitlines()) == 1 and "is being written by `embed` (pid " in err, err
        else:
            assert out.startswith("embed: "), (out, err)
    assert_consistent(s)
    # and the next embed has nothing to do
    from pipeline.steps.embed import run_embed

    ch = run_embed(s)["changes"]
    assert sum(c["inserted"] + c["updated"] + c["deleted"] for c in ch.values()) == 0


def test_duplicate_ids_from_an_old_concurrent_run_are_repaired(base, tmp_path, shared_data):
    """What two unlocked embeds used to leave behind (issue 17): rows duplicated in chunks; and a data file
    gone from papers. The next embed repairs both from the vector cache, without encoding."""
    import lancedb

    from pipeline.steps.embed import run_embed

    s = _clone(base, tmp_path, shared_data, grow=False)
    db = lancedb.connect(str(s.lancedb_dir))
    chunks = db.open_table("chunks")
    chunks.add(chunks.search().limit(7).to_arrow())  # 7 ids twice
    papers_data = sorted((s.lancedb_dir / "papers.lance" / "data").glob("*"))
    papers_data[0].unlink()
    with pytest.raises(Exception):
        db.open_table("papers").to_arrow()

    out = run_embed(s)
    assert out["encoded"] == 0
    assert "duplicates" in out["changes"]["chunks"]["repaired"] and out["changes"]["chunks"]["rebuilt"]
    assert "unreadable" in out["changes"]["papers"]["repaired"] and out["changes"]["papers"]["rebuilt"]
    assert "repaired" not in out["changes"]["figures"]
    assert_consistent(s)


def test_killed_while_encoding_resumes_from_its_checkpoints(shared_data, tmp_path):
    """A fresh vector cache, checkpoints every 16 texts: SIGKILL once a few checkpoints are staged; the rerun
    encodes only what was not checkpointed (and takes over the dead process's writer lock)."""
    from pipeline.steps.embed import _cache_key
    from pipeline.embedding.encoders import get_encoder

    n = 200
    s = make_settings(tmp_path, embed_cache_dir=tmp_path / "cache", embed_checkpoint_texts=16)
    import_cisi_subset(s, shared_data, n)
    staged = s.staging_dir / "embed" / _cache_key(get_encoder(s))
    env = _env(s, PAPERKB_EMBED_CHECKPOINT_TEXTS="16")
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "embed"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while len(list(staged.glob("*.parquet"))) < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "no checkpoint staged in time"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    kept = len(list(staged.glob("*.parquet")))
    assert kept < n / 16  # killed during encoding, not after it

    res = subprocess.run([sys.executable, "-m", "pipeline.cli", "embed"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    encoded = int(re.search(r";\s+(\d+)\s+texts\s+encoded", res.stdout).group(1))  # wrapped at 80 columns
    assert encoded <= n - 16 * kept, (encoded, kept, res.stdout)
    assert "taking over from `embed`" in res.stderr  # the dead run's lock record
    assert_consistent(s)
