"""`run_harvest` against recorded arXiv OAI-PMH responses served over real HTTP (pytest-httpserver).

Expected values are read from the recorded XML with the standard library's ElementTree, not from
the code under test.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET

import duckdb
import pytest

from arxiv_replay import LAST_PAGE, LIST_PAGE, RECORDED_TOKEN, ArxivReplay
from pipeline.errors import StepFailed, UserError
from pipeline.steps.harvest import run_harvest
from pipeline.raw import RawZone

OAI = "{http://www.openarchives.org/OAI/2.0/}"


def recorded(path):
    """(identifier -> metadata element, responseDate, token) from a recorded page, via ElementTree."""
    root = ET.parse(path).getroot()
    recs = {}
    for r in root.iter(f"{OAI}record"):
        meta = r.find(f"{OAI}metadata")[0]
        ns = meta.tag.split("}")[0] + "}"
        recs[meta.findtext(f"{ns}id")] = (meta, ns)
    token = root.find(f".//{OAI}resumptionToken")
    return recs, root.findtext(f"{OAI}responseDate"), (token.text if token is not None else None)


@pytest.fixture
def arxiv_dir(shared_data):
    return shared_data / "arxiv"


@pytest.fixture
def replay(httpserver, arxiv_dir):
    return ArxivReplay(arxiv_dir).install(httpserver)


@pytest.fixture
def hs(settings, httpserver):
    """Settings pointing at the replay server, keeping every category, 2 attempts per request."""
    return settings.model_copy(update={
        "arxiv_oai_url": httpserver.url_for("/oai"), "arxiv_api_url": httpserver.url_for("/api/query"),
        "categories": ["*"], "retry_max_attempts": 2,
    })


def db(settings):
    return duckdb.connect(str(settings.db_path), read_only=True)


def table_rows(settings, sql):
    con = db(settings)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def watermark(settings):
    rows = table_rows(settings, "SELECT value FROM watermarks WHERE source = 'arxiv_oai'")
    return rows[0][0] if rows else None


# ------------------------------------------------------------------------------------------------
def test_paging_follows_the_recorded_resumption_token(hs, replay, arxiv_dir):
    page1, date1, token1 = recorded(arxiv_dir / "oai" / LIST_PAGE)
    page2, _, token2 = recorded(arxiv_dir / "oai" / LAST_PAGE)
    assert token1 == RECORDED_TOKEN and token2 is None

    s = run_harvest(hs)

    assert [x.args for x in replay.oai_log] == [
        {"verb": "ListRecords", "metadataPrefix": "arXivRaw", "set": "cs"},
        {"verb": "ListRecords", "resumptionToken": token1},
    ]
    assert s["pages"] == 2 and s["records_in"] == len(page1) + len(page2)
    assert s["papers_written"] == s["papers_new"] == len(page1) + len(page2) and s["rejected"] == 0
    rows = dict(table_rows(hs, "SELECT paper_id, title FROM papers"))
    assert set(rows) == set(page1) | set(page2)
    for pid, (meta, ns) in {**page1, **page2}.items():
        assert rows[pid] == " ".join(meta.findtext(f"{ns}title").split())
    # versions from arXivRaw: every <version> of every record
    n_versions = sum(len(m.findall(f"{ns}version")) for m, ns in page1.values())
    assert table_rows(hs, "SELECT count(*) FROM versions")[0][0] == n_versions
    # 0704.0716 has v1..v4: latest_version and dates from the first and last version
    meta, ns = page1["0704.0716"]
    (latest, published, updated), = table_rows(hs, "SELECT latest_version, published::VARCHAR, updated::VARCHAR FROM papers WHERE paper_id = '0704.0716'")
    assert latest == len(meta.findall(f"{ns}version")) == 4
    assert (published, updated) == ("2007-04-05", "2008-11-14")
    # structured authors from metadataPrefix=arXiv, in order
    meta, ns = page2["1607.01710"]
    want = [" ".join(x for x in (a.findtext(f"{ns}forenames"), a.findtext(f"{ns}keyname")) if x)
            for a in meta.find(f"{ns}authors")]
    got = [r[0] for r in table_rows(hs, "SELECT name FROM paper_authors WHERE paper_id = '1607.01710' ORDER BY position")]
    assert got == want
    # checkpoint finished, watermark = day of the first responseDate
    (status, pages, token), = table_rows(hs, "SELECT status, pages_done, resumption_token FROM harvest_checkpoints")
    assert (status, pages, token) == ("merged", 2, None)
    assert watermark(hs) == date1[:10] == s["watermark"]


def test_every_page_is_in_the_raw_zone_byte_exact_before_parsing(hs, replay, arxiv_dir):
    run_harvest(hs)
    entries = list(RawZone(hs.raw_dir).entries("arxiv"))
    assert len(entries) == 2
    for entry, name in zip(entries, [LIST_PAGE, LAST_PAGE]):
        body = (arxiv_dir / "oai" / name).read_bytes()
        assert RawZone(hs.raw_dir).read(entry) == body
        assert entry.sha256 == hashlib.sha256(body).hexdigest() and entry.status == 200
        assert entry.params["verb"] == "ListRecords"


def test_idempotent_rerun_writes_nothing(hs, replay):
    first = run_harvest(hs)
    snapshot = table_rows(hs, "SELECT * FROM papers ORDER BY paper_id")
    second = run_harvest(hs)  # from the new watermark; the server answers with the same records
    assert replay.list_starts == 2 and replay.oai_log[2].args["from"] == first["watermark"]
    assert second["records_in"] == first["records_in"]
    assert second["papers_written"] == 0 and second["authors_new"] == 0
    assert second["versions_written"] == 0 and second["paper_authors_written"] == 0
    assert table_rows(hs, "SELECT * FROM papers ORDER BY paper_id") == snapshot
    counts = [json.loads(c) for (c,) in table_rows(hs, "SELECT counts FROM run_log WHERE step = 'harvest' ORDER BY started_at")]
    assert [c["papers_written"] for c in counts] == [9, 0]


def test_resume_after_a_failure_mid_list_does_not_refetch_page_one(hs, replay):
    replay.pages = {RECORDED_TOKEN: [(500, b"Internal Server Error", {})]}
    with pytest.raises(StepFailed, match="run again to resume"):
        run_harvest(hs)
    # nothing merged, watermark not moved, the token is checkpointed
    assert table_rows(hs, "SELECT count(*) FROM papers")[0][0] == 0
    assert watermark(hs) is None
    (status, pages, token), = table_rows(hs, "SELECT status, pages_done, resumption_token FROM harvest_checkpoints")
    assert (status, pages, token) == ("listing", 1, RECORDED_TOKEN)
    assert table_rows(hs, "SELECT status FROM run_log")[0][0] == "failed"
    assert len(replay.oai_log) == 1 + hs.retry_max_attempts

    replay.pages = {RECORDED_TOKEN: [LAST_PAGE]}
    replay.oai_log.clear()
    s = run_harvest(hs)
    assert s["resumed"] is True
    assert [x.args for x in replay.oai_log] == [{"verb": "ListRecords", "resumptionToken": RECORDED_TOKEN}]
    assert s["pages"] == 2 and s["papers_new"] == 9
    assert watermark(hs) == "2015-01-06"


def test_no_records_match_is_an_empty_successful_harvest(hs, replay, arxiv_dir):
    replay.first = "saelim2015_ErrorResponseNoRecordsMatch.xml"
    s = run_harvest(hs, from_date="2015-06-01")
    _, date1, _ = recorded(arxiv_dir / "oai" / replay.first)
    assert s["oai_error"] == "noRecordsMatch" and s["records_in"] == 0 and s["papers_written"] == 0
    assert s["rejected"] == 0 and watermark(hs) == date1[:10]
    assert table_rows(hs, "SELECT status FROM run_log") == [("ok",)]
    assert replay.oai_log[0].args["from"] == "2015-06-01"


def test_bad_resumption_token_restarts_the_list_from_the_watermark(hs, replay):
    replay.pages = {RECORDED_TOKEN: ["saelim2015_ErrorResponseBadResumptionToken.xml", LAST_PAGE]}
    s = run_harvest(hs)
    starts = [x.args for x in replay.oai_log if "resumptionToken" not in x.args]
    assert len(starts) == 2 and starts[0] == starts[1]
    assert s["restarts"] == 1 and s["papers_new"] == 9
    assert sorted(r[0] for r in table_rows(hs, "SELECT status FROM harvest_checkpoints")) == ["merged", "restarted"]


def test_bad_resumption_token_every_time_stops_cleanly(hs, replay):
    replay.pages = {RECORDED_TOKEN: ["saelim2015_ErrorResponseBadResumptionToken.xml"]}
    with pytest.raises(StepFailed, match="refused the resumption token"):
        run_harvest(hs)
    assert replay.list_starts == hs.oai_max_restarts + 1
    assert table_rows(hs, "SELECT count(*) FROM papers")[0][0] == 0 and watermark(hs) is None


@pytest.mark.parametrize("name, error, text", [
    ("saelim2015_ErrorResponseBadArgument.xml", UserError, "badArgument: Verb 'ListRecords', illegal argument 'identifier'"),
    ("saelim2015_ErrorResponseIdDoesNotExist.xml", StepFailed, "idDoesNotExist: Identifier 'oai:arXiv.org:0813.2274'"),
])
def test_other_oai_errors_fail_with_the_code_and_message(hs, replay, name, error, text):
    replay.first = name
    with pytest.raises(error, match=text.replace("(", r"\(").replace(".", r"\.")):
        run_harvest(hs)
    (status, message), = table_rows(hs, "SELECT status, message FROM run_log")
    assert status == "failed" and text.split(":")[0] in message
    assert table_rows(hs, "SELECT count(*) FROM papers")[0][0] == 0 and watermark(hs) is None


def test_truncated_page_is_rejected_and_the_run_continues(hs, replay, arxiv_dir):
    body = (arxiv_dir / "oai" / LAST_PAGE).read_bytes()
    cut = body[: len(body) // 2]
    replay.pages = {RECORDED_TOKEN: [cut]}
    s = run_harvest(hs)
    # page 1 (6 records) is loaded; page 2 was retried, stored as received, and rejected
    assert s["papers_new"] == 6 and s["rejected"] == 1 and s["rejected_pages"] == 1
    (raw_path, reason, detail), = table_rows(hs, "SELECT raw_path, reason, detail FROM rejects")
    assert reason == "malformed OAI-PMH response" and "well-formed" in detail
    assert RawZone(hs.raw_dir).read(raw_path) == cut
    assert len([x for x in replay.oai_log if "resumptionToken" in x.args]) == hs.retry_max_attempts
    # the data of the rejected page was not seen: the watermark stays so the next run asks again
    assert watermark(hs) is None and s["watermark_moved"] is False
    assert table_rows(hs, "SELECT status FROM run_log") == [("ok",)]


def test_a_bad_record_is_rejected_with_its_key(hs, replay, arxiv_dir):
    # a real page with one record's <title> removed (a small synthetic fixture built from real data)
    body = (arxiv_dir / "oai" / LAST_PAGE).read_bytes()
    start = body.index(b"<title>")
    body = body[:start] + body[body.index(b"</title>", start) + len(b"</title>"):]
    replay.first, replay.pages = body, {}
    s = run_harvest(hs)
    assert s["rejected"] == 1 and s["papers_new"] == 2 and s["watermark_moved"] is True
    assert table_rows(hs, "SELECT record_key, reason FROM rejects") == [("1412.8323", "missing title")]


def test_categories_filter_keeps_cross_lists(hs, replay, arxiv_dir):
    page1, _, _ = recorded(arxiv_dir / "oai" / LIST_PAGE)
    page2, _, _ = recorded(arxiv_dir / "oai" / LAST_PAGE)
    want = {pid for pid, (m, ns) in {**page1, **page2}.items()
            if any(c == "nucl-th" or c.startswith("hep-th") for c in m.findtext(f"{ns}categories").split())}
    s = run_harvest(hs.model_copy(update={"categories": ["nucl-th", "hep-th"]}))
    got = {r[0] for r in table_rows(hs, "SELECT paper_id FROM papers")}
    assert got == want and len(want) == 5
    assert s["skipped_category"] == 9 - len(want)


def test_default_category_cs_ai_keeps_nothing_from_physics_pages(hs, replay):
    s = run_harvest(hs.model_copy(update={"categories": ["cs.AI"]}))
    assert s["papers_written"] == 0 and s["skipped_category"] == 9


def test_replay_rebuilds_the_tables_without_network(hs, replay, httpserver):
    run_harvest(hs)
    tables = {"papers": "*", "authors": "*", "paper_authors": "*",
              # TIMESTAMPTZ is read as text: DuckDB needs pytz to hand it to Python
              "versions": "* REPLACE (submitted_at::VARCHAR AS submitted_at)"}
    before = {t: table_rows(hs, f"SELECT {cols} FROM {t} ORDER BY ALL") for t, cols in tables.items()}
    hs.db_path.unlink()
    n_requests = len(replay.oai_log)
    offline = hs.model_copy(update={"arxiv_oai_url": "http://127.0.0.1:9/oai", "arxiv_api_url": "http://127.0.0.1:9/api"})
    s = run_harvest(offline, replay=True)
    assert len(replay.oai_log) == n_requests
    assert s["mode"] == "replay" and s["pages"] == 2 and s["papers_new"] == 9
    after = {t: table_rows(hs, f"SELECT {cols} FROM {t} ORDER BY ALL") for t, cols in tables.items()}
    assert after == before
    again = run_harvest(offline, replay=True)
    assert again["papers_written"] == 0 and again["versions_written"] == 0


def test_dates_are_validated(hs):
    with pytest.raises(UserError, match="YYYY-MM-DD"):
        run_harvest(hs, from_date="yesterday")
    with pytest.raises(UserError, match="before --from"):
        run_harvest(hs, from_date="2024-02-01", until_date="2024-01-01")


def test_explicit_window_is_sent_and_does_not_move_the_watermark_back(hs, replay):
    run_harvest(hs)  # watermark 2015-01-06
    replay.oai_log.clear()
    s = run_harvest(hs, from_date="2014-10-01", until_date="2014-10-31")
    assert replay.oai_log[0].args == {"verb": "ListRecords", "metadataPrefix": "arXivRaw", "set": "cs",
                                      "from": "2014-10-01", "until": "2014-10-31"}
    assert watermark(hs) == "2015-01-06" and s["watermark_moved"] is False


def test_parallel_parse_replay_equals_serial(hs, replay):
    # two harvested lists = 4 pages with every paper twice, so the latest-record-wins rule spans workers
    run_harvest(hs)
    run_harvest(hs)
    tables = {"papers": "*", "authors": "*", "paper_authors": "*",
              "versions": "* REPLACE (submitted_at::VARCHAR AS submitted_at)"}
    results = {}
    for workers in (1, 2):
        hs.db_path.unlink()
        s = run_harvest(hs.model_copy(update={"harvest_parse_workers": workers, "harvest_batch_records": 1000}),
                        replay=True)
        assert (s["pages"], s["records_in"], s["papers_new"], s["rejected"]) == (4, 18, 9, 0)
        results[workers] = {t: table_rows(hs, f"SELECT {c} FROM {t} ORDER BY ALL") for t, c in tables.items()}
    assert results[1] == results[2]


def test_parallel_parse_with_groups_that_keep_nothing(hs, replay):
    run_harvest(hs)
    run_harvest(hs)  # pages: saelim, hepcrawl, saelim, hepcrawl; only saelim has nucl-th papers
    hs.db_path.unlink()
    s = run_harvest(hs.model_copy(update={"harvest_parse_workers": 2, "harvest_batch_records": 1000,
                                          "categories": ["nucl-th"]}), replay=True)
    assert (s["records_in"], s["papers_new"], s["skipped_category"]) == (18, 2, 14)
    assert {r[0] for r in table_rows(hs, "SELECT paper_id FROM papers")} == {"0704.0471", "0704.1586"}
