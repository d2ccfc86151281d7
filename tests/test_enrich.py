"""paperkb enrich end to end: recorded S2 answers -> raw zone -> works, citations, authors, papers.

Every expectation is computed from the recorded JSON in ../shared/data/s2, not written as a constant.
"""

from __future__ import annotations

import json

import pytest

from pipeline.steps.enrich import run_enrich
from pipeline.errors import StepFailed
from pipeline.raw import RawZone
from pipeline.warehouse import Warehouse
from s2_replay import GRAPH_PREFIX, S2Replay, empty_page_body, fail_first, load_cassette

OTHER_PAGES = ("/references", "/citations")


@pytest.fixture
def replay(httpserver, shared_data):
    r = S2Replay(httpserver, shared_data / "s2")
    empty = empty_page_body(shared_data / "s2")

    def fallback(request):  # any other paper: the recorded empty result page
        from werkzeug import Response

        if request.path.endswith(OTHER_PAGES) and request.args.get("offset") == "0":
            return Response(empty, status=200, content_type="application/json")
        return None

    r.fallback = fallback
    return r


def _settings(settings, replay, **over):
    return settings.model_copy(update={"s2_api_url": replay.api_url, "s2_page_size": 50, **over})


def seed(s, rows):
    """Corpus papers as the harvest would leave them; lookup ids come from the recorded requests."""
    with Warehouse(s) as wh:
        wh.init()
        for r in rows:
            wh.con.execute("INSERT INTO papers (paper_id, source, external_id, doi, s2_paper_id) VALUES (?, ?, ?, ?, ?)",
                           [r["paper_id"], r.get("source", "test"), r["external_id"], r.get("doi"), r.get("s2_paper_id")])


def seed_for_ids(s, ids):
    """One paper per recorded lookup id, in the recorded order (enrich asks in paper_id order)."""
    rows = []
    for i, lookup in enumerate(ids):
        row = {"paper_id": f"p{i}", "external_id": f"doc-{i}"}
        if lookup.startswith("CorpusId:"):
            row["external_id"] = lookup  # an S2-prefixed external id
        elif lookup.startswith("10."):
            row["doi"] = lookup
        else:
            row["s2_paper_id"] = lookup  # S2 paperId already known
        rows.append(row)
    seed(s, rows)
    return {r["paper_id"]: lookup for r, lookup in zip(rows, ids)}


def q(s, sql, params=None):
    with Warehouse(s) as wh:
        return wh.con.execute(sql, params or []).fetchall()


def recorded_batch(shared_data, name):
    [it] = load_cassette(shared_data / "s2" / name)
    return json.loads(it["body"])["ids"], json.loads(it["content"])


def paper_id_for_doi(records, doi):
    return next(r["paperId"] for r in records if r and (r.get("externalIds") or {}).get("DOI", "").lower() == doi.lower())


