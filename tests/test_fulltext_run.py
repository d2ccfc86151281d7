"""`paperkb fulltext` end to end: real PDFs served over HTTP (pytest-httpserver), papers in the
warehouse, downloads into the raw zone, rejects with reasons, idempotent reruns and replay."""

from __future__ import annotations

import hashlib

import pyarrow.parquet as pq
import pymupdf
import pytest
from fulltext_sources import read_pdf_table
from werkzeug import Response

from pipeline.steps.fulltext import extract_batch, fetch_batch, fetch_extract_batch, merge_fulltext, plan_batches, run_fulltext
from pipeline.raw import RawZone
from pipeline.warehouse import Warehouse

GOOD = ["1409.0473", "1505.04597", "1508.04025"]


def _add_papers(settings, rows):
    with Warehouse(settings) as wh:
        wh.init()
        wh.con.execute("CREATE TABLE IF NOT EXISTS papers (paper_id VARCHAR PRIMARY KEY, source VARCHAR NOT NULL, "
                       "external_id VARCHAR NOT NULL, open_access_pdf_url VARCHAR)")  # only if harvest's is absent
        for pid, source, ext, oa in rows:
            wh.con.execute("INSERT INTO papers (paper_id, source, external_id, open_access_pdf_url) VALUES (?, ?, ?, ?)",
                           [pid, source, ext, oa])


def _snapshot(settings):
    with Warehouse(settings, read_only=True) as wh:
        out = {}
        for t, order in (("chunks", "chunk_id"), ("figures", "figure_id"), ("fulltext_docs", "paper_id"),
                         ("rejects", "reject_id")):
            out[t] = wh.con.execute(f"SELECT * FROM {t} ORDER BY {order}").fetchall()
        return out


