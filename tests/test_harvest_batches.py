"""Batch commits of the harvest merge (``harvest_commit_records``, default 10,000), on real records
over real HTTP (pytest-httpserver replaying ../shared/data/arxiv/oai).

A run killed with SIGKILL between batch commits must leave whole batches (each paper with all its
versions and authors), the watermark unmoved and the list checkpoint unmerged; the rerun resumes the
fetched list without the network and ends with exactly the tables of an uninterrupted run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from arxiv_replay import ArxivReplay, pages_script, renumbered_pages
from pipeline.errors import UserError
from pipeline.steps.harvest import run_harvest
from pipeline.settings import Settings

PAPERKB = shutil.which("paperkb", path=str(Path(sys.executable).parent)) or shutil.which("paperkb")
TABLES = {"papers": "*", "authors": "*", "paper_authors": "*",
          # TIMESTAMPTZ is read as text: DuckDB needs pytz to hand it to Python
          "versions": "* REPLACE (submitted_at::VARCHAR AS submitted_at)"}


@pytest.fixture
def replay(httpserver, shared_data):
    return ArxivReplay(shared_data / "arxiv").install(httpserver)


@pytest.fixture
def hs(settings, httpserver):
    return settings.model_copy(update={
        "arxiv_oai_url": httpserver.url_for("/oai"), "arxiv_api_url": httpserver.url_for("/api/query"),
        "categories": ["*"], "retry_max_attempts": 2,
    })


def query(db_path: Path, sql: str):
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def tables(db_path: Path) -> dict[str, list[tuple]]:
    return {t: query(db_path, f"SELECT {cols} FROM {t} ORDER BY ALL") for t, cols in TABLES.items()}


def watermark(db_path: Path):
    rows = query(db_path, "SELECT value FROM watermarks WHERE source = 'arxiv_oai'")
    return rows[0][0] if rows else None


def test_default_commits_in_bounded_batches():
    # the default is bounded (memory flat); 0 (one transaction) stays an option
    assert Settings.model_fields["harvest_commit_records"].default == 10_000
    assert Settings.load(harvest_commit_records=0).harvest_commit_records == 0


def test_batch_commits_give_the_tables_of_one_transaction(hs, replay):
    # the recorded list: 2 pages, 9 papers; one record per part and per commit vs one transaction
    results = {}
    for commit in (0, 1):
        s = hs.model_copy(update={"warehouse": hs.warehouse / f"c{commit}", "harvest_batch_records": 1,
                                  "harvest_commit_records": commit})
        summary = run_harvest(s)
        assert (summary["papers_new"], summary["rejected"], summary["watermark"]) == (9, 0, "2015-01-06")
        results[commit] = (tables(s.db_path), watermark(s.db_path),
                           query(s.db_path, "SELECT status FROM harvest_checkpoints"))
    assert results[0] == results[1]
    assert results[1][1] == "2015-01-06" and results[1][2] == [("merged",)]


def test_harvest_memory_limit_is_checked(hs):
    with pytest.raises(UserError, match="PAPERKB_HARVEST_MEMORY_LIMIT 'lots'"):
        run_harvest(hs.model_copy(update={"harvest_memory_limit": "lots"}), replay=True)


@pytest.mark.slow
def test_harvest_killed_between_batch_commits_leaves_whole_batches_and_reruns_to_the_same_tables(
        replay, hs, shared_data, tmp_path):
    n_records, page_size, batch = 3000, 500, 150  # 20 batch commits
    replay.first, replay.pages = pages_script(renumbered_pages(shared_data / "arxiv", n_records, page_size))
    s = hs.model_copy(update={"harvest_batch_records": batch, "harvest_commit_records": batch})

    # an uninterrupted run for reference
    ref = s.model_copy(update={"warehouse": tmp_path / "reference"})
    summary = run_harvest(ref)
    assert summary["papers_new"] == n_records and summary["pages"] == n_records // page_size
    want, want_watermark = tables(ref.db_path), watermark(ref.db_path)
    assert want_watermark == "2015-01-06"

    # the same run as `paperkb harvest` in a child process, SIGKILLed once the first batch is committed
    killed = s.model_copy(update={"warehouse": tmp_path / "killed"})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(PAPERKB_ARXIV_OAI_URL=s.arxiv_oai_url, PAPERKB_ARXIV_DELAY_S="0",
               PAPERKB_HARVEST_BATCH_RECORDS=str(batch), PAPERKB_HARVEST_COMMIT_RECORDS=str(batch))
    cmd = [PAPERKB] if PAPERKB else [sys.executable, "-m", "pipeline.cli"]
    requests_before = len(replay.oai_log)
    proc = subprocess.Popen([*cmd, "--warehouse", str(killed.warehouse), "harvest", "--categories", "*"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    db = killed.db_path
    try:
        # the list's pages are fetched and checkpointed through the WAL; the database file itself only
        # grows when a CHECKPOINT writes table data, i.e. right after the first batch commit
        deadline = time.monotonic() + 120
        while len(replay.oai_log) < requests_before + n_records // page_size or not db.exists():
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, "the harvest never fetched the whole list"
            time.sleep(0.005)
        size = db.stat().st_size
        while db.stat().st_size <= size:
            assert proc.poll() is None, "the harvest finished before it could be killed between batches"
            assert time.monotonic() < deadline, "no batch was ever committed"
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL

    # whole batches: every paper there has exactly the rows of the uninterrupted run, nothing else
    got = tables(db)
    n = len(got["papers"])
    assert 0 < n < n_records and n % batch == 0, n
    kept = {row[0] for row in got["papers"]}
    for t in ("papers", "paper_authors", "versions"):
        assert got[t] == [row for row in want[t] if row[0] in kept], t
    assert set(got["authors"]) <= set(want["authors"])
    assert query(db, "SELECT count(*) FROM papers p WHERE NOT EXISTS "
                     "(SELECT 1 FROM versions v WHERE v.paper_id = p.paper_id)") == [(0,)]
    # the watermark did not move and the list is fetched but not merged
    assert watermark(db) is None
    assert query(db, "SELECT status, pages_done FROM harvest_checkpoints") == [("fetched", n_records // page_size)]

    # the rerun resumes the fetched list (no request), skips the committed batches, ends identical
    requests = len(replay.oai_log)
    again = run_harvest(killed)
    assert len(replay.oai_log) == requests
    assert again["resumed"] is True and again["papers_new"] == n_records - n and again["papers_updated"] == 0
    assert tables(db) == want
    assert watermark(db) == want_watermark
    assert query(db, "SELECT status FROM harvest_checkpoints") == [("merged",)]