def test_enrich_batch_with_missing_ids_references_paging_rerun_and_replay(settings, replay, shared_data):
    s = _settings(settings, replay)
    ids, records = recorded_batch(shared_data, "test_get_papers_not_found_warning.yaml")
    replay.load("test_get_papers_not_found_warning.yaml")
    doi_work = paper_id_for_doi(records, "10.2139/ssrn.2250500")
    ref_pages = [json.loads(it["content"]) for it in replay.load(
        "test_get_paper_references.yaml", alias={f"{GRAPH_PREFIX}/paper/10.2139/ssrn.2250500": f"{GRAPH_PREFIX}/paper/{doi_work}"})]
    lookups = seed_for_ids(s, ids)

    out = run_enrich(s)
    assert out["status"] == "ok"
    batch_calls = replay.calls(lambda c: c.path.endswith("/paper/batch"))
    assert len(batch_calls) == 1 and json.loads(batch_calls[0].body) == {"ids": ids}

    # null entries -> unresolved, the rest -> works + papers
    missing = [lookup for lookup, rec in zip(ids, records) if rec is None]
    assert missing and q(s, "SELECT lookup_id, paper_id, reason FROM s2_unresolved ORDER BY 1") == sorted(
        (m, next(p for p, l in lookups.items() if l == m), "null_in_batch") for m in missing)
    assert out["unresolved"] == len(missing) and out["resolved"] == len(ids) - len(missing)
    for pid, lookup in lookups.items():
        rec = records[ids.index(lookup)]
        row = q(s, "SELECT s2_paper_id, citation_count, influential_citation_count, reference_count, publication_types, "
                   "CAST(publication_date AS VARCHAR), venue, open_access_pdf_url, s2_enriched_at IS NOT NULL "
                   "FROM papers WHERE paper_id = ?", [pid])[0]
        if rec is None:
            assert row == (None,) * 8 + (False,)
            continue
        assert row == (rec["paperId"], rec["citationCount"], rec["influentialCitationCount"], rec["referenceCount"],
                       rec["publicationTypes"], rec["publicationDate"], rec["venue"] or None,
                       (rec["openAccessPdf"] or {}).get("url"), True)
        assert q(s, "SELECT paper_id, title, year, detail FROM works WHERE work_id = ?", [rec["paperId"]]) == [
            (pid, rec["title"], rec["year"], "paper")]
        assert q(s, "SELECT author_id, name FROM work_authors WHERE work_id = ? ORDER BY position", [rec["paperId"]]) == [
            (a["authorId"], a["name"]) for a in rec["authors"]]

    # references: two recorded pages, null paperIds are unlinked, the rest are edges + works
    items = [it for page in ref_pages for it in page["data"]]
    linked = {it["citedPaper"]["paperId"]: it["citedPaper"]["title"] for it in items if it["citedPaper"]["paperId"]}
    assert q(s, "SELECT cited_work_id FROM citations WHERE citing_work_id = ? ORDER BY 1", [doi_work]) == [(k,) for k in sorted(linked)]
    assert out["edges_unlinked"] == len(items) - len(linked) > 0
    assert dict(q(s, "SELECT work_id, title FROM works WHERE detail = 'edge'")) == linked
    ref_calls = replay.calls(lambda c: c.path == f"{GRAPH_PREFIX}/paper/{doi_work}/references")
    assert [c.query["offset"] for c in ref_calls] == ["0", "50"]
    assert q(s, "SELECT value IS NOT NULL FROM watermarks WHERE source = 's2'") == [(True,)]

    tables = ["works", "citations", "s2_authors", "work_authors", "s2_unresolved"]
    before = {t: sorted(q(s, f"SELECT COLUMNS(*)::VARCHAR FROM {t}")) for t in tables}
    papers_before = q(s, "SELECT COLUMNS(*)::VARCHAR FROM papers ORDER BY paper_id")

    # rerun: nothing pending, no HTTP, nothing rewritten
    n_calls = len(replay.seen)
    again = run_enrich(s)
    assert len(replay.seen) == n_calls and again["http_calls"] == 0 and again["papers"] == 0
    assert all(v["inserted"] == v["updated"] == 0 for v in again["tables"].values())

    # replay into an empty warehouse (same raw zone, harvest re-seeded): same tables, no network
    s.db_path.unlink()
    seed_for_ids(s, ids)
    dead = s.model_copy(update={"s2_api_url": "http://127.0.0.1:9/graph/v1"})
    rebuilt = run_enrich(dead, replay=True)
    assert rebuilt["http_calls"] == 0 and len(replay.seen) == n_calls
    assert {t: sorted(q(s, f"SELECT COLUMNS(*)::VARCHAR FROM {t}")) for t in tables} == before
    assert q(s, "SELECT COLUMNS(*)::VARCHAR FROM papers ORDER BY paper_id") == papers_before
    # and replay over itself changes nothing
    assert all(v["inserted"] == v["updated"] == 0 for v in run_enrich(dead, replay=True)["tables"].values())


