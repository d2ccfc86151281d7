"""Exports (BibTeX, RIS, CSL-JSON) of real papers, each read back by a real parser: bibtexparser, rispy,
and citeproc-py (a CSL processor) for CSL-JSON. CACM and CISI from ../shared/data, arXiv records from the recorded
OAI-PMH responses."""

from __future__ import annotations

import json
import re

import bibtexparser
import duckdb
import pytest
import rispy

from pipeline import exports
from pipeline.exports import BibRecord, render
from pipeline.query.records import bib_records


@pytest.fixture(scope="module")
def cacm_db(cacm_warehouse):
    """The CACM warehouse (papers, authors, citations), opened read-only."""
    con = duckdb.connect(str(cacm_warehouse.db_path), read_only=True)
    yield con
    con.close()


def arxiv_records(shared_data) -> list[BibRecord]:
    """The real arXiv records of the recorded OAI-PMH pages, as the catalog would hold them."""
    from pipeline.sources.arxiv.records import read_oai_page

    out = []
    for name in ("saelim2015_ListRecordsResponse.xml", "hepcrawl2017_ListRecords_arXiv_hep-th.xml"):
        for r in read_oai_page(shared_data / "arxiv" / "oai" / name).records:
            out.append(BibRecord(id=r["paper_id"], title=r["title"], authors=[a["name"] for a in r["authors"]],
                                 year=r["year"], published=str(r["published"]), doi=r["doi"], arxiv_id=r["paper_id"],
                                 primary_category=r["primary_category"], categories=r["categories"],
                                 journal=r["journal_ref"], abstract=r["abstract"], source="arxiv"))
    assert len(out) == 9
    return out


@pytest.fixture(scope="module")
def records(cacm_db, shared_data) -> list[BibRecord]:
    ids = [r[0] for r in cacm_db.execute(
        "SELECT paper_id FROM papers WHERE paper_id IN ('cacm:1', 'cacm:1785', 'cacm:2371') "
        "OR paper_id IN (SELECT paper_id FROM papers WHERE abstract IS NOT NULL ORDER BY paper_id LIMIT 30)").fetchall()]
    recs = bib_records(cacm_db, ids) + arxiv_records(shared_data)
    assert len(recs) >= 40 and sum(1 for r in recs if r.doi) >= 4
    return recs


def _words(s: str | None) -> str:
    return re.sub(r"[^a-z0-9]", "", (s or "").lower())


def test_bibtex_round_trips_through_bibtexparser(records):
    text = render("bibtex", records)
    lib = bibtexparser.parse_string(text)
    assert not lib.failed_blocks
    assert len(lib.entries) == len(records)
    assert len({e.key for e in lib.entries}) == len(records)  # unique citation keys
    for e, r in zip(lib.entries, records):
        f = {k.lower(): v.value for k, v in e.fields_dict.items()}
        assert _words(f["title"]) == _words(r.title)
        assert len(re.split(r"\s+and\s+", f["author"])) == len(r.authors)
        assert int(f["year"]) == r.year
        assert f.get("doi") == r.doi
        assert f.get("eprint") == r.arxiv_id
        assert f["note"] == f"paperkb: {r.id}"
        assert e.entry_type == ("article" if r.journal else "misc")


def test_ris_round_trips_through_rispy(records):
    parsed = rispy.loads(render("ris", records))
    assert len(parsed) == len(records)
    for p, r in zip(parsed, records):
        assert p["id"] == r.id
        assert _words(p["title"]) == _words(r.title)
        assert len(p["authors"]) == len(r.authors)
        assert p["year"] == str(r.year)
        assert p.get("doi") == r.doi
        assert p["type_of_reference"] == ("JOUR" if r.journal else "UNPB" if r.arxiv_id else "GEN")
        if r.arxiv_id:
            assert p["urls"] == [f"https://arxiv.org/abs/{r.arxiv_id}"]
            assert p["keywords"] == r.categories


def _csl_bibliography(items: list[dict]) -> tuple[list[str], list[str]]:
    """Render ``items`` with citeproc-py and the style it ships; returns (entries, parser warnings)."""
    import os
    import warnings

    import citeproc
    from citeproc import Citation, CitationItem, CitationStylesBibliography, CitationStylesStyle, formatter
    from citeproc.source.json import CiteProcJSON

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        source = CiteProcJSON(items)
    style = CitationStylesStyle(os.path.join(os.path.dirname(citeproc.__file__), "data", "styles",
                                             "harvard-cite-them-right.csl"), validate=False)
    bib = CitationStylesBibliography(style, source, formatter.plain)
    for it in items:
        bib.register(Citation([CitationItem(it["id"])]))
    return [str(e) for e in bib.bibliography()], [str(w.message) for w in caught]


