"""`run_lookup` (paperkb lookup ID...) against recorded arXiv API Atom feeds served over HTTP.

Expected values come from the recorded XML via ElementTree."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import duckdb
import pytest

from arxiv_replay import API_FILES, ArxivReplay
from pipeline.errors import UserError
from pipeline.steps.harvest import run_harvest, run_lookup
from pipeline.raw import RawZone

ATOM = "{http://www.w3.org/2005/Atom}"
ARXIV = "{http://arxiv.org/schemas/atom}"


def recorded_entries(arxiv_dir, id_list):
    root = ET.parse(arxiv_dir / "api" / API_FILES[id_list][0]).getroot()
    return root.findall(f"{ATOM}entry")


@pytest.fixture
def arxiv_dir(shared_data):
    return shared_data / "arxiv"


@pytest.fixture
def replay(httpserver, arxiv_dir):
    return ArxivReplay(arxiv_dir).install(httpserver)


@pytest.fixture
def hs(settings, httpserver):
    return settings.model_copy(update={"arxiv_api_url": httpserver.url_for("/api/query"),
                                       "arxiv_oai_url": httpserver.url_for("/oai"), "retry_max_attempts": 2})


def rows(settings, sql, params=None):
    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def test_versioned_id_and_the_paper_titled_zero(hs, replay, arxiv_dir):
    entry, = recorded_entries(arxiv_dir, "2104.12255v1")
    s = run_lookup(hs, ["2104.12255v1"])
    assert replay.api_log[0].args["id_list"] == "2104.12255v1"
    assert s["found"] == 1 and s["missing"] == [] and s["paper_ids"] == ["2104.12255"]
    (pid, ext, title, latest, cats, primary), = rows(
        hs, "SELECT paper_id, external_id, title, latest_version, categories, primary_category FROM papers")
    assert entry.findtext(f"{ATOM}title") == "0"
    assert (pid, ext, title, latest) == ("2104.12255", "2104.12255", "0", 1)
    assert cats == [c.get("term") for c in entry.findall(f"{ATOM}category")] and primary == "cs.CR"
    assert rows(hs, "SELECT paper_id FROM papers WHERE title = '0'") == [("2104.12255",)]
    assert rows(hs, "SELECT version FROM versions WHERE paper_id = '2104.12255'") == [(1,)]


def test_old_style_id_with_affiliations_and_journal_ref(hs, replay, arxiv_dir):
    entry, = recorded_entries(arxiv_dir, "astro-ph/0601001")
    run_lookup(hs, ["astro-ph/0601001"])
    (pid, jref, published), = rows(hs, "SELECT paper_id, journal_ref, published::VARCHAR FROM papers")
    assert pid == "astro-ph/0601001"
    assert jref == entry.findtext(f"{ARXIV}journal_ref")
    assert published == entry.findtext(f"{ATOM}published")[:10]
    want = [(a.findtext(f"{ATOM}name"), a.findtext(f"{ARXIV}affiliation")) for a in entry.findall(f"{ATOM}author")]
    got = rows(hs, "SELECT name, affiliation FROM paper_authors WHERE paper_id = ? ORDER BY position", [pid])
    assert got == want


def test_two_ids_one_entry_and_non_ascii_names(hs, replay, arxiv_dir):
    entry, = recorded_entries(arxiv_dir, "0808.05394,1707.08567")
    s = run_lookup(hs, ["0808.05394", "1707.08567"])
    assert replay.api_log[0].args["id_list"] == "0808.05394,1707.08567"  # one request for both
    assert s["requested"] == 2 and s["found"] == 1 and s["missing"] == ["0808.05394"]
    want = [a.findtext(f"{ATOM}name") for a in entry.findall(f"{ATOM}author")]
    got = [r[0] for r in rows(hs, "SELECT name FROM paper_authors WHERE paper_id = '1707.08567' ORDER BY position")]
    assert got == want and "Dirk Wübben" in got  # decoded once, not double-encoded
    assert rows(hs, "SELECT author_id, name FROM authors WHERE name = 'Dirk Wübben'") == [("dirk-wubben", "Dirk Wübben")]


def test_empty_feed_is_a_successful_lookup_that_finds_nothing(hs, replay, arxiv_dir):
    assert recorded_entries(arxiv_dir, "0000.0000") == []
    s = run_lookup(hs, ["0000.0000"])
    assert s["found"] == 0 and s["missing"] == ["0000.0000"] and s["rejected"] == 0
    assert rows(hs, "SELECT count(*) FROM papers") == [(0,)]
    assert rows(hs, "SELECT status FROM run_log") == [("ok",)]


def test_http_400_error_feed_is_a_user_error_with_arxivs_message(hs, replay, arxiv_dir):
    entry, = recorded_entries(arxiv_dir, "abc")
    with pytest.raises(UserError) as err:
        run_lookup(hs, ["abc"])
    assert entry.findtext(f"{ATOM}summary") in str(err.value)  # "incorrect id format for abc"
    # the error body was stored before it was parsed, with its status
    entry_raw, = RawZone(hs.raw_dir).entries("arxiv")
    assert entry_raw.status == 400 and entry_raw.params["id_list"] == "abc"
    assert rows(hs, "SELECT status FROM run_log") == [("failed",)]


def test_lookup_is_idempotent_and_replayable(hs, replay):
    run_lookup(hs, ["astro-ph/0601001"])
    again = run_lookup(hs, ["astro-ph/0601001"])
    assert again["papers_written"] == 0 and again["authors_new"] == 0 and again["paper_authors_written"] == 0
    hs.db_path.unlink()
    # replay keeps looked-up papers whatever the category setting (they were asked for by id)
    s = run_harvest(hs.model_copy(update={"categories": ["cs.AI"]}), replay=True)
    assert s["papers_new"] == 1 and s["skipped_category"] == 0
    assert rows(hs, "SELECT paper_id FROM papers") == [("astro-ph/0601001",)]


def test_no_ids_is_a_user_error(hs):
    with pytest.raises(UserError, match="at least one arXiv id"):
        run_lookup(hs, ["  "])