def test_enrich_authors_and_citation_paging_from_recorded_paper(settings, replay, shared_data):
    s = _settings(settings, replay, s2_page_size=100, s2_mode="per-paper")
    raw_paper = (shared_data / "s2/Paper.json").read_bytes()
    paper = json.loads(raw_paper)
    doi = paper["externalIds"]["DOI"]
    pid = paper["paperId"]
    replay.add("POST", f"{GRAPH_PREFIX}/paper/batch", 200, b"[" + raw_paper + b"]", json_body={"ids": [doi]})
    replay.serve_pages("citations", pid, [{"citingPaper": c} for c in paper["citations"]], 100)
    replay.serve_pages("references", pid, [{"citedPaper": r} for r in paper["references"]], 100)
    seed(s, [{"paper_id": "turing1950", "external_id": "t1", "doi": doi}])

    out = run_enrich(s)
    assert out["status"] == "ok"
    assert out["calls"] == {"batch": 1, "citations": -(-len(paper["citations"]) // 100), "references": 1}
    for a in paper["authors"]:
        assert q(s, "SELECT name, citation_count, paper_count, h_index FROM s2_authors WHERE author_id = ?", [a["authorId"]]) == [
            (a["name"], a["citationCount"], a["paperCount"], a["hIndex"])]
    citing = {c["paperId"] for c in paper["citations"] if c.get("paperId")}
    cited = {r["paperId"] for r in paper["references"] if r.get("paperId")}
    assert {r[0] for r in q(s, "SELECT citing_work_id FROM citations WHERE cited_work_id = ?", [pid])} == citing
    assert {r[0] for r in q(s, "SELECT cited_work_id FROM citations WHERE citing_work_id = ?", [pid])} == cited
    assert out["edges_unlinked"] == sum(1 for r in paper["references"] if not r.get("paperId")) + sum(
        1 for c in paper["citations"] if not c.get("paperId"))
    some = paper["citations"][0]
    assert q(s, "SELECT title, year, citation_count, detail FROM works WHERE work_id = ?", [some["paperId"]]) == [
        (some["title"], some["year"], some["citationCount"], "edge")]
    assert q(s, "SELECT s2_paper_id, citation_count, reference_count, venue FROM papers") == [
        (pid, paper["citationCount"], paper["referenceCount"], paper["venue"])]


def test_429_storm_keeps_data_and_watermark_then_resumes_from_raw(settings, replay, shared_data):
    s = _settings(settings, replay, max_consecutive_failures=3, retry_max_attempts=10)
    ids, records = recorded_batch(shared_data, "test_get_papers.yaml")
    replay.load("test_get_papers.yaml")
    doi_work = paper_id_for_doi([r for r in json.loads(load_cassette(shared_data / "s2/test_get_papers_not_found_warning.yaml")[0]["content"]) if r],
                                "10.2139/ssrn.2250500")
    assert doi_work in {r["paperId"] for r in records}
    replay.load("test_get_paper_references.yaml",
                alias={f"{GRAPH_PREFIX}/paper/10.2139/ssrn.2250500": f"{GRAPH_PREFIX}/paper/{doi_work}"})
    last = records[-1]["paperId"]
    reference = json.loads((shared_data / "s2/Reference.json").read_text())
    citation = json.loads((shared_data / "s2/Citation.json").read_text())
    replay.serve_pages("references", last, [reference], 50)
    replay.serve_pages("citations", last, [citation], 50)
    storm_path = f"{GRAPH_PREFIX}/paper/{last}/citations"
    storm = fail_first(10**9, retry_after="0", when=lambda r: r.path == storm_path)
    replay.interceptors.append(storm)
    lookups = seed_for_ids(s, ids)

    with pytest.raises(StepFailed, match="consecutive failed requests"):
        run_enrich(s)
    assert len([c for c in replay.seen if c.path == storm_path]) == 3
    # data kept: raw zone and tables hold everything fetched; the last paper is not marked enriched
    assert {r[0] for r in q(s, "SELECT work_id FROM works WHERE detail = 'paper'")} == {r["paperId"] for r in records}
    assert q(s, "SELECT is_influential, intents FROM citations WHERE citing_work_id = ? AND cited_work_id = ?",
             [last, reference["citedPaper"]["paperId"]]) == [(reference["isInfluential"], reference["intents"])]
    enriched = dict(q(s, "SELECT paper_id, s2_enriched_at IS NOT NULL FROM papers"))
    last_pid = next(p for p, l in lookups.items() if l == last)
    assert enriched == {p: p != last_pid for p in lookups}
    assert q(s, "SELECT value FROM watermarks WHERE source = 's2'") == []
    assert q(s, "SELECT status FROM run_log WHERE step = 'enrich'") == [("failed",)]
    fetched_paths = {e.path for e in RawZone(s.raw_dir).entries("s2")}

    # S2 is back: only the missing page is asked for; the batch and pages in the raw zone are reused
    replay.interceptors.remove(storm)
    n = len(replay.seen)
    out = run_enrich(s)
    assert out["status"] == "ok" and out["papers"] == 1
    assert [(c.path, c.status) for c in replay.seen[n:]] == [(storm_path, 200)]
    assert fetched_paths < {e.path for e in RawZone(s.raw_dir).entries("s2")}
    assert q(s, "SELECT is_influential, intents FROM citations WHERE citing_work_id = ? AND cited_work_id = ?",
             [citation["citingPaper"]["paperId"], last]) == [(citation["isInfluential"], citation["intents"])]
    assert q(s, "SELECT count(*) FROM papers WHERE s2_enriched_at IS NULL") == [(0,)]
    assert q(s, "SELECT count(*) FROM watermarks WHERE source = 's2'") == [(1,)]


def test_404_for_a_resolved_paper_is_recorded_as_unresolved(settings, replay, shared_data):
    s = _settings(settings, replay)
    ids, records = recorded_batch(shared_data, "test_get_papers.yaml")
    replay.load("test_get_papers.yaml")
    gone = records[0]["paperId"]
    not_found = load_cassette(shared_data / "s2/test_not_found.yaml")[0]
    replay.add("GET", f"{GRAPH_PREFIX}/paper/{gone}/references", not_found["status"], not_found["content"],
               query={"offset": 0, "limit": 50})
    seed_for_ids(s, ids)
    out = run_enrich(s)
    assert out["status"] == "ok" and out["unresolved"] == 1
    assert q(s, "SELECT lookup_id, reason FROM s2_unresolved") == [(gone, "not_found")]
    assert not replay.calls(lambda c: c.path == f"{GRAPH_PREFIX}/paper/{gone}/citations")  # 404: the paper's other edges are not asked


def test_cli_enrich_limit_and_one_line_summary(settings, replay, shared_data, capsys, monkeypatch):
    from pipeline.cli import main

    s = _settings(settings, replay)
    raw_paper = (shared_data / "s2/Paper.json").read_bytes()
    paper = json.loads(raw_paper)
    doi = paper["externalIds"]["DOI"]
    replay.add("POST", f"{GRAPH_PREFIX}/paper/batch", 200, b"[" + raw_paper + b"]", json_body={"ids": [doi]})
    seed(s, [{"paper_id": "a-turing", "external_id": "t1", "doi": doi},
             {"paper_id": "b-other", "external_id": "t2", "doi": "10.9999/never-asked"}])
    monkeypatch.setenv("PAPERKB_S2_API_URL", s.s2_api_url)
    monkeypatch.setenv("PAPERKB_S2_DELAY_S", "0")
    monkeypatch.setenv("PAPERKB_S2_FETCH_CITATIONS", "false")
    monkeypatch.setenv("PAPERKB_S2_PAGE_SIZE", "50")
    monkeypatch.setenv("COLUMNS", "1000")  # the summary whole on one line (80 columns wraps it)
    assert main(["--warehouse", str(s.warehouse), "enrich", "--limit", "1"]) == 0
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and line.startswith("enrich (fetch, batch): 1 papers in, 1 resolved")
    assert [json.loads(c.body) for c in replay.calls(lambda c: c.path.endswith("/paper/batch"))] == [{"ids": [doi]}]


def test_arxiv_papers_resolve_by_arxiv_id_and_link_as_neighbours(settings, replay, shared_data):
    """An arXiv corpus paper is asked for as 'arXiv:<id>'; seen first as a citing neighbour of another
    corpus paper it is linked to its paper_id, and its own enrichment later upgrades the row."""
    s = _settings(settings, replay, s2_page_size=100)
    raw_paper = (shared_data / "s2/Paper.json").read_bytes()
    paper = json.loads(raw_paper)
    doi = paper["externalIds"]["DOI"]
    arx = next(c for c in paper["citations"] if (c.get("externalIds") or {}).get("ArXiv"))
    arxiv_id = arx["externalIds"]["ArXiv"]
    replay.add("POST", f"{GRAPH_PREFIX}/paper/batch", 200, b"[" + raw_paper + b"]", json_body={"ids": [doi]})
    replay.add_json("POST", f"{GRAPH_PREFIX}/paper/batch", [arx], json_body={"ids": [f"arXiv:{arxiv_id}"]})
    replay.serve_pages("citations", paper["paperId"], [{"citingPaper": c} for c in paper["citations"]], 100)
    replay.serve_pages("references", paper["paperId"], [{"citedPaper": r} for r in paper["references"]], 100)
    seed(s, [{"paper_id": "0000:turing", "source": "classics", "external_id": "turing", "doi": doi},
             {"paper_id": arxiv_id, "source": "arxiv", "external_id": arxiv_id}])

    run_enrich(s, limit=1)  # the Turing paper only (paper_id order)
    assert q(s, "SELECT paper_id, detail, title FROM works WHERE work_id = ?", [arx["paperId"]]) == [
        (arxiv_id, "edge", arx["title"])]
    assert q(s, "SELECT s2_enriched_at IS NULL FROM papers WHERE paper_id = ?", [arxiv_id]) == [(True,)]

    run_enrich(s)
    batches = [json.loads(c.body) for c in replay.calls(lambda c: c.path.endswith("/paper/batch"))]
    assert batches == [{"ids": [doi]}, {"ids": [f"arXiv:{arxiv_id}"]}]
    assert q(s, "SELECT paper_id, detail, citation_count, influential_citation_count FROM works WHERE work_id = ?",
             [arx["paperId"]]) == [(arxiv_id, "paper", arx["citationCount"], arx["influentialCitationCount"])]
    assert q(s, "SELECT s2_paper_id, citation_count FROM papers WHERE paper_id = ?", [arxiv_id]) == [
        (arx["paperId"], arx["citationCount"])]
    assert q(s, "SELECT author_id, name FROM work_authors WHERE work_id = ? ORDER BY position", [arx["paperId"]]) == [
        (a["authorId"], a["name"]) for a in arx["authors"]]
    # the Turing run's edge record never overwrote the arXiv paper's full record, and the edge is there
    assert q(s, "SELECT count(*) FROM citations WHERE citing_work_id = ? AND cited_work_id = ?",
             [arx["paperId"], paper["paperId"]]) == [(1,)]


def test_403_stops_with_one_line_and_a_failed_run(settings, replay, shared_data, capsys, monkeypatch):
    from pipeline.cli import main

    s = _settings(settings, replay)
    ids, _ = recorded_batch(shared_data, "test_debug.yaml")  # the recorded 403 answer to a batch call
    replay.load("test_debug.yaml")
    seed_for_ids(s, ids)
    monkeypatch.setenv("PAPERKB_S2_API_URL", s.s2_api_url)
    monkeypatch.setenv("PAPERKB_S2_DELAY_S", "0")
    assert main(["--warehouse", str(s.warehouse), "enrich"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("paperkb: error: Semantic Scholar refused access (HTTP 403 Forbidden)")
    assert "S2_API_KEY" in err[-1]
    assert q(s, "SELECT status FROM run_log WHERE step = 'enrich'") == [("failed",)]
    assert q(s, "SELECT count(*) FROM watermarks") == [(0,)]


def test_batch_mode_takes_whole_lists_from_the_batch_and_pages_only_a_cut_off_list(settings, replay, shared_data):
    """Batch mode on the recorded Paper.json (a real S2 record with its lists): its 14 references
    arrive whole in the /paper/batch answer (no /references call), its citations list stops at the
    1,000 S2 hands out while citationCount is larger, so only /citations is paged."""
    s = _settings(settings, replay, s2_page_size=100, s2_mode="batch")
    raw_paper = (shared_data / "s2/Paper.json").read_bytes()
    paper = json.loads(raw_paper)
    doi, pid = paper["externalIds"]["DOI"], paper["paperId"]
    assert len(paper["citations"]) == s.s2_batch_edge_cap < paper["citationCount"]  # the cut the test relies on
    assert len(paper["references"]) == paper["referenceCount"] < s.s2_batch_edge_cap
    replay.add("POST", f"{GRAPH_PREFIX}/paper/batch", 200, b"[" + raw_paper + b"]", json_body={"ids": [doi]})
    replay.serve_pages("citations", pid, [{"citingPaper": c} for c in paper["citations"]], 100)
    seed(s, [{"paper_id": "turing1950", "external_id": "t1", "doi": doi}])

    out = run_enrich(s)
    assert out["status"] == "ok" and out["s2_mode"] == "batch"
    assert out["calls"] == {"batch": 1, "citations": -(-len(paper["citations"]) // 100)}
    assert out["over_cap"] == 1
    batch_req = next(r for r in replay.seen if r.path.endswith("/paper/batch"))
    fields = batch_req.query["fields"].split(",")
    assert "references.paperId" in fields and "citations.paperId" in fields and "references.isInfluential" not in fields
    cited = {r["paperId"] for r in paper["references"] if r.get("paperId")}
    assert {r[0] for r in q(s, "SELECT cited_work_id FROM citations WHERE citing_work_id = ?", [pid])} == cited
    # edges from the batch list carry no isInfluential/intents (S2 gives those on edge pages only)
    assert q(s, "SELECT DISTINCT is_influential, intents FROM citations WHERE citing_work_id = ?", [pid]) == [(None, None)]
    citing = {c["paperId"] for c in paper["citations"] if c.get("paperId")}
    assert {r[0] for r in q(s, "SELECT citing_work_id FROM citations WHERE cited_work_id = ?", [pid])} == citing
    ref = next(r for r in paper["references"] if r.get("paperId"))
    assert q(s, "SELECT title, year, citation_count, detail FROM works WHERE work_id = ?", [ref["paperId"]]) == [
        (ref["title"], ref["year"], ref["citationCount"], "edge")]
    assert q(s, "SELECT s2_paper_id, citation_count, reference_count FROM papers") == [
        (pid, paper["citationCount"], paper["referenceCount"])]

    # replay rebuilds the same edges from the raw zone (the batch answer's list + the citation pages)
    before = q(s, "SELECT citing_work_id, cited_work_id FROM citations ORDER BY ALL")
    with Warehouse(s) as wh:
        wh.con.execute("DELETE FROM citations")
    again = run_enrich(s, replay=True)
    assert again["http_calls"] == 0
    assert q(s, "SELECT citing_work_id, cited_work_id FROM citations ORDER BY ALL") == before