def test_csl_json_is_read_and_rendered_by_a_csl_processor(records):
    items = json.loads(render("csl-json", records))
    assert [i["id"] for i in items] == [r.id for r in records]
    for it, r in zip(items, records):
        assert it.get("DOI") == r.doi and it["issued"]["date-parts"][0][0] == r.year
        assert len(it["author"]) == len(r.authors)
    entries, warned = _csl_bibliography(items)
    # citeproc-py implements CSL 1.0.1 and names every variable it does not know; `citation-key` is CSL 1.0.2's
    assert {w for w in warned} <= {"The following arguments for Reference are unsupported: citation_key"}, warned
    assert len(entries) == len(records)
    for entry, r in zip(entries, records):  # registered in order, and every entry shows its paper's title
        assert _words(r.title)[:24] in _words(entry), (r.title, entry)
    # the check means something: a variable CSL does not define is named by the processor
    _, warned = _csl_bibliography([{**items[0], "doi": "x"}])
    assert any("doi" in w for w in warned), warned


def test_awkward_values_stay_parseable():
    r = BibRecord(id="x:1", title="Sorting & searching {in} 100% of cases #1 \\", authors=["Müller, Jürgen", "Plato"],
                  year=2001, published="2001-02")
    lib = bibtexparser.parse_string(render("bibtex", [r, r]))
    assert not lib.failed_blocks and len({e.key for e in lib.entries}) == 2
    assert rispy.loads(render("ris", [r]))[0]["date"] == "2001/02/"
    assert json.loads(render("csl-json", [r]))[0]["author"][1] == {"literal": "Plato"}
    with pytest.raises(ValueError, match="unknown export format"):
        render("endnote", [r])
    assert exports.filename("csl-json", "cacm:1") == "cacm_1.json"


def test_unknown_ids_are_named(cacm_db):
    from pipeline.errors import UnknownPaper

    with pytest.raises(UnknownPaper, match="'cacm:999999'"):
        bib_records(cacm_db, ["cacm:1", "cacm:999999"])
    # the external id (docno) works when unambiguous; duplicates collapse
    assert [r.id for r in bib_records(cacm_db, ["1785", "cacm:1785", "cacm:1"])] == ["cacm:1785", "cacm:1"]


# ---- CLI and HTTP on the CISI snapshot --------------------------------------------------------------
def test_cli_exports_search_related_and_papers(cisi_snapshot, capsys):
    from pipeline.cli import main

    wh = ["--warehouse", str(cisi_snapshot.warehouse)]
    assert main([*wh, "search", "automatic indexing", "-k", "5", "--expand", "off", "--json"]) == 0
    ids = [r["paper_id"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert main([*wh, "search", "automatic indexing", "-k", "5", "--expand", "off", "--format", "bibtex"]) == 0
    lib = bibtexparser.parse_string(capsys.readouterr().out)
    assert [e.fields_dict["note"].value for e in lib.entries] == [f"paperkb: {i}" for i in ids]

    assert main([*wh, "related", ids[0], "-k", "4", "--format", "ris"]) == 0
    assert 1 <= len(rispy.loads(capsys.readouterr().out)) <= 4

    assert main([*wh, "export", ids[0], ids[1], "--format", "csl-json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert [i["id"] for i in items] == ids[:2]
    assert len(_csl_bibliography(items)[0]) == 2

    assert main([*wh, "export", ids[0], "--format", "docx"]) == 2
    err = capsys.readouterr().err
    assert "unknown export format 'docx'" in err and err.strip().count("\n") == 0
    assert main([*wh, "export", "cisi:999999"]) == 2
    assert "unknown paper id" in capsys.readouterr().err


def test_http_exports(cisi_snapshot):
    from fastapi.testclient import TestClient

    from pipeline.serve import create_app

    with TestClient(create_app(cisi_snapshot)) as c:
        r = c.get("/api/export", params={"id": ["cisi:1", "cisi:2"], "format": "csl-json"})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/vnd.citationstyles.csl+json")
        assert "attachment" in r.headers["content-disposition"]
        assert len(_csl_bibliography(r.json())[0]) == len(r.json())
        assert c.get("/api/export", params={"id": "cisi:1,cisi:3", "format": "ris"}).text.count("ER  - ") == 2

        s = c.get("/api/search", params={"q": "library classification", "k": 3, "expand": "off", "format": "bibtex"})
        assert s.status_code == 200 and s.headers["content-type"].startswith("application/x-bibtex")
        assert len(bibtexparser.parse_string(s.text).entries) == 3
        rel = c.get("/api/papers/cisi:1/related", params={"k": 3, "format": "ris"})
        assert rel.status_code == 200 and 1 <= len(rispy.loads(rel.text)) <= 3

        assert c.get("/api/export", params={"id": "cisi:1", "format": "doc"}).status_code == 422
        assert c.get("/api/export").status_code == 422
        bad = c.get("/api/export", params={"id": "cisi:999999"})
        assert bad.status_code == 404 and "unknown paper id" in bad.json()["detail"]
        assert c.get("/api/search", params={"q": "x", "format": "pdf"}).status_code == 422
        paths = c.get("/openapi.json").json()["paths"]
        assert "/api/export" in paths and "format" in {p["name"] for p in paths["/api/search"]["get"]["parameters"]}
