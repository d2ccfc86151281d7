"""Matching reference-manager libraries (BibTeX, RIS, CSL-JSON) to catalog papers: DOI, arXiv id, then
normalised title; unmatched entries listed with a reason. Real papers: CACM, and the arXiv records of the
recorded OAI-PMH pages loaded into a catalog built from the warehouse schema."""

from __future__ import annotations

import json

import duckdb
import pytest

from pipeline import exports
from pipeline.library.match import match_library, normalize_title, read_library
from pipeline.query.records import bib_records
from pipeline.settings import SQL_DIR


@pytest.fixture(scope="module")
def cacm_wh(cacm_warehouse):
    return cacm_warehouse


@pytest.fixture(scope="module")
def arxiv_con(shared_data):
    """An in-memory catalog (the warehouse's papers and works tables) holding the 9 recorded arXiv papers."""
    from pipeline.sources.arxiv.records import read_oai_page

    con = duckdb.connect()
    for name in ("010_papers.sql", "030_works.sql"):
        con.execute((SQL_DIR / "core" / name).read_text())
    recs = []
    for name in ("saelim2015_ListRecordsResponse.xml", "hepcrawl2017_ListRecords_arXiv_hep-th.xml"):
        recs += read_oai_page(shared_data / "arxiv" / "oai" / name).records
    for r in recs:
        con.execute("INSERT INTO papers (paper_id, source, external_id, title, doi, dois, year) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [r["paper_id"], "arxiv", r["external_id"], r["title"], r["doi"], r["dois"], r["year"]])
    yield con, {r["paper_id"]: r for r in recs}
    con.close()


def test_cacm_exports_match_back_in_every_format(cacm_wh, tmp_path):
    con = duckdb.connect(str(cacm_wh.warehouse / "warehouse.duckdb"), read_only=True)
    try:
        ids = [r[0] for r in con.execute("SELECT paper_id FROM papers ORDER BY paper_id LIMIT 60").fetchall()]
        recs = bib_records(con, ids)
        # titles CACM repeats (e.g. 'Algorithm 4') are ambiguous and must be reported, not guessed
        seen: dict[str, int] = {}
        for (t,) in con.execute("SELECT title FROM papers").fetchall():
            seen[normalize_title(t)] = seen.get(normalize_title(t), 0) + 1
        dup = {k for k, n in seen.items() if n > 1}
        for fmt, ext in (("bibtex", "bib"), ("ris", "ris"), ("csl-json", "json")):
            f = tmp_path / f"lib.{ext}"
            f.write_text(exports.render(fmt, recs))
            rep = match_library(con, f)
            assert rep.format == fmt and rep.entries == len(recs)
            assert len(rep.matched) + len(rep.unmatched) == len(recs)  # nothing dropped
            for m in rep.matched:
                assert m.by == "title" and m.paper_id == m.entry.key or fmt == "bibtex"
                assert m.paper_id in ids
            assert len(rep.unmatched) >= 1  # CACM does repeat titles
            assert [m.paper_id for m in rep.matched] == [r.id for r in recs if normalize_title(r.title) not in dup and len(normalize_title(r.title)) >= 10]
            for u in rep.unmatched:
                assert "matches" in u.reason or "too short" in u.reason
    finally:
        con.close()


BIB = r"""
@article{shetty,
  title = {Density dependence of the symmetry energy},
  author = {Shetty, D. V. and Yennello, S. J.},
  doi = {https://doi.org/10.1103/PHYSREVC.76.024606},
  year = 2007
}
@misc{hoehn,
  title = {Toolbox for reconstructing quantum theory},
  eprint = {1412.8323v3}, archivePrefix = {arXiv}, year = {2014}
}
@misc{byurl, title = {Whatever the manager called it}, url = {https://arxiv.org/abs/0704.0716v2}}
@misc{bydoi48550, title = {x}, doi = {10.48550/arXiv.0704.0874}}
@article{bytitle,
  title = {{TOOLBOX} for reconstructing {Q}uantum theory from rules on information acquisition},
  year = 2014
}
@article{absent, title = {Attention Is All You Need}, eprint = {1706.03762}, doi = {10.5555/3295222.3295349}}
@misc{nothing, author = {Nobody}}
"""


def test_bibtex_library_by_doi_arxiv_and_title(arxiv_con, tmp_path):
    con, recs = arxiv_con
    f = tmp_path / "library.bib"
    f.write_text(BIB)
    rep = match_library(con, f)
    got = {m.entry.key: (m.paper_id, m.by) for m in rep.matched}
    assert got == {"shetty": ("0704.0471", "doi"), "hoehn": ("1412.8323", "arxiv"), "byurl": ("0704.0716", "arxiv"),
                   "bydoi48550": ("0704.0874", "arxiv"), "bytitle": ("1412.8323", "title")}
    assert rep.paper_ids == ["0704.0471", "1412.8323", "0704.0716", "0704.0874"]
    reasons = {u.entry.key: u.reason for u in rep.unmatched}
    assert set(reasons) == {"absent", "nothing"}
    assert "DOI 10.5555/3295222.3295349 not in the catalog" in reasons["absent"]
    assert "arXiv id 1706.03762 not in the catalog" in reasons["absent"]
    assert reasons["nothing"] == "no DOI, arXiv id or title"
    assert json.loads(json.dumps(rep.to_dict()))["paper_ids"] == rep.paper_ids


def test_ris_and_csl_json_libraries(arxiv_con, tmp_path):
    con, recs = arxiv_con
    ris = tmp_path / "zotero.ris"
    ris.write_text("TY  - JOUR\nTI  - Something else entirely\nDO  - 10.1007/S10773-009-0204-X\nER  - \n\n"
                   "TY  - UNPB\nTI  - Preprint\nUR  - http://arxiv.org/pdf/1507.07790v4\nER  - \n\n"
                   "TY  - JOUR\nTI  - A paper nobody harvested\nER  - \n")
    rep = match_library(con, ris)
    assert [(m.paper_id, m.by) for m in rep.matched] == [("0704.1109", "doi"), ("1507.07790", "arxiv")]
    assert [u.entry.title for u in rep.unmatched] == ["A paper nobody harvested"]

    csl = tmp_path / "library.json"
    title = recs["0704.1586"]["title"]
    csl.write_text(json.dumps([
        {"id": "a", "type": "article", "title": title.upper(), "author": [{"family": "X", "given": "Y"}]},
        {"id": "b", "type": "article", "title": "T", "number": "arXiv:1607.01710", "issued": {"date-parts": [[2016]]}},
        {"id": "c", "type": "article", "title": "Short"},
    ]))
    rep = match_library(con, csl)
    assert [(m.entry.key, m.paper_id, m.by) for m in rep.matched] == [("a", "0704.1586", "title"), ("b", "1607.01710", "arxiv")]
    assert rep.unmatched[0].entry.key == "c" and "too short" in rep.unmatched[0].reason


def test_unreadable_libraries_are_one_line_errors(tmp_path, arxiv_con):
    from pipeline.errors import UserError

    con, _ = arxiv_con
    with pytest.raises(UserError, match="no such file"):
        match_library(con, tmp_path / "missing.bib")
    bad = tmp_path / "broken.json"
    bad.write_text("[{")
    with pytest.raises(UserError, match="not JSON"):
        match_library(con, bad)
    odd = tmp_path / "notes.txt"
    odd.write_text("just some words")
    with pytest.raises(UserError, match="cannot tell the format"):
        read_library(odd)
    assert normalize_title("Schr{\\\"o}dinger's  Cat: a {GUIDE}") == normalize_title("Schrödinger’s cat — A guide")


def test_cli_match_library(cacm_wh, tmp_path, capsys):
    from pipeline.cli import main

    con = duckdb.connect(str(cacm_wh.warehouse / "warehouse.duckdb"), read_only=True)
    try:
        text = exports.render("bibtex", bib_records(con, ["cacm:1785", "cacm:1"]))
    finally:
        con.close()
    lib = tmp_path / "mine.bib"
    lib.write_text(text + "@misc{other, title = {Attention Is All You Need}}\n")
    wh = ["--warehouse", str(cacm_wh.warehouse)]
    assert main([*wh, "match-library", str(lib), "--warehouse-db", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["paper_ids"] == ["cacm:1785", "cacm:1"] and d["unmatched"][0]["entry"]["key"] == "other"
    assert main([*wh, "match-library", str(lib), "--warehouse-db"]) == 0
    out = capsys.readouterr().out
    assert "2 matched, 1 unmatched" in out and "unmatched #3" in out and "Attention Is All You Need" in out
    assert main([*wh, "match-library", str(tmp_path / "nope.ris"), "--warehouse-db"]) == 2
    assert "no such file" in capsys.readouterr().err
