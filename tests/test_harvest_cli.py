"""End to end: the installed `paperkb` command against the replay server, and a harvest killed
with SIGKILL in the middle of a list that resumes from its checkpoint."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from arxiv_replay import LAST_PAGE, RECORDED_TOKEN, ArxivReplay
from pipeline.steps.harvest import run_harvest

PAPERKB = shutil.which("paperkb", path=str(Path(sys.executable).parent)) or shutil.which("paperkb")


@pytest.fixture
def replay(httpserver, shared_data):
    return ArxivReplay(shared_data / "arxiv").install(httpserver)


@pytest.fixture
def env(httpserver, tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    e.update(PAPERKB_ARXIV_OAI_URL=httpserver.url_for("/oai"), PAPERKB_ARXIV_API_URL=httpserver.url_for("/api/query"),
             PAPERKB_ARXIV_DELAY_S="0", PAPERKB_RETRY_MAX_BACKOFF_S="0.05", PAPERKB_RETRY_MAX_ATTEMPTS="2",
             COLUMNS="1000")  # each summary whole on one line (80 columns wraps it)
    return e


def paperkb(env, warehouse, *args, timeout=120):
    cmd = [PAPERKB] if PAPERKB else [sys.executable, "-m", "pipeline.cli"]
    return subprocess.run([*cmd, "--warehouse", str(warehouse), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_cli_harvest_lookup_replay_end_to_end(replay, env, tmp_path):
    wh = tmp_path / "wh"
    r = paperkb(env, wh, "harvest", "--categories", "*")
    assert r.returncode == 0, r.stderr
    line, = r.stdout.strip().splitlines()
    assert line.startswith("harvest: 2 pages, 9 records in, 9 papers written (9 new, 0 updated)")
    assert "0 rejected" in line and "watermark 2015-01-06" in line

    r = paperkb(env, wh, "harvest", "--categories", "*")
    assert r.returncode == 0 and "0 papers written" in r.stdout and "from" in replay.oai_log[-2].args

    r = paperkb(env, wh, "lookup", "2104.12255v1")
    assert r.returncode == 0 and r.stdout.startswith("lookup: 1 ids asked, 1 found"), r.stderr

    r = paperkb(env, wh, "lookup", "abc")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["paperkb: error: arXiv API refused the request: incorrect id format for abc"]

    r = paperkb({**env, "PAPERKB_ARXIV_OAI_URL": "http://127.0.0.1:9/oai"}, wh, "harvest", "--replay", "--categories", "cs,nucl-th")
    assert r.returncode == 0 and r.stdout.startswith("harvest (replay):") and "0 papers written" in r.stdout, r.stderr

    con = duckdb.connect(str(wh / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM papers").fetchone()[0] == 10
        assert con.execute("SELECT title FROM papers WHERE paper_id = '2104.12255'").fetchone()[0] == "0"
    finally:
        con.close()


@pytest.mark.slow
def test_harvest_killed_mid_list_resumes_from_the_checkpoint(replay, env, tmp_path, settings, httpserver):
    release = threading.Event()

    def hang():
        release.wait(60)
        return LAST_PAGE

    replay.pages = {RECORDED_TOKEN: [hang, LAST_PAGE]}
    wh = tmp_path / "wh"
    cmd = [PAPERKB] if PAPERKB else [sys.executable, "-m", "pipeline.cli"]
    proc = subprocess.Popen([*cmd, "--warehouse", str(wh), "harvest", "--categories", "*"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not any("resumptionToken" in s.args for s in replay.oai_log):
            assert time.monotonic() < deadline and proc.poll() is None, "harvest never asked for page 2"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # killed while waiting for page 2
        proc.wait(30)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL

    s = settings.model_copy(update={"warehouse": wh, "arxiv_oai_url": httpserver.url_for("/oai"), "categories": ["*"]})
    con = duckdb.connect(str(s.db_path), read_only=True)
    try:  # page 1 stored and checkpointed; nothing merged
        assert con.execute("SELECT status, pages_done, resumption_token FROM harvest_checkpoints").fetchall() == [
            ("listing", 1, RECORDED_TOKEN)]
        assert con.execute("SELECT count(*) FROM papers").fetchone()[0] == 0
    finally:
        con.close()
    starts = replay.list_starts
    summary = run_harvest(s)
    assert replay.list_starts == starts == 1  # page 1 was not fetched again
    assert summary["resumed"] and summary["pages"] == 2 and summary["papers_new"] == 9