@pytest.fixture
def served(httpserver, shared_data, settings):
    pdf_dir = shared_data / "arxiv" / "pdf"
    for pid in GOOD:
        httpserver.expect_request(f"/pdf/{pid}").respond_with_data((pdf_dir / f"{pid}.pdf").read_bytes(),
                                                                   content_type="application/pdf")
    real = (pdf_dir / "1512.03385.pdf").read_bytes()
    httpserver.expect_request("/pdf/2401.00001").respond_with_data("Not Found", status=404)
    httpserver.expect_request("/pdf/2401.00002").respond_with_data(
        "<!DOCTYPE html><html><body>arXiv is busy, try later</body></html>", content_type="text/html")
    httpserver.expect_request("/pdf/2401.00003").respond_with_data(real[: len(real) // 3], content_type="application/pdf")
    httpserver.expect_request("/pdf/2401.00004").respond_with_data(b"", content_type="application/pdf")
    calls = {"flaky": 0, "down": 0}

    def flaky(request):  # two 503s, then the PDF: retried within the run
        calls["flaky"] += 1
        if calls["flaky"] <= 2:
            return Response("busy", status=503, headers={"Retry-After": "0"})
        return Response((pdf_dir / "1412.6980.pdf").read_bytes(), content_type="application/pdf")

    def down(request):  # always 503: retried next run
        calls["down"] += 1
        return Response("down", status=503)

    httpserver.expect_request("/pdf/1412.6980").respond_with_handler(flaky)
    httpserver.expect_request("/pdf/2401.00005").respond_with_handler(down)
    httpserver.expect_request("/oa/x1.pdf").respond_with_data((pdf_dir / "1706.03762.pdf").read_bytes(),
                                                              content_type="application/pdf")
    settings = settings.model_copy(update={"arxiv_pdf_url": httpserver.url_for("/pdf"), "retry_max_attempts": 3})
    rows = [(pid, "arxiv", pid, None) for pid in GOOD + ["1412.6980"]]
    rows += [(f"2401.0000{k}", "arxiv", f"2401.0000{k}", None) for k in range(1, 6)]
    rows += [("jsonl:x1", "jsonl", "x1", httpserver.url_for("/oa/x1.pdf")),  # S2 openAccessPdf, no arXiv
             ("cisi:1", "cisi", "1", None)]  # no PDF anywhere: not planned
    _add_papers(settings, rows)
    return settings, calls


def test_fulltext_downloads_extracts_rejects_and_reruns_idempotently(served, shared_data, httpserver):
    settings, calls = served
    facts = {f.paper_id: f for f in read_pdf_table(shared_data / "arxiv" / "SOURCES.md")}
    first = run_fulltext(settings)
    assert first["papers"] == 10  # 9 arXiv + 1 open access; the CISI paper has no PDF source
    assert first["extracted"] == 5 and first["rejected"] == 4 and first["retry_later"] == 1
    assert calls["flaky"] == 3 and calls["down"] == 3

    with Warehouse(settings, read_only=True) as wh:
        docs = dict(wh.con.execute("SELECT paper_id, coalesce(reason, status) FROM fulltext_docs").fetchall())
        assert docs == {"1409.0473": "ok", "1505.04597": "ok", "1508.04025": "ok", "1412.6980": "ok", "jsonl:x1": "ok",
                        "2401.00001": "http_404", "2401.00002": "not_pdf", "2401.00003": "truncated",
                        "2401.00004": "empty"}
        rejects = dict(wh.con.execute("SELECT record_key, reason FROM rejects WHERE step = 'fulltext'").fetchall())
        assert rejects == {"2401.00001": "http_404", "2401.00002": "not_pdf", "2401.00003": "truncated",
                           "2401.00004": "empty", "2401.00005": "download_failed"}
        assert wh.con.execute("SELECT count(*) FROM rejects WHERE raw_path IS NOT NULL AND reason = 'truncated'").fetchone()[0] == 1
        figs = dict(wh.con.execute("SELECT paper_id, count(*) FROM figures GROUP BY 1").fetchall())
        for pid in GOOD + ["1412.6980"]:
            assert figs[pid] == facts[pid].figures
        assert figs["jsonl:x1"] == facts["1706.03762"].figures
        n_chunks = dict(wh.con.execute("SELECT paper_id, count(*) FROM chunks GROUP BY 1").fetchall())
        assert set(n_chunks) == {"1409.0473", "1505.04597", "1508.04025", "1412.6980", "jsonl:x1"}
        row = wh.con.execute("SELECT n_pages, n_chunks, n_figures, abstract_text, extracted_at FROM fulltext_docs "
                             "WHERE paper_id = '1508.04025'").fetchone()
        assert row[0] == facts["1508.04025"].pages and row[1] == n_chunks["1508.04025"] and row[3] and row[4]
        status = wh.con.execute("SELECT status, counts FROM run_log WHERE step = 'fulltext'").fetchone()
        assert status[0] == "ok"

    # raw zone: byte-exact bodies with a manifest; parsing read them from there
    rz = RawZone(settings.raw_dir)
    entries = {e.params["paper_id"]: e for e in rz.entries("pdf")}
    for pid in GOOD:
        assert rz.read(entries[pid]) == (shared_data / "arxiv" / "pdf" / f"{pid}.pdf").read_bytes()
        assert rz.verify(entries[pid])
    assert entries["2401.00002"].content_type.startswith("text/html")  # stored as received, rejected by the parser
    assert "2401.00001" not in entries  # a 404 has no body worth keeping

    before = _snapshot(settings)
    n_requests = len(httpserver.log)
    # rerun: only the paper that failed for a transient reason is tried again; nothing else changes
    second = run_fulltext(settings)
    assert second["papers"] == 1 and second["retry_later"] == 1
    assert len(httpserver.log) == n_requests + 3
    assert second["merge"]["papers_changed"] == 0 and second["merge"]["chunks_written"] == 0
    after = _snapshot(settings)
    assert after == before  # same rows, same extracted_at; the repeated reject is not added again

    # replay: everything re-extracted from the raw zone, no network, no change
    third = run_fulltext(settings, replay=True)
    assert len(httpserver.log) == n_requests + 3
    assert third["extracted"] == 5 and third["rejected"] == 3  # not_pdf, truncated, empty are in the raw zone
    assert third["merge"]["papers_changed"] == 0 and third["merge"]["chunks_written"] == 0
    assert third["merge"]["docs_inserted"] == 0 and third["merge"]["docs_updated"] == 0
    assert _snapshot(settings) == before


def test_fan_out_batches_write_staging_only(served, shared_data):
    settings, _ = served
    batches = plan_batches(settings, batch_size=4)
    assert [len(b) for b in batches] == [4, 4, 2]
    ids = [p for b in batches for p in b]
    assert "cisi:1" not in ids and "jsonl:x1" in ids
    db_before = settings.db_path.read_bytes()
    stats = fetch_extract_batch(settings, ["1505.04597", "2401.00004"], part="p0")
    assert stats["extracted"] == 1 and stats["rejected"] == 1
    assert settings.db_path.read_bytes() == db_before  # no DuckDB writes in a batch
    assert (settings.staging_dir / "fulltext" / "docs" / "p0.parquet").exists()
    m1 = merge_fulltext(settings)
    assert m1["parts"] == 1 and m1["docs_inserted"] == 2 and m1["chunks_written"] > 0
    m2 = merge_fulltext(settings)
    assert m2["parts"] == 0
    # a changed extraction replaces the paper's chunks as a set (smaller windows -> more chunks)
    s2 = settings.model_copy(update={"chunk_max_tokens": 128, "chunk_overlap_tokens": 16})
    fetch_extract_batch(s2, ["1505.04597"], part="p1")  # from the raw zone: no download
    m3 = merge_fulltext(s2)
    assert m3["papers_changed"] == 1 and m3["chunks_deleted"] > 0 and m3["chunks_written"] > m3["chunks_deleted"]
    with Warehouse(settings, read_only=True) as wh:
        n, mx = wh.con.execute("SELECT count(*), max(n_tokens) FROM chunks WHERE paper_id = '1505.04597'").fetchone()
        assert n == m3["chunks_written"] and mx <= 128
    # a part staged by a paperkb without fulltext_docs.pdf_version (a run killed before its merge) still merges
    fetch_extract_batch(settings, ["1505.04597"], part="old")
    docs = settings.staging_dir / "fulltext" / "docs" / "old.parquet"
    pq.write_table(pq.read_table(docs).drop_columns(["pdf_version"]), docs)
    m4 = merge_fulltext(settings)
    assert m4["parts"] == 1 and m4["papers_changed"] == 1 and m4["docs_updated"] == 1  # back to the default windows


def test_a_batch_splits_into_download_then_extraction(served, httpserver):
    """fetch_batch only lands PDFs in the raw zone (the Airflow task in arxiv_pool); extract_batch reads
    the raw zone only and writes the staging part (the task with no pool); neither writes DuckDB."""
    settings, _ = served
    ids = ["1505.04597", "2401.00001", "2401.00004"]  # a good PDF, a 404 (permanent), an empty body
    db_before = settings.db_path.read_bytes()
    fetched = fetch_batch(settings, ids, part="px")
    assert (fetched["downloaded"], fetched["from_raw"], fetched["failed"]) == (2, 0, 1)
    assert [(f["paper_id"], f["permanent"]) for f in fetched["failures"]] == [("2401.00001", True)]
    assert not (settings.staging_dir / "fulltext").exists()  # nothing staged by the download half
    n_requests = len(httpserver.log)
    again = fetch_batch(settings, ids, part="px")  # already in the raw zone: skipped, no request
    assert (again["downloaded"], again["from_raw"]) == (0, 2) and len(httpserver.log) == n_requests + 1  # the 404 again
    stats = extract_batch(settings, ids, "px", failures=fetched["failures"])
    assert len(httpserver.log) == n_requests + 1  # extraction never touches the network
    assert (stats["extracted"], stats["rejected"], stats["retry_later"]) == (1, 2, 0)
    assert settings.db_path.read_bytes() == db_before
    assert merge_fulltext(settings)["docs_inserted"] == 3
    # a paper neither in the raw zone nor reported failed is retried next run, not rejected for good
    assert extract_batch(settings, ["1508.04025"], "py")["retry_later"] == 1


def test_reject_reasons_for_bad_files(tmp_path, shared_data, settings):
    """Truncated, not a PDF, empty, encrypted: rejected with a reason; the good file still lands."""
    real = (shared_data / "arxiv" / "pdf" / "1505.04597.pdf").read_bytes()
    with pymupdf.open(stream=real, filetype="pdf") as doc:
        encrypted = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    bodies = {"bad:trunc": real[: len(real) - 4096], "bad:html": b"<html>nope</html>", "bad:empty": b"",
              "bad:enc": encrypted, "good:1": real}
    rz = RawZone(settings.raw_dir)
    from pipeline.sources.pdf.client import raw_relpath

    for pid, body in bodies.items():
        rz.write("pdf", raw_relpath(pid), body, url=f"file://{pid}", params={"paper_id": pid})
    summary = run_fulltext(settings, replay=True)
    assert summary["extracted"] == 1 and summary["rejected"] == 4
    with Warehouse(settings, read_only=True) as wh:
        got = dict(wh.con.execute("SELECT record_key, reason FROM rejects").fetchall())
        detail = wh.con.execute("SELECT detail FROM rejects WHERE reason = 'truncated'").fetchone()[0]
        assert wh.con.execute("SELECT count(*) FROM chunks WHERE paper_id = 'good:1'").fetchone()[0] > 0
    assert got == {"bad:trunc": "truncated", "bad:html": "not_pdf", "bad:empty": "empty", "bad:enc": "encrypted"}
    assert "%%EOF" in detail
    assert hashlib.sha256(rz.read("pdf/good_1.pdf")).hexdigest() == hashlib.sha256(real).hexdigest()


def test_the_plan_sends_papers_already_in_the_raw_zone_straight_to_extraction(served, httpserver):
    """plan_fulltext splits the pending papers: PDFs still to download (fetch_batch in the one-slot pool,
    then extract_batch) and PDFs already in the raw zone (extract_raw_batch only, no pool)."""
    from pipeline.steps.fulltext import plan_fulltext_batches

    settings, _ = served
    settings = settings.model_copy(update={"fulltext_batch_size": 2})
    plan = plan_fulltext_batches(settings)
    pending = [p for b in plan["download"] for p in b["paper_ids"]]
    assert plan["in_raw"] == [] and len(pending) == 10  # nothing downloaded yet: all ten wait for the pool
    fetch_batch(settings, ["1409.0473", "1505.04597", "1508.04025"], part="pre")  # e.g. an earlier run's downloads
    n_requests = len(httpserver.log)
    plan = plan_fulltext_batches(settings)
    in_raw = [p for b in plan["in_raw"] for p in b["paper_ids"]]
    assert sorted(in_raw) == ["1409.0473", "1505.04597", "1508.04025"]
    assert [len(b["paper_ids"]) for b in plan["in_raw"]] == [2, 1]  # batched like the rest
    assert sorted(p for b in plan["download"] for p in b["paper_ids"]) == sorted(set(pending) - set(in_raw))
    assert len(httpserver.log) == n_requests  # planning never touches the network
    # replay: everything comes from the raw zone, nothing is to download
    replayed = plan_fulltext_batches(settings, replay=True)
    assert replayed["download"] == [] and sorted(p for b in replayed["in_raw"] for p in b["paper_ids"]) == sorted(in_raw)


def _docs(settings) -> dict:
    with Warehouse(settings, read_only=True) as wh:
        return {r[0]: r[1:] for r in wh.con.execute(
            "SELECT paper_id, status, coalesce(reason, ''), raw_path, pdf_version FROM fulltext_docs").fetchall()}


def _chunk_texts(settings, pid: str) -> list[str]:
    with Warehouse(settings, read_only=True) as wh:
        return [r[0] for r in wh.con.execute("SELECT text FROM chunks WHERE paper_id = ? ORDER BY ordinal", [pid]).fetchall()]


def _revise(settings, pid: str, version: int, updated: str) -> None:
    """What a harvest of the paper's new version writes (papers.latest_version and its date)."""
    with Warehouse(settings) as wh:
        wh.con.execute("UPDATE papers SET latest_version = ?, updated = ? WHERE paper_id = ?", [version, updated, pid])


def test_a_revised_arxiv_paper_is_fetched_again_and_its_text_replaced(httpserver, shared_data, settings):
    """A newer arXiv version than the one read is fetched by its number (the older PDF stays in the raw zone), its
    text replaces the paper's chunks, and nothing is fetched again until a still newer version appears; a newer
    version that cannot be used is recorded, and the text of the one before stays. A paper read before the version
    was recorded is read again when its latest version is dated after the extraction."""
    from pipeline.steps.fulltext import extract_fetched, extract_pdf, plan_fulltext_batches, summary_line

    pdf_dir = shared_data / "arxiv" / "pdf"
    v1, v2 = (pdf_dir / "1409.0473.pdf").read_bytes(), (pdf_dir / "1508.04025.pdf").read_bytes()  # real PDFs
    httpserver.expect_request("/pdf/1409.0473v1").respond_with_data(v1, content_type="application/pdf")
    httpserver.expect_request("/pdf/1409.0473v2").respond_with_data(v2, content_type="application/pdf")
    httpserver.expect_request("/pdf/1409.0473v3").respond_with_data("Not Found", status=404)
    httpserver.expect_request("/pdf/1505.04597").respond_with_data((pdf_dir / "1505.04597.pdf").read_bytes(),
                                                                   content_type="application/pdf")
    httpserver.expect_request("/pdf/1505.04597v3").respond_with_data((pdf_dir / "1512.03385.pdf").read_bytes(),
                                                                     content_type="application/pdf")
    settings = settings.model_copy(update={"arxiv_pdf_url": httpserver.url_for("/pdf")})
    _add_papers(settings, [("1409.0473", "arxiv", "1409.0473", None), ("1505.04597", "arxiv", "1505.04597", None)])
    _revise(settings, "1409.0473", 1, "2014-09-01")  # 1505.04597: no version known yet (fetched as arXiv's latest)

    first = run_fulltext(settings)
    assert first["papers"] == 2 and first["extracted"] == 2 and first["downloaded"] == 2
    assert _docs(settings) == {"1409.0473": ("ok", "", "pdf/1409.0473v1.pdf", 1),
                               "1505.04597": ("ok", "", "pdf/1505.04597.pdf", None)}
    texts_v1 = _chunk_texts(settings, "1409.0473")
    assert texts_v1 == [c["text"] for c in extract_pdf(v1, "1409.0473", settings).chunks]
    n_requests = len(httpserver.log)
    assert run_fulltext(settings)["papers"] == 0 and len(httpserver.log) == n_requests  # nothing revised

    _revise(settings, "1409.0473", 2, "2016-05-19")
    with Warehouse(settings, read_only=True) as wh:
        assert [r[0] for r in wh.con.execute("SELECT paper_id FROM fulltext_pending").fetchall()] == ["1409.0473"]
    plan = plan_fulltext_batches(settings)  # the DAG's route: plan, fetch, extract, merge
    assert plan["in_raw"] == [] and [b["paper_ids"] for b in plan["download"]] == [["1409.0473"]]
    fetched = fetch_batch(settings, ["1409.0473"], plan["download"][0]["part"])
    assert fetched["downloaded"] == 1 and extract_fetched(settings, fetched)["extracted"] == 1
    assert merge_fulltext(settings)["papers_changed"] == 1
    assert [r.url for r, _ in httpserver.log[n_requests:]][0].endswith("/pdf/1409.0473v2")
    assert _docs(settings)["1409.0473"] == ("ok", "", "pdf/1409.0473v2.pdf", 2)
    texts_v2 = _chunk_texts(settings, "1409.0473")
    assert texts_v2 == [c["text"] for c in extract_pdf(v2, "1409.0473", settings).chunks] and texts_v2 != texts_v1
    rz = RawZone(settings.raw_dir)
    assert rz.read("pdf/1409.0473v1.pdf") == v1 and rz.read("pdf/1409.0473v2.pdf") == v2  # every response kept
    n_requests = len(httpserver.log)
    assert run_fulltext(settings)["papers"] == 0 and len(httpserver.log) == n_requests
    replayed = run_fulltext(settings, replay=True)  # the raw zone's newest version is the one read
    assert replayed["merge"]["papers_changed"] == 0 and _chunk_texts(settings, "1409.0473") == texts_v2

    _revise(settings, "1409.0473", 3, "2016-06-01")  # a version arXiv refuses: recorded, the text of v2 stays
    third = run_fulltext(settings)
    assert third["revised"] == 1 and "1 papers in (1 revised since read: a newer arXiv version)" in summary_line(third)
    assert third["rejected"] == 1 and _docs(settings)["1409.0473"] == ("rejected", "http_404", None, 3)
    assert _chunk_texts(settings, "1409.0473") == texts_v2
    assert run_fulltext(settings)["papers"] == 0  # not tried again until a still newer version

    # read without a known version: a latest version dated before the extraction is the one read, one after is not
    _revise(settings, "1505.04597", 2, "2015-05-18")
    assert run_fulltext(settings)["papers"] == 0
    _revise(settings, "1505.04597", 3, "2999-01-01")
    fourth = run_fulltext(settings)
    assert fourth["downloaded"] == 1 and _docs(settings)["1505.04597"] == ("ok", "", "pdf/1505.04597v3.pdf", 3)
    assert _chunk_texts(settings, "1505.04597") == [
        c["text"] for c in extract_pdf((pdf_dir / "1512.03385.pdf").read_bytes(), "1505.04597", settings).chunks]
